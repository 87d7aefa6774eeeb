package gitdir

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// refEncode is git's tree encoding as gitmem first wrote it (go-git's
// mode strings, a folder's sort key built with its "/"): the encoding
// must stay byte-identical, or every tree's hash changes.
func refEncode(entries []object.TreeEntry) []byte {
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	slices.SortFunc(entries, func(a, b object.TreeEntry) int { return strings.Compare(key(a), key(b)) })
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

// TestEncodeEntriesAsGit checks SortEntries and EncodeEntries against the
// reference on names that sort differently as folders ("a" against "a.b",
// "a-", "a0": '/' is between '.' and '0'), every mode, and a known tree
// hash from git itself.
func TestEncodeEntriesAsGit(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	names := []string{"a", "a.b", "a-", "a0", "a/", "ab", "b", "a.", "é", "Z", "a b", "aa", "a.md", "a0.md"}
	modes := []filemode.FileMode{filemode.Dir, filemode.Regular, filemode.Executable, filemode.Symlink, filemode.Submodule}
	for i := range 2000 {
		var entries []object.TreeEntry
		seen := map[string]bool{}
		for range rng.IntN(len(names)) + 1 {
			name := strings.TrimSuffix(names[rng.IntN(len(names))], "/")
			if seen[name] {
				continue
			}
			seen[name] = true
			var h plumbing.Hash
			for j := range h {
				h[j] = byte(rng.IntN(256))
			}
			entries = append(entries, object.TreeEntry{Name: name, Mode: modes[rng.IntN(len(modes))], Hash: h})
		}
		rng.Shuffle(len(entries), func(a, b int) { entries[a], entries[b] = entries[b], entries[a] })
		want := refEncode(slices.Clone(entries))
		got := slices.Clone(entries)
		SortEntries(got)
		if enc := EncodeEntries(got); !bytes.Equal(enc, want) {
			t.Fatalf("case %d: %v encodes as %q, want %q", i, entries, enc, want)
		}
	}
	// A tree git made: `printf x >a.b; mkdir a; printf y >a/f; git add -A; git write-tree`.
	blob := func(s string) plumbing.Hash { return plumbing.ComputeHash(plumbing.BlobObject, []byte(s)) }
	sub := plumbing.ComputeHash(plumbing.TreeObject, EncodeEntries([]object.TreeEntry{{Name: "f", Mode: filemode.Regular, Hash: blob("y")}}))
	root := []object.TreeEntry{{Name: "a", Mode: filemode.Dir, Hash: sub}, {Name: "a.b", Mode: filemode.Regular, Hash: blob("x")}}
	SortEntries(root)
	if h := plumbing.ComputeHash(plumbing.TreeObject, EncodeEntries(root)); h.String() != gitWriteTree {
		t.Fatalf("the tree hashes to %s, git says %s", h, gitWriteTree)
	}
}

const gitWriteTree = "33a282faf736ab16a0f52274d124c3d30369dc2f"

// BenchmarkEncodeTree sorts and encodes a folder of 100 files, as every
// commit does for each folder on the path of a change.
func BenchmarkEncodeTree(b *testing.B) {
	entries := make([]object.TreeEntry, 100)
	for i := range entries {
		entries[i] = object.TreeEntry{Name: "f" + strings.Repeat("0", i%3) + string(rune('a'+i%26)) + ".md", Mode: filemode.Regular}
		entries[i].Hash[0] = byte(i)
	}
	entries[7].Mode = filemode.Dir
	work := make([]object.TreeEntry, len(entries))
	b.ReportAllocs()
	for b.Loop() {
		copy(work, entries)
		SortEntries(work)
		EncodeEntries(work)
	}
}
