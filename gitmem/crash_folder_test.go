//go:build unix

package gitmem

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// The child half of TestKillNineBeforeAWriteKeepsAFolderMadeByHand: it
// writes the memory file x and kills itself (SIGKILL) at the worktree's
// write of x, the change acknowledged (in the log) and x not on disk.
func init() {
	dir := os.Getenv("GITMEM_KILL_AT_WRITE")
	if dir == "" {
		return
	}
	env := new(gd.Env)
	env.SetFault(func(step, p string) error {
		if step == gd.StepWorktree && p == "memories/x" {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	})
	r, err := Open(context.Background(), dir, Options{Operator: Signature{"op", "op@x"}, hooks: &testHooks{env: env}})
	if err == nil {
		_, err = r.Update(context.Background(), Meta{Subject: "w x", Trailers: []Trailer{{TrailerToolUseID, "t1"}}}, func(tx *Tx) error {
			return tx.WriteFile("x", []byte("the model's\n"))
		})
	}
	if err == nil {
		err = r.Flush(context.Background()) // (the background's write of x may come first)
	}
	fmt.Println("error:", err)
	os.Exit(1)
}

// kill -9 between the log's record of a change and the worktree's write
// of its file x; an operator then makes a folder x with a file in it
// before the restart. The restart's replay writes x where the folder is:
// the file made by hand is kept and adopted (the model's x making way,
// in its commit), never removed with the folder unchecked.
func TestKillNineBeforeAWriteKeepsAFolderMadeByHand(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GITMEM_KILL_AT_WRITE="+dir)
	// Killed at the worktree's write: the change is in the log, which
	// only a commit point writes (HEAD~1 below is it).
	if out, err := cmd.Output(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the child: %v\n%s", err, out)
	}
	x := filepath.Join(dir, "memories", "x")
	if _, err := os.Lstat(x); err == nil {
		t.Fatal("the child wrote x before it was killed")
	}
	if err := os.Mkdir(x, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(x, "h.md"), []byte("by hand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Adopt(context.Background()); err != nil && err != ErrNoChange {
		t.Fatal(err)
	}
	settle(t, r)
	adoptedAs(t, r, map[string]string{"x/h.md": "by hand\n"})
	if got := gittest.Git(t, dir, "show", "HEAD~1:memories/x"); got != "the model's\n" {
		t.Errorf("HEAD~1:memories/x = %q", got)
	}
}
