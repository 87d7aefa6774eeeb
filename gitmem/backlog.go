package gitmem

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// backlogMax bounds the commits answered but not yet materialised
// (about 40 KB of memory each under load), those being materialised
// included: past it a call waits (awaitBacklog), at most backlogWait, for
// the materialiser, which takes at most chunkMax commits at a time so
// that waiting calls go on after each. A burst of thousands of calls is
// absorbed; a load the disk cannot keep up with is slowed to its pace.
// (A test sets others: testHooks.)
//
// logMax bounds the write-ahead log the same way, in bytes (both files):
// the commits answered and not yet checkpointed. The backlog alone let a
// log of large records (a file grown to tens of kilobytes, rewritten at
// every insert) reach 272 MiB under load.
const (
	backlogMax = 8192
	chunkMax   = 2048
	logMax     = int64(64 << 20)
)

// backlog is the commits published (durable, answered) and not yet in
// git's files: publish adds them, the materialiser takes them.
type backlog struct {
	// mu guards items, taken and drained. A leaf of the lock order: no
	// other lock is taken while it is held.
	mu      sync.Mutex
	items   []*prepared
	since   time.Time     // when items last went from none to some: what is left after a take waited longer
	taken   int           // commits taken from items and being materialised
	drained chan struct{} // closed when some were materialised; nil: no materialiser (a Repo Fsck or Clone made)
}

func newBacklog() backlog {
	return backlog{drained: make(chan struct{})}
}

// add queues published commits for the materialiser.
func (b *backlog) add(items []*prepared) {
	b.mu.Lock()
	if len(b.items) == 0 && len(items) > 0 {
		b.since = time.Now()
	}
	b.items = append(b.items, items...)
	b.mu.Unlock()
}

// waited is how many commits wait, and how long the first of them has.
func (b *backlog) waited() (n int, d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.items) == 0 {
		return 0, 0
	}
	return len(b.items), time.Since(b.since)
}

// pending is how many commits wait, and the parent of the first (the
// branch they follow on from).
func (b *backlog) pending() (n int, from plumbing.Hash) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.items) > 0 {
		from = b.items[0].parent
	}
	return len(b.items), from
}

// take takes the first k commits to materialise; requeue puts them back
// when that failed, noteDrained says it is done.
func (b *backlog) take(k int) []*prepared {
	b.mu.Lock()
	defer b.mu.Unlock()
	items := slices.Clone(b.items[:k])
	b.taken = k
	clear(b.items[:k]) // the array's head no longer holds them (their objects) alive
	if b.items = b.items[k:]; len(b.items) == 0 {
		b.items = nil
	}
	return items
}

func (b *backlog) requeue(items []*prepared) {
	b.mu.Lock()
	if len(b.items) == 0 && len(items) > 0 {
		b.since = time.Now()
	}
	b.items = append(items, b.items...)
	b.mu.Unlock()
}

// noteDrained wakes the calls waiting for the backlog to shrink.
func (b *backlog) noteDrained() {
	b.mu.Lock()
	b.taken = 0
	close(b.drained)
	b.drained = make(chan struct{})
	b.mu.Unlock()
}

// await waits while hold(n) says the n commits waiting (those being
// materialised included) are too many, at most backlogWait, waking the
// materialiser (wake) each time. It returns ctx.Err() when ctx ends the
// wait, else nil.
func (b *backlog) await(ctx context.Context, hold func(n int) bool, wake func()) error {
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		n, drained := len(b.items)+b.taken, b.drained
		b.mu.Unlock()
		if drained == nil || !hold(n) {
			return nil
		}
		if timeout == nil {
			t := time.NewTimer(backlogWait)
			defer t.Stop()
			timeout = t.C
		}
		wake()
		select {
		case <-drained:
		case <-timeout:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// awaitBacklog holds a call back while backlogMax commits answered are
// not yet materialised, or the log holds logMax bytes (until a checkpoint
// empties it), at most backlogWait, and not when materialising
// fails (the call then meets the failure). Under a load the disk cannot
// keep up with, calls are so answered at the rate their changes reach
// git's files, and the memory the backlog holds, and how far git's files
// lag, stay bounded (the calls that passed the check at once may each
// add one more). It returns ctx.Err() when ctx ends the wait first.
func (r *Repo) awaitBacklog(ctx context.Context) error {
	return r.backlog.await(ctx, func(n int) bool {
		if n < r.opt.hooks.backlog() && r.log.size() < r.opt.hooks.logLimit() {
			return false
		}
		return r.state.brokenErr() == nil && !r.disk.failing()
	}, r.maint.signal)
}
