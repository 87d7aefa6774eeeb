//go:build unix

package gittest

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// LockHeld reports whether someone holds the flock(2) on path, as
// another gitmem process would see it: a repository's .git/gitmem/lock
// (the writer lock) or .git/gitmem/intent (held by a process waiting for
// the writer lock).
func LockHeld(t testing.TB, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false // closing f lets it go
}
