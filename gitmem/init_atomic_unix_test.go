//go:build unix

package gitmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// The child half of TestInitKilledAtEachStepLeavesNothing: Init of the
// folder GITMEM_KILL_AT_INIT names, killed (SIGKILL) at its write step
// GITMEM_KILL_STEP.
func init() {
	dir := os.Getenv("GITMEM_KILL_AT_INIT")
	if dir == "" {
		return
	}
	env := new(gd.Env)
	env.SetFault(func(step, p string) error {
		if step == gd.StepInit && p == os.Getenv("GITMEM_KILL_STEP") {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	})
	_, _, err := Init(context.Background(), dir, Options{Operator: Signature{"op", "op@x"}, hooks: &testHooks{env: env}})
	fmt.Println("error:", err)
	os.Exit(1)
}

// The child half of TestCreateKilledAtItsTreeSyncLeavesNothing: Create
// of the folder GITMEM_KILL_AT_CREATE names, killed (SIGKILL) at the sync
// of its whole tree, before the rename.
func init() {
	dir := os.Getenv("GITMEM_KILL_AT_CREATE")
	if dir == "" {
		return
	}
	env := new(gd.Env)
	env.SetFault(func(step, p string) error {
		if step == gd.StepSync && p == "tree" {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	})
	err := Create(context.Background(), dir, Options{Operator: Signature{"op", "op@x"}, hooks: &testHooks{env: env}}, createFill)
	fmt.Println("error:", err)
	os.Exit(1)
}

// createFill is the first change of the repositories Create makes here.
func createFill(r *Repo) error {
	_, err := r.Update(context.Background(), Meta{Subject: "w x", Trailers: []Trailer{{TrailerToolUseID, "t1"}}}, func(tx *Tx) error {
		return tx.WriteFile("x", []byte("first\n"))
	})
	return err
}

// initSteps are the write steps of a new repository's creation, in
// order, as the fault hook sees them.
func initSteps(t *testing.T) []string {
	t.Helper()
	opt := testOptions(t)
	var steps []string
	opt.hooks.env.SetFault(func(step, p string) error {
		if step == gd.StepInit {
			steps = append(steps, p)
		}
		return nil
	})
	r, _, err := Init(context.Background(), gittest.TempDir(t), opt)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if len(steps) < 10 || steps[len(steps)-1] != "rename" {
		t.Fatalf("the steps of a creation: %q", steps)
	}
	return steps
}

// checkCreatedAfter says the Init after a failed or killed one created
// the repository, with its first commit, git fsck --strict clean (by
// gittest.TempDir), and left no temporary folder.
func checkCreatedAfter(t *testing.T, dir, step string) {
	t.Helper()
	r, created, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatalf("after step %s: Init: %v", step, err)
	}
	r.Close()
	if !created && step != "rename" {
		t.Errorf("after step %s: the second Init did not create the repository", step)
	}
	if got := strings.TrimSpace(gittest.Git(t, dir, "log", "--format=%s")); got != "memory: init" {
		t.Errorf("after step %s: history %q", step, got)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, gd.NewTempPrefix+"*")); len(left) > 0 {
		t.Errorf("after step %s: left %q", step, left)
	}
}

// F11: a creation that fails at any write step (a full disk) leaves no
// .git that Open refuses: the same Init then creates the repository.
func TestInitFailedAtEachStepLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, step := range initSteps(t) {
		dir := gittest.TempDir(t)
		opt := testOptions(t)
		opt.hooks.env.SetFault(func(s, p string) error {
			if s == gd.StepInit && p == step {
				return &os.PathError{Op: "write", Path: p, Err: syscall.ENOSPC}
			}
			return nil
		})
		if r, _, err := Init(context.Background(), dir, opt); err == nil {
			r.Close()
			t.Fatalf("step %s: Init did not fail", step)
		} else if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("step %s: %v", step, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, ".git")); step != "rename" && err == nil {
			t.Errorf("step %s: a .git is left", step)
		}
		checkCreatedAfter(t, dir, step)
	}
}

// F11: kill -9 at any step of a creation (a first start of serve killed
// by a deploy) leaves no .git that Open refuses; the temporary folder the
// killed process left is removed by the next Init.
func TestInitKilledAtEachStepLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, step := range initSteps(t) {
		dir := gittest.TempDir(t)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "GITMEM_KILL_AT_INIT="+dir, "GITMEM_KILL_STEP="+step)
		if out, err := cmd.Output(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("step %s: the child: %v\n%s", step, err, out)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, gd.NewTempPrefix+"*")); step != "rename" && len(left) != 1 {
			t.Errorf("step %s: the killed process left %q", step, left)
		}
		checkCreatedAfter(t, dir, step)
	}
}

