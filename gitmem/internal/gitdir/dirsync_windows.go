//go:build windows

package gitdir

import "os"

// fsyncDir does nothing on Windows: a folder handle cannot be flushed
// (FlushFileBuffers refuses it), and NTFS journals a folder's entries
// itself.
func fsyncDir(*os.File) error { return nil }

// linkedElsewhere: not known on Windows (no link count in os.FileInfo).
func linkedElsewhere(os.FileInfo) bool { return false }

// openOwnFile: no such flags on Windows, where no FIFO is opened by path
// (dirsync_unix.go).
const openOwnFile = 0
