//go:build !windows

package gitdir

import (
	"os"
	"syscall"
)

// fsyncDir flushes a folder's entries (a file created or renamed in it).
func fsyncDir(d *os.File) error { return Fsync(d) }

// linkedElsewhere reports whether the file fi has more than one link
// (not known: false).
func linkedElsewhere(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink > 1
}
