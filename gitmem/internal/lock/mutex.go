package lock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// ErrClosing is returned by a wait that the closing channel ended.
var ErrClosing = errors.New("closing")

// Mutex is a mutex whose Lock gives up when its context is done or the
// closing channel is closed. It is a one-slot channel; waiters are served
// in the order they came. The zero value is an unlocked Mutex. A Mutex
// must not be copied after first use.
type Mutex struct {
	made    sync.Once
	slot    chan struct{}
	waiting atomic.Int32 // Lock calls waiting now
}

// ch is the slot, made at first use.
func (m *Mutex) ch() chan struct{} {
	m.made.Do(func() { m.slot = make(chan struct{}, 1) })
	return m.slot
}

// Lock takes m, waiting while another holds it. It returns ctx.Err()
// when ctx is done, and ErrClosing when closing is closed (a nil closing
// never is), without m; a ctx done or closing closed before the call
// never takes it, even when m is free.
func (m *Mutex) Lock(ctx context.Context, closing <-chan struct{}) error {
	if err := gaveUp(ctx, closing); err != nil {
		return err
	}
	ch := m.ch()
	select {
	case ch <- struct{}{}:
		return nil
	default:
	}
	m.waiting.Add(1)
	defer m.waiting.Add(-1)
	select {
	case ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-closing:
		return ErrClosing
	}
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

// Take is Lock for a call that need not give up when it does not wait:
// a free m is taken at once, whatever ctx and closing say; a wait gives
// up as Lock's does.
func (m *Mutex) Take(ctx context.Context, closing <-chan struct{}) error {
	if m.TryLock() {
		return nil
	}
	return m.Lock(ctx, closing)
}

// TryLock takes m if it is free, and reports whether it did.
func (m *Mutex) TryLock() bool {
	select {
	case m.ch() <- struct{}{}:
		return true
	default:
		return false
	}
}

// Unlock lets m go. Unlocking a free Mutex panics, as sync.Mutex does.
func (m *Mutex) Unlock() {
	select {
	case <-m.ch():
	default:
		panic("lock: Unlock of an unlocked Mutex")
	}
}

// Waiting is how many Lock calls wait for m now: for tests, which wait
// until a call is blocked before they cancel it.
func (m *Mutex) Waiting() int { return int(m.waiting.Load()) }
