package gitmem

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// logIDs is the tool_use ids of r's history, newest first.
func logIDs(t *testing.T, r *Repo) []string {
	t.Helper()
	var ids []string
	if err := r.Log(context.Background(), LogOptions{}, nil, func(c Commit) error {
		ids = append(ids, c.Trailer(TrailerToolUseID))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestReaderSeesWhatAWriterHoldsBack: a change another process
// acknowledged and holds back from git's files (a store of serve
// --stores writes them every 2 s) is in the history a reader opened
// after it shows once it caught up: the reader asks the holder to write what waits (the
// intent lock), as a writer waiting for the lock does, and the holder
// lets its lock go after writing it; the reader never takes the lock.
func TestReaderSeesWhatAWriterHoldsBack(t *testing.T) {
	t.Parallel()
	w, dir := initWritingLate(t)
	defer w.Close()
	w.MarkWhenClean() // as a store's writer: its release writes the clean mark
	write(t, w, "t1", "a.md", "one\n")
	if ids := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)"); strings.Contains(ids, "t1") {
		t.Fatalf("t1 reached git's files before the reader asked; the test needs it held back:\n%s", ids)
	}
	ro := testOptions(t)
	ro.ReadOnly, ro.OneCommand = true, true
	r, err := Open(context.Background(), dir, ro)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ids := logIDs(t, r); len(ids) == 0 || ids[0] != "t1" {
		t.Fatalf("the reader's history begins %q, want t1 (the change the writer held back)", ids)
	}
	// The writer let go with nothing left to write: its clean mark is
	// there, and the reader, which writes nothing, left it.
	if _, err := os.Stat(cleanPath(filepath.Join(dir, ".git"))); err != nil {
		t.Fatalf("after the reader caught up, the writer's clean mark: %v", err)
	}
	if u, err := r.Unrecovered(); err != nil || u.Changes != 0 || u.HeldBack != 0 {
		t.Fatalf("Unrecovered = %+v, %v after catching up; want none", u, err)
	}
	// The writer goes on: it takes its lock again at its next change.
	write(t, w, "t2", "a.md", "two\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, dir, "show", "HEAD:memories/a.md"); got != "two\n" {
		t.Fatalf("after the reader, the writer's change left git's HEAD with a.md = %q", got)
	}
}

// TestReaderWaitsForAHolderAtMostLockWait: a holder that does not let
// its lock go when asked (here the test itself holds it) keeps a reader
// at most Options.LockWait (or catchUpWait, if shorter), without telling
// Options.Waiting; the reader then reads what git's files hold, and
// Unrecovered says the holder may hold changes not shown.
func TestReaderWaitsForAHolderAtMostLockWait(t *testing.T) {
	t.Parallel()
	r0, dir := newRepo(t)
	write(t, r0, "t1", "a.md", "one\n")
	if err := r0.Close(); err != nil {
		t.Fatal(err)
	}
	held, err := gd.OpenFileLock(filepath.Join(dir, ".git", "gitmem", "lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := held.Lock(); err != nil {
		t.Fatal(err)
	}
	ro := testOptions(t)
	ro.ReadOnly, ro.OneCommand, ro.LockWait = true, true, 50*time.Millisecond
	var told []Holder
	ro.Waiting = func(h Holder) { told = append(told, h) }
	r, err := Open(context.Background(), dir, ro)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.CatchUp(context.Background()); err != nil {
		t.Fatalf("a reader gave up on a held lock: %v; want it to read what git holds", err)
	}
	if ids := logIDs(t, r); len(ids) == 0 || ids[0] != "t1" {
		t.Fatalf("the reader's history begins %q, want t1", ids)
	}
	u, err := r.Unrecovered()
	if err != nil || u.HeldBack != 50*time.Millisecond {
		t.Fatalf("Unrecovered = %+v, %v; want HeldBack 50ms (the holder did not write what it may hold)", u, err)
	}
	if len(told) != 0 {
		t.Fatalf("Waiting told %d time(s): a reader's wait is told after, by Unrecovered", len(told))
	}
	// A writer's LockWait (the CLI's 30 s) is more than a reader waits:
	// a serve lets go at once, and a gc that keeps the lock holds back
	// nothing.
	ro.LockWait = 30 * time.Second
	r2, err := Open(context.Background(), dir, ro)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if err := r2.CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	if u, err := r2.Unrecovered(); err != nil || u.HeldBack != catchUpWait {
		t.Fatalf("with LockWait 30s, Unrecovered = %+v, %v; want HeldBack %v", u, err, catchUpWait)
	}
}
