//go:build linux

package gitmem

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// The worktree's one-step lookups (openat2) answer as os.Root does,
// whatever the path: plain, through a symbolic link inside or out of the
// folder, missing, through a file, leaving the folder. The plain ones take
// the fast path.
func TestBeneathAnswersAsRoot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for p, text := range map[string]string{"top.md": "top\n", "memories/a.md": "a\n", "memories/d/b.md": "b, nested\n"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"memories/link.md": "a.md", "memories/ld": "d", "memories/out": "/etc", "memories/up": ".."} {
		if err := os.Symlink(to, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	w := openWorktree(t, dir)
	root := w.root
	mem, err := root.OpenRoot("memories")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if _, _, ok := w.fastLstat("memories/a.md", nil); !ok {
		t.Skip("openat2 is not available here: os.Root does every lookup")
	}
	fast := map[string]bool{"top.md": true, "memories": true, "memories/a.md": true, "memories/d": true, "memories/d/b.md": true,
		"memories/link.md": true, "memories/ld": true, "memories/out": true, "memories/missing.md": true, "memories/../top.md": true}
	for _, p := range []string{"top.md", "memories", "memories/a.md", "memories/d", "memories/d/b.md", "memories/link.md",
		"memories/ld", "memories/ld/b.md", "memories/out", "memories/out/passwd", "memories/up/top.md", "memories/missing.md",
		"memories/nodir/x.md", "memories/a.md/x", "../escape", "memories/../top.md", "memories/d/"} {
		fi, err := w.lstat(p)
		rfi, rerr := root.Lstat(p)
		switch {
		case (err == nil) != (rerr == nil) || errors.Is(err, fs.ErrNotExist) != errors.Is(rerr, fs.ErrNotExist):
			t.Errorf("lstat %s: %v, os.Root: %v", p, err, rerr)
		case err == nil:
			st, rst := fi.Sys().(*syscall.Stat_t), rfi.Sys().(*syscall.Stat_t)
			if fi.Name() != rfi.Name() || fi.Size() != rfi.Size() || fi.Mode() != rfi.Mode() || !fi.ModTime().Equal(rfi.ModTime()) ||
				fi.IsDir() != rfi.IsDir() || *st != *rst || !sameFile(fi, rfi) {
				t.Errorf("lstat %s: %s %d %v %v, os.Root: %s %d %v %v", p, fi.Name(), fi.Size(), fi.Mode(), fi.ModTime(),
					rfi.Name(), rfi.Size(), rfi.Mode(), rfi.ModTime())
			}
		}
		if _, _, ok := w.fastLstat(p, nil); ok != fast[p] {
			t.Errorf("lstat %s: fast path taken %v, want %v", p, ok, fast[p])
		}
		// Only a path resolved in one step vouches for its folders: never
		// one through a link, a file or a missing folder.
		if _, _, folders := w.lstatFolders(p); folders != fast[p] {
			t.Errorf("lstat %s: folders known real %v, want %v", p, folders, fast[p])
		}
		// A memory file is read as an os.Root of memories/ reads it: no
		// link out of the folder (memories/up/top.md is not read).
		data, err := w.readFile(p)
		rdata, rerr := root.ReadFile(p)
		if rel, ok := strings.CutPrefix(path.Clean(p), "memories/"); ok {
			rdata, rerr = mem.ReadFile(rel)
		}
		if (err == nil) != (rerr == nil) || !bytes.Equal(data, rdata) {
			t.Errorf("read %s: %q, %v; os.Root: %q, %v", p, data, err, rdata, rerr)
		}
	}
}

// The fast path's folder is the one os.Root holds: a folder put at the
// same name after the root was opened is not looked into.
func TestBeneathIsTheRootsFolder(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "repo")
	mustWrite := func(text string) {
		if err := os.MkdirAll(filepath.Join(dir, "memories"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "memories", "a.md"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite("the root's\n")
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	mustWrite("another folder's\n")
	w := newWorktree(root, dir, filepath.Join(dir, ".git"), nil)
	defer w.close()
	if data, err := w.readFile("memories/a.md"); err != nil || string(data) != "the root's\n" {
		t.Fatalf("read %q, %v; want the root's file", data, err)
	}
}

// Lookups running while the worktree closes neither race the close (go
// test -race) nor use its descriptor after it: they end with os.Root's
// answer for a closed root.
func TestBeneathWhileClosing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "memories", "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "memories", "d", "b.md"), []byte("b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorktree(root, dir, filepath.Join(dir, ".git"), nil)
	started, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			if i == 10 {
				close(started)
			}
			if _, err := w.lstat("memories/d/b.md"); err != nil {
				if !errors.Is(err, os.ErrClosed) {
					t.Errorf("lstat while closing: %v, want os.ErrClosed", err)
				}
				return
			}
		}
	}()
	<-started
	w.close()
	<-done
}

