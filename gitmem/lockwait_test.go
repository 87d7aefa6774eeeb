package gitmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// gitToolIDs lists the Tool-Use-Id trailers of the branch's history, as
// the git CLI reads them, oldest first.
func gitToolIDs(t *testing.T, dir string) string {
	t.Helper()
	out := gittest.Git(t, dir, "log", "--reverse", "--format=%(trailers:key=Tool-Use-Id,valueonly,separator=)")
	return strings.Join(strings.Fields(out), " ")
}

// A process that waits for the writer lock another keeps while its
// checkpoint fails (git's files cannot take t2 and t3; its write-ahead
// log holds them, and it keeps the lock until a checkpoint succeeds) is
// told, once, what it waits for, and gives up after Options.LockWait
// with a *LockHeldError naming the holder and why its checkpoint fails,
// having changed nothing; so does fsck --repair. Once the fault is gone
// the holder's record is cleared, the lock goes to the next process as
// usual, and every acknowledged change is in git's history. (Open, and
// Fsck, waited for ever: until the disk had room again.)
func TestLockWaitBesideAFailingCheckpoint(t *testing.T) {
	t.Parallel()
	for _, step := range []string{gd.StepPack, gd.StepRef, gd.StepSync} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			dir := gittest.TempDir(t)
			hopt := testOptions(t)
			hopt.Process = "gitmem serve"
			r, _, err := Init(context.Background(), dir, hopt)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			write(t, r, "t1", "a.md", "one\n")
			settle(t, r)
			dt := r.disk.hold() // t2 and t3 stay in the log until the fault is in place
			write(t, r, "t2", "a.md", "two\n")
			write(t, r, "t3", "b.md", "three\n")
			stop := failAt(t, r, step, "")
			dt.release()
			if err := r.checkpoint(); err == nil {
				t.Fatal("the fault did not fail the checkpoint")
			}
			head := gittest.Git(t, dir, "rev-parse", "HEAD")

			// A bound for a hang, not a timing: before the fix the wait
			// ended only with it.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			opt := testOptions(t)
			opt.LockWait = 100 * time.Millisecond
			opt.hooks.noticeAfter = time.Millisecond
			var told []Holder
			opt.Waiting = func(h Holder) { told = append(told, h) }
			_, err = Open(ctx, dir, opt)
			var held *LockHeldError
			if !errors.As(err, &held) {
				t.Fatalf("Open beside the failing holder = %v, want a *LockHeldError", err)
			}
			want := Holder{Pid: os.Getpid(), Process: "gitmem serve", Since: hopt.Now()}
			if h := held.Holder; h.Pid != want.Pid || h.Process != want.Process || !h.Since.Equal(want.Since) || !strings.Contains(h.Failing, "no space left on device") {
				t.Fatalf("the holder named: %+v", h)
			}
			if strings.Contains(held.Holder.Failing, dir) {
				t.Fatalf("the failure names a host path: %q", held.Holder.Failing)
			}
			if len(told) != 1 || told[0] != held.Holder {
				t.Fatalf("Waiting was told %+v", told)
			}
			if held.Waited != opt.LockWait {
				t.Fatalf("Waited = %v", held.Waited)
			}
			if _, err := Fsck(ctx, dir, opt, true); !errors.As(err, &held) || held.Holder.Pid != os.Getpid() {
				t.Fatalf("fsck --repair beside the failing holder = %v", err)
			}
			if len(told) != 2 {
				t.Fatalf("fsck's wait told Waiting %d time(s) in all", len(told))
			}
			if got := gittest.Git(t, dir, "rev-parse", "HEAD"); got != head {
				t.Fatalf("HEAD moved from %s to %s", head, got)
			}
			if got := read(t, r, "b.md"); got != "three\n" {
				t.Fatalf("the holder reads b.md = %q", got)
			}

			stop()
			if err := r.checkpoint(); err != nil {
				t.Fatal(err)
			}
			if h := readHolder(r.gitDir); h != (Holder{}) {
				t.Fatalf("the record outlives the failure: %+v", h)
			}
			opt.LockWait = time.Minute // the holder lets go at once, as ever: a bound for a hang
			r2, err := Open(ctx, dir, opt)
			if err != nil {
				t.Fatal(err)
			}
			write(t, r2, "t4", "c.md", "four\n")
			if err := r2.Close(); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if got := gitToolIDs(t, dir); got != "t1 t2 t3 t4" {
				t.Fatalf("history: %q", got)
			}
			gittest.Fsck(t, dir)
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status:\n%s", st)
			}
		})
	}
}

