package gitmem

import (
	"context"
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
// holder to let go). It gives up when ctx is done or Close begins.
func (r *Repo) acquire(ctx context.Context) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(r.life, stop)()
	if err := r.lease.Acquire(ctx); err != nil {
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
	had, _, loaded := r.state.loadedAt()
	var off, rewritten bool
	cur, err := r.readRef(r.branch)
	if err == nil && loaded {
		off, rewritten = r.movedOff(had, cur)
	}
	if rewritten {
		dt := r.disk.hold()
		r.mat.dropHeld(dt) // a redaction deleted them: never written again
		dt.release()
	}
	handed, replaying := r.state.handedOver(), false
	if err == nil && handed {
		// This process let the lock go with changes git's files lack
		// (handOver): while the log still holds some, it is replayed
		// onto the branch as git's files hold it, and readers keep the
		// view meanwhile (a refresh would show them the branch without
		// the changes until the replay).
		u, err := unrecoveredIn(r.gitDir, r.branch, r.objects.st)
		if err != nil {
			return err // never a branch put back on commits only the log holds (takeBack)
		}
		if replaying = u.Changes > 0; replaying {
			off = false // not moved by hand: the replay moves it on
			tree, err := r.treeAt(cur, nil, r.snapshotTree())
			if err != nil {
				return err
			}
			r.disk.resetTo(cur, tree)
			r.toolIDs.markStale()
		}
	}
	if !off && !replaying {
		if err := r.refresh(t, si, true); err != nil {
			return err
		}
	}
	if !replaying {
		r.disk.resetTo(r.state.snapshot())
	}
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
	if handed {
		r.forgetHanded()
	}
	r.lease.Own()
	r.putHeadBack() // git checkout or git switch while the lock was free
	r.maint.start(r.maintainLoop)
	return nil
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
		// The last attempt failed: retried when due, not at every poll;
		// another process waiting takes the log over at once.
		return r.lease.Wanted() && r.handOver()
	}
	// A commit made with git while this process held the lock (from
	// .git/index as it lagged) is put aside first, with what is known of
	// the indexes it may have been made from, and merged back before the
	// lock is let go: the next holder would take it as a branch moved
	// forward, and check out what the lagging index put back (N9 F0).
	if r.gitMoved() {
		return false
	}
	if err := r.checkpoint(); err != nil {
		// Idle, the lock (and the log) is kept until git's files take
		// the changes; another process waiting is not kept waiting.
		return r.lease.Wanted() && r.handOver()
	}
	held := r.gitIndex.lock()
	defer held.unlock() // an index written by Flush meanwhile is the holder's
	if err := r.writeIndexHeld(held); err != nil {
		r.opt.Logf("gitmem: could not write .git/index: %v", err)
	}
	if r.gitMoved() { // a git commit made since the look above (its index written over: the branch alone is looked at)
		return false
	}
	r.closeLog(false)
	r.mirror.dropSpares()
	r.lease.Release()
	return true
}

// handOver gives the writer lock up to another process waiting for it
// while git's files cannot take the acknowledged changes (a full disk:
// the checkpoint fails). The write-ahead log is the commit point: it
// holds them, and the next holder replays it as after a crash (settleIn,
// openLog), whatever the failed checkpoint left half done (a pack
// written and the branch not moved, files written and not synced, a
// worktree file the journal names). This process forgets what it had
// still to write (the backlog) and the log's state; its readers keep
// the view, which holds the changes (their objects stay in memory),
// until it takes the lock again (loadMoved, settleIn) or git's branch
// moves on from it. .git/index is not written: it would name blobs git
// lacks. Called with the turn held, nothing queued or pending; reports
// that it released.
func (r *Repo) handOver() bool {
	dt := r.disk.hold() // no materialisation (a call's gitUpToDate) runs or starts
	err := r.mat.handOver(dt)
	r.state.handOver()
	r.lease.Release()
	dt.release()
	r.mirror.dropSpares()
	r.opt.Errorf("gitmem: another process waits for the writer lock: let it go, though git's files cannot take the acknowledged changes yet (%v); the write-ahead log holds them, and that process writes them to git's files or refuses changes as this one did", err)
	return true
}

// forgetHanded ends a hand-over for this process's readers: the view
// holds the changes again from the log replayed, or from git's files
// (settleIn, loadMoved). The objects of the commits handOver dropped
// leave memory (a replay put them there again).
func (r *Repo) forgetHanded() {
	r.state.tookBack()
	r.objects.st.Drop(r.mat.takeHanded())
}
