package gitmem

import (
	"context"
	"path/filepath"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// CatchUp, for a Repo opened ReadOnly, asks the process that holds the
// writer lock, if one does, to write to git's files what it acknowledged
// and still holds back (a store of serve --stores writes its changes every
// 2 s: Options.MaterialiseEvery), so that what the reader shows next holds
// every call answered before CatchUp began. An operator's reading command
// calls it once, before it reads. A writer has nothing to catch up. The
// reader holds the intent lock shared, as a writer waiting for the lock
// holds it exclusively: the holder sees it wanted, writes what waits,
// checkpoints and lets the lock go (maintainLoop). The reader waits for
// that, shared, and lets both go at once without ever holding the lock:
// a writer's next call waits for it a few milliseconds at most.
//
// A holder whose checkpoint fails keeps its lock until one succeeds: it
// is not waited for (Unrecovered names it). Otherwise the wait lasts at
// most catchUpWait, or Options.LockWait if shorter (and ctx): a serve
// lets go within milliseconds of being asked, while a gc, a redaction or
// an fsck --repair keeps the lock until done and holds nothing back, so
// a reader does not wait for them as a writer must. A holder that did not
// let go by then may hold changes the reader does not show, and
// Unrecovered says so (HeldBack). It writes nothing.
func (r *Repo) CatchUp(ctx context.Context) error {
	if !r.opt.ReadOnly {
		return nil
	}
	heldBack, err := catchUp(ctx, r.gitDir, &r.opt)
	r.heldBack.Store(int64(heldBack))
	return err
}

// catchUpWait bounds a reader's wait for the holder of the writer lock
// to write what it holds back (see CatchUp).
const catchUpWait = 3 * time.Second

// catchUp is CatchUp for the repository at gitDir: it reports how long
// it waited for a holder that kept its lock all along (0: none did). Its
// only error is ctx's: the command was stopped.
func catchUp(ctx context.Context, gitDir string, opt *Options) (heldBack time.Duration, err error) {
	// A reader that cannot look at the lock files (another user's
	// repository, whose lock files are the owner's alone: 0600) reads
	// what git's files hold, as it did before it could ask; Unrecovered
	// says the log could not be checked.
	lk, err := gd.OpenReadLock(filepath.Join(gitDir, "gitmem", "lock"))
	if err != nil {
		return 0, nil
	}
	defer lk.Close()
	free := func() (bool, error) {
		ok, err := lk.TryLockShared()
		if ok {
			err = lk.Unlock()
		}
		return ok, err
	}
	if ok, err := free(); ok || err != nil { // no holder: git's files hold every change
		return 0, nil
	}
	if readHolder(gitDir).Pid != 0 { // its checkpoint fails: it keeps the lock
		return 0, nil
	}
	intent, err := gd.OpenReadLock(filepath.Join(gitDir, "gitmem", "intent"))
	if err != nil {
		return 0, nil
	}
	defer intent.Close()
	letGo := func(ctx context.Context) error {
		if err := intent.LockSharedContext(ctx); err != nil {
			return err
		}
		defer intent.Unlock()
		if err := lk.LockSharedContext(ctx); err != nil {
			return err
		}
		return lk.Unlock()
	}
	wait := *opt
	wait.Waiting = nil // a few seconds at most, told after (Unrecovered)
	if wait.LockWait <= 0 || wait.LockWait > catchUpWait {
		wait.LockWait = catchUpWait
	}
	err = waitLockFor(ctx, &wait, gitDir, letGo, free) // not waitLock: a reader removes no clean mark
	switch {
	case ctx.Err() != nil:
		return 0, ctx.Err()
	case err != nil: // given up (*LockHeldError), or a lock that cannot be waited for: not let go
		return wait.LockWait, nil
	}
	return 0, nil
}
