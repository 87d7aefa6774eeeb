package gitdir

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestLockContextGivesUpWhenCancelled(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "lock")
	holder, err := OpenFileLock(path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	waiter, err := OpenFileLock(path) // its own open file: flock(2) locks it apart
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	if err := holder.Lock(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- waiter.LockContext(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("LockContext = %v while the lock is held and ctx cancelled, want context.Canceled", err)
	}
	// Still the holder's: the waiter did not take it.
	if ok, err := waiter.TryLock(); ok || err != nil {
		t.Fatalf("TryLock = %v, %v: the holder's lock was taken", ok, err)
	}

	// Once let go, a waiter takes it.
	go func() { done <- waiter.LockContext(context.Background()) }()
	if err := holder.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("LockContext after the holder let go = %v", err)
	}
	if ok, _ := holder.TryLock(); ok {
		t.Fatal("the holder took the lock the waiter holds")
	}
}

func TestLockContextDoneNeverTakes(t *testing.T) {
	t.Parallel()
	l, err := OpenFileLock(filepath.Join(t.TempDir(), "lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.LockContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("LockContext(done ctx) = %v, want context.Canceled", err)
	}
	if err := (*FileLock)(nil).LockContext(ctx); err != nil {
		t.Fatalf("nil lock: %v", err)
	}
}

// A lock file this process holds (writeLock: a second name of its own) is
// told from one another program made (git's, one name only), and from
// none: gitmem's adopt waits for git at work, not for itself.
func TestHeldByThisProcess(t *testing.T) {
	t.Parallel()
	index := filepath.Join(t.TempDir(), "index")
	if HeldByThisProcess(index) {
		t.Fatal("no lock file, yet held")
	}
	own, err := writeLock(index, []byte("gitmem's\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if !HeldByThisProcess(index) {
		t.Error("the lock writeLock took is not this process's")
	}
	os.Remove(index + ".lock")
	os.Remove(own)
	if err := os.WriteFile(index+".lock", []byte("git's\n"), 0o644); err != nil { // as git's O_EXCL create
		t.Fatal(err)
	}
	if HeldByThisProcess(index) {
		t.Error("git's lock file taken for this process's")
	}
}
