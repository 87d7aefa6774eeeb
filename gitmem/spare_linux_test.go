package gitmem

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// inode is the inode number of the memory file p.
func inode(t *testing.T, dir, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(dir, "memories", p))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// A file a write takes aside is the next write's file: no file is created
// or deleted (worktree.recycle). Overwritten, it holds the new text only,
// with gitmem's mode. Giving the writer lock up (idle) removes the spares.
func TestSpareFilesAreReused(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", strings.Repeat("a long first version\n", 50))
	settle(t, r)
	first := inode(t, dir, "a.md")
	if err := os.Chmod(filepath.Join(dir, "memories", "a.md"), 0o640); err != nil {
		t.Fatal(err)
	}
	// One materialisation takes both (the lock held meanwhile), a.md
	// first: an idle moment between them would drop the spare.
	r.disk.hold()
	write(t, r, "t2", "a.md", "second\n")
	write(t, r, "t3", "b.md", "bee\n")
	r.disk.mu.Unlock()
	settle(t, r)
	if got := inode(t, dir, "b.md"); got != first {
		t.Errorf("b.md is inode %d, not a.md's first file (%d), taken aside", got, first)
	}
	if got := readDisk(t, dir, "b.md"); got != "bee\n" {
		t.Errorf("b.md holds %q", got)
	}
	if fi, err := os.Stat(filepath.Join(dir, "memories", "b.md")); err != nil || fi.Mode().Perm() != fileMode {
		t.Errorf("b.md: %v, mode %v, want %v", err, fi.Mode().Perm(), os.FileMode(fileMode))
	}
	write(t, r, "t4", "a.md", "third\n") // a.md's second file is a spare now
	settle(t, r)
	tmp := filepath.Join(dir, ".git", "gitmem", "tmp")
	turn := holdTurn(r) // no release meanwhile (unless one came first: the spare is gone then)
	if left, _ := os.ReadDir(tmp); r.lease.Held() && len(left) != 1 {
		t.Errorf("%d files in .git/gitmem/tmp, want the one spare", len(left))
	}
	released := r.release(turn)
	turn.end()
	if left, _ := os.ReadDir(tmp); !released || len(left) != 0 {
		t.Errorf("released %v; spare files left: %v", released, left)
	}
}

