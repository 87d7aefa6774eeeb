package gitmem

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A journal that cannot be read for a reason of the moment (the process
// out of file descriptors, EMFILE; a disk error, EIO; EACCES) is not a
// damaged journal: the start fails (EMFILE as OutOfFiles, which a server
// answers 503 and a client retries) and changes nothing, and the next
// start adopts the hand edits. Before, any read error but "not there"
// made the journal "unreadable", and the whole memory folder was brought
// back to HEAD: a file made by hand deleted and an edit made by hand
// reverted, in no commit (N4, F7). The journal here names another path,
// which the next start repairs as usual.
func TestJournalReadFailureFailsTheStart(t *testing.T) {
	t.Parallel()
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.EIO, syscall.EACCES} {
		t.Run(errno.Error(), func(t *testing.T) {
			t.Parallel()
			dir := gittest.TempDir(t)
			r, _, err := Init(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			write(t, r, "a", "a.md", "x\n")
			write(t, r, "b", "b.md", "b\n")
			r.Close()
			if err := os.WriteFile(filepath.Join(dir, ".git", "gitmem", "pending"), []byte(`{"paths":["memories/b.md"]}`), 0o600); err != nil {
				t.Fatal(err)
			}
			hand := map[string]string{"a.md": "x\nedit by hand\n", "hand.md": "hand made\n"}
			for p, s := range hand {
				if err := os.WriteFile(filepath.Join(dir, "memories", p), []byte(s), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			opt := testOptions(t)
			opt.hooks.env.SetFault(func(step, p string) error {
				if step == "journal-read" {
					return &fs.PathError{Op: "open", Path: filepath.Join(dir, ".git", "gitmem", "pending"), Err: errno}
				}
				return nil
			})
			r, err = Open(context.Background(), dir, opt)
			if err == nil {
				r.Close()
				t.Errorf("the start with the journal unread succeeded")
			} else if OutOfFiles(err) != (errno == syscall.EMFILE) || !errors.Is(err, errno) || strings.Contains(err.Error(), dir) {
				t.Errorf("the start with the journal unread: %v (OutOfFiles %v)", err, OutOfFiles(err))
			}
			for p, want := range hand {
				if got, err := os.ReadFile(filepath.Join(dir, "memories", p)); string(got) != want {
					t.Errorf("after the failed start %s = %q, %v; want the hand edit %q", p, got, err, want)
				}
			}

			r, err = Open(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Adopt(context.Background()); err != nil && !errors.Is(err, ErrNoChange) {
				t.Fatal(err)
			}
			r.Close()
			if _, err := os.Stat(filepath.Join(dir, ".git", "gitmem", "pending")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the journal is left: %v", err)
			}
			for p, want := range hand {
				if got := gittest.Git(t, dir, "show", "HEAD:memories/"+p); got != want {
					t.Errorf("HEAD:memories/%s = %q, want the hand edit adopted %q", p, got, want)
				}
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status: %s", st)
			}
		})
	}
}
