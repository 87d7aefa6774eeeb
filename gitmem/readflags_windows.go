package gitmem

import "os"

// readFlags open a worktree file for reading (see readflags_unix.go).
const readFlags = os.O_RDONLY

// asideFlags open a file taken aside for reading and reuse (see
// readflags_unix.go).
const asideFlags = os.O_RDWR

// leased reports whether an open failed for another program's lease:
// there are none here.
func leased(error) bool { return false }

// holderFlags open .git/gitmem/holder (see readflags_unix.go).
const holderFlags = 0