// BenchmarkWorktreeLookup compares the worktree's lstat and readFile of
// a memory file with os.Root's, which walks the folders one at a time.
//
//	go test ./gitmem/ -run '^$' -bench WorktreeLookup -count 6
func BenchmarkWorktreeLookup(b *testing.B) {
	dir := b.TempDir()
	const p = "memories/d012/f01234.md"
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, p), []byte("# a memory\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	w := openWorktree(b, dir)
	root := w.root
	for _, c := range []struct {
		name string
		fn   func() error
	}{
		{"lstat/os.Root", func() error { _, err := root.Lstat(p); return err }},
		{"lstat/worktree", func() error { _, err := w.lstat(p); return err }},
		{"read/os.Root", func() error { _, err := root.ReadFile(p); return err }},
		{"read/worktree", func() error { _, err := w.readFile(p); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				if err := c.fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A named pipe put where a memory file was never holds a read up (a
// transaction's, holding the writer lock, would hold every call): it is
// not the blob, and it cannot be read as a file.
func TestWorktreeReadsNeverWaitOnAPipe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, memDir), 0o700); err != nil {
		t.Fatal(err)
	}
	p := memDir + "/pipe.md"
	if err := syscall.Mkfifo(filepath.Join(dir, p), 0o600); err != nil {
		t.Skipf("cannot make a named pipe here: %v", err)
	}
	w := openWorktree(t, dir)
	done := make(chan string)
	go func() {
		_, ok := w.readBlob(p, &node{mode: filemode.Regular, size: 6})
		_, err := w.readFile(p)
		done <- fmt.Sprintf("readBlob ok %v, readFile %v", ok, err)
	}()
	select {
	case got := <-done:
		if got != "readBlob ok false, readFile read memories/pipe.md: not a regular file" {
			t.Fatal(got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read waits on a named pipe")
	}
}

// A socket at a memory file's path is no file either (opening it fails,
// where a pipe opens): the stat cache's check says "not the blob" rather
// than failing the hand-edit check of the call.
func TestASocketIsNoFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, memDir), 0o700); err != nil {
		t.Fatal(err)
	}
	p := memDir + "/sock.md"
	ln, err := net.Listen("unix", filepath.Join(dir, p))
	if err != nil {
		t.Skipf("cannot make a socket here: %v", err)
	}
	defer ln.Close()
	w := openWorktree(t, dir)
	if _, err := w.readFile(p); !errors.Is(err, errNotRegular) {
		t.Fatalf("readFile of a socket: %v", err)
	}
	if _, ok := w.readBlob(p, &node{mode: filemode.Regular, size: 0}); ok {
		t.Fatal("a socket read as a blob")
	}
}

// A folder an operator replaced by a link (here to another memory folder)
// is no folder on a path's way, though the kernel resolves through it in
// os.Root's lookups: the hand-edit check sees the file under it deleted,
// and the next write there puts a real folder back, leaving the link's
// target as it was.
func TestALinkedFolderIsNoFolder(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "real/a.md", "a\n")
	write(t, r, "t2", "d/b.md", "b\n")
	settle(t, r)
	mem := filepath.Join(dir, "memories")
	if err := os.RemoveAll(filepath.Join(mem, "d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(mem, "d")); err != nil {
		t.Fatal(err)
	}
	if _, _, folders := r.mirror.wt.lstatFolders("memories/d/a.md"); folders {
		t.Fatal("a path through a link was taken for one through real folders")
	}
	write(t, r, "t3", "d/b.md", "b2\n")
	settle(t, r)
	log := gittest.Git(t, dir, "log", "--format=%s", "--name-status", "-2")
	if !strings.Contains(log, "memory: adopt changes made outside gitmem") || !strings.Contains(log, "D\tmemories/d/b.md") {
		t.Errorf("the file under the link was not adopted as deleted:\n%s", log)
	}
	if fi, err := os.Lstat(filepath.Join(mem, "d")); err != nil || !fi.IsDir() {
		t.Fatalf("memories/d is no real folder again: %v, %v", fi, err)
	}
	if got, _ := os.ReadFile(filepath.Join(mem, "d", "b.md")); string(got) != "b2\n" {
		t.Errorf("memories/d/b.md holds %q", got)
	}
	if ents, _ := os.ReadDir(filepath.Join(mem, "real")); len(ents) != 1 || ents[0].Name() != "a.md" {
		t.Errorf("the link's target was written to: %v", ents)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("git status:\n%s", st)
	}
}

// A check for hand edits of many files (a merge's, before and while it
// commits) opens each folder once, not once per file: the files of a
// folder come one after the other, an fstatat each on the folder held
// open. A file edited by hand among them is found all the same.
func TestHandEditCheckOpensAFolderOnce(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	if _, _, ok := r.mirror.wt.fastLstat("memories", nil); !ok {
		t.Skip("openat2 is not available here: os.Root does every lookup")
	}
	var rels []string
	for i := range 40 {
		p := fmt.Sprintf("d%d/f%02d.md", i/20, i)
		write(t, r, fmt.Sprint("t", i), p, fmt.Sprintf("file %d\n", i))
		rels = append(rels, p)
	}
	settle(t, r)
	time.Sleep(2 * gd.RacyWindow) // past the racy window, the stat cache vouches for them, once they are read
	if _, err := r.mirror.driftedAt(r.snapshotTree(), repoPaths(rels)); err != nil {
		t.Fatal(err)
	}
	check := func() []string {
		t.Helper()
		was, read := r.mirror.wt.lookups.Load(), r.mirror.wt.reads.Load()
		drift, err := r.mirror.driftedAt(r.snapshotTree(), repoPaths(rels))
		if err != nil {
			t.Fatal(err)
		}
		if n, reads := r.mirror.wt.lookups.Load()-was, r.mirror.wt.reads.Load()-read; n-reads != 2 {
			t.Errorf("the check of %d files in 2 folders resolved %d paths besides the %d files it read, want 2 (a folder each)", len(rels), n-reads, reads)
		}
		return drift
	}
	if drift := check(); len(drift) != 0 {
		t.Errorf("found edited by hand: %v", drift)
	}
	if err := os.WriteFile(filepath.Join(dir, "memories", "d1", "f33.md"), []byte("edited by hand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if drift := check(); fmt.Sprint(drift) != "[d1/f33.md]" {
		t.Errorf("found edited by hand: %v, want d1/f33.md", drift)
	}
}
