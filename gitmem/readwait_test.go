package gitmem

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A read that brings git's files up to date first (Commit, Log, ...,
// Flush) waits for the disk lock while a materialisation, a checkpoint
// or gc's swap holds it. That wait ends when the read's context is
// cancelled (ctx.Err(), the lock still held) and when Close begins
// (ErrClosed). Nothing ended it before: each read waited until the lock
// was let go.
func TestReadsStopWaitingForTheDiskLock(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	keepWriterLock(t, r) // Flush waits for nothing without it
	write(t, r, "t0", "a.md", "zero\n")
	if err := r.AddRemote("origin", "https://example.invalid/memory.git"); err != nil {
		t.Fatal(err)
	}
	reads := map[string]func(ctx context.Context) error{
		"Commit": func(ctx context.Context) error {
			_, err := r.Commit(ctx, "HEAD")
			return err
		},
		"ReadFileAt": func(ctx context.Context) error {
			_, err := r.ReadFileAt(ctx, "HEAD", "a.md")
			return err
		},
		"Resolve": func(ctx context.Context) error {
			_, err := r.Resolve(ctx, "t0")
			return err
		},
		"At": func(ctx context.Context) error {
			_, err := r.At(ctx, time.Now())
			return err
		},
		"Log": func(ctx context.Context) error {
			return r.Log(ctx, LogOptions{}, nil, func(Commit) error { return nil })
		},
		"Blame": func(ctx context.Context) error {
			_, err := r.Blame(ctx, "a.md")
			return err
		},
		"StaleFiles": func(ctx context.Context) error {
			_, err := r.StaleFiles(ctx, time.Now(), nil, nil)
			return err
		},
		"IndexLag": func(ctx context.Context) error {
			_, err := r.IndexLag(ctx, 10)
			return err
		},
		"Status": func(ctx context.Context) error {
			_, err := r.Status(ctx, "origin")
			return err
		},
		"Flush": func(ctx context.Context) error { return r.Flush(ctx) },
	}
	dt := r.disk.hold() // a materialisation under way
	held := true
	defer func() {
		if held {
			dt.release()
		}
	}()
	reading := func(ctx context.Context, name string) <-chan error {
		id, done := inBackground(func() error { return reads[name](ctx) })
		waitUntil(t, name+" waits for the disk lock", func() bool {
			return waitsIn(id, "(*Repo)."+name+"(", "(*Repo).holdContext(")
		})
		return done
	}
	for name := range reads {
		ctx, cancel := context.WithCancel(context.Background())
		done := reading(ctx, name)
		cancel()
		if err := returned(t, done, name+" cancelled while waiting for the disk lock"); !errors.Is(err, context.Canceled) {
			t.Errorf("%s cancelled while waiting for the disk lock: %v, want context.Canceled", name, err)
		}
	}

	done := reading(context.Background(), "Commit")
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	if err := returned(t, done, "Commit waiting for the disk lock at Close"); !errors.Is(err, ErrClosed) {
		t.Errorf("Commit waiting for the disk lock at Close: %v, want ErrClosed", err)
	}
	held = false
	dt.release() // Close checkpoints under it
	if err := returned(t, closed, "Close"); err != nil {
		t.Fatal(err)
	}
}

// Flush waits for the index's lock while .git/index is written (the
// timer's flush, 1-2 s at 10,000 files under load), and for a merge back
// under way (the maintenance loop's): those waits too end when its
// context is cancelled, and when Close begins. (The writer lock is kept:
// let go after a stall of a loaded machine, Flush had nothing to write
// and waited for nothing, and the test failed, 6 times in 40 runs beside
// other tests at load 8: "never: Flush waits in (*gitIndex).lockContext(",
// or, where another test's Flush was taken for this one, "<nil>, want
// context.Canceled".)
func TestFlushStopsWaiting(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	keepWriterLock(t, r)
	write(t, r, "t0", "a.md", "zero\n")
	flushing := func(ctx context.Context, in string) <-chan error {
		id, done := inBackground(func() error { return r.Flush(ctx) })
		waitUntil(t, "Flush waits in "+in, func() bool { return waitsIn(id, "(*Repo).Flush(", in) })
		return done
	}

	r.outside.mergeMu.Lock(context.Background(), nil) // a merge back under way
	ctx, cancel := context.WithCancel(context.Background())
	done := flushing(ctx, "(*Repo).mergeDisplaced(")
	cancel()
	if err := returned(t, done, "Flush cancelled while waiting for the merge back"); !errors.Is(err, context.Canceled) {
		t.Errorf("Flush cancelled while waiting for the merge back: %v, want context.Canceled", err)
	}
	r.outside.mergeMu.Unlock()

	held := r.gitIndex.lock() // an index write under way
	locked := true
	defer func() {
		if locked {
			held.unlock()
		}
	}()
	ctx, cancel = context.WithCancel(context.Background())
	done = flushing(ctx, "(*gitIndex).lockContext(")
	cancel()
	if err := returned(t, done, "Flush cancelled while waiting for the index lock"); !errors.Is(err, context.Canceled) {
		t.Errorf("Flush cancelled while waiting for the index lock: %v, want context.Canceled", err)
	}
	done = flushing(context.Background(), "(*gitIndex).lockContext(")
	r.cancel() // Close begins
	if err := returned(t, done, "Flush waiting for the index lock at Close"); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush waiting for the index lock at Close: %v, want ErrClosed", err)
	}
	locked = false
	held.unlock()
}
