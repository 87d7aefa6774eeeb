package gitmem

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A named pipe put in place of one of gitmem's own files in .git/gitmem,
// or of a file of git's that gitmem reads (.git/index, a loose object, a
// pack's index) (a hostile process, a slip): a start, a write and its
// settle do not wait on it for a writer: the pipe is taken as a folder
// (or a damaged file) there is: a start, or a call, failing with an
// error, one that names no host path, or going on without the file. A hang fails the subtest at
// its bound. Before, .git/index, a loose object and a pack's index were
// opened with a blocking open, which waited for a writer.
func TestAPipeInGitmemsFolderHangsNothing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		where func(t *testing.T, dir string) string // the file the pipe takes the place of
	}{
		{"history", inGitmem("history")},
		{"redact", inGitmem("redact")},
		{"sync", inGitmem("sync")},
		{"redacted", inGitmem("redacted")},
		{"wal", inGitmem("wal")},
		{"lock", inGitmem("lock")},
		{"intent", inGitmem("intent")},
		{"index", func(t *testing.T, dir string) string { return filepath.Join(dir, ".git", "index") }},
		{"loose object", func(t *testing.T, dir string) string {
			// A commit made with git: its objects are loose, and the
			// start reads the commit git moved the branch to.
			if err := os.WriteFile(filepath.Join(dir, "memories", "b.md"), []byte("B\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			gittest.Git(t, dir, "add", "memories/b.md")
			gittest.Git(t, dir, "commit", "-qm", "by git")
			h := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD"))
			return filepath.Join(dir, ".git", "objects", h[:2], h[2:])
		}},
		{"pack", func(t *testing.T, dir string) string {
			packs, err := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "pack-*.pack"))
			if err != nil || len(packs) == 0 {
				t.Fatalf("no pack: %v", err)
			}
			return packs[0]
		}},
		{"pack index", func(t *testing.T, dir string) string {
			idx, err := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "pack-*.idx"))
			if err != nil || len(idx) == 0 {
				t.Fatalf("no pack index: %v", err)
			}
			return idx[0]
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var errs [2]error
			// The pipe is compared with a folder there, or, where a rename
			// replaces the file (and cannot replace a folder), with a
			// damaged file.
			damaged := c.name == "index"
			what := "a folder"
			if damaged {
				what = "a damaged file"
			}
			for i, pipe := range []bool{true, false} {
				opt, dir, _ := leftFixture(t)
				p := c.where(t, dir)
				gittest.Damaged(t, dir, "a named pipe or "+what+" in place of "+filepath.Base(p)) // git too would wait on a pipe
				os.Remove(p)
				var err error
				switch {
				case pipe:
					mkfifo(t, p)
				case damaged:
					err = os.WriteFile(p, []byte("damaged\n"), 0o600)
				default:
					err = os.MkdirAll(filepath.Join(p, "x"), 0o700)
				}
				if err != nil {
					t.Fatal(err)
				}
				errs[i] = startWriteFlush(t, dir, opt, p)
				if errs[i] != nil && strings.Contains(errs[i].Error(), dir) {
					t.Errorf("the error names a host path: %v", errs[i])
				}
			}
			t.Logf("a pipe: %v; %s: %v", errs[0], what, errs[1])
			if (errs[0] == nil) != (errs[1] == nil) {
				t.Errorf("a pipe there is not taken as %s there is: %v, and %v", what, errs[0], errs[1])
			}
		})
	}
}

// startWriteFlush opens dir, writes a file and flushes, and returns the
// first error. It fails the test if that takes over a minute (a wait on
// a named pipe at p, which is then opened for writing and closed, so that
// the open waiting on it goes on).
func startWriteFlush(t *testing.T, dir string, opt Options, p string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		r, err := Open(context.Background(), dir, opt)
		if err != nil {
			done <- err
			return
		}
		defer r.Close()
		_, err = r.Update(context.Background(), Meta{Subject: "w"}, func(tx *Tx) error { return tx.WriteFile("a.md", []byte("A2\n")) })
		if err == nil {
			err = r.Flush(context.Background())
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute): // a bound for a hang, not a timing
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		select {
		case <-done:
		case <-time.After(time.Minute):
		}
		t.Fatal("hung")
		return nil
	}
}

// inGitmem names one of gitmem's own files in .git/gitmem.
func inGitmem(name string) func(*testing.T, string) string {
	return func(_ *testing.T, dir string) string { return filepath.Join(dir, ".git", "gitmem", name) }
}
