package gitdir

import (
	"context"
	"time"
)

// LockContext takes the lock, waiting while another process holds it,
// until ctx is done: then it returns ctx.Err() without the lock. A ctx
// already done never takes it. flock(2) and LockFileEx cannot be
// interrupted, so the wait is TryLock polled, every millisecond at
// first and then, doubling, every lockPollMax. The order among waiting
// processes is kept by the caller (gitmem queues on its intent lock
// first), not by the kernel. Nothing happens on a nil lock.
func (l *FileLock) LockContext(ctx context.Context) error {
	return l.poll(ctx, l.TryLock)
}

// LockSharedContext is LockContext for the lock taken shared
// (TryLockShared): it waits while a process holds it exclusively.
func (l *FileLock) LockSharedContext(ctx context.Context) error {
	return l.poll(ctx, l.TryLockShared)
}

// poll calls try until it takes the lock or fails, or ctx is done.
func (l *FileLock) poll(ctx context.Context, try func() (bool, error)) error {
	if l == nil {
		return nil
	}
	wait := time.Millisecond
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if ok, err := try(); ok || err != nil {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, lockPollMax)
	}
}

// lockPollMax is the longest LockContext sleeps between two tries: a
// lock let go is taken at most this late.
const lockPollMax = 20 * time.Millisecond
