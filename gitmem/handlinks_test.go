package gitmem

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A folder of the memory that a hand made into a symbolic link (to a
// folder outside) is not written through: the change is committed and
// acknowledged, the worktree's follow fails, and the path waits for a
// repair (.git/gitmem/pending). It is repaired before the writer lock is
// let go, at Close or when idle, as the next start would: the link gives
// way to the folder git holds, and fsck after the process ends finds
// nothing interrupted (it said "a change was interrupted" until the next
// open, a newcomer's finding; and after an idle release too, the
// attacker's pass).
func TestTheWorktreeIsRepairedBeforeTheLockIsLetGo(t *testing.T) {
	t.Parallel()
	for _, idle := range []bool{false, true} {
		name := "at Close"
		if idle {
			name = "when idle, before Close"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opt := testOptions(t)
			if idle {
				opt.ReleaseIdle = time.Millisecond
			}
			r, dir := newRepoOpts(t, opt)
			write(t, r, "t1", "a.md", "a\n")
			settle(t, r)
			outside := gittest.TempDir(t)
			if err := os.Symlink(outside, filepath.Join(dir, memDir, "dl")); err != nil {
				t.Fatal(err)
			}
			write(t, r, "t2", "dl/x.md", "x\n")
			settle(t, r)
			if idle {
				for deadline := time.Now().Add(time.Minute); r.lease.Held(); time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the writer lock was not let go when idle")
					}
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("written through the link: %d file(s) outside", len(ents))
			}
			fi, err := os.Lstat(filepath.Join(dir, memDir, "dl"))
			if err != nil || !fi.IsDir() {
				t.Fatalf("memories/dl after Close: %v, %v; want git's folder", fi, err)
			}
			if got, err := os.ReadFile(filepath.Join(dir, memDir, "dl", "x.md")); err != nil || string(got) != "x\n" {
				t.Errorf("memories/dl/x.md = %q, %v", got, err)
			}
			rep, err := Fsck(context.Background(), dir, testOptions(t), false)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range rep.Problems {
				t.Errorf("fsck after Close: %s", p.What)
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status after Close:\n%s", st)
			}
		})
	}
}
