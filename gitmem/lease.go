package gitmem

import (
	"context"
	"errors"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// own takes the writer lock for this process if it does not hold it yet:
// behind any process already queued for it, then it loads what others
// committed meanwhile, replays a log a crash left, and repairs unfinished
// worktree paths. The wait gives up when ctx is done (ctx.Err()) or Close
// begins (ErrClosed); settling in, once the lock is taken, always
// finishes.
func (r *Repo) own(ctx context.Context, t *writerTurn) error {
	if r.lease.Held() {
		if r.state.brokenErr() != nil {
			// The log or git's files failed earlier: a checkpoint that
			// succeeds now (the fault is gone) lets changes through again.
			if err := r.checkpoint(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := r.acquire(ctx); err != nil {
		return err
	}
	if err := r.settleIn(t, nil); err != nil {
		r.lease.Release()
		return err
	}
	return nil
}

// acquire takes the writer lock, queueing behind any process already
// waiting for it (the intent lock is held while waiting, which tells the
// holder to let go). It gives up when ctx is done, Close begins, or
// Options.LockWait is over (a *LockHeldError; see waitLock).
func (r *Repo) acquire(ctx context.Context) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(r.life, stop)()
	if err := waitLock(ctx, &r.opt, r.gitDir, r.lease.Acquire, r.lease.TryAcquire); err != nil {
		var held *LockHeldError
		if errors.As(err, &held) {
			return err
		}
		if ctx.Err() != nil {
			return r.gaveUp(err)
		}
		return wrap("lock the repository", err)
	}
	return nil
}

// settleIn makes a freshly taken writer lock ours: what others committed
// is loaded, a log a crash left is replayed, unfinished worktree paths
// are repaired, and the background work starts. Called with the turn and
// the writer lock held; si is .git/index as start read it (nil after).
func (r *Repo) settleIn(t *writerTurn, si *startIndex) error {
	// A journal that cannot be read now (out of file descriptors, say)
	// stops the start before anything changed; repairPending reads it
	// again once the log is replayed.
	if _, _, err := r.mirror.loadJournal(); err != nil {
		return err
	}
	// A branch git moved off what this process acknowledged while the
	// lock was free is not taken: it is put back below.
	// (At a start nothing is loaded: the branch is read once, by refresh.)
	had, _, loaded := r.state.loadedAt()
	var cur plumbing.Hash
	var off, rewritten bool
	if loaded && !had.IsZero() {
		if h, err := r.readRef(r.branch); err == nil {
			cur = h
			off, rewritten = r.movedOff(had, cur)
		}
	}
	if rewritten {
		dt := r.disk.hold()
		r.mat.dropHeld(dt) // a redaction deleted them: never written again
		dt.release()
	}
	if !off {
		if err := r.refresh(t, si, true); err != nil {
			return err
		}
	}
	r.disk.resetTo(r.state.snapshot())
	if off {
		r.takeBack(cur)
	}
	replayed, err := r.openLog()
	if err != nil {
		return err
	}
	if err := r.repairPending(); err != nil {
		return err
	}
	if !replayed {
		r.checkoutMoved(si)
		// The log is empty: a checkpoint is due a checkpointEvery from
		// now, not at the first change (a replay's checkpoint set it).
		r.disk.checkpointed()
	}
	if refs := displacedIn(r.gitDir); len(refs) > 0 { // left by a start or a run that could not merge them
		r.outside.load(r.gitDir, refs)
		r.outside.wait()
	}
	r.lease.Own()
	r.putHeadBack() // git checkout or git switch while the lock was free
	r.maint.start(r.maintainLoop)
	return nil
}

// repairBeforeLettingGo brings back to HEAD the worktree paths the
// follow could not write (a folder a hand made a link: repairPending), as
// the next holder's start would, before the lock is let go (release,
// Close): fsck and git status after it find nothing interrupted. A
// repair that fails is logged, and stays for the next start. Called with
// the turn and the writer lock held, after a checkpoint.
func (r *Repo) repairBeforeLettingGo() {
	if len(r.mirror.pending()) == 0 {
		return
	}
	if err := r.repairPending(); err != nil {
		r.opt.Errorf("gitmem: could not repair the worktree: %v", scrubPaths(err))
	}
}

// release checkpoints and gives the writer lock up, unless a change is
// still being made. Called with the turn held; reports whether it
// released.
func (r *Repo) release(t *writerTurn) bool {
	if !r.lease.Held() {
		return true
	}
	queued := r.committer.queued()
	pending := r.state.pending()
	if queued > 0 || pending || r.collector.isRunning() || r.histIndex.savesUnderWay() {
		return false
	}
	if r.disk.failing() && !r.disk.due() {
		return false // the last attempt failed: retried when due, not at every poll
	}
	// A commit made with git while this process held the lock (from
	// .git/index as it lagged) is put aside first, with what is known of
	// the indexes it may have been made from, and merged back before the
	// lock is let go: the next holder would take it as a branch moved
	// forward, and check out what the lagging index put back (N9 F0).
	if r.gitMoved() {
		return false
	}
	if r.checkpoint() != nil {
		return false // keep the lock (and the log) until git's files take the changes
	}
	r.repairBeforeLettingGo()
	held := r.gitIndex.lock()
	defer held.unlock() // an index written by Flush meanwhile is the holder's
	if err := r.writeIndexHeld(held); err != nil {
		r.opt.Logf("gitmem: could not write .git/index: %v", scrubPaths(err))
	}
	if r.gitMoved() { // a git commit made since the look above (its index written over: the branch alone is looked at)
		return false
	}
	// A memory file just written (the checkpoint above materialised it)
	// is vouched for in the clean mark once the racy window is over: the
	// lock is kept, the turn given back, and the maintainer's next polls
	// let it go with the mark, rather than the racy window waited out
	// under the turn, which held up the first call after a store's pause
	// (an agent's next call) that long. At most twice the window for a
	// commit: a file that stays racy (its times in the future) is left
	// out of the mark, and the mark with it.
	if head, racy := r.racyMark(held); racy {
		if head != r.markWaitedFor {
			r.markWaitedFor, r.markWaitedSince = head, time.Now()
		}
		if time.Since(r.markWaitedSince) < 2*gd.RacyWindow {
			return false
		}
	}
	r.closeLog(false)
	r.mat.forgetHeld() // the checkpoint above made them durable; the next holder may redact them
	r.markClean(held)
	r.mirror.dropSpares()
	r.lease.Release()
	return true
}
