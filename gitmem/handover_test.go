package gitmem

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// inTheLogFailingAt is twoInTheLog with the fault at step: t1 is in git,
// t2 and t3 only in r's write-ahead log, and r's checkpoints fail at
// step (a full disk: StepPack writes nothing, StepRef leaves the pack
// written and the branch not moved, StepSync leaves all written and
// not synced) until stop.
func inTheLogFailingAt(t *testing.T, step string) (dir string, r *Repo, stop func()) {
	t.Helper()
	dir = gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	write(t, r, "t1", "a.md", "one\n")
	settle(t, r)
	r.disk.hold() // t2 and t3 stay in the log until the fault is in place
	write(t, r, "t2", "a.md", "two\n")
	write(t, r, "t3", "b.md", "three\n")
	stop = failAt(t, r, step, "")
	r.disk.mu.Unlock()
	if err := r.checkpoint(); err == nil {
		t.Fatal("the fault did not fail the checkpoint")
	}
	return dir, r, stop
}

// toolIDs lists the Tool-Use-Id trailers of the branch's history, as
// the git CLI reads them, oldest first.
func gitToolIDs(t *testing.T, dir string) string {
	t.Helper()
	out := gittest.Git(t, dir, "log", "--reverse", "--format=%(trailers:key=Tool-Use-Id,valueonly,separator=)")
	return strings.Join(strings.Fields(out), " ")
}

// A holder of the writer lock whose checkpoints keep failing (git's files
// cannot take t2 and t3; the log holds them) lets the lock go as soon as
// another process waits for it: the write-ahead log is the commit point,
// and the next holder replays it, whatever the failed checkpoint left
// half done (a pack written and the branch not moved, everything written
// and not synced). The other process is never stuck behind it (it waited
// until the disk had room again, or for ever), and nothing acknowledged
// is lost: the first holder goes on once the lock is free again.
func TestFailingCheckpointHandsTheLockOver(t *testing.T) {
	t.Parallel()
	for _, step := range []string{gd.StepPack, gd.StepRef, gd.StepSync} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			dir, r, _ := inTheLogFailingAt(t, step)
			// A bound for a hang, not a timing: before the fix the wait
			// never ended while the fault stayed.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r2, err := Open(ctx, dir, testOptions(t)) // this one's disk has room
			if err != nil {
				t.Fatalf("a second process waiting for the writer lock: %v", err)
			}
			write(t, r2, "t4", "c.md", "four\n")
			if err := r2.Close(); err != nil {
				t.Fatal(err)
			}
			if got := gitToolIDs(t, dir); got != "t1 t2 t3 t4" {
				t.Fatalf("history after the hand-over: %q", got)
			}
			gittest.Fsck(t, dir)

			// The first holder reads, and writes, on top of it.
			if got := read(t, r, "c.md"); got != "four\n" {
				t.Fatalf("the first holder reads c.md = %q", got)
			}
			r.objects.st.Env.SetFault(nil)
			write(t, r, "t5", "a.md", "five\n")
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if got := gitToolIDs(t, dir); got != "t1 t2 t3 t4 t5" {
				t.Fatalf("history: %q", got)
			}
			for p, want := range map[string]string{"a.md": "five\n", "b.md": "three\n", "c.md": "four\n"} {
				if got := readDisk(t, dir, p); got != want {
					t.Errorf("worktree %s = %q, want %q", p, got, want)
				}
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status:\n%s", st)
			}
		})
	}
}

// The same with the disk still full for the next holder too: it takes
// the lock, replays the log (the acknowledged changes are readable), and
// its own change is refused with the failure, not left waiting; it
// leaves the log as it found it. The first holder, which let the lock
// go, still reads its acknowledged changes, takes the lock back at its
// next call, and once there is room every one of them is in git's
// history.
func TestFailingCheckpointHandsOverToAFullDisk(t *testing.T) {
	t.Parallel()
	dir, r, stop := inTheLogFailingAt(t, gd.StepPack)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound for a hang
	defer cancel()
	opt := testOptions(t)
	opt.hooks.env.SetFault(func(step, p string) error { // its disk is full too
		if step == gd.StepPack {
			return &os.PathError{Op: "write", Path: p, Err: syscall.ENOSPC}
		}
		return nil
	})
	r2, err := Open(ctx, dir, opt)
	if err != nil {
		t.Fatalf("a second process waiting for the writer lock: %v", err)
	}
	if got := read(t, r2, "b.md"); got != "three\n" {
		t.Fatalf("the next holder reads b.md = %q", got)
	}
	_, err = r2.Update(ctx, Meta{Subject: "refused", Trailers: []Trailer{{TrailerToolUseID, "t4"}}}, func(tx *Tx) error {
		return tx.WriteFile("c.md", []byte("four\n"))
	})
	var se *StorageError
	if !errors.As(err, &se) {
		t.Fatalf("a change on a full disk: %v, want a *StorageError", err)
	}
	var ue *UnwrittenError
	if err := r2.Close(); !errors.As(err, &ue) || ue.Changes != 2 {
		t.Fatalf("Close of the next holder = %v, want the 2 changes kept in the log", err)
	}
	opt.hooks.env.SetFault(nil)

	if got := read(t, r, "a.md"); got != "two\n" {
		t.Fatalf("the first holder reads its acknowledged a.md as %q", got)
	}
	stop()
	write(t, r, "t5", "c.md", "five\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := gitToolIDs(t, dir); got != "t1 t2 t3 t5" {
		t.Fatalf("history: %q", got)
	}
	gittest.Fsck(t, dir)
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("git status:\n%s", st)
	}
}

// gitmem fsck --repair, the repair the runbook names for a full disk,
// beside a holder whose checkpoints fail: it queues for the writer lock
// as a Repo does (the intent lock), so the holder hands the log over and
// the repair replays it. It took the writer lock without queueing, and
// waited for ever: the holder never learnt that it waited.
func TestFsckRepairBesideAFailingCheckpoint(t *testing.T) {
	t.Parallel()
	dir, _, _ := inTheLogFailingAt(t, gd.StepPack)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound for a hang
	defer cancel()
	if _, err := Fsck(ctx, dir, testOptions(t), true); err != nil {
		t.Fatalf("fsck --repair beside a failing holder: %v", err)
	}
	if got := gitToolIDs(t, dir); got != "t1 t2 t3" {
		t.Fatalf("history after the repair: %q", got)
	}
	gittest.Fsck(t, dir)
}
