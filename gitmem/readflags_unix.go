//go:build unix

package gitmem

import (
	"os"
	"syscall"
)

// readFlags open a worktree file for reading. Something an operator put
// in the memory folder may be no regular file: a named pipe would hold
// the open (and a call holding the writer lock, every call) until a
// writer comes, a terminal would become the process's. O_NONBLOCK opens
// either at once, and the file's type then decides.
const readFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY
