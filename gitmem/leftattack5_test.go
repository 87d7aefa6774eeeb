package gitmem

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A named pipe put in place of a file of .git that a command other than
// a start and a write reads (gitmem fsck, a sync, a redaction), or that
// a start reads past TestAPipeInGitmemsFolderHangsNothing's: the command
// does not wait on it for a writer: the pipe is taken as a folder there
// is (the same outcome, an error naming no host path, or the command
// going on without the file). A hang fails the subtest at its bound.
// Before, each of these files was read with a blocking os.ReadFile (or
// opened with a blocking os.OpenFile), which waited for a writer.
func TestAPipeInGitsFilesHangsNoCommand(t *testing.T) {
	t.Parallel()
	withRemote := func(t *testing.T, dir string) {
		gittest.Git(t, dir, "remote", "add", "origin", bareRemote(t))
	}
	start := func(t *testing.T, dir string, opt Options) (string, error) {
		r, err := Open(context.Background(), dir, opt)
		if err != nil {
			return "", err
		}
		defer r.Close()
		_, err = r.Update(context.Background(), Meta{Subject: "w"}, func(tx *Tx) error { return tx.WriteFile("a.md", []byte("A2\n")) })
		if err == nil {
			err = r.Flush(context.Background())
		}
		return "", err
	}
	fsck := func(t *testing.T, dir string, opt Options) (string, error) {
		rep, err := Fsck(context.Background(), dir, opt, false)
		for _, p := range rep.Problems {
			if strings.Contains(p.What+p.Repair, dir) {
				t.Errorf("the problem names a host path: %s; %s", p.What, p.Repair)
			}
		}
		return fmt.Sprint(len(rep.Problems), " problems"), err
	}
	sync := func(t *testing.T, dir string, opt Options) (string, error) {
		r, err := Open(context.Background(), dir, opt)
		if err != nil {
			return "", err
		}
		defer r.Close()
		if _, err := r.Push(context.Background(), "origin", SyncOptions{}); err != nil {
			return "push", err
		}
		if _, err := r.Status(context.Background(), "origin"); err != nil {
			return "status", err
		}
		_, err = r.Sync(context.Background(), "origin", SyncOptions{})
		return "sync", err
	}
	redact := func(t *testing.T, dir string, opt Options) (string, error) {
		r, err := Open(context.Background(), dir, opt)
		if err != nil {
			return "", err
		}
		defer r.Close()
		if _, err := r.Update(context.Background(), Meta{Subject: "w"}, func(tx *Tx) error { return tx.WriteFile("s.md", []byte("sk-abc123\n")) }); err != nil {
			return "write", err
		}
		if _, err := r.Update(context.Background(), Meta{Subject: "w"}, func(tx *Tx) error { return tx.Remove("s.md") }); err != nil {
			return "remove", err
		}
		rep, err := r.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)}, false, nil)
		return fmt.Sprint(len(rep.Rewritten), " rewritten"), err
	}
	resolve := func(t *testing.T, dir string, opt Options) (string, error) {
		r, err := Open(context.Background(), dir, opt)
		if err != nil {
			return "", err
		}
		defer r.Close()
		c, err := r.Resolve(context.Background(), "other~0")
		return c.Hash, err
	}
	inGit := func(rel string) func(*testing.T, string) string {
		return func(t *testing.T, dir string) string {
			p := filepath.Join(dir, ".git", filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	for _, c := range []struct {
		name  string
		where func(t *testing.T, dir string) string // the file the pipe takes the place of
		run   func(t *testing.T, dir string, opt Options) (string, error)
	}{
		{"start/stale keep", inGit("objects/pack/pack-" + strings.Repeat("ab", 20) + ".keep"), start},
		{"start/keep template", inGitmem("keep"), start},
		{"fsck/commit-graph", inGit("objects/info/commit-graph"), fsck},
		{"fsck/commit-graph-chain", inGit("objects/info/commit-graphs/commit-graph-chain"), fsck},
		{"fsck/multi-pack-index", inGit("objects/pack/multi-pack-index"), fsck},
		{"sync/sync state", func(t *testing.T, dir string) string { withRemote(t, dir); return inGitmem("sync")(t, dir) }, sync},
		{"sync/redacted", func(t *testing.T, dir string) string { withRemote(t, dir); return inGitmem("redacted")(t, dir) }, sync},
		{"redact/redacted", func(t *testing.T, dir string) string { withRemote(t, dir); return inGitmem("redacted")(t, dir) }, redact},
		{"start/a killed redaction's ref lock", func(t *testing.T, dir string) string {
			// The record of a redaction killed as it moved the branch:
			// the start finishes it, and reads the branch's lock first
			// (the killed redaction's, when it holds the new hash).
			old := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD"))
			new := strings.TrimSpace(gittest.Git(t, dir, "-c", "user.name=x", "-c", "user.email=x@x", "commit-tree", "HEAD^{tree}", "-m", "redacted"))
			rec := fmt.Sprintf(`{"refs":{"refs/heads/main":[%q,%q]}}`, old, new)
			if err := os.WriteFile(filepath.Join(dir, ".git", "gitmem", "redact"), []byte(rec), 0o600); err != nil {
				t.Fatal(err)
			}
			return inGit("refs/heads/main.lock")(t, dir)
		}, start},
		{"resolve/a branch", inGit("refs/heads/other"), resolve},
		{"resolve/a tag", inGit("refs/tags/other"), resolve},
		{"start/config", inGit("config"), start},
		{"fsck/config", inGit("config"), fsck},
		{"start/packed-refs", inGit("packed-refs"), start},
		{"fsck/packed-refs", inGit("packed-refs"), fsck},
		{"sync/packed-refs", func(t *testing.T, dir string) string { withRemote(t, dir); return inGit("packed-refs")(t, dir) }, sync},
		{"redact/packed-refs", func(t *testing.T, dir string) string { withRemote(t, dir); return inGit("packed-refs")(t, dir) }, redact},
		{"start/alternates", inGit("objects/info/alternates"), start},
		{"fsck/alternates", inGit("objects/info/alternates"), fsck},
		{"redact/alternates", inGit("objects/info/alternates"), redact},
		{"sync/alternates", func(t *testing.T, dir string) string {
			withRemote(t, dir)
			return inGit("objects/info/alternates")(t, dir)
		}, sync},
		{"fsck/pending", inGitmem("pending"), fsck},
		{"fsck/index", inGit("index"), fsck},
		{"fsck/redact", inGitmem("redact"), fsck},
		{"fsck/history", inGitmem("history"), fsck},
		{"fsck/kept", inGitmem("kept"), fsck},
		{"fsck/left", inGitmem("left"), fsck},
		{"sync/fetch", func(t *testing.T, dir string) string { withRemote(t, dir); return inGitmem("fetch")(t, dir) }, sync},
		{"start/info/packs", inGit("objects/info/packs"), start},
		{"fsck/info/packs", inGit("objects/info/packs"), fsck},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var outs [2]string
			var errs [2]error
			for i, pipe := range []bool{true, false} {
				opt, dir, _ := leftFixture(t)
				p := c.where(t, dir)
				gittest.Damaged(t, dir, "a named pipe or a folder in place of "+filepath.Base(p)) // git too would wait on a pipe
				os.Remove(p)
				if pipe {
					mkfifo(t, p)
				} else if err := os.MkdirAll(filepath.Join(p, "x"), 0o700); err != nil {
					t.Fatal(err)
				}
				outs[i], errs[i] = runWithin(t, p, func() (string, error) { return c.run(t, dir, opt) })
				if errs[i] != nil && strings.Contains(errs[i].Error(), dir) {
					t.Errorf("the error names a host path: %v", errs[i])
				}
			}
			t.Logf("a pipe: %s, %v; a folder: %s, %v", outs[0], errs[0], outs[1], errs[1])
			if (errs[0] == nil) != (errs[1] == nil) || outs[0] != outs[1] {
				t.Errorf("a pipe there is not taken as a folder there is: %s, %v; and %s, %v", outs[0], errs[0], outs[1], errs[1])
			}
		})
	}
}

