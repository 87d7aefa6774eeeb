// Package gitdir is gitmem's git plumbing: the objects of a .git
// directory (read through go-git, loose and packed; written by gitmem,
// durably), its refs, its index, its lock files, and the durable-write
// helpers beneath them (temporary file, fsync, rename, folder fsync).
//
// It knows git's formats and nothing of memories, the tool protocol or
// gitmem's history. go-git types and errors are used freely here; package
// gitmem is the boundary that translates them. A Store is not safe for
// concurrent use: gitmem serialises access to it.
package gitdir

import "errors"

// Damaged reports a repository that must be repaired before it is used,
// because going on could lose history: what is wrong and how to repair it
// (for an operator; no host path). gitmem exports it as DamagedError.
type Damaged struct {
	Problem string
	Repair  string
}

func (e *Damaged) Error() string { return "gitmem: " + e.Problem + "; " + e.Repair }

// ErrNotRegular is ReadFile's error for a file that is neither a regular
// file nor a folder (a FIFO, a socket, a device).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooBig is ReadFileMax's error for a file larger than it reads.
var ErrTooBig = errors.New("larger than the file can be")