// A record of .git/gitmem/holder counts only whole and of a process that
// runs: half written (its sum fails), or left by a process gone, it is
// none.
func TestHolderRecordReadOnlyWholeAndRunning(t *testing.T) {
	t.Parallel()
	gitDir := filepath.Join(t.TempDir(), ".git")
	if err := os.MkdirAll(filepath.Join(gitDir, "gitmem"), 0o700); err != nil {
		t.Fatal(err)
	}
	if h := readHolder(gitDir); h != (Holder{}) {
		t.Fatalf("no file: %+v", h)
	}
	makeHolderFile(gitDir, noSpare)
	if h := readHolder(gitDir); h != (Holder{}) {
		t.Fatalf("zeros: %+v", h)
	}
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := &holderRecord{Pid: os.Getpid(), Process: "gitmem serve", Since: since, Failing: "write: no space left on device"}
	rec.Start, _ = gd.ProcessStart(rec.Pid)
	if err := writeHolder(gitDir, rec); err != nil {
		t.Fatal(err)
	}
	want := Holder{Pid: os.Getpid(), Process: "gitmem serve", Since: since, Failing: "write: no space left on device"}
	if h := readHolder(gitDir); h != want {
		t.Fatalf("read %+v, want %+v", h, want)
	}
	data, err := os.ReadFile(holderPath(gitDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != holderBytes {
		t.Fatalf("the file grew to %d bytes", len(data))
	}
	torn := append([]byte(nil), data...)
	copy(torn[20:], "xx") // a write half done
	os.WriteFile(holderPath(gitDir), torn, 0o600)
	if h := readHolder(gitDir); h != (Holder{}) {
		t.Fatalf("a torn record read as %+v", h)
	}
	if _, ok := gd.ProcessStart(os.Getpid()); ok {
		rec.Start++ // another process has the pid now
		writeHolder(gitDir, rec)
		if h := readHolder(gitDir); h != (Holder{}) {
			t.Fatalf("a record of a process gone read as %+v", h)
		}
	}
	writeHolder(gitDir, nil)
	if h := readHolder(gitDir); h != (Holder{}) {
		t.Fatalf("cleared: %+v", h)
	}
}

// A record too long for the file's 1 KiB (a long Options.Process whose
// '<' JSON writes as 6 bytes each, a long failure) is cut to fit, at
// whole characters, and still read back.
func TestHolderRecordLongIsCutToFit(t *testing.T) {
	t.Parallel()
	gitDir := filepath.Join(t.TempDir(), ".git")
	if err := os.MkdirAll(filepath.Join(gitDir, "gitmem"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, rec := range []*holderRecord{
		{Process: strings.Repeat("<", 200), Failing: "write: no space left on device"},
		{Process: strings.Repeat("<", 2000), Failing: strings.Repeat("é\x01", 2000)},
		{Process: "gitmem serve", Failing: strings.Repeat("ü", 3000)},
	} {
		rec.Pid = os.Getpid()
		rec.Start, _ = gd.ProcessStart(rec.Pid)
		rec.Since = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		if err := writeHolder(gitDir, rec); err != nil {
			t.Fatal(err)
		}
		h := readHolder(gitDir)
		if h.Pid != os.Getpid() || !utf8.ValidString(h.Process) || !utf8.ValidString(h.Failing) || h.Process == "" {
			t.Fatalf("read %+v", h)
		}
		if data, _ := os.ReadFile(holderPath(gitDir)); len(data) != holderBytes {
			t.Fatalf("the file grew to %d bytes", len(data))
		}
	}
}

// A record without its process's start time (0) is none where the start
// time of a running process is known: with it any live pid (1) would be
// taken for the holder.
func TestHolderRecordWithoutStartIsNone(t *testing.T) {
	t.Parallel()
	if _, ok := gd.ProcessStart(os.Getpid()); !ok {
		t.Skip("no process start times here")
	}
	gitDir := filepath.Join(t.TempDir(), ".git")
	if err := os.MkdirAll(filepath.Join(gitDir, "gitmem"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeHolder(gitDir, &holderRecord{Pid: os.Getpid(), Process: "gitmem serve", Failing: "write: no space left on device"}); err != nil {
		t.Fatal(err)
	}
	if h := readHolder(gitDir); h != (Holder{}) {
		t.Fatalf("a record without a start time read as %+v", h)
	}
}

// A *LockHeldError's own text, which a program using the package may
// print, escapes the holder's record as the CLI does: the record is
// anyone's who can write .git.
func TestLockHeldErrorEscapesTheRecord(t *testing.T) {
	t.Parallel()
	err := &LockHeldError{Waited: time.Second, Holder: Holder{Pid: 7, Process: "serve\x1b[2J", Since: time.Unix(0, 0).UTC(),
		Failing: "no space\nleft \u202etxt" + strings.Repeat("x", 2000)}}
	got := err.Error()
	if strings.ContainsFunc(got, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\u202e' }) || len(got) > 600 {
		t.Fatalf("raw or whole: %q", got)
	}
	if want := `(pid 7, "serve\x1b[2J", its checkpoint failing since 1970-01-01T00:00:00Z: "no space\nleft \u202etxt`; !strings.Contains(got, want) {
		t.Fatalf("%s\nwant it to hold %s", got, want)
	}
	err = &LockHeldError{Waited: time.Second, Holder: Holder{Locker: 7, LockerName: "gc\x1b[2J"}}
	if got, want := err.Error(), `gitmem: gave up after 1s waiting for the writer lock, which another process holds (pid 7, "gc\x1b[2J")`; got != want {
		t.Fatalf("the kernel's holder: %q, want %q", got, want)
	}
}

// noSpare is makeHolderFile's spare where there is no reserve.
func noSpare() bool { return false }

// fsck --repair beside a busy writer (one that keeps the writer lock
// between its changes, ReleaseIdle long, as a serve under load does)
// queues for the lock as a writer's Open does, on the intent file, so the
// holder lets it go: the repair runs, and the holder takes the lock back
// for its next change. (fsck waited on the lock file alone: the holder
// was never asked, and fsck gave up after --lock-wait with a
// *LockHeldError beside a healthy server.)
func TestFsckRepairAsksABusyHolderToLetGo(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	hopt := testOptions(t)
	hopt.ReleaseIdle = time.Hour
	r, _, err := Init(context.Background(), dir, hopt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	write(t, r, "t1", "a.md", "one\n")
	opt := testOptions(t)
	opt.LockWait = time.Minute // a bound for a hang: the holder lets go within its poll
	if _, err := Fsck(context.Background(), dir, opt, true); err != nil {
		t.Fatalf("fsck --repair beside a busy holder: %v", err)
	}
	write(t, r, "t2", "b.md", "two\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := gitToolIDs(t, dir); got != "t1 t2" {
		t.Fatalf("history: %q", got)
	}
}

// A view of a file edited by hand commits the edit first, which takes
// the writer lock. Beside another process that keeps the lock because
// its checkpoints fail (a full disk), the view waited its request out
// (serve's 50 s) and then showed the memory as committed. It now sees
// the holder's record and does not wait: the memory as committed, at
// once, and a log line saying why the hand edit is not in it. Once the
// holder's checkpoint succeeds, the next view commits the edit.
func TestViewBesideAFailingHolderDoesNotWaitForIt(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	hopt := testOptions(t)
	hopt.Process = "gitmem serve"
	a, _, err := Init(context.Background(), dir, hopt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	write(t, a, "t1", "x.md", "one\n")
	settle(t, a)
	bopt := testOptions(t)
	logs := captureLogs(t, &bopt)
	b, err := Open(context.Background(), dir, bopt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	settle(t, b)
	stop := failAt(t, a, gd.StepPack, "")
	write(t, a, "t2", "y.md", "two\n") // a takes the lock from b; git's files cannot take t2
	if err := a.checkpoint(); err == nil {
		t.Fatal("the fault did not fail the checkpoint")
	}
	if h := readHolder(a.gitDir); h.Pid != os.Getpid() {
		t.Fatalf("the holder recorded %+v", h)
	}
	if err := os.WriteFile(filepath.Join(dir, "memories", "x.md"), []byte("by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// A bound for a hang, not a timing: before the fix the view waited
	// for it to end.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v, err := b.Snapshot(ctx, "x.md")
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("the view waited for the failing holder until its request ended")
	}
	if data, err := v.ReadFile("x.md"); err != nil || string(data) != "one\n" {
		t.Fatalf("the view read x.md = %q, %v; want the committed version", data, err)
	}
	if got := strings.Join(logs(), "\n"); !strings.Contains(got, "memories/x.md") || !strings.Contains(got, fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(got, "no space left on device") {
		t.Fatalf("the log says:\n%s", got)
	}

	stop()
	if err := a.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if v, err = b.Snapshot(context.Background(), "x.md"); err != nil {
		t.Fatal(err)
	}
	if data, err := v.ReadFile("x.md"); err != nil || string(data) != "by hand\n" {
		t.Fatalf("x.md once the holder's checkpoint succeeded = %q, %v", data, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := gitToolIDs(t, dir); got != "t1 t2" {
		t.Fatalf("history: %q", got)
	}
	if got := gittest.Git(t, dir, "show", "HEAD:memories/x.md"); got != "by hand\n" {
		t.Fatalf("x.md at HEAD = %q", got)
	}
	gittest.Fsck(t, dir)
}
