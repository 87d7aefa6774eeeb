package lock

import (
	"context"
	"sync/atomic"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// Writer is a repository's writer lease. A writer takes, in this order,
// the turn (one writer in this process) and, if the process does not
// hold it yet, the lock file (one writer across processes). The process
// keeps the lock file between writes, until it is idle or another
// process asks for it (Wanted); the turn is held for one write.
type Writer struct {
	turn   Mutex
	lock   *gd.FileLock // .git/gitmem/lock; nil for a read-only Repo
	intent *gd.FileLock // .git/gitmem/intent, held while waiting for lock
	owned  atomic.Bool  // this process holds lock and settled in; changed with the turn held
	waits  atomic.Int32 // Acquire calls waiting for another process now
}

// NewWriter makes the lease over the two lock files (nil files for a
// Repo that never writes: every wait for them then succeeds at once).
func NewWriter(lockFile, intent *gd.FileLock) *Writer {
	return &Writer{lock: lockFile, intent: intent}
}

// Turn waits for this process's writer turn (see Mutex.Lock).
func (w *Writer) Turn(ctx context.Context, closing <-chan struct{}) error {
	return w.turn.Lock(ctx, closing)
}

// TryTurn takes the turn if it is free, and reports whether it did.
func (w *Writer) TryTurn() bool { return w.turn.TryLock() }

// EndTurn gives the turn back.
func (w *Writer) EndTurn() { w.turn.Unlock() }

// TurnWaiters is how many calls wait for the turn now (for tests).
func (w *Writer) TurnWaiters() int { return w.turn.Waiting() }

// Acquire takes the lock file, behind any process already waiting for
// it: the intent file first, held while waiting, which tells the holder
// to let go. It gives up with ctx.Err() when ctx is done. Called with
// the turn held; Own marks the lock settled in.
func (w *Writer) Acquire(ctx context.Context) error {
	w.waits.Add(1)
	defer w.waits.Add(-1)
	if err := w.intent.LockContext(ctx); err != nil {
		return err
	}
	err := w.lock.LockContext(ctx)
	w.intent.Unlock()
	return err
}

// TryAcquire takes the lock file if no process holds it, without
// waiting and without the intent file (Close, which must not wait for
// another process).
func (w *Writer) TryAcquire() (bool, error) { return w.lock.TryLock() }

// AcquireWaiters is how many Acquire calls wait now (for tests).
func (w *Writer) AcquireWaiters() int { return int(w.waits.Load()) }

// Own records that the lock file taken is this process's, settled in.
// Called with the turn and the lock file held.
func (w *Writer) Own() { w.owned.Store(true) }

// Held reports whether this process holds the lock file, settled in.
func (w *Writer) Held() bool { return w.owned.Load() }

// Wanted reports whether another process waits for the lock file (it
// holds the intent file while it waits).
func (w *Writer) Wanted() bool {
	ok, err := w.intent.TryLock()
	if err != nil {
		return false
	}
	if ok {
		w.intent.Unlock()
	}
	return !ok
}

// Release gives the lock file up (also one taken and not settled in).
// Called with the turn held, or by Close.
func (w *Writer) Release() error {
	w.owned.Store(false)
	return w.lock.Unlock()
}

// Disown forgets the lock file without letting it go: a Repo shut down
// without its checkpoint (a test's crash) closes the files instead.
func (w *Writer) Disown() { w.owned.Store(false) }

// Close closes both lock files, which lets a lock held go.
func (w *Writer) Close() {
	w.lock.Close()
	w.intent.Close()
}
