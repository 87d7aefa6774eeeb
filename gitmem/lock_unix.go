//go:build unix

package gitmem

import (
	"os"
	"syscall"
)

// fileLock is the repository's writer lock, shared by every gitmem process
// on the machine (serve and the operator commands): flock(2) on
// .git/gitmem/lock. The kernel releases it if the process dies.
type fileLock struct{ f *os.File }

func openFileLock(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return &fileLock{f: f}, nil
}

// lock, unlock and close do nothing on a nil lock (a read-only Repo).
func (l *fileLock) lock() error {
	if l == nil {
		return nil
	}
	for {
		err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}

func (l *fileLock) unlock() error {
	if l == nil {
		return nil
	}
	return syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
}

func (l *fileLock) close() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}
