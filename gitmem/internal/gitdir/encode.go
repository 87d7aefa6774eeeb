package gitdir

import (
	"bytes"
	"io"
	"slices"
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
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	slices.SortFunc(entries, func(a, b object.TreeEntry) int { return strings.Compare(key(a), key(b)) })
}

// EncodeEntries encodes tree entries, already in git's order: each
// "mode name\0" and the 20-byte hash.
func EncodeEntries(entries []object.TreeEntry) []byte {
	var b bytes.Buffer
	for _, e := range entries {
		b.WriteString(strings.TrimLeft(e.Mode.String(), "0"))
		b.WriteByte(' ')
		b.WriteString(e.Name)
		b.WriteByte(0)
		b.Write(e.Hash[:])
	}
	return b.Bytes()
}
