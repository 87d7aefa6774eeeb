package gitmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// crashWithLog leaves a repository as a gitmem killed before writing its
// last acknowledged changes to git's files: t1 is in git, t2 and t3 only
// in the write-ahead log.
func crashWithLog(t *testing.T) string {
	t.Helper()
	dir, r, stop := twoInTheLog(t)
	crash(r)
	stop()
	if ids := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)"); strings.Contains(ids, "t2") {
		t.Fatalf("t2 reached git's files; the test needs it in the log only:\n%s", ids)
	}
	notHeld(t, dir)
	return dir
}

// notHeld waits until no one holds the writer lock of the repository at
// dir, as after a crash: a child another test forks in this process
// (git) holds a copy of every descriptor, the crashed Repo's lock file's
// too, until it execs, and a reader then sees the lock held (a full run
// under load: "unrecovered {Changes:0}").
func notHeld(t *testing.T, dir string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) { // a bound for a hang, not a timing
		held, err := gd.HeldElsewhere(filepath.Join(dir, ".git", "gitmem", "lock"))
		if err != nil {
			t.Fatal(err)
		}
		if !held {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer lock is still held after the crash")
		}
	}
}

// twoInTheLog makes a repository whose writes to git's files fail (as on
// a full disk) until stop: t1 is in git, t2 and t3 only in r's write-ahead
// log.
func twoInTheLog(t *testing.T) (dir string, r *Repo, stop func()) {
	t.Helper()
	dir = gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	keepWriterLock(t, r) // t2 and t3 are written with the disk lock held
	write(t, r, "t1", "a.md", "one\n")
	settle(t, r)
	r.disk.hold() // t2 and t3 stay in the log until the fault is in place
	write(t, r, "t2", "a.md", "two\n")
	write(t, r, "t3", "b.md", "three\n")
	stop = failAt(t, r, gd.StepPack, "")
	r.disk.mu.Unlock()
	return dir, r, stop
}

