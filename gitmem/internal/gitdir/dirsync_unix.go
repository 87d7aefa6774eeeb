//go:build !windows

package gitdir

import "os"

// fsyncDir flushes a folder's entries (a file created or renamed in it).
func fsyncDir(d *os.File) error { return Fsync(d) }
