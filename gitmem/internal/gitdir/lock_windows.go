//go:build windows

package gitdir

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// FileLock is the repository's writer lock on Windows: LockFileEx on the
// whole of .git/gitmem/lock. The system releases it if the process dies.
type FileLock struct{ f *os.File }

func OpenFileLock(path string) (*FileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return &FileLock{f: f}, nil
}

func (l *FileLock) lock(flags uint32) error {
	var ol windows.Overlapped
	return windows.LockFileEx(windows.Handle(l.f.Fd()), flags|windows.LOCKFILE_EXCLUSIVE_LOCK, 0, 1, 0, &ol)
}

// OpenReadLock opens the lock file at path read-only, for a reader that
// takes it shared only (TryLockShared). A missing file is
// fs.ErrNotExist (no writer made it).
func OpenReadLock(path string) (*FileLock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &FileLock{f: f}, nil
}

// Lock, Unlock and Close do nothing on a nil lock (a read-only Repo).
func (l *FileLock) Lock() error {
	if l == nil {
		return nil
	}
	return l.lock(0)
}

// LockShared takes the lock beside other shared holders, waiting while
// it is held exclusively.
func (l *FileLock) LockShared() error {
	if l == nil {
		return nil
	}
	var ol windows.Overlapped
	return windows.LockFileEx(windows.Handle(l.f.Fd()), 0, 0, 1, 0, &ol)
}

// TryLock takes the lock if no one holds it, and reports whether it did.
func (l *FileLock) TryLock() (bool, error) {
	if l == nil {
		return true, nil
	}
	err := l.lock(windows.LOCKFILE_FAIL_IMMEDIATELY)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
		return false, nil
	}
	return err == nil, err
}

// TryLockShared takes the lock beside other shared holders if no one
// holds it exclusively, and reports whether it did.
func (l *FileLock) TryLockShared() (bool, error) {
	if l == nil {
		return true, nil
	}
	var ol windows.Overlapped
	err := windows.LockFileEx(windows.Handle(l.f.Fd()), windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
		return false, nil
	}
	return err == nil, err
}

func (l *FileLock) Unlock() error {
	if l == nil {
		return nil
	}
	var ol windows.Overlapped
	return windows.UnlockFileEx(windows.Handle(l.f.Fd()), 0, 1, 0, &ol)
}

func (l *FileLock) Close() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}

// HeldElsewhere reports whether a process holds the writer lock at path,
// without taking it (a shared lock is tried and at once released; the
// file is opened read-only). A missing lock file is not held.
func HeldElsewhere(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	var ol windows.Overlapped
	err = windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	var ol2 windows.Overlapped
	return false, windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &ol2)
}

// processGone: not told here; a lock file is never taken for a killed
// gitmem's.
func processGone(int) bool { return false }