func ids(t *testing.T, r *Repo) string {
	t.Helper()
	var out []string
	err := r.Log(context.Background(), LogOptions{}, nil, func(c Commit) error {
		if id := trailerValue(c.Trailers, TrailerToolUseID); id != "" {
			out = append(out, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, " ")
}

// After a crash, a read-only Repo (gitmem log, show, diff, blame) learns
// how many acknowledged changes the log holds that git's files lack, and
// their ids; it writes nothing. Once a writer opened the repository there
// are none.
func TestUnrecoveredChangesAfterACrash(t *testing.T) {
	t.Parallel()
	dir := crashWithLog(t)
	ro, err := Open(context.Background(), dir, Options{ReadOnly: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	u, err := ro.Unrecovered()
	if err != nil || u.Changes != 2 || strings.Join(u.IDs, " ") != "t2 t3" {
		t.Fatalf("unrecovered %+v %v, want 2 changes t2 t3", u, err)
	}
	if got := ids(t, ro); got != "t1" {
		t.Fatalf("a read-only log shows %q: the test expects the crash's changes missing", got)
	}
	ro.Close()
	if ids := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)"); strings.Contains(ids, "t2") {
		t.Fatal("asking changed git's files")
	}

	// Another process holding the writer lock recovered the log itself:
	// nothing is reported while it holds it.
	l, err := gd.OpenFileLock(filepath.Join(dir, ".git", "gitmem", "lock"))
	if err != nil {
		t.Fatal(err)
	}
	l.Lock()
	ro, _ = Open(context.Background(), dir, Options{ReadOnly: true, Logf: t.Logf})
	if u, err := ro.Unrecovered(); err != nil || u.Changes != 0 {
		t.Fatalf("with the lock held elsewhere: %+v %v", u, err)
	}
	ro.Close()
	l.Unlock()
	l.Close()

	w, err := Open(context.Background(), dir, testOptions(t)) // recovers
	if err != nil {
		t.Fatal(err)
	}
	settle(t, w)
	w.Close()
	ro, _ = Open(context.Background(), dir, Options{ReadOnly: true, Logf: t.Logf})
	defer ro.Close()
	if u, err := ro.Unrecovered(); err != nil || u.Changes != 0 {
		t.Fatalf("after recovery: %+v %v", u, err)
	}
	if got := ids(t, ro); got != "t3 t2 t1" {
		t.Fatalf("log after recovery: %q", got)
	}
}

// Changes already in git's files (materialised, the log not yet emptied)
// are not reported.
func TestMaterialisedLogIsNotUnrecovered(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "a.md", "one\n")
	// Holding the writer's mutex keeps the log from being emptied before
	// the crash: giving the lock up when idle (200 ms, which a loaded
	// machine can take) checkpoints first; the periodic checkpoint is due
	// only a second after the start.
	turn := holdTurn(r)
	if err := r.materialize(); err != nil {
		t.Fatal(err)
	}
	r.shutdown(turn) // a crash: crash(r) with the turn held
	if _, recs, _ := gd.ReadWAL(filepath.Join(dir, ".git"), "wal"); len(recs) == 0 {
		if _, recs2, _ := gd.ReadWAL(filepath.Join(dir, ".git"), "wal2"); len(recs2) == 0 {
			t.Fatal("the log is empty: the test needs it to hold t1")
		}
	}
	ro, err := Open(context.Background(), dir, Options{ReadOnly: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if u, err := ro.Unrecovered(); err != nil || u.Changes != 0 {
		t.Fatalf("%+v %v", u, err)
	}
}

// gitmem fsck reports the changes a crash left in the log (how many, their
// ids, how they are recovered) and changes nothing; fsck --repair recovers
// them.
func TestFsckReportsTheWriteAheadLog(t *testing.T) {
	t.Parallel()
	dir := crashWithLog(t)
	rep, err := Fsck(context.Background(), dir, Options{ReadOnly: true, Logf: t.Logf}, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unrecovered.Changes != 2 || len(rep.Problems) != 1 || rep.Problems[0].Repaired ||
		!strings.Contains(rep.Problems[0].What, "2 acknowledged change(s) are in the write-ahead log") ||
		!strings.Contains(rep.Problems[0].What, "tool_use ids: t2, t3") ||
		!strings.Contains(rep.Problems[0].Repair, "next gitmem serve or writing command") {
		t.Fatalf("fsck: %+v", rep)
	}
	if ids := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)"); strings.Contains(ids, "t2") {
		t.Fatal("fsck without --repair changed git's files")
	}
	rep, err = Fsck(context.Background(), dir, testOptions(t), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || !rep.Problems[0].Repaired {
		t.Fatalf("fsck --repair: %+v", rep)
	}
	if ids := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)"); !strings.Contains(ids, "t2\n") || !strings.Contains(ids, "t3\n") {
		t.Fatalf("fsck --repair did not recover the log:\n%s", ids)
	}
	gittest.Fsck(t, dir)
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
	rep, err = Fsck(context.Background(), dir, Options{ReadOnly: true, Logf: t.Logf}, false)
	if err != nil || len(rep.Problems) != 0 {
		t.Fatalf("fsck after the repair: %+v %v", rep, err)
	}
}

// Close whose last checkpoint fails (a full disk) says so: an
// UnwrittenError counting the acknowledged changes kept in the log, which
// the next start recovers.
func TestCloseWithFailedCheckpointKeepsTheLog(t *testing.T) {
	t.Parallel()
	dir, r, stop := twoInTheLog(t)
	err := r.Close()
	var ue *UnwrittenError
	var se *StorageError
	if !errors.As(err, &ue) || ue.Changes != 2 || !errors.As(err, &se) {
		t.Fatalf("Close: %v, want an UnwrittenError for 2 changes", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "no space left on device") || strings.Contains(msg, dir) ||
		!strings.Contains(msg, "2 acknowledged change(s) are safe in the write-ahead log (.git/gitmem/wal) and are recovered at the next start") {
		t.Fatalf("Close: %q", msg)
	}
	stop()
	notHeld(t, dir)
	ro, _ := Open(context.Background(), dir, Options{ReadOnly: true, Logf: t.Logf})
	if u, err := ro.Unrecovered(); err != nil || u.Changes != 2 {
		t.Fatalf("after Close: %+v %v", u, err)
	}
	ro.Close()
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if ids := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)"); !strings.Contains(ids, "t2\n") || !strings.Contains(ids, "t3\n") {
		t.Fatalf("not recovered:\n%s", ids)
	}
}

// A commit waiting under refs/gitmem/displaced/ (the branch was moved
// outside gitmem and the merge back has not happened yet) is reported by
// fsck, its objects checked; --repair merges it back.
func TestFsckReportsDisplacedCommits(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "a.md", "one\n")
	r.Close()
	os.WriteFile(filepath.Join(dir, "memories", "b.md"), []byte("by hand\n"), 0o600)
	hand := commitByHand(t, dir, "by hand")
	gittest.Git(t, dir, "update-ref", displacedRefs+hand, hand)
	gittest.Git(t, dir, "reset", "-q", "--hard", "HEAD~1")

	rep, err := Fsck(context.Background(), dir, testOptions(t), false)
	if err != nil || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].What, "the commit "+hand+", which the branch was moved to outside gitmem, waits to be merged back") || rep.Problems[0].Repaired {
		t.Fatalf("fsck: %+v %v", rep, err)
	}
	if rep.Commits != 3 { // init, t1 and the waiting commit
		t.Fatalf("fsck checked %d commits, want 3", rep.Commits)
	}
	if rep, err = Fsck(context.Background(), dir, testOptions(t), true); err != nil || len(rep.Problems) != 1 || !rep.Problems[0].Repaired {
		t.Fatalf("fsck --repair: %+v %v", rep, err)
	}
	if refs := gittest.Git(t, dir, "for-each-ref", displacedRefs); refs != "" {
		t.Fatalf("still waiting after the repair:\n%s", refs)
	}
	if b := gittest.Git(t, dir, "show", "HEAD:memories/b.md"); b != "by hand\n" {
		t.Fatalf("b.md: %q", b)
	}
	if rep, err := Fsck(context.Background(), dir, testOptions(t), false); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("fsck after the repair: %+v %v", rep, err)
	}
}

