//go:build unix

package gitmem

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A FIFO put in place of the clean mark is no mark, and no wait: the
// first view of a store opens it as before (it hung in the mark's open,
// waiting for a writer of the FIFO).
func TestAFIFOAtTheCleanMarkIsNoWait(t *testing.T) {
	t.Parallel()
	dir, _ := cleanStore(t)
	p := cleanPath(filepath.Join(dir, ".git"))
	if err := syscall.Unlink(p); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := CleanView(dir); ok {
		t.Fatal("CleanView of a FIFO mark: true")
	}
}

// gitmem's own files in .git/gitmem are their owner's alone (0600), as
// .git is (0700): the clean mark and index-head were made 0644 beside the
// log files, the history index and the rest. (A reading command, which
// may run as another user, reads neither: it opens the repository, not
// the mark, and writes nothing there; a user other than root cannot
// enter .git at all.) keep, the note every pack's .keep is a link of, is
// read-only for all, as git's .keep files are.
func TestGitmemsOwnFilesAreTheOwners(t *testing.T) {
	t.Parallel()
	dir, _ := cleanStore(t)
	gm := filepath.Join(dir, ".git", "gitmem")
	for _, name := range []string{cleanName, "index-head"} {
		if _, err := os.Lstat(filepath.Join(gm, name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	entries, err := os.ReadDir(gm)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().IsRegular() && e.Name() != "keep" && fi.Mode().Perm()&0o077 != 0 {
			t.Errorf(".git/gitmem/%s is %v, want the owner's alone (%v)", e.Name(), fi.Mode(), os.FileMode(0o600))
		}
	}
	if _, ok := CleanView(dir); !ok {
		t.Error("CleanView of the mark: false")
	}
}
