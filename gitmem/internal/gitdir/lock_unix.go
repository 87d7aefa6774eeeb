//go:build unix

package gitdir

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// FileLock is the repository's writer lock, shared by every gitmem process
// on the machine (serve and the operator commands): flock(2) on
// .git/gitmem/lock. The kernel releases it if the process dies.
type FileLock struct{ f *os.File }

// OpenFileLock opens (making it when missing) the lock file at path. One
// that is not a regular file is ErrNotRegular (OpenFile), a folder
// EISDIR: a FIFO put there was opened and flocked as the lock, which
// a reader's OpenReadLock refused.
func OpenFileLock(path string) (*FileLock, error) {
	f, err := OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return &FileLock{f: f}, nil
}

// OpenReadLock opens the lock file at path read-only, for a reader that
// takes it shared only (TryLockShared): one with no write access to
// .git can. A missing file is fs.ErrNotExist (no writer made it); one
// that is not a regular file is ErrNotRegular (OpenRead), never waited
// on: a FIFO put there kept a blocking open waiting for a writer.
func OpenReadLock(path string) (*FileLock, error) {
	f, err := OpenRead(path)
	if err != nil {
		return nil, err
	}
	return &FileLock{f: f}, nil
}

// Lock, Unlock and Close do nothing on a nil lock (a read-only Repo).
func (l *FileLock) Lock() error { return l.wait(syscall.LOCK_EX) }

// LockShared takes the lock beside other shared holders, waiting while
// it is held exclusively.
func (l *FileLock) LockShared() error { return l.wait(syscall.LOCK_SH) }

// wait takes the lock as how says (LOCK_EX, LOCK_SH), waiting for it.
func (l *FileLock) wait(how int) error {
	if l == nil {
		return nil
	}
	for {
		err := syscall.Flock(int(l.f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// TryLock takes the lock if no one holds it, and reports whether it did.
func (l *FileLock) TryLock() (bool, error) { return l.try(syscall.LOCK_EX) }

// TryLockShared takes the lock beside other shared holders if no one
// holds it exclusively, and reports whether it did.
func (l *FileLock) TryLockShared() (bool, error) { return l.try(syscall.LOCK_SH) }

// try takes the lock as how says (LOCK_EX, LOCK_SH) without waiting.
func (l *FileLock) try(how int) (bool, error) {
	if l == nil {
		return true, nil
	}
	for {
		err := syscall.Flock(int(l.f.Fd()), how|syscall.LOCK_NB)
		switch err {
		case nil:
			return true, nil
		case syscall.EWOULDBLOCK:
			return false, nil
		case syscall.EINTR:
			continue
		}
		return false, err
	}
}

func (l *FileLock) Unlock() error {
	if l == nil {
		return nil
	}
	return syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
}

func (l *FileLock) Close() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}

// HeldElsewhere reports whether a process holds the writer lock at path,
// without taking it (a shared lock is tried and at once released; the
// file is opened read-only, so a reader with no write access can ask).
// A missing lock file is not held.
func HeldElsewhere(path string) (bool, error) {
	f, err := OpenRead(path) // a FIFO: ErrNotRegular, see OpenReadLock
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		switch err {
		case nil:
			return false, syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		case syscall.EWOULDBLOCK:
			return true, nil
		case syscall.EINTR:
			continue
		}
		return false, err
	}
}

// processGone says no process with this pid runs on this machine.
func processGone(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == syscall.ESRCH
}
