package gitmem

import (
	"context"
	"errors"

	"github.com/gitmem-dev/gitmem/gitmem/internal/lock"
)

// The writer turn. Every call that writes, or that must load what another
// process committed, begins the same way (beginWrite): wait for the
// collector's lock if no collection or redaction may run meanwhile, wait
// for this process's writer turn (r.lease), refuse a Repo Close has
// closed, and with withOwn make sure this process holds the repository's
// writer lock (own). Each wait gives up when the caller's context is done
// (ctx.Err(), nothing written) or when Close begins (ErrClosed).
// Functions that must run with the turn held take the *writerTurn as
// their first argument.
//
// The lock order: the collector's lock, the turn, the intent file, the
// lock file, then the parts' own locks.

// writerTurn is this process's writer turn, held; end gives it back.
// It belongs to the goroutine that began it.
type writerTurn struct {
	r     *Repo
	mode  turnMode
	ended bool // the turn was given back (endTurn)
	freed bool // and the collector's lock too (end)
}

// turnMode says what beginWrite takes and checks besides the turn.
type turnMode uint8

const (
	// withOwn takes the repository's writer lock too (own): what other
	// processes committed is loaded, a crashed holder's log replayed.
	withOwn turnMode = 1 << iota
	// ownIfYouCan is withOwn where own's failure counts only when the
	// lock is not held after it: GC runs on a log that cannot be
	// checkpointed yet (it reports that itself).
	ownIfYouCan
	// writable refuses a read-only Repo (ErrReadOnly).
	writable
	// exclusive takes the collector's lock first: no collection or
	// redaction meanwhile (GC, redact). end lets it go; endTurn keeps it.
	exclusive
)

// beginWrite waits for the writer turn and what mode asks for. The
// error is ctx.Err() when ctx ended the wait, ErrClosed when the Repo is
// closed or Close began meanwhile, or own's.
func (r *Repo) beginWrite(ctx context.Context, mode turnMode) (*writerTurn, error) {
	if mode&writable != 0 && r.opt.ReadOnly {
		return nil, ErrReadOnly
	}
	if mode&exclusive != 0 {
		if err := r.collector.lock(ctx, r.life.Done()); err != nil {
			return nil, r.gaveUp(err)
		}
	}
	if err := r.lease.Turn(ctx, r.life.Done()); err != nil {
		if mode&exclusive != 0 {
			r.collector.unlock()
		}
		return nil, r.gaveUp(err)
	}
	t := &writerTurn{r: r, mode: mode}
	if r.closed.Load() { // a call that began before Close: the lock files are closed
		t.end()
		return nil, ErrClosed
	}
	if mode&(withOwn|ownIfYouCan) != 0 {
		if err := r.own(ctx, t); err != nil && (mode&ownIfYouCan == 0 || !r.lease.Held()) {
			t.end()
			return nil, err
		}
	}
	return t, nil
}

// tryTurn takes the writer turn if it is free (the maintenance loop's
// release, which must not hold calls up), or returns nil.
func (r *Repo) tryTurn() *writerTurn {
	if !r.lease.TryTurn() {
		return nil
	}
	return &writerTurn{r: r}
}

// gaveUp is the error of a wait that ended: ErrClosed when Close ended
// it (lock.ErrClosing, or a context Close cancelled), else err (the
// caller's ctx.Err(), or any other error, unchanged).
func (r *Repo) gaveUp(err error) error {
	if errors.Is(err, lock.ErrClosing) || r.life.Err() != nil && errors.Is(err, context.Canceled) {
		return ErrClosed
	}
	return err
}

// endTurn gives the writer turn back, keeping the collector's lock if
// beginWrite took it (GC: writers go on while it collects). Ending twice
// does nothing.
func (t *writerTurn) endTurn() {
	if !t.ended {
		t.ended = true
		t.r.lease.EndTurn()
	}
}

// end gives the writer turn back, and the collector's lock if beginWrite
// took it. Ending twice does nothing: a call that ends early may also
// defer it.
func (t *writerTurn) end() {
	t.endTurn()
	if t.mode&exclusive != 0 && !t.freed {
		t.freed = true
		t.r.collector.unlock()
	}
}
