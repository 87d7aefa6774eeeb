//go:build unix

package gitmem

import (
	"errors"
	"os"
	"syscall"
)

// readFlags open a worktree file for reading. Something an operator put
// in the memory folder may be no regular file: a named pipe would hold
// the open (and a call holding the writer lock, every call) until a
// writer comes, a terminal would become the process's. O_NONBLOCK opens
// either at once, and the file's type then decides.
const readFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY

// asideFlags open a file taken aside for reading and reuse (takeAside).
// O_NONBLOCK here: another program's lease (fcntl(2), F_SETLEASE) on it
// would hold the open — and the writer lock, and every call — for the
// kernel's lease-break-time (45 s); the open fails at once instead
// (EWOULDBLOCK: leased), and the file is taken as that program's, busy.
const asideFlags = os.O_RDWR | syscall.O_NONBLOCK

// leased reports whether an open failed because another program holds a
// lease on the file: readFlags and asideFlags opens do not wait for it.
func leased(err error) bool { return errors.Is(err, syscall.EWOULDBLOCK) }

// holderFlags open .git/gitmem/holder (holder.go): a symbolic link there
// is not followed (a root serve would write over its target), a named
// pipe opens at once (and is then no record), not waiting for a writer.
const holderFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
