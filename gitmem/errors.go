package gitmem

import (
	"errors"
	"fmt"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// The store's errors. Callers test them with errors.Is; no go-git error or
// host path ever leaves this package (see wrap).
var (
	ErrNotExist      = errors.New("gitmem: path does not exist")
	ErrExist         = errors.New("gitmem: path already exists")
	ErrIsDir         = errors.New("gitmem: path is a folder")
	ErrNotDir        = errors.New("gitmem: a parent of the path is not a folder")
	ErrRoot          = errors.New("gitmem: the memory root cannot be changed itself")
	ErrInsideItself  = errors.New("gitmem: a folder cannot be moved into itself")
	ErrNotRepository = errors.New("gitmem: not a gitmem repository")
	ErrClosed        = errors.New("gitmem: repository is closed")
	ErrUnknownRev    = errors.New("gitmem: unknown revision")
	ErrReadOnly      = errors.New("gitmem: repository was opened read-only")
	// ErrForeign: a git repository gitmem did not create. gitmem would
	// commit onto its branch; Options.Adopt says to do so anyway.
	ErrForeign = errors.New("gitmem: a git repository that gitmem did not create")
	// ErrNoChange: an operator command found nothing to change; no commit
	// was made.
	ErrNoChange = errors.New("gitmem: nothing to change")
	// ErrEmptyMatch: a redaction pattern that matches empty text would
	// put [REDACTED] between every two characters.
	ErrEmptyMatch = errors.New("gitmem: the pattern matches empty text")
)

// DamagedError reports a repository gitmem will not work on until it is
// repaired, because going on could lose history: what is wrong
// (Problem) and how to repair it (Repair), both for an operator; no host
// path.
type DamagedError = gd.Damaged

// AppliedError reports that a change with the same operation id (the
// tool_use id) was already committed; nothing new was written.
type AppliedError struct {
	ID     string
	Commit Commit
}

func (e *AppliedError) Error() string {
	return fmt.Sprintf("gitmem: %s was already applied as commit %s", e.ID, e.Commit.Hash)
}

// StorageError is a failure of the repository or the disk beneath it. Its
// message names the step that failed, never a host path or library detail;
// Unwrap gives the underlying cause for logs.
type StorageError struct {
	Op  string
	Err error
}

func (e *StorageError) Error() string { return "gitmem: " + e.Op + " failed" }
func (e *StorageError) Unwrap() error { return e.Err }

// wrap turns any error from below (go-git, the OS) into a *StorageError,
// leaving gitmem's own errors as they are.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var se *StorageError
	var ae *AppliedError
	var de *DamagedError
	for _, own := range []error{ErrNotExist, ErrExist, ErrIsDir, ErrNotDir, ErrRoot, ErrInsideItself, ErrNotRepository,
		ErrClosed, ErrUnknownRev, ErrReadOnly, ErrForeign, ErrNoChange, ErrEmptyMatch} {
		if errors.Is(err, own) {
			return err
		}
	}
	if errors.As(err, &se) || errors.As(err, &ae) || errors.As(err, &de) {
		return err
	}
	return &StorageError{Op: op, Err: err}
}
