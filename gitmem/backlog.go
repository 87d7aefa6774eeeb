package gitmem

import "time"

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

// noteDrained wakes the calls waiting for the backlog to shrink.
func (r *Repo) noteDrained() {
	r.umu.Lock()
	r.taken = 0
	close(r.drained)
	r.drained = make(chan struct{})
	r.umu.Unlock()
}

// awaitBacklog holds a call back while backlogMax commits answered are
// not yet materialised, or the log holds logMax bytes (until a checkpoint
// empties it), at most backlogWait, and not when materialising
// fails (the call then meets the failure). Under a load the disk cannot
// keep up with, calls are so answered at the rate their changes reach
// git's files, and the memory the backlog holds, and how far git's files
// lag, stay bounded (the calls that passed the check at once may each
// add one more).
func (r *Repo) awaitBacklog() {
	var timeout <-chan time.Time
	for {
		r.umu.Lock()
		n, drained := len(r.unmat)+r.taken, r.drained
		r.umu.Unlock()
		r.smu.RLock()
		broken := r.broken != nil
		r.smu.RUnlock()
		if n < r.opt.hooks.backlog() && r.log.size() < r.opt.hooks.logLimit() || drained == nil || broken || r.ckptFailing.Load() {
			return
		}
		if timeout == nil {
			t := time.NewTimer(backlogWait)
			defer t.Stop()
			timeout = t.C
		}
		r.signal()
		select {
		case <-drained:
		case <-timeout:
			return
		}
	}
}
