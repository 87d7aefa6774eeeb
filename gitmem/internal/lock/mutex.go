package lock

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosing is returned by a wait that the closing channel ended.
var ErrClosing = errors.New("closing")

// Mutex is a mutex whose Lock gives up when its context is done or the
// closing channel is closed. The zero value is an unlocked Mutex. A Mutex
// must not be copied after first use.
//
// It behaves as sync.Mutex does, which gitmem's locks were before they
// could give up: a Lock that finds m held tries again a few times before
// it waits (holds are mostly short, and a goroutine that sleeps costs a
// futex call to wake); the waiters queue in the order they came; an
// Unlock wakes the first, which competes for m with goroutines arriving
// meanwhile (one that is running takes m without a switch), and goes back
// to the front of the queue if it loses. A waiter that has waited longer
// than starveAfter turns m to handing off: Unlock then gives m to the
// first waiter directly, and newcomers queue, until a waiter is served
// that had not waited that long, or the queue is empty. (A one-slot
// channel, which gitmem used first, hands m to the first waiter always:
// every Unlock under contention woke a sleeping goroutine while running
// ones queued behind it. BenchmarkMutex: 4-5x this one's time with 8
// goroutines; BenchmarkMutationParallel, 4 alternated runs: 5,036-7,190
// calls/s with it, 5,463-8,108 with this one, each run ahead.)
type Mutex struct {
	mu       sync.Mutex // guards the fields below; held for a few instructions
	locked   bool
	starving bool      // Unlock hands m to queue[0]
	queue    []*waiter // in the order they came; a woken one that lost goes back to the front

	waiting atomic.Int32 // Lock calls queued now (Waiting)
}

// waiter is one Lock queued. Unlock pops it from the queue and sends on
// ch, whose one slot never blocks the sender: true when m is handed to
// it, false when it is woken to compete for m.
type waiter struct {
	ch    chan bool
	since time.Time
}

const (
	// spins is how many times Lock tries again, yielding between tries,
	// before it queues.
	spins = 4
	// starveAfter is how long a waiter waits before m hands off (as
	// sync.Mutex's starvationThresholdNs).
	starveAfter = time.Millisecond
)

// Lock takes m, waiting while another holds it. It returns ctx.Err()
// when ctx is done, and ErrClosing when closing is closed (a nil closing
// never is), without m; a ctx done or closing closed before the call
// never takes it, even when m is free.
func (m *Mutex) Lock(ctx context.Context, closing <-chan struct{}) error {
	if err := gaveUp(ctx, closing); err != nil {
		return err
	}
	return m.lock(ctx, closing)
}

// Take is Lock for a call that need not give up when it does not wait:
// a free m is taken at once, whatever ctx and closing say; a wait gives
// up as Lock's does.
func (m *Mutex) Take(ctx context.Context, closing <-chan struct{}) error {
	if m.TryLock() {
		return nil
	}
	return m.Lock(ctx, closing)
}

// TryLock takes m if it is free, and reports whether it did. It does not
// take m from waiters it is being handed to.
func (m *Mutex) TryLock() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locked {
		return false
	}
	m.locked = true
	return true
}

func (m *Mutex) lock(ctx context.Context, closing <-chan struct{}) error {
	for i := 0; i <= spins; i++ {
		if m.TryLock() {
			return nil
		}
		if i < spins {
			runtime.Gosched()
		}
	}
	w := &waiter{ch: make(chan bool, 1), since: time.Now()}
	m.waiting.Add(1)
	defer m.waiting.Add(-1)
	front := false // a woken waiter that lost queues at the front
	for {
		m.mu.Lock()
		if !m.locked {
			m.locked = true
			m.mu.Unlock()
			return nil
		}
		if front {
			m.queue = append([]*waiter{w}, m.queue...)
		} else {
			m.queue = append(m.queue, w)
		}
		m.mu.Unlock()
		select {
		case handed := <-w.ch:
			if handed {
				return nil
			}
			if time.Since(w.since) > starveAfter {
				m.mu.Lock()
				m.starving = true
				m.mu.Unlock()
			}
			front = true
		case <-ctx.Done():
			m.leave(w)
			return ctx.Err()
		case <-closing:
			m.leave(w)
			return ErrClosing
		}
	}
}

// leave takes w, which gives up, out of the queue. When an Unlock had
// popped it already, what it was sent is passed on: m handed to w goes to
// the next waiter (or is let go); a wake-up wakes the next.
func (m *Mutex) leave(w *waiter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, q := range m.queue {
		if q == w {
			m.queue = append(m.queue[:i], m.queue[i+1:]...)
			return
		}
	}
	if handed := <-w.ch; handed {
		m.release()
	} else if !m.locked {
		m.wake()
	}
}

// Unlock lets m go. Unlocking a free Mutex panics, as sync.Mutex does.
func (m *Mutex) Unlock() {
	m.mu.Lock()
	if !m.locked {
		m.mu.Unlock()
		panic("lock: Unlock of an unlocked Mutex")
	}
	m.release()
	m.mu.Unlock()
}

// release lets m go: to the first waiter when m hands off, else free,
// with the first waiter woken to compete for it. Called with m.mu held
// and m locked.
func (m *Mutex) release() {
	if len(m.queue) == 0 {
		m.locked, m.starving = false, false
		return
	}
	if !m.starving {
		m.locked = false
		m.wake()
		return
	}
	w := m.queue[0]
	m.queue = m.queue[1:]
	if len(m.queue) == 0 || time.Since(w.since) < starveAfter {
		m.starving = false
	}
	w.ch <- true // m stays locked: it is w's
}

// wake pops the first waiter and wakes it to compete for m. Called with
// m.mu held.
func (m *Mutex) wake() {
	if len(m.queue) == 0 {
		return
	}
	w := m.queue[0]
	m.queue = m.queue[1:]
	w.ch <- false
}

func gaveUp(ctx context.Context, closing <-chan struct{}) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-closing:
		return ErrClosing
	default:
		return nil
	}
}

// Waiting is how many Lock calls wait for m now: for tests, which wait
// until a call is blocked before they cancel it.
func (m *Mutex) Waiting() int { return int(m.waiting.Load()) }
