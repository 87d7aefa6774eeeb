package gitmem

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// Close does not wait on another process (docs/design.md): with the
// branch's lock held by another program (a regular file at
// .git/refs/heads/main.lock: git gc expiring the reflog, or a git
// command killed holding it) and acknowledged changes git's files lack,
// the background's move of the branch, waiting for the lock, gives up
// when Close begins, Close tries the branch once and fails naming the
// lock (no host path), and the changes stay in the write-ahead log: once
// the lock is gone the next start writes them to git's files. (Close
// took about 30 s: the maintenance loop's 5 s waits, one after another,
// each held the disk lock that Close's steps wait for, then Close's own
// 5 s wait.)
func TestCloseDoesNotWaitForAnotherProgramsBranchLock(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "a.md", "one\n")
	settle(t, r)
	lock := filepath.Join(dir, ".git", "refs", "heads", "main.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, r, "t2", "a.md", "two\n")
	write(t, r, "t3", "b.md", "three\n")

	// A move of the branch under way, waiting for the lock, as the
	// maintenance loop's is: its second name of the lock is there while it
	// waits.
	moved := make(chan error, 1)
	go func() { moved <- r.materialize() }()
	for waiting := time.Now(); ; time.Sleep(time.Millisecond) {
		if m, _ := filepath.Glob(filepath.Join(dir, ".git", "refs", "heads", "main.gitmem-*.lock")); len(m) > 0 {
			break
		}
		if time.Since(waiting) > time.Minute { // a bound for a hang
			t.Fatal("no move of the branch waits for the lock")
		}
	}

	err = closeWithoutWaiting(t, r)
	var ue *UnwrittenError
	if !errors.As(err, &ue) || ue.Changes != 2 {
		t.Fatalf("Close beside git's lock of the branch = %v, want an *UnwrittenError of 2 changes", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "lock .git/refs/heads/main.lock: another program holds it") || strings.Contains(msg, dir) {
		t.Fatalf("Close's error: %q", msg)
	}
	if err := <-moved; err == nil {
		t.Fatal("the branch moved past git's lock")
	}
	if t.Failed() {
		t.FailNow()
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("git's lock was removed: %v", err)
	}
	if got := gitToolIDs(t, dir); got != "t1" {
		t.Fatalf("history with git's lock held: %q", got)
	}

	os.Remove(lock) // git is done
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := read(t, r, "a.md"), read(t, r, "b.md"); a != "two\n" || b != "three\n" {
		t.Fatalf("after the next start: a.md = %q, b.md = %q", a, b)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := gitToolIDs(t, dir); got != "t1 t2 t3" {
		t.Fatalf("history after the next start: %q", got)
	}
}

// Nor on another program's .git/index.lock (git commit holds it while
// its editor is open): the changes reach the branch, Close's write of
// the index tries the lock once and fails naming it, and git's lock is
// left; the next start writes the index. (Close waited 5 s for it.)
func TestCloseDoesNotWaitForAnotherProgramsIndexLock(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "a.md", "one\n")
	settle(t, r)
	lock := filepath.Join(dir, ".git", "index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The editor open for a minute: no git command writing worktree files
	// now, which gitmem would wait for (up to gd.StaleLock) before it
	// writes one.
	old := time.Now().Add(-time.Minute)
	os.Chtimes(lock, old, old)
	write(t, r, "t2", "b.md", "two\n")

	err = closeWithoutWaiting(t, r)
	if err == nil || !strings.Contains(err.Error(), "lock .git/index.lock: another program holds it") || strings.Contains(err.Error(), dir) {
		t.Fatalf("Close beside git's lock of the index = %v", err)
	}
	if t.Failed() {
		t.FailNow()
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("git's lock was removed: %v", err)
	}
	if got := gitToolIDs(t, dir); got != "t1 t2" {
		t.Fatalf("history: %q", got)
	}

	os.Remove(lock) // git is done
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status after the next start:\n%s", st)
	}
}

// With the branch's lock held by another program, a Flush that fails
// naming it refuses new changes, as docs/operations.md says ("new changes
// are refused meanwhile, as on a full disk"); each new call tries the
// branch again, and once the lock is gone changes go through and every
// acknowledged one reaches the branch. (A change right after the failed
// Flush was accepted: only the maintenance loop's own failed attempt,
// up to 5 s later, refused them.)
func TestFlushFailingOnABranchLockRefusesNewChanges(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	write(t, r, "t1", "a.md", "one\n")
	settle(t, r)
	lock := filepath.Join(dir, ".git", "refs", "heads", "main.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, r, "t2", "a.md", "two\n")
	if err := r.Flush(context.Background()); err == nil || !strings.Contains(err.Error(), "lock .git/refs/heads/main.lock: another program holds it") {
		t.Fatalf("Flush beside git's lock of the branch: %v", err)
	}
	_, err = r.Update(context.Background(), Meta{Subject: "w b.md", Trailers: []Trailer{{TrailerToolUseID, "t3"}}}, func(tx *Tx) error {
		return tx.WriteFile("b.md", []byte("three\n"))
	})
	var se *StorageError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "main.lock") || strings.Contains(err.Error(), dir) {
		t.Fatalf("a change after the failed Flush: %v, want it refused naming the lock", err)
	}
	os.Remove(lock) // git is done
	write(t, r, "t4", "c.md", "four\n")
	settle(t, r)
	if got := gitToolIDs(t, dir); got != "t1 t2 t4" {
		t.Fatalf("history: %q", got)
	}
}

// closeWithoutWaiting closes r, failing t if Close is still under way
// after 4 s: a bound for a hang, not a timing. The wait for another
// program's lock is 5 s (gd.LockWait), and Close waited that long at
// least once before it gave such waits up.
func closeWithoutWaiting(t *testing.T, r *Repo) error {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	bound := time.NewTimer(4 * time.Second)
	defer bound.Stop()
	select {
	case err := <-closed:
		return err
	case <-bound.C:
		t.Error("Close waits for the lock another program holds")
		return <-closed
	}
}
