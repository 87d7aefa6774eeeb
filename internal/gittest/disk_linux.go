//go:build linux

package gittest

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// SmallDisk mounts a tmpfs of size ("8m", "1m": tmpfs's own notation) at
// a new folder and returns it, with fill, which takes every byte left on
// it (a file "filler" in it), and free, which gives them back at once. It is
// unmounted when the test ends; the test is skipped where mounting is
// not allowed (not root).
func SmallDisk(t testing.TB, size string) (dir string, fill, free func()) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("a full disk is a small tmpfs mounted here (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	// The os package checks once a process, at its first start of a
	// program (or FindProcess), that clone gives a pidfd: it clones a child
	// that exits at once, without ForkLock. That child holds a copy of every
	// descriptor open at its clone until its exit, the filler's too when the
	// check runs during fill, and on a busy machine it may exit after free
	// (TestFreeGivesTheBytesBackBesideForks failed so once, in its round 0,
	// as the test's first programs started). Checked here, before any fill,
	// it never clones again.
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		p.Release()
	}
	filler := filepath.Join(dir, "filler")
	fill = func() {
		t.Helper()
		// No child process may hold a copy of the filler's descriptor
		// (a fork copies them all, until its exec): its bytes would stay
		// taken after free, for as long as the child waits to run. While
		// ForkLock is held for reading no fork begins.
		syscall.ForkLock.RLock()
		defer syscall.ForkLock.RUnlock()
		f, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for buf := make([]byte, 4096); ; {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				return
			}
		}
	}
	free = func() {
		t.Helper()
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	}
	return dir, fill, free
}
