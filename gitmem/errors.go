package gitmem

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/policy"
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
	// ErrInterrupted: .git holds only part of what the creation of a
	// repository writes, no commit (an earlier gitmem's init or store
	// create cut short there). Init replaces it, losing nothing.
	ErrInterrupted = errors.New("gitmem: .git is what an interrupted creation of the repository left, without a commit")
	ErrClosed      = errors.New("gitmem: repository is closed")
	// ErrDeleted: the repository's .git was deleted while it was open
	// (another process deleted the store, say). Nothing is to be
	// repaired: there is no repository any more.
	ErrDeleted    = errors.New("gitmem: the repository was deleted while it was open")
	ErrUnknownRev = errors.New("gitmem: unknown revision")
	ErrReadOnly   = errors.New("gitmem: repository was opened read-only")
	// ErrForeign: a git repository gitmem did not create. gitmem would
	// commit onto its branch; Options.Adopt says to do so anyway.
	ErrForeign = errors.New("gitmem: a git repository that gitmem did not create")
	// ErrOtherOwner: a writer with Options.OwnerOnly refused a repository
	// whose .git belongs to another user than the one this process runs
	// as. Nothing was written.
	ErrOtherOwner = errors.New("gitmem: the repository belongs to another user")
	// ErrNoChange: an operator command found nothing to change; no commit
	// was made.
	ErrNoChange = errors.New("gitmem: nothing to change")
	// ErrEmptyMatch: a redaction pattern that matches empty text would
	// put [REDACTED] between every two characters.
	ErrEmptyMatch = errors.New("gitmem: the pattern matches empty text")
)

// AmbiguousError is a name that is the tool_use id of one commit and a
// revision (an abbreviated hash, a branch, HEAD~1) of another: a caller
// chooses its ids, so an id `HEAD` or a hash `gitmem log` printed could
// otherwise make an operator's command act on another commit than the
// one meant. Or it is the tool_use id of two commits: two agents each
// made a call with it, and a pull or sync merged their histories. Nothing
// is done; the commit is named by its hash.
type AmbiguousError struct {
	Name      string
	ByID      string // the hash of the call's commit (of two, one)
	AsRevType string // what else the name is: "revision", "time", "tool_use id of" (another call's)
	AsRev     string // the hash of the commit it names so
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%s names two commits: the tool_use id of %s and the %s %s; name the one meant by its hash",
		policy.QuoteName(e.Name), e.ByID[:12], e.AsRevType, e.AsRev[:12])
}

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
// message names the step that failed and why (the cause's text, for an
// operator's log or CLI message), never a host path: a path in the cause
// is shown from .git/ or memories/ on, or by its last element. It is not
// for the model: the handler answers a storage failure with generic text.
// Unwrap gives the underlying cause.
type StorageError struct {
	Op  string
	Err error
}

func (e *StorageError) Error() string {
	if e.Err == nil {
		return "gitmem: " + e.Op + " failed"
	}
	return "gitmem: " + e.Op + " failed: " + scrubPaths(e.Err)
}

func (e *StorageError) Unwrap() error { return e.Err }

// OutOfFiles reports whether err is the process's (EMFILE) or the
// system's (ENFILE) limit of open files: the store is not at fault, and
// the same request may succeed once files are free. A call that failed
// so before its commit point changed nothing.
func OutOfFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// absPath is a host path in an error's text: an absolute path at the start
// of a word (up to a space, a colon or a quote). Compiled when an error
// is first worded, not in every command's start-up.
var absPath = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(^|[\s"'(=])((?:[A-Za-z]:)?[/\\][^\s:"')]+)`)
})

// scrubPaths is err's text with every host path shortened by shortPath:
// the paths the chain's *fs.PathError and *os.LinkError name (which may
// hold spaces), then whatever else looks like an absolute path.
func scrubPaths(err error) string {
	text := err.Error()
	var paths []string
	var walk func(error)
	walk = func(e error) {
		switch e := e.(type) {
		case nil:
			return
		case *fs.PathError:
			paths = append(paths, e.Path)
		case *os.LinkError:
			paths = append(paths, e.Old, e.New)
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	for _, p := range paths {
		if filepath.IsAbs(p) {
			text = strings.ReplaceAll(text, p, shortPath(p))
		}
	}
	return absPath().ReplaceAllStringFunc(text, func(m string) string {
		loc := absPath().FindStringSubmatchIndex(m)
		return m[:loc[4]] + shortPath(m[loc[4]:loc[5]])
	})
}

// shortPath is a host path as an error may show it: from the repository's
// .git/ or memories/ on, else its last element.
func shortPath(p string) string {
	s := filepath.ToSlash(p)
	for _, mark := range []string{"/.git/", "/memories/"} {
		if i := strings.LastIndex(s, mark); i >= 0 {
			return s[i+1:]
		}
	}
	for _, mark := range []string{"/.git", "/memories"} {
		if strings.HasSuffix(s, mark) {
			return mark[1:]
		}
	}
	return path.Base(s)
}

// UnwrittenError is Close's report that its last checkpoint failed (a
// full disk, a read-only folder): git's files may lack acknowledged
// changes. Nothing is lost: the Changes are kept in the write-ahead log,
// and the next process to take the writer lock (serve, a writing command,
// gitmem fsck --repair) recovers them. Unwrap gives the checkpoint's
// error.
type UnwrittenError struct {
	Changes int      // acknowledged changes git's files lack
	IDs     []string // their tool_use ids, oldest first
	// LogGone says the log's file was gone (the repository was deleted
	// or moved while open): no start recovers the Changes. Err is
	// ErrDeleted when the whole .git was gone (Close tried nothing).
	LogGone bool
	Err     error
}

func (e *UnwrittenError) Error() string {
	if errors.Is(e.Err, ErrDeleted) {
		return fmt.Sprintf("gitmem: the repository was deleted while open, with its write-ahead log (.git/gitmem/wal): %d acknowledged change(s) git's files lacked went with it",
			e.Changes)
	}
	if e.LogGone {
		return fmt.Sprintf("gitmem: the last checkpoint failed (%s), and the write-ahead log (.git/gitmem/wal) is gone: the repository was deleted or moved while open; %d acknowledged change(s) git's files lack are in no file a next start would read",
			strings.TrimPrefix(scrubPaths(e.Err), "gitmem: "), e.Changes)
	}
	return fmt.Sprintf("gitmem: the last checkpoint failed (%s); %d acknowledged change(s) are safe in the write-ahead log (.git/gitmem/wal) and are recovered at the next start",
		strings.TrimPrefix(scrubPaths(e.Err), "gitmem: "), e.Changes)
}

func (e *UnwrittenError) Unwrap() error { return e.Err }

// wrap turns any error from below (go-git, the OS) into a *StorageError,
// leaving gitmem's own errors as they are.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var se *StorageError
	var ae *AppliedError
	var de *DamagedError
	var ue *UnwrittenError
	var me *AmbiguousError
	for _, own := range []error{ErrNotExist, ErrExist, ErrIsDir, ErrNotDir, ErrRoot, ErrInsideItself, ErrNotRepository, ErrInterrupted,
		ErrClosed, ErrDeleted, ErrUnknownRev, ErrReadOnly, ErrForeign, ErrOtherOwner, ErrNoChange, ErrEmptyMatch} {
		if errors.Is(err, own) {
			return err
		}
	}
	if errors.As(err, &se) || errors.As(err, &ae) || errors.As(err, &de) || errors.As(err, &ue) || errors.As(err, &me) {
		return err
	}
	return &StorageError{Op: op, Err: err}
}
