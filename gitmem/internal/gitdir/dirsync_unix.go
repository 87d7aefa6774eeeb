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

// openOwnFile are the flags of an open that writes into a file in place
// (RewriteCache): a symlink is not followed (ELOOP) and a FIFO not waited
// on (ENXIO without a reader).
const openOwnFile = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