// A start that replays a long log, and a read-only command that counts
// what the log holds beyond git's files, look each record's commit up
// without reading the pack folder again for every one git lacks: before,
// each such commit was a miss that listed the folder once more (after a
// day of bursts, thousands of packs: 8,202 changes in the log and 1,197
// packs made a start take 60 s before its first call; finding D4 of the
// attacker pass).
func TestLongLogIsCountedWithoutListingPacksPerChange(t *testing.T) {
	t.Parallel()
	const n = 40
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	// The writes below are made with the disk lock held: a release of the
	// idle lock meanwhile (a stall of a loaded machine after settle) took
	// the turn and waited for the disk lock, the write for the turn: the
	// package hung (-test.cpu 1 -test.parallel 16).
	keepWriterLock(t, r)
	write(t, r, "t0", "a.md", "zero\n")
	settle(t, r)
	r.disk.hold() // the changes stay in the log until the fault is in place
	for i := 1; i <= n; i++ {
		write(t, r, fmt.Sprintf("t%d", i), fmt.Sprintf("f%d.md", i), "x\n")
	}
	stop := failAt(t, r, gd.StepPack, "")
	r.disk.mu.Unlock()
	crash(r)
	stop()
	notHeld(t, dir)

	roEnv := new(gd.Env) // counts the pack folder's listings
	ro, err := Open(context.Background(), dir, Options{ReadOnly: true, Logf: t.Logf, hooks: &testHooks{env: roEnv}})
	if err != nil {
		t.Fatal(err)
	}
	u, err := ro.Unrecovered()
	if err != nil || u.Changes != n {
		t.Fatalf("unrecovered %d changes (%v), want %d", u.Changes, err, n)
	}
	ro.Close()
	if got := roEnv.PackListings(); got > 5 {
		t.Errorf("counting %d changes in the log read the pack folder %d times", n, got)
	}
	opt := testOptions(t)
	r2, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	if got := opt.hooks.gdEnv().PackListings(); got > 5 {
		t.Errorf("a start replaying %d changes read the pack folder %d times", n, got)
	}
	settle(t, r2)
	if got := strings.Fields(ids(t, r2)); len(got) != n+1 {
		t.Errorf("after the replay the log shows %d ids, want %d", len(got), n+1)
	}
	r2.Close()
}

