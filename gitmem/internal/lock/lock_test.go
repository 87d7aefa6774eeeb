package lock

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
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

// TestMutexServesWaitersInOrder: goroutines that queue for m are served
// in the order they came.
func TestMutexServesWaitersInOrder(t *testing.T) {
	t.Parallel()
	m := new(Mutex)
	m.TryLock()
	const n = 5
	order := make(chan int, n)
	for i := range n {
		go func() {
			if err := m.Lock(context.Background(), nil); err != nil {
				t.Error(err)
				return
			}
			order <- i
			m.Unlock()
		}()
		waitFor(t, "the waiter queues", func() bool { return m.Waiting() == i+1 })
	}
	m.Unlock()
	for want := range n {
		if got := <-order; got != want {
			t.Fatalf("waiter %d served %dth", got, want)
		}
	}
}

// TestMutexHandsOffToAStarvedWaiter: a waiter that has waited longer
// than starveAfter is given m by the next Unlock, ahead of a goroutine
// that tries meanwhile; and a waiter that gives up while m is handed to
// it passes m on.
func TestMutexHandsOffToAStarvedWaiter(t *testing.T) {
	t.Parallel()
	m := new(Mutex)
	m.TryLock()
	got := make(chan error, 1)
	go func() { got <- m.Lock(context.Background(), nil) }()
	waitFor(t, "the waiter queues", func() bool { return m.Waiting() == 1 })
	time.Sleep(2 * starveAfter)
	// Woken, it finds m taken again and turns m to handing off.
	m.mu.Lock()
	m.release()
	m.locked = true // a goroutine that came meanwhile took it
	m.mu.Unlock()
	waitFor(t, "m hands off", func() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.starving && len(m.queue) == 1 })
	m.Unlock()
	if m.TryLock() {
		t.Fatal("TryLock took m while it was handed to a waiter")
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	m.Unlock()
	if !m.TryLock() {
		t.Fatal("m is not free after the waiter let it go")
	}
	m.Unlock()
}

// TestMutexUnderCancels: many goroutines take m, some giving up while
// they wait; m is never held twice, and is free at the end.
func TestMutexUnderCancels(t *testing.T) {
	t.Parallel()
	m := new(Mutex)
	var held atomic.Int32
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 300 {
				ctx, cancel := context.WithCancel(context.Background())
				if (g+i)%3 == 0 {
					time.AfterFunc(time.Duration(i%50)*time.Microsecond, cancel)
				}
				if m.Lock(ctx, nil) == nil {
					if held.Add(1) != 1 {
						t.Error("m held twice")
					}
					if i%25 == 0 {
						time.Sleep(2 * starveAfter) // the others starve
					}
					held.Add(-1)
					m.Unlock()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if !m.TryLock() {
		t.Fatal("m is held at the end")
	}
	if m.Waiting() != 0 || len(m.queue) != 0 {
		t.Fatalf("%d waiting, %d queued at the end", m.Waiting(), len(m.queue))
	}
}

// BenchmarkMutex compares Mutex with sync.Mutex, which it imitates,
// uncontended and under RunParallel's goroutines, over a short critical
// section. Measured here (2 cores, -cpu 1,2,8, busy machine): Mutex
// 36, 34, 44 ns/op; sync.Mutex 15, 17-21, 27-43; the one-slot channel
// Mutex was first 44-63, 58-67, 195-249.
func BenchmarkMutex(b *testing.B) {
	work := func(n *int) {
		for i := range 50 {
			*n += i
		}
	}
	b.Run("lock.Mutex", func(b *testing.B) {
		var m Mutex
		n := 0
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Lock(context.Background(), nil)
				work(&n)
				m.Unlock()
			}
		})
	})
	b.Run("sync.Mutex", func(b *testing.B) {
		var m sync.Mutex
		n := 0
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Lock()
				work(&n)
				m.Unlock()
			}
		})
	})
}
