//go:build unix

package gitmem

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// The child half of TestKillNineHoldingMaintenanceLock: a gc that kills
// itself (SIGKILL) once it holds git's objects/maintenance.lock, before
// it deletes the packs its new pack replaced.
func init() {
	dir := os.Getenv("GITMEM_KILL_IN_MAINTENANCE")
	if dir == "" {
		return
	}
	env := new(gd.Env)
	env.SetFault(func(step, _ string) error {
		if step == gd.StepMaintenance {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	})
	r, err := Open(context.Background(), dir, Options{Logf: func(string, ...any) {}, Operator: Signature{"op", "op@x"}, hooks: &testHooks{env: env}})
	if err == nil {
		_, err = r.GC(context.Background(), false)
	}
	fmt.Println("error:", err)
	os.Exit(1)
}

// packedRepo is a closed repository whose history is in n packs.
func packedRepo(t *testing.T, n int) string {
	t.Helper()
	r, dir := newRepo(t)
	for i := range n {
		write(t, r, fmt.Sprint("t", i), fmt.Sprintf("f%d.md", i), "x\n")
		if err := r.materialize(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if packs, _ := gd.ListPacks(filepath.Join(dir, ".git")); len(packs) < 2 {
		t.Fatalf("%d packs, want several", len(packs))
	}
	return dir
}

// maintenanceProblem is the problem fsck reports about
// .git/objects/maintenance.lock, if any.
func maintenanceProblem(t *testing.T, dir string, repair bool) (Problem, bool) {
	t.Helper()
	rep, err := Fsck(context.Background(), dir, testOptions(t), repair)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(rep.Problems, func(p Problem) bool { return strings.Contains(p.What, "maintenance.lock") })
	if i < 0 {
		return Problem{}, false
	}
	return rep.Problems[i], true
}

// kill -9 while a gc holds git's .git/objects/maintenance.lock (for the
// milliseconds it deletes the packs another pack replaced): the lock it
// left stopped every later gc from deleting a pack, for good, and git
// maintenance from running, while gitmem fsck said nothing. gitmem takes
// it as its other locks, with a second name: fsck names it, the next
// start removes it, and gc folds the packs.
func TestKillNineHoldingMaintenanceLock(t *testing.T) {
	t.Parallel()
	dir := packedRepo(t, 3)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GITMEM_KILL_IN_MAINTENANCE="+dir)
	if out, err := cmd.Output(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the child: %v\n%s", err, out)
	}
	lock := filepath.Join(dir, ".git", "objects", "maintenance.lock")
	if _, err := os.Lstat(lock); err != nil {
		t.Fatalf("the child was killed without the lock: %v", err)
	}
	if p, ok := maintenanceProblem(t, dir, false); !ok || p.Repaired {
		t.Errorf("gitmem fsck did not report the lock a killed gitmem left: %+v", p)
	} else if !strings.Contains(p.Repair, "gitmem fsck --repair") {
		t.Errorf("the repair does not say what to run: %q", p.Repair)
	}
	opt := testOptions(t)
	logged := captureLogs(t, &opt)
	r, err := Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(lock); err == nil {
		t.Error("the start left the lock a killed gitmem left")
	}
	if !slices.ContainsFunc(logged(), func(l string) bool { return strings.Contains(l, "removed .git/objects/maintenance.lock") }) {
		t.Errorf("the start did not say it removed the lock: %q", logged())
	}
	if _, err := r.GC(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if packs, _ := gd.ListPacks(filepath.Join(dir, ".git")); len(packs) != 1 {
		t.Errorf("after gitmem gc: %d packs, want 1", len(packs))
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "*.lock")); len(left) > 0 {
		t.Errorf("left: %q", left)
	}
	if _, ok := maintenanceProblem(t, dir, false); ok {
		t.Error("fsck still reports the lock")
	}
	gittest.Fsck(t, dir)
}

// A maintenance.lock with no second name is git's (git maintenance run
// holds it while it runs): no start nor fsck --repair removes it, and
// fsck names it only once it is older than a run takes, with the rm to
// run. One a running gitmem holds (its second name's process runs) is
// not reported either.
func TestMaintenanceLockOfGitStays(t *testing.T) {
	t.Parallel()
	dir := packedRepo(t, 2)
	lock := filepath.Join(dir, ".git", "objects", "maintenance.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(lock); err != nil {
		t.Fatalf("the start removed git's lock: %v", err)
	}
	if p, ok := maintenanceProblem(t, dir, false); ok {
		t.Errorf("fsck reports a lock git maintenance took now: %+v", p)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(lock, old, old); err != nil {
		t.Fatal(err)
	}
	p, ok := maintenanceProblem(t, dir, true)
	if !ok || p.Repaired || !strings.Contains(p.Repair, "rm .git/objects/maintenance.lock") {
		t.Errorf("fsck --repair on a lock of git's held for an hour: %+v, %v", p, ok)
	}
	if _, err := os.Lstat(lock); err != nil {
		t.Fatalf("fsck --repair removed git's lock: %v", err)
	}
	// The same lock file with a second name of this process, which runs.
	own := filepath.Join(dir, ".git", "objects", "maintenance.gitmem-"+gd.ProcTag+"-1.lock")
	if err := os.Link(lock, own); err != nil {
		t.Fatal(err)
	}
	if p, ok := maintenanceProblem(t, dir, true); ok {
		t.Errorf("fsck reports the lock a running gitmem holds: %+v", p)
	}
	if _, err := os.Lstat(lock); err != nil {
		t.Fatalf("fsck --repair removed the lock a running gitmem holds: %v", err)
	}
	os.Remove(own)
	os.Remove(lock)
	gittest.Fsck(t, dir)
}