// A start that replays the log on a full disk writes the recovered
// commits to git's files, but the worktree cannot follow (no room for a
// file) nor can the journal say so (.git/gitmem/pending: no room
// either): the paths wait in memory for their repair. The start's repair
// of a journal found none and forgot them, and its look at every file
// then took what the worktree still held (a.md as before t2, b.md
// missing) for hand edits: an adopt commit undid t2 and t3. They are
// repaired once there is room, and nothing is adopted.
func TestReplayOnAFullDiskKeepsTheWorktreeRepairs(t *testing.T) {
	t.Parallel()
	dir := crashWithLog(t)
	opt := testOptions(t)
	var full atomic.Bool
	full.Store(true)
	opt.hooks.env.SetFault(func(step, p string) error {
		if full.Load() && (step == gd.StepWorktree && (strings.HasSuffix(p, "a.md") || strings.HasSuffix(p, "b.md")) || step == gd.StepJournal) {
			return &os.PathError{Op: "write", Path: p, Err: syscall.ENOSPC}
		}
		return nil
	})
	r, err := Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	r.Flush(context.Background()) // the start's look at every file is done (the checkpoint fails)
	full.Store(false)
	write(t, r, "t4", "c.md", "four\n") // the worktree follows it, and repairs what waits
	settle(t, r)
	if got := read(t, r, "a.md") + read(t, r, "b.md"); got != "two\nthree\n" {
		t.Fatalf("a.md and b.md after the disk had room: %q", got)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if log := gittest.Git(t, dir, "log", "--format=%s"); strings.Contains(log, "adopt") {
		t.Fatalf("the worktree's lag was adopted as hand edits:\n%s", log)
	}
	if got := readDisk(t, dir, "a.md") + readDisk(t, dir, "b.md"); got != "two\nthree\n" {
		t.Fatalf("the worktree holds %q", got)
	}
	gittest.Fsck(t, dir)
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
}

// A writer cannot take the writer lock while Unrecovered reads the log
// files: a serve that took it back (after a reader's catch-up made it
// let go) and appended a change meanwhile made a reader warn that
// gitmem had stopped before writing it (the attacker's pass: 3 of ~150
// reads beside a busy serve --stores). The reader holds the lock shared
// for the read.
func TestUnrecoveredHoldsTheLockWhileItReadsTheLog(t *testing.T) {
	t.Parallel()
	dir := crashWithLog(t)
	opt := testOptions(t)
	opt.ReadOnly = true
	var took bool
	var tryErr error
	h := &testHooks{env: new(gd.Env)}
	h.unrecovered = func() {
		l, err := gd.OpenFileLock(filepath.Join(dir, ".git", "gitmem", "lock"))
		if err != nil {
			tryErr = err
			return
		}
		defer l.Close()
		took, tryErr = l.TryLock()
		if took {
			l.Unlock()
		}
	}
	opt.hooks = h
	r, err := Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	u, err := r.Unrecovered()
	if err != nil || u.Changes != 2 {
		t.Fatalf("Unrecovered = %+v, %v; want the 2 changes the crash left", u, err)
	}
	if tryErr != nil || took {
		t.Fatalf("a writer took the writer lock while Unrecovered read the log (%v, %v)", took, tryErr)
	}
}
