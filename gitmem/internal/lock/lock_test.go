package lock

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// waitFor polls cond until it holds: how a test knows a call is blocked.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

func TestMutexWaitGivesUp(t *testing.T) {
	t.Parallel()
	m := new(Mutex)
	if err := m.Lock(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if m.TryLock() {
		t.Fatal("TryLock took a held Mutex")
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Lock(ctx, nil) }()
	waitFor(t, "the second Lock waits", func() bool { return m.Waiting() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock = %v, want context.Canceled", err)
	}

	closing := make(chan struct{})
	go func() { done <- m.Lock(context.Background(), closing) }()
	waitFor(t, "the third Lock waits", func() bool { return m.Waiting() == 1 })
	close(closing)
	if err := <-done; !errors.Is(err, ErrClosing) {
		t.Fatalf("Lock = %v, want ErrClosing", err)
	}
	if m.Waiting() != 0 {
		t.Fatalf("Waiting = %d after both gave up", m.Waiting())
	}

	// Neither took it: the holder's Unlock leaves it free.
	go func() { done <- m.Lock(context.Background(), nil) }()
	waitFor(t, "the fourth Lock waits", func() bool { return m.Waiting() == 1 })
	m.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	m.Unlock()
	if !m.TryLock() {
		t.Fatal("TryLock of a free Mutex failed")
	}
	m.Unlock()
}

func TestMutexGivenUpBeforeNeverTakes(t *testing.T) {
	t.Parallel()
	m := new(Mutex)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Lock(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock(done ctx) = %v", err)
	}
	closing := make(chan struct{})
	close(closing)
	if err := m.Lock(context.Background(), closing); !errors.Is(err, ErrClosing) {
		t.Fatalf("Lock(closed) = %v", err)
	}
	if !m.TryLock() {
		t.Fatal("a Lock that gave up took the Mutex")
	}
}

func TestMutexUnlockOfFreePanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	new(Mutex).Unlock()
}

// openWriter opens dir's two lock files as a process of its own would
// (flock(2) tells open files apart, even in one process).
func openWriter(t *testing.T, dir string) *Writer {
	t.Helper()
	l, err := gd.OpenFileLock(filepath.Join(dir, "lock"))
	if err != nil {
		t.Fatal(err)
	}
	i, err := gd.OpenFileLock(filepath.Join(dir, "intent"))
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(l, i)
	t.Cleanup(w.Close)
	return w
}

func TestWriterAcquireGivesUpAndQueues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder, waiter := openWriter(t, dir), openWriter(t, dir)
	if err := holder.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	holder.Own()
	if holder.Wanted() {
		t.Fatal("Wanted with no process waiting")
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- waiter.Acquire(ctx) }()
	waitFor(t, "the holder sees a waiter", holder.Wanted)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire = %v, want context.Canceled", err)
	}
	if holder.Wanted() {
		t.Fatal("the intent file is still held after the waiter gave up")
	}
	if ok, err := waiter.TryAcquire(); ok || err != nil {
		t.Fatalf("TryAcquire = %v, %v while the holder holds the lock", ok, err)
	}

	go func() { done <- waiter.Acquire(context.Background()) }()
	waitFor(t, "the holder sees a waiter", holder.Wanted)
	if err := holder.Release(); err != nil {
		t.Fatal(err)
	}
	if holder.Held() {
		t.Fatal("Held after Release")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ok, _ := holder.TryAcquire(); ok {
		t.Fatal("the lock the waiter took was free")
	}
}

func TestReadOnlyWriterNeverWaits(t *testing.T) {
	t.Parallel()
	w := NewWriter(nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := w.TryAcquire(); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if w.Wanted() {
		t.Fatal("Wanted")
	}
	w.Close()
}

func TestMutexTakeGivesUpOnlyAWait(t *testing.T) {
	t.Parallel()
	m := new(Mutex)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	closing := make(chan struct{})
	close(closing)
	if err := m.Take(ctx, closing); err != nil {
		t.Fatalf("Take of a free Mutex = %v", err)
	}
	if err := m.Take(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Take of a held Mutex, ctx done = %v", err)
	}
	if err := m.Take(context.Background(), closing); !errors.Is(err, ErrClosing) {
		t.Fatalf("Take of a held Mutex, closed = %v", err)
	}
	m.Unlock()
	if !m.TryLock() {
		t.Fatal("a Take that gave up took the Mutex")
	}
}
