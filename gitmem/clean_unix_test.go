//go:build unix

package gitmem

import (
	"path/filepath"
	"syscall"
	"testing"
)

// A FIFO put in place of the clean mark is no mark, and no wait: the
// first view of a store opens it as before (it hung in the mark's open,
// waiting for a writer of the FIFO).
func TestAFIFOAtTheCleanMarkIsNoWait(t *testing.T) {
	t.Parallel()
	dir, _ := cleanStore(t)
	p := cleanPath(filepath.Join(dir, ".git"))
	if err := syscall.Unlink(p); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := CleanView(dir); ok {
		t.Fatal("CleanView of a FIFO mark: true")
	}
}
