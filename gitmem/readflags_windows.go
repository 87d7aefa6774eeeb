package gitmem

import "os"

// readFlags open a worktree file for reading (see readflags_unix.go).
const readFlags = os.O_RDONLY