// F11: a .git that an older gitmem left when it was killed or ran out of
// space while it created the repository in place (go-git's PlainInit,
// then the mark) holds no commit: Open says so (ErrInterrupted, not
// "read HEAD failed" or "a git repository gitmem did not create"), and
// Init replaces it. A repository git init made is not one.
func TestInitReplacesWhatAnInterruptedOlderCreationLeft(t *testing.T) {
	t.Parallel()
	for name, files := range map[string]map[string]string{
		"no HEAD":    {"objects/info/": "", "objects/pack/": "", "refs/": ""},
		"empty HEAD": {"HEAD": "", "objects/": "", "refs/heads/": ""},
		"no mark":    {"HEAD": "ref: refs/heads/main\n", "config": "[core]\n\tbare = false\n", "objects/pack/": "", "refs/tags/": ""},
		"empty .git": {},
	} {
		dir := gittest.TempDir(t)
		gitDir := filepath.Join(dir, ".git")
		if err := os.MkdirAll(gitDir, 0o700); err != nil {
			t.Fatal(err)
		}
		for p, data := range files {
			if strings.HasSuffix(p, "/") {
				err := os.MkdirAll(filepath.Join(gitDir, p), 0o755)
				if err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(filepath.Join(gitDir, p), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, ro := range []bool{true, false} {
			if _, err := Open(context.Background(), dir, Options{ReadOnly: ro, Logf: t.Logf}); !errors.Is(err, ErrInterrupted) {
				t.Errorf("%s: Open (read-only %v): %v", name, ro, err)
			}
		}
		if _, err := Fsck(context.Background(), dir, Options{Logf: t.Logf}, true); !errors.Is(err, ErrInterrupted) {
			t.Errorf("%s: Fsck: %v", name, err)
		}
		checkCreatedAfter(t, dir, name)
	}
	// git init's repository, empty as it is, is another program's.
	dir := gittest.TempDir(t)
	gittest.Git(t, dir, "init", "-q", "-b", "main")
	if _, _, err := Init(context.Background(), dir, Options{Logf: t.Logf}); !errors.Is(err, ErrForeign) {
		t.Errorf("git init's repository: %v", err)
	}
}

// F13: two processes creating one repository at once: one builds it, the
// other finds it built (not go-git's "repository already exists", nor a
// half-made .git), and both open it.
func TestInitRacingAnotherProcessOpensItsRepository(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	raced := false
	opt.hooks.env.SetFault(func(s, p string) error {
		if s == gd.StepInit && p == "./" && !raced { // built, not yet renamed: the other process is quicker
			raced = true
			r, created, err := Init(context.Background(), dir, testOptions(t))
			if err != nil || !created {
				t.Errorf("the other Init: %v, created %v", err, created)
			} else {
				r.Close()
			}
		}
		return nil
	})
	r, created, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if created || !raced {
		t.Errorf("created %v, raced %v", created, raced)
	}
	if got := strings.TrimSpace(gittest.Git(t, dir, "log", "--format=%s")); got != "memory: init" {
		t.Errorf("history %q", got)
	}
}

// F11, F13: Create builds a repository beside its place and renames it
// there once complete: failed at any write step of its build (its
// creation, its first commits, its close), it leaves nothing at dir and
// no temporary folder, and the same Create then makes it, git fsck
// --strict clean. A Create whose dir another made meanwhile is ErrExist.
func TestCreateFailedAtEachStepLeavesNothing(t *testing.T) {
	t.Parallel()
	fill := func(r *Repo) error {
		_, err := r.Update(context.Background(), Meta{Subject: "w x", Trailers: []Trailer{{TrailerToolUseID, "t1"}}}, func(tx *Tx) error {
			return tx.WriteFile("x", []byte("first\n"))
		})
		return err
	}
	type step struct{ step, path string }
	var steps []step
	var mu sync.Mutex // the hook runs in the background's goroutines too
	opt := testOptions(t)
	opt.hooks.env.SetFault(func(s, p string) error {
		mu.Lock()
		defer mu.Unlock()
		steps = append(steps, step{s, p})
		return nil
	})
	root := gittest.TempDir(t)
	if err := Create(context.Background(), filepath.Join(root, "m"), opt, fill); err != nil {
		t.Fatal(err)
	}
	if len(steps) < 15 {
		t.Fatalf("steps: %q", steps)
	}
	failed := 0
	for i, at := range steps {
		dir := filepath.Join(root, fmt.Sprint("m", i))
		opt := testOptions(t)
		occ, n := 0, 0 // the occurrence of at to fail, and those seen
		for _, s := range steps[:i+1] {
			if s == at {
				occ++
			}
		}
		opt.hooks.env.SetFault(func(s, p string) error {
			mu.Lock()
			defer mu.Unlock()
			if s == at.step && p == at.path {
				n++
			}
			if n == occ && s == at.step && p == at.path {
				return &os.PathError{Op: "write", Path: p, Err: syscall.ENOSPC}
			}
			return nil
		})
		err := Create(context.Background(), dir, opt, fill)
		if err != nil {
			failed++
			if _, serr := os.Lstat(dir); serr == nil {
				t.Errorf("step %d %v: failed (%v) and left %s", i, at, err, dir)
			}
			if err := Create(context.Background(), dir, testOptions(t), fill); err != nil {
				t.Fatalf("step %d %v: the next Create: %v", i, at, err)
			}
		}
		// (A first commit that failed is left out, as by Open: the
		// repository is complete without it.)
		if got := strings.TrimSpace(gittest.Git(t, dir, "log", "--format=%s")); got != "w x\nmemory: init" && got != "w x" {
			t.Errorf("step %d %v: history %q", i, at, got)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(root, gd.NewTempPrefix+"*")); len(left) > 0 {
		t.Errorf("left %q", left)
	}
	if failed < len(steps)/2 {
		t.Errorf("only %d of %d faults failed the Create", failed, len(steps))
	}
	t.Logf("%d of %d faults failed the Create", failed, len(steps))
	if err := Create(context.Background(), filepath.Join(root, "m"), testOptions(t), fill); !errors.Is(err, ErrExist) {
		t.Errorf("a Create of a repository there: %v", err)
	}
}

// A new repository's files and folders are not synced one by one while
// it is built aside: the whole tree is, once, complete (both commits in
// it), before the rename; if that sync fails (a full disk, EIO) or the
// process is killed there, nothing is in place and the next Create
// makes the repository.
func TestCreateSyncsItsTreeOnceBeforeTheRename(t *testing.T) {
	t.Parallel()
	root := gittest.TempDir(t)
	dir := filepath.Join(root, "m")
	opt := testOptions(t)
	syncs := 0
	opt.hooks.env.SetFault(func(s, p string) error {
		if s != gd.StepSync {
			return nil
		}
		syncs++
		if p != "tree" {
			t.Errorf("a sync of %s while the repository was built", p)
			return nil
		}
		if _, err := os.Lstat(dir); err == nil {
			t.Errorf("%s in place before its sync", dir)
		}
		tmp, _ := filepath.Glob(filepath.Join(root, gd.NewTempPrefix+"*"))
		if len(tmp) != 1 {
			t.Fatalf("the folder built aside: %q", tmp)
		}
		if got := strings.TrimSpace(gittest.Git(t, tmp[0], "log", "--format=%s")); got != "w x\nmemory: init" {
			t.Errorf("history at the sync: %q", got)
		}
		return &os.PathError{Op: "syncfs", Path: p, Err: syscall.EIO}
	})
	if err := Create(context.Background(), dir, opt, createFill); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Create with its sync failed: %v", err)
	}
	if syncs != 1 {
		t.Errorf("%d syncs, want the tree's", syncs)
	}
	if left, _ := os.ReadDir(root); len(left) > 0 {
		t.Errorf("left %v", left)
	}
	if err := Create(context.Background(), dir, testOptions(t), createFill); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(gittest.Git(t, dir, "log", "--format=%s")); got != "w x\nmemory: init" {
		t.Errorf("history: %q", got)
	}
}

func TestCreateKilledAtItsTreeSyncLeavesNothing(t *testing.T) {
	t.Parallel()
	root := gittest.TempDir(t)
	dir := filepath.Join(root, "m")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GITMEM_KILL_AT_CREATE="+dir)
	if out, err := cmd.Output(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the child: %v\n%s", err, out)
	}
	if _, err := os.Lstat(dir); err == nil {
		t.Fatalf("the killed process left %s", dir)
	}
	if left, _ := filepath.Glob(filepath.Join(root, gd.NewTempPrefix+"*")); len(left) != 1 {
		t.Errorf("the killed process left %q", left)
	}
	if err := Create(context.Background(), dir, testOptions(t), createFill); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(gittest.Git(t, dir, "log", "--format=%s")); got != "w x\nmemory: init" {
		t.Errorf("history: %q", got)
	}
	if left, _ := filepath.Glob(filepath.Join(root, gd.NewTempPrefix+"*")); len(left) > 0 {
		t.Errorf("left %q", left)
	}
}
