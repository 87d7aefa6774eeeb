package gitdir

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
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
// none or an old one: gitmem's adopt waits for git at work, not for
// itself.
func TestHeldByAnother(t *testing.T) {
	t.Parallel()
	index := filepath.Join(t.TempDir(), "index")
	if HeldByAnother(index, StaleLock) {
		t.Fatal("no lock file, yet held")
	}
	own, err := writeLock(context.Background(), index, []byte("gitmem's\n"), false, GitFileMode)
	if err != nil {
		t.Fatal(err)
	}
	if HeldByAnother(index, StaleLock) {
		t.Error("the lock writeLock took is another program's")
	}
	os.Remove(index + ".lock")
	os.Remove(own)
	if err := os.WriteFile(index+".lock", []byte("git's\n"), 0o644); err != nil { // as git's O_EXCL create
		t.Fatal(err)
	}
	if !HeldByAnother(index, StaleLock) {
		t.Error("git's lock file taken for this process's")
	}
	old := time.Now().Add(-2 * StaleLock)
	os.Chtimes(index+".lock", old, old)
	if HeldByAnother(index, StaleLock) {
		t.Error("a lock file older than StaleLock taken for a git command at work")
	}
}

// This process's lock released between the look at the lock file and
// the one at its second names (the index written, renamed into place,
// its second name removed) is no other program's: an adopt that took it
// for git at work took no hand edit, and the model's change ran on the
// version before the edit (TestHandEditWhileRunningIsAdoptedFirst, once
// under load). A lock git takes in that instant is git's.
func TestHeldByAnotherWhileThisProcessReleases(t *testing.T) {
	t.Parallel()
	for _, gitTakes := range []bool{false, true} {
		index := filepath.Join(t.TempDir(), "index")
		own, err := writeLock(context.Background(), index, []byte("gitmem's\n"), false, GitFileMode)
		if err != nil {
			t.Fatal(err)
		}
		released := false
		glob := func(pattern string) ([]string, error) {
			if released {
				return filepath.Glob(pattern)
			}
			released = true
			// Released as replaceLocked releases it.
			if err := os.Rename(index+".lock", index); err != nil {
				t.Fatal(err)
			}
			os.Remove(own)
			if gitTakes {
				if err := os.WriteFile(index+".lock", []byte("git's\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			return filepath.Glob(pattern)
		}
		if got := heldByAnother(index, StaleLock, glob); got != gitTakes {
			t.Errorf("git takes the lock in that instant: %v; held by another: %v", gitTakes, got)
		}
	}
}

// The wait for a lock file another program holds gives up when its ctx
// is done (a repository closing: Close does not wait on another
// process), and a ctx done already tries the lock once: either way the
// step fails naming the lock, leaves it and the file as they were, and
// leaves no second name. (It waited LockWait, 5 s, whatever the ctx.)
func TestLockFileWaitGivesUpWhenCancelled(t *testing.T) {
	t.Parallel()
	index := filepath.Join(t.TempDir(), "index")
	if err := os.WriteFile(index, []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(index+".lock", []byte("git's\n"), 0o644); err != nil { // as git's O_EXCL create
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		var pe *os.PathError
		if !errors.As(err, &pe) || pe.Path != index+".lock" || !errors.Is(err, ErrLocked) {
			t.Fatalf("%s: %v, want ErrLocked naming the lock", what, err)
		}
		if b, _ := os.ReadFile(index + ".lock"); string(b) != "git's\n" {
			t.Fatalf("%s: the lock holds %q", what, b)
		}
		if b, _ := os.ReadFile(index); string(b) != "before\n" {
			t.Fatalf("%s: the file holds %q", what, b)
		}
		if m, _ := filepath.Glob(index + ".gitmem-*.lock"); len(m) > 0 {
			t.Fatalf("%s: second names left: %v", what, m)
		}
	}
	// A bound for a hang, not a timing: the wait without a ctx is 5 s.
	bounded := func(what string, f func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		bound := time.NewTimer(4 * time.Second)
		defer bound.Stop()
		select {
		case err := <-done:
			return err
		case <-bound.C:
			t.Errorf("%s waits out LockWait", what)
			return <-done
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	check("a done ctx", bounded("a done ctx", func() error {
		return ReplaceCache(ctx, index, []byte("after\n"), GitFileMode)
	}))

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	check("a ctx cancelled during the wait", bounded("a ctx cancelled during the wait", func() error {
		go func() {
			for { // cancelled once the wait is under way: its second name is there
				if m, _ := filepath.Glob(index + ".gitmem-*.lock"); len(m) > 0 || ctx.Err() != nil {
					cancel()
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		return ReplaceCache(ctx, index, []byte("after\n"), GitFileMode)
	}))

	// A lock let go during the wait is taken, as before.
	done := make(chan error, 1)
	go func() { done <- ReplaceCache(context.Background(), index, []byte("after\n"), GitFileMode) }()
	for {
		if m, _ := filepath.Glob(index + ".gitmem-*.lock"); len(m) > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	os.Remove(index + ".lock")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(index); string(b) != "after\n" {
		t.Fatalf("the file holds %q", b)
	}
}