// runWithin runs fn and returns what it returns. It fails the test if
// that takes over a minute (a wait on a named pipe at p, which is then
// opened for writing and closed, and opened for reading, so that an open
// waiting on it goes on).
func runWithin(t *testing.T, p string, fn func() (string, error)) (string, error) {
	t.Helper()
	type res struct {
		out string
		err error
	}
	done := make(chan res, 1)
	go func() {
		out, err := fn()
		done <- res{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-time.After(time.Minute): // a bound for a hang, not a timing
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		if r, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			time.Sleep(time.Second)
			r.Close()
		}
		select {
		case <-done:
		case <-time.After(time.Minute):
		}
		t.Fatal("hung")
		return "", nil
	}
}

// The operator's identity (user.name and user.email of .git/config, read
// when a commit of the operator's is first made: a merge, an adoption)
// does not wait on a named pipe at .git/config, one put there after the
// start read it: the pipe is taken as a folder there is (none of the
// repository's identity). Before, go-git's open of the repository read
// the file with a blocking open.
func TestTheOperatorsIdentityDoesNotWaitOnAPipeAtGitsConfig(t *testing.T) {
	t.Parallel()
	var ids [2]Signature
	for i, pipe := range []bool{true, false} {
		dir := gittest.TempDir(t)
		gittest.Git(t, dir, "init", "-q")
		gittest.Git(t, dir, "config", "user.name", "Ann")
		p := filepath.Join(dir, ".git", "config")
		gittest.Damaged(t, dir, "a named pipe or a folder in place of .git/config") // git too would wait on a pipe
		os.Remove(p)
		if pipe {
			mkfifo(t, p)
		} else if err := os.MkdirAll(filepath.Join(p, "x"), 0o700); err != nil {
			t.Fatal(err)
		}
		runWithin(t, p, func() (string, error) { ids[i] = gitIdentity(dir); return "", nil })
	}
	if ids[0] != ids[1] || ids[0].Name == "Ann" {
		t.Errorf("a pipe at .git/config gives %v, a folder %v", ids[0], ids[1])
	}
}
