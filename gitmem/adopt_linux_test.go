//go:build linux

package gitmem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A program that writes a whole file opens it with O_TRUNC, then writes:
// between the two the file is empty. An adopt that runs then must not
// take the empty file (it deleted every line, and the acknowledged values
// with them, until the next adopt); the completed write is adopted.
func TestAdoptWaitsForATruncatedFileToBeWritten(t *testing.T) {
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "one\ntwo\n")
	settle(t, r)
	f, err := os.OpenFile(filepath.Join(dir, "memories", "a.md"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Adopt(); !errors.Is(err, ErrNoChange) {
		t.Fatalf("adopt of a file being written: %v, want ErrNoChange", err)
	}
	if got := read(t, r, "a.md"); got != "one\ntwo\n" {
		t.Fatalf("HEAD's a.md = %q while the file was being written", got)
	}
	f.WriteString("one\ntwo\nthree by hand\n")
	f.Close()
	if _, err := r.Adopt(); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	if got := read(t, r, "a.md"); got != "one\ntwo\nthree by hand\n" {
		t.Fatalf("a.md = %q", got)
	}
	if log := subjects(t, dir); log != "memory: adopt changes made outside gitmem\nw a.md\nmemory: init\n" {
		t.Fatalf("history:\n%s", log)
	}
	gittest.Fsck(t, dir)
}

// A program opened a file (O_TRUNC) just before gitmem replaced it with
// an acknowledged change, and writes after: its write goes to the file
// gitmem took aside. gitmem waits for such a write, and when the program
// holds the file open longer than that, puts its file back in place, so
// that the write lands in the memory folder and the next adopt merges it
// with the acknowledged change. (The write was lost with the file taken
// aside.)
func TestWriteThroughADescriptorOpenWhileGitmemReplacesIsKept(t *testing.T) {
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "one\ntwo\nthree\n")
	settle(t, r)
	var f *os.File
	var once sync.Once
	gd.SetFault(func(step, p string) error {
		if step == gd.StepWorktree && strings.HasSuffix(p, "a.md") {
			once.Do(func() {
				var err error
				if f, err = os.OpenFile(filepath.Join(dir, "memories", "a.md"), os.O_WRONLY|os.O_TRUNC, 0); err != nil {
					t.Error(err)
				}
			})
		}
		return nil
	})
	defer gd.SetFault(nil)
	write(t, r, "t2", "a.md", "ONE\ntwo\nthree\n")
	settle(t, r) // the acknowledged change reaches the worktree, the descriptor still open
	gd.SetFault(nil)
	if f == nil {
		t.Fatal("the descriptor was not opened")
	}
	f.WriteString("one\ntwo\nthree\nfour by hand\n")
	f.Close()
	if _, err := r.Adopt(); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	want := "ONE\ntwo\nthree\nfour by hand\n"
	if got := read(t, r, "a.md"); got != want {
		t.Fatalf("a.md = %q, want %q\n%s", got, want, gittest.Git(t, dir, "log", "-p", "--format=%s"))
	}
	if got := readDisk(t, dir, "a.md"); got != want {
		t.Fatalf("worktree a.md = %q, want %q", got, want)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
	gittest.Fsck(t, dir)
}

// A program holds a memory file open for writing (exec 3>>a.md, an
// editor) while the model changes it, and still holds it when gitmem
// stops cleanly: gitmem kept the program's file in place (what it writes
// stays in the memory folder), to be merged with the acknowledged changes
// once the program is done — and at exit the program was not done. The
// next start took the file as it was, a hand edit, and rolled every
// acknowledged change to it back (repro-held.sh, repro-exec3.sh). The
// next start merges it with them from the version it was kept on: a
// program that wrote nothing changes nothing (and makes no commit), one
// that wrote keeps its lines beside the acknowledged change.
func TestFileHeldOpenAtACleanStopIsMergedAtTheNextStart(t *testing.T) {
	for _, wrote := range []string{"", "by hand\n"} {
		t.Run(fmt.Sprintf("wrote %q", wrote), func(t *testing.T) {
			dir := gittest.TempDir(t)
			r, _, err := Init(dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			write(t, r, "t0", "a.md", "value: 0\nsome\nnotes\n")
			settle(t, r)
			f, err := os.OpenFile(filepath.Join(dir, "memories", "a.md"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for i := 1; i <= 5; i++ {
				write(t, r, fmt.Sprintf("t%d", i), "a.md", fmt.Sprintf("value: %d\nsome\nnotes\n", i))
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			f.WriteString(wrote)
			f.Close()
			r, err = Open(dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			settle(t, r)
			want := "value: 5\nsome\nnotes\n" + wrote
			if got := read(t, r, "a.md"); got != want {
				t.Errorf("a.md in HEAD = %q, want %q", got, want)
			}
			if got := readDisk(t, dir, "a.md"); got != want {
				t.Errorf("a.md on disk = %q, want %q", got, want)
			}
			log := subjects(t, dir)
			if n := strings.Count(log, "adopt"); n != min(len(wrote), 1) {
				t.Errorf("%d adopt commit(s):\n%s", n, log)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status:\n%s", st)
			}
			if _, err := os.Stat(r.keptPath()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the record of the kept edit is left (%v)", err)
			}
		})
	}
}