// A file that something else can still reach once taken aside — a
// descriptor held open on it, a second link — is never reused: a write
// through that descriptor, or a read of that link, would meet another
// memory file's text. (A file held open for writing is not even left
// aside: it goes back in place, and what is written through the
// descriptor is merged with the acknowledged change by the adopt after
// it is closed.)
func TestReachableFilesAreNotReused(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "held.md", "held, first\n")
	write(t, r, "t2", "linked.md", "linked, first\n")
	settle(t, r)
	held := inode(t, dir, "held.md")
	linked := inode(t, dir, "linked.md")
	f, err := os.OpenFile(filepath.Join(dir, "memories", "held.md"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	outside := filepath.Join(t.TempDir(), "link")
	if err := os.Link(filepath.Join(dir, "memories", "linked.md"), outside); err != nil {
		t.Fatal(err)
	}
	write(t, r, "t3", "held.md", "held, second\n")
	write(t, r, "t4", "linked.md", "linked, second\n")
	settle(t, r)
	want := map[string]string{"held.md": "held, second\n", "linked.md": "linked, second\n"}
	for i, p := range []string{"n1.md", "n2.md", "n3.md"} {
		want[p] = strings.Repeat("new text\n", i+1)
		write(t, r, "n"+p, p, want[p])
		settle(t, r)
	}
	if _, err := f.WriteString("written through the old descriptor\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	awaitNoWriter(t, r, "held.md") // ErrNoChange here, one run in five beside a test that forks
	if _, err := r.Adopt(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	// Both changed the end of the file: both are shown.
	want["held.md"] = "<<<<<<< gitmem\nheld, second\n=======\nheld, first\nwritten through the old descriptor\n>>>>>>> edited by hand\n"
	for p, text := range want {
		if got := inode(t, dir, p); got == linked || got == held && p != "held.md" {
			t.Errorf("%s reuses the file taken aside from held.md (%d) or linked.md (%d)", p, held, linked)
		}
		if got := readDisk(t, dir, p); got != text {
			t.Errorf("%s holds %q, want %q", p, got, text)
		}
	}
	if data, err := os.ReadFile(outside); err != nil || string(data) != "linked, first\n" {
		t.Errorf("the outside link holds %q (%v), want linked.md's first text", data, err)
	}
}

// On a full disk a spare that cannot take a write is removed, and the
// write fails as a new file's would (the caller leaves the path for
// repair): no spare, no temporary file is left holding part of it.
// Needs a small tmpfs (root); skipped otherwise.
func TestSpareOnAFullDisk(t *testing.T) {
	t.Parallel()
	mnt, fill, free := gittest.SmallDisk(t, "1m")
	tmp := filepath.Join(mnt, ".git", "gitmem", "tmp")
	if err := os.MkdirAll(tmp, dirMode); err != nil {
		t.Fatal(err)
	}
	w := openWorktree(t, mnt)
	name, _, err := w.writeTemp([]byte("small\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, file, err := w.takeAside(name, nil); err != nil || !file {
		t.Fatalf("take %s aside: %v", name, err)
	}
	if len(w.spares) != 1 {
		t.Fatalf("%d spares, want 1", len(w.spares))
	}
	fill()
	if got, _, err := w.writeTemp([]byte(strings.Repeat("does not fit\n", 1000))); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a write on a full disk gave %q, %v; want ENOSPC", got, err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 || len(w.spares) != 0 {
		t.Errorf("left after the failed write: %v, %d spares", left, len(w.spares))
	}
	free()
	if _, _, err := w.writeTemp([]byte("there is room again\n")); err != nil {
		t.Fatalf("a write with room again: %v", err)
	}
}

// A file taken aside (the file a write replaced, until it is read) keeps
// the mtime of the memory file it was: a rename keeps it. gc removed
// every temporary file older than 10 minutes, the running process's
// too: a memory file untouched for an hour, taken aside as gc ran, was
// gone before it was read ("no such file or directory"), and with it
// any hand edit it held. gc now leaves the process's own files alone
// (clearTemp); another process's, that old, go.
func TestGCLeavesAFileTakenAside(t *testing.T) {
	t.Parallel()
	r, dir, followed := newFollowedRepo(t)
	write(t, r, "t1", "a.md", "a, first\n")
	settle(t, r)
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{filepath.Join(dir, "memories", "a.md"), filepath.Join(dir, ".git", "gitmem", "tmp", "w-1.0badf00d-1")} {
		if err := os.WriteFile(p, []byte("a, edited by hand\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	r.disk.hold() // as the materialiser does
	tmp, _, err := r.mirror.wt.writeTemp([]byte("a, second\n"))
	if err != nil {
		t.Fatal(err)
	}
	aside, _, placed, err := r.mirror.wt.put(tmp, "memories/a.md", true)
	if err != nil || !placed || aside == "" {
		t.Fatalf("put: %q %v %v", aside, placed, err)
	}
	r.collector.lock(t.Context(), nil)
	pl, err := r.gcTarget().plan(false, false) // a background gc, meanwhile
	r.collector.unlock()
	data, _, aerr := r.mirror.wt.takeAside(aside, nil)
	r.disk.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if aerr != nil || string(data) != "a, edited by hand\n" {
		t.Errorf("the file taken aside, read after gc: %q, %v", data, aerr)
	}
	if pl.removed != 1 {
		t.Errorf("gc removed %d file(s), want 1 (another process's, an hour old)", pl.removed)
	}
	followed(map[string]string{"a.md": "a, second\n"})
}
