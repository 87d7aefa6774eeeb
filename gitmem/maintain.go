package gitmem

import (
	"sync"
	"sync/atomic"
	"time"
)

// maintainer runs the background loop of the writer lock's holder
// (maintainLoop): it materialises soon after each group, checkpoints,
// puts HEAD back, merges displaced commits back, and gives the lock up
// when idle or wanted. Its state is channels and atomics: no lock.
type maintainer struct {
	stop    chan struct{}  // closed by shutdown: the loop ends
	wake    chan struct{}  // signal: work is waiting
	wg      sync.WaitGroup // the loop, while it runs
	lastUse atomic.Int64   // unix nanos of the last change
	idleFor time.Duration  // Options.ReleaseIdle, or releaseIdle
}

func newMaintainer(idleFor time.Duration) maintainer {
	return maintainer{stop: make(chan struct{}), wake: make(chan struct{}, 1), idleFor: idleFor}
}

// signal wakes the loop (a group was published, a checkpoint is due).
func (m *maintainer) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// used notes a change: the lock is not idle.
func (m *maintainer) used() { m.lastUse.Store(time.Now().UnixNano()) }

// idle reports whether no change was made for releaseIdle.
func (m *maintainer) idle() bool {
	return time.Since(time.Unix(0, m.lastUse.Load())) > m.idleFor
}

// start runs loop in the background, as the lock is taken.
func (m *maintainer) start(loop func(stop, wake <-chan struct{})) {
	m.used()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		loop(m.stop, m.wake)
	}()
}

// shutdown ends the loop and waits for it. Once only (Close).
func (m *maintainer) shutdown() {
	close(m.stop)
	m.wg.Wait()
}

// maintainLoop materialises soon after each group, checkpoints now and
// then, and gives the writer lock up when idle or asked for.
func (r *Repo) maintainLoop(stop, wake <-chan struct{}) {
	t := time.NewTicker(r.opt.pollEvery())
	defer t.Stop()
	var headChecked time.Time
	for {
		select {
		case <-stop:
			return
		case <-wake:
		case <-t.C:
		}
		if !r.lease.Held() {
			return // released by Close
		}
		if r.life.Err() != nil {
			// Close began: it makes the last checkpoint itself, and the
			// loop starts no attempt that would hold the disk lock its
			// steps wait for.
			return
		}
		// A change is written once it has waited MaterialiseEvery (see
		// Options), with all that waits then.
		if r.materialiseDue() {
			if err := r.materialize(); err != nil {
				r.refuseAfter(err)
			}
		}
		r.mat.prepareSpareLog()
		// Nearly full, and the other file takes more: switch to it now
		// rather than grow this one while the writers wait.
		size, full := r.log.fill()
		broken := r.state.brokenErr() != nil
		due := r.disk.due()
		// The lock is about to be given up (idle, or another process
		// waits for it): the checkpoint release needs is made here,
		// without the writer lock, so that a burst of calls beginning
		// meanwhile is not held up by it (up to 200 ms under the lock at
		// the end of a 64-client run, measured). release then finds the
		// log empty. Not again at every poll while checkpoints fail.
		wanted := r.lease.Wanted()
		leaving := wanted || r.idleToRelease()
		if r.life.Err() == nil && ((size > 0 && (size > checkpointBytes || due || full || (leaving && !broken))) || (broken && due)) {
			r.checkpoint() // a failure is logged once and retried when due
		}
		// HEAD moved with git (git checkout, git switch): put back every
		// second, and before the lock is let go.
		if now := time.Now(); leaving || now.Sub(headChecked) > checkpointEvery {
			headChecked = now
			if _, _, moved := headMoved(r.gitDir, r.branch); moved {
				if t, err := r.beginWrite(r.life, 0); err == nil { // not once Close began: it puts back itself
					r.putHeadBack()
					t.end()
				}
			}
		}
		if r.outside.waits() {
			r.mergeDisplaced(r.life)
		}
		if wanted || r.idleToRelease() { // again: calls may have come meanwhile
			r.opt.hooks.atMaintain("idle")
			if t := r.tryTurn(); t != nil {
				// Idle is looked at again with the turn: a change made
				// since the look above was not seen by it.
				released := (wanted || r.idleWithTurn()) && r.release(t)
				t.end()
				r.opt.hooks.atMaintain("tried")
				if released {
					return
				}
			}
		}
	}
}

// refuseAfter refuses new changes after a materialisation failed with
// err (the maintenance loop's, or Flush's): acknowledged changes are safe
// in the log; new ones wait until git's files can take them (a full
// disk, a branch's lock another program holds), and each new call tries
// a checkpoint first (own). Logged once, when changes begin to be
// refused.
func (r *Repo) refuseAfter(err error) {
	if r.state.refuse(err) {
		r.opt.Errorf("gitmem: %s; changes are refused until it can be written", failureText(err))
	}
}

// materialiseDue says the maintainer is to write the changes waiting:
// the first has waited Options.MaterialiseEvery, or so many wait that
// calls are held back for them (awaitBacklog).
func (r *Repo) materialiseDue() bool {
	n, waited := r.backlog.waited()
	return n > 0 && (waited >= r.opt.MaterialiseEvery || n >= r.opt.hooks.backlog())
}

// idleToRelease reports whether the writer lock is to be let go for
// idleness: no change for releaseIdle, and .git/index holds every change
// or its rewrite is due (the lock is kept until then). Letting the lock
// go writes the index: under load, where a store often goes releaseIdle
// without a change, writing it there rewrote the whole index a few times
// a second instead of once every IndexDelay (issue 25).
func (r *Repo) idleToRelease() bool {
	if !r.maint.idle() {
		return false
	}
	head, _ := r.state.snapshot()
	return !r.gitIndex.waits(head)
}

// idleWithTurn is idleToRelease looked at with the writer turn held,
// once no change waits to be published. A look made before the turn was
// taken may miss a change made meanwhile: the turn is free while a change
// is written to the log, so it can be prepared, published and
// acknowledged between that look and the turn, and the lock was let go
// and .git/index written though its rewrite was not due
// (TestIdleReleaseLooksAgainWithTheTurn). With the turn held no change is
// prepared, and once none is pending HEAD is the last one made, whose
// rewrite of the index was scheduled before it was published.
func (r *Repo) idleWithTurn() bool {
	return !r.state.pending() && r.idleToRelease()
}
