package gitdir

import (
	"cmp"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// EncodeCommit returns the git encoding of a commit object.
func EncodeCommit(tree plumbing.Hash, parents []plumbing.Hash, author, committer object.Signature, msg string) ([]byte, error) {
	c := &object.Commit{Author: author, Committer: committer, Message: msg, TreeHash: tree, ParentHashes: parents}
	obj := &plumbing.MemoryObject{}
	if err := c.Encode(obj); err != nil {
		return nil, err
	}
	r, _ := obj.Reader()
	defer r.Close()
	return io.ReadAll(r)
}

// SortEntries puts tree entries in git's order, where a folder sorts as if
// its name ended in "/".
func SortEntries(entries []object.TreeEntry) {
	slices.SortFunc(entries, compareTreeEntries)
}

// compareTreeEntries compares two entries' sort keys.
func compareTreeEntries(a, b object.TreeEntry) int {
	return CompareNames(a.Name, a.Mode == filemode.Dir, b.Name, b.Mode == filemode.Dir)
}

// CompareNames compares the sort keys of two tree entries (the name, with
// "/" after a folder's) without building them.
func CompareNames(a string, aDir bool, b string, bDir bool) int {
	n := min(len(a), len(b))
	if c := strings.Compare(a[:n], b[:n]); c != 0 {
		return c
	}
	// One name starts the other: the keys differ at byte n, where a key
	// that has ended is the smaller. Names hold no "/", so equal bytes
	// there mean equal keys.
	return cmp.Compare(keyByte(a, aDir, n), keyByte(b, bDir, n))
}

// keyByte is byte i of the sort key of name (a folder's if dir), or -1
// past its end.
func keyByte(name string, dir bool, i int) int {
	switch {
	case i < len(name):
		return int(name[i])
	case i == len(name) && dir:
		return '/'
	}
	return -1
}

// EncodeEntries encodes tree entries, already in git's order: each
// "mode name\0" and the 20-byte hash, the mode in octal without leading
// zeros (as go-git's FileMode.String, trimmed). One allocation.
func EncodeEntries(entries []object.TreeEntry) []byte {
	size := 0
	for _, e := range entries {
		size += EntrySize(e.Name)
	}
	b := make([]byte, 0, size)
	for _, e := range entries {
		b = AppendEntry(b, e.Name, e.Mode, e.Hash)
	}
	return b
}

// EntrySize is at least the encoded size of a tree entry named name.
func EntrySize(name string) int { return 7 + 1 + len(name) + 1 + len(plumbing.ZeroHash) }

// AppendEntry appends a tree entry, encoded, to b.
func AppendEntry(b []byte, name string, mode filemode.FileMode, h plumbing.Hash) []byte {
	if mode != 0 {
		b = strconv.AppendUint(b, uint64(mode), 8)
	}
	b = append(b, ' ')
	b = append(b, name...)
	b = append(b, 0)
	return append(b, h[:]...)
}
