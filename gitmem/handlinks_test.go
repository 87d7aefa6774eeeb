package gitmem

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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

// A folder of the memory that a hand made a link into .git is neither
// written through nor read through: the model's file at that path is
// committed as the model wrote it, and nothing of .git/config (a
// remote's credentials in its URL) reaches the history (the attacker's
// pass: it was taken for a hand edit and merged in).
func TestALinkIntoGitShowsNothingOfGitsFiles(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "a\n")
	settle(t, r)
	gittest.Git(t, dir, "remote", "add", "origin", "https://user:ghp_SECRET123@example.invalid/x.git")
	config, err := os.ReadFile(filepath.Join(dir, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../.git", filepath.Join(dir, memDir, "gl")); err != nil {
		t.Fatal(err)
	}
	write(t, r, "t2", "gl/config", "x\n")
	settle(t, r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if log := gittest.Git(t, dir, "log", "--all", "-p"); strings.Contains(log, "SECRET123") {
		t.Errorf(".git/config reached the history:\n%s", log)
	}
	if got := gittest.Git(t, dir, "show", "HEAD:memories/gl/config"); got != "x\n" {
		t.Errorf("memories/gl/config at HEAD = %q, want the model's", got)
	}
	if after, err := os.ReadFile(filepath.Join(dir, ".git", "config")); err != nil || string(after) != string(config) {
		t.Errorf(".git/config changed: %q, %v", after, err)
	}
}
