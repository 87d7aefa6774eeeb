package gitmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// touchedRepo is a closed repository of 20 files (f00.md ... f19.md) and
// a.md, whose first line the returned commit changed.
func touchedRepo(t *testing.T) (string, Commit) {
	t.Helper()
	r, dir := newRepo(t)
	for i := range 20 {
		write(t, r, fmt.Sprintf("f%02d", i), fmt.Sprintf("f%02d.md", i), fmt.Sprintf("file %d\n", i))
	}
	write(t, r, "a1", "a.md", "1\n2\n3\n4\n5\n")
	c := write(t, r, "a2", "a.md", "one\n2\n3\n4\n5\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, c
}

// openTouchedOnly opens dir as revert and restore do (OneCommand,
// TouchedOnly).
func openTouchedOnly(t *testing.T, dir string) *Repo {
	t.Helper()
	opt := testOptions(t)
	opt.OneCommand, opt.TouchedOnly = true, true
	r, err := Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// editByHand writes a memory file of dir as an operator would.
func editByHand(t *testing.T, dir, rel, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "memories", rel), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A revert opened with TouchedOnly looks for hand edits at the file it
// changes only: its start compares no worktree file (it compared all 21
// before), yet a hand edit of the reverted file is committed first and
// kept by the revert; a hand edit of another file is left on disk,
// uncommitted, for the next start that looks at every file.
func TestTouchedOnlyRevertLooksAtTheFileItChanges(t *testing.T) {
	t.Parallel()
	dir, c := touchedRepo(t)
	editByHand(t, dir, "a.md", "one\n2\n3\n4\nfive\n")
	editByHand(t, dir, "f05.md", "edited by hand\n")
	r := openTouchedOnly(t, dir)
	if n := r.mirror.wt.looks.Load(); n != 0 {
		t.Fatalf("the start compared %d worktree files with the tree, want none", n)
	}
	if _, _, err := r.Revert(context.Background(), []string{c.Hash}, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	// a.md twice: the hand edit found and committed, then the revert run
	// again on it (Update's second look).
	if n := r.mirror.wt.looks.Load(); n != 2 {
		t.Fatalf("the revert compared %d worktree files with the tree, want 2 (a.md, twice)", n)
	}
	if got := read(t, r, "a.md"); got != "1\n2\n3\n4\nfive\n" {
		t.Fatalf("a.md = %q after the revert, want its first line reverted and the hand edit kept", got)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	subjects := strings.Split(strings.TrimSpace(gittest.Git(t, dir, "log", "-n", "3", "--format=%s")), "\n")
	if !strings.HasPrefix(subjects[0], "memory: revert") || subjects[1] != "memory: adopt changes made outside gitmem" {
		t.Fatalf("the last commits are %q, want the revert on an adopt commit", subjects)
	}
	if paths := gittest.Git(t, dir, "show", "--format=", "--name-only", "HEAD~1"); paths != "memories/a.md\n" {
		t.Fatalf("the adopt commit took %q, want memories/a.md alone", paths)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != " M memories/f05.md\n" {
		t.Fatalf("git status says %q, want f05.md's hand edit left uncommitted", st)
	}
	r, err := Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := read(t, r, "f05.md"); got != "edited by hand\n" {
		t.Fatalf("f05.md = %q after the next start, want the hand edit committed", got)
	}
}

// A restore of a folder or of the whole memory looks at every file
// there, TouchedOnly or not: a file made there by hand is one the restore
// would delete, and it is refused as such, not left behind.
func TestTouchedOnlyRestoreOfAllLooksAtEveryFile(t *testing.T) {
	t.Parallel()
	dir, c := touchedRepo(t)
	editByHand(t, dir, "new.md", "made by hand\n")
	r := openTouchedOnly(t, dir)
	defer r.Close()
	_, _, err := r.Restore(context.Background(), c, RestoreOptions{})
	var absent *AbsentError
	if !errors.As(err, &absent) || !slices.Equal(absent.Paths, []string{"new.md"}) {
		t.Fatalf("restore of all memory: %v, want new.md named as a file it would delete", err)
	}
}

// The stat cache takes .git/index's word for a file at the first look
// at it: a start that looks at no file caches none (it cached all 21
// before).
func TestStatCacheTakesTheIndexAtTheFirstLook(t *testing.T) {
	t.Parallel()
	dir, c := touchedRepo(t)
	time.Sleep(2 * gd.RacyWindow)
	r, err := Open(context.Background(), dir, testOptions(t)) // reads the files the last index did not vouch for
	if err != nil {
		t.Fatal(err)
	}
	settle(t, r) // the start's look, made after Open returned
	// A start that looked at every file keeps no second copy of the index.
	if n, idx := r.mirror.stats.len(), len(r.mirror.stats.index); n != 21 || idx != 0 {
		t.Fatalf("after a start that looked at every file the cache holds %d files and %d index entries, want 21 and none", n, idx)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = openTouchedOnly(t, dir)
	defer r.Close()
	if n := r.mirror.stats.len(); n != 0 {
		t.Fatalf("the start cached the lstat data of %d files, want none", n)
	}
	if _, _, err := r.Revert(context.Background(), []string{c.Hash}, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, r, "a.md"); got != "1\n2\n3\n4\n5\n" {
		t.Fatalf("a.md = %q after the revert", got)
	}
}
