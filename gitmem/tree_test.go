package gitmem

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// Folders that differ only in a kid's content share their kids' order
// (node.kids is kept in git's order), so that encoding a commit's trees needs no sort. After any
// sequence of edits (a file where a folder was and back, names that sort
// differently as a folder: "a" against "a.b" and "a-b"), every folder
// still encodes as git would, and its size and file count are its files'.
func TestTreeOrderStaysGitOrder(t *testing.T) {
	t.Parallel()
	names := []string{"a", "a.b", "a-b", "a0", "b"}
	rng := rand.New(rand.NewPCG(1, 2))
	put := func(_ plumbing.ObjectType, data []byte, _ plumbing.Hash) (plumbing.Hash, error) {
		return plumbing.ComputeHash(plumbing.TreeObject, data), nil
	}
	var root *node
	for step := range 3000 {
		depth := 1 + rng.IntN(3)
		var p []string
		for range depth {
			p = append(p, names[rng.IntN(len(names))])
		}
		var leaf *node
		if rng.IntN(3) > 0 {
			content := fmt.Sprint(step)
			leaf = &node{mode: filemode.Regular, hash: plumbing.ComputeHash(plumbing.BlobObject, []byte(content)), size: int64(len(content))}
		}
		// A file on the way is removed first, as Tx does.
		for i := 1; i < len(p); i++ {
			if n := lookup(root, joinPath(p[:i])); n.isFile() {
				root, _ = with(root, p[:i], nil)
			}
		}
		next, err := with(root, p, leaf) // a folder at p is replaced by the file
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		root = next
		if root == nil {
			continue
		}
		if _, err := writeTrees(put, root, nil); err != nil {
			t.Fatal(err)
		}
		checkTree(t, root, "")
		if t.Failed() {
			t.Fatalf("after step %d (%v -> %v)", step, p, leaf != nil)
		}
	}
}

// checkTree compares every folder under n with a fresh copy of it encoded
// from its kids alone.
func checkTree(t *testing.T, n *node, at string) {
	t.Helper()
	fresh := newDir(slices.Clone(n.kids))
	if got, want := plumbing.ComputeHash(plumbing.TreeObject, encodeTree(fresh)), n.hash; got != want {
		t.Errorf("%q: hash %v, encoded afresh %v", at, want, got)
	}
	if fresh.size != n.size || fresh.files != n.files {
		t.Errorf("%q: size %d, files %d; counted afresh %d, %d", at, n.size, n.files, fresh.size, fresh.files)
	}
	if !slices.IsSortedFunc(n.kids, compareKids) {
		t.Errorf("%q: kids out of git's order", at)
	}
	for _, k := range n.kids {
		if k.n.isDir() {
			checkTree(t, k.n, at+"/"+k.name)
		}
	}
}

func joinPath(segs []string) string {
	s := segs[0]
	for _, x := range segs[1:] {
		s += "/" + x
	}
	return s
}

// The tree a start builds from .git/index (treeFromIndex) is made from
// the entries' runs, sorted by path: the files' nodes in one allocation,
// a few per folder, no map of names nor split path per entry (that, with
// a second copy of the 10,000 entries sorted again, was a quarter of a
// revert's CPU on the bench's repository). Names that sort apart as a
// file and as a folder ("q-s/", "q.md", "q/", "q0.md") make git's tree.
func TestTreeFromIndexAllocatesLittle(t *testing.T) { // not parallel: AllocsPerRun
	const folders, each = 20, 100
	r, dir := folderRepo(t, folders, each) // the index written at Close only
	settle(t, r)
	time.Sleep(2 * gd.RacyWindow) // the index written after the next change vouches for these files: their sizes are not looked up
	if _, err := r.Update(context.Background(), Meta{Subject: "names"}, func(tx *Tx) error {
		for _, p := range []string{"q-s/t.md", "q.md", "q/r.md", "q0.md"} {
			if err := tx.WriteFile(p, []byte(p+"\n")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	si := readStartIndex(filepath.Join(dir, ".git"))
	if si == nil || len(si.list()) != folders*each+4 {
		t.Fatalf("the index read: %v", si)
	}
	want := plumbing.NewHash(strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD^{tree}")))
	var got *node
	r.objects.lock()
	allocs := testing.AllocsPerRun(3, func() { got = r.treeFromIndex(si, want) })
	r.objects.unlock()
	if got == nil || got.hash != want {
		t.Fatalf("the tree built from the index is not HEAD's (%v)", got)
	}
	if files := folders*each + 4; allocs > float64(files)/4 { // about 4,500 with a map per folder and a split per path
		t.Fatalf("building the tree of %d files from the index made %.0f allocations, want at most %d: some are per file", files, allocs, files/4)
	}
}
