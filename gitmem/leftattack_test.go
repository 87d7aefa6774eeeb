package gitmem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// leftFixture is a store at --max-files 1 holding a.md, stopped, with
// .git/gitmem/left's path.
func leftFixture(t *testing.T) (Options, string, string) {
	t.Helper()
	opt := testOptions(t)
	opt.MaxFiles = 1
	r, dir := newRepoOpts(t, opt)
	write(t, r, "t1", "a.md", "A\n")
	settle(t, r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return opt, dir, filepath.Join(dir, ".git", "gitmem", "left")
}

// openWithin opens dir, failing the test if the start takes longer than
// a minute (it waited on what stands at .git/gitmem/left).
func openWithin(t *testing.T, dir string, opt Options) *Repo {
	t.Helper()
	type res struct {
		r   *Repo
		err error
	}
	ch := make(chan res, 1)
	go func() {
		r, err := Open(context.Background(), dir, opt)
		ch <- res{r, err}
	}()
	select {
	case x := <-ch:
		if x.err != nil {
			t.Fatal(x.err)
		}
		t.Cleanup(func() { x.r.Close() })
		return x.r
	case <-time.After(time.Minute):
		t.Fatal("the start hung")
	}
	return nil
}

// An operator's or a hostile process's .git/gitmem/left, malformed (a
// path out of memories/, an absolute one, one into .git, control
// characters, a carriage return, binary, a line over the longest path,
// no final newline): the start takes none of them, the store keeps
// working, nothing is committed but the model's, and the next adopt
// writes the file again with the one file left by hand.
func TestAMalformedListOfFilesLeftIsIgnored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt, dir, list := leftFixture(t)
	bad := "../../etc/passwd\n/abs.md\n/memories/x.md\n.git/config\n../.git/HEAD\nx\x01y.md\nz.md\r\n\x00\xff\xfe\n" +
		strings.Repeat("q", 70000) + "\n\n\nmemories/../../o.md\nw.md"
	if err := os.WriteFile(list, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	r := openWithin(t, dir, opt)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"../../etc/passwd", "/abs.md", ".git/config", "x\x01y.md", "z.md\r"} {
		if r.mirror.leftByAdopt(rel) {
			t.Errorf("%q taken as left", rel)
		}
	}
	if _, err := os.Lstat(list); !errors.Is(err, fs.ErrNotExist) {
		b, _ := os.ReadFile(list)
		t.Errorf(".git/gitmem/left after the start: %q %v, want none (no file is left)", b, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "memories", "h.md"), []byte("HAND\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
		t.Fatalf("adopt: %v, want ErrNoChange (no room)", err)
	}
	if b, err := os.ReadFile(list); err != nil || string(b) != "h.md\n" {
		t.Errorf(".git/gitmem/left = %q %v, want h.md", b, err)
	}
	if _, err := r.Update(ctx, Meta{Subject: "rename"}, func(tx *Tx) error { return tx.Rename("a.md", "b.md") }); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	if got := strings.Fields(gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD")); len(got) != 1 || got[0] != "memories/b.md" {
		t.Errorf("HEAD holds %v, want memories/b.md", got)
	}
}

// A symbolic link at .git/gitmem/left, to a file outside the repository:
// the start reads it (a list like any other), and the next save replaces
// the link, never writing through it.
func TestASymlinkAtTheListOfFilesLeftIsNotWrittenThrough(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt, dir, list := leftFixture(t)
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, list); err != nil {
		t.Fatal(err)
	}
	r := openWithin(t, dir, opt)
	if err := os.WriteFile(filepath.Join(dir, "memories", "h.md"), []byte("HAND\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
		t.Fatalf("adopt: %v, want ErrNoChange (no room)", err)
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "keep me\n" {
		t.Errorf("the link's target = %q %v, want it untouched", b, err)
	}
	if fi, err := os.Lstat(list); err != nil || !fi.Mode().IsRegular() {
		t.Errorf(".git/gitmem/left: %v %v, want a regular file", fi, err)
	}
	if b, err := os.ReadFile(list); err != nil || string(b) != "h.md\n" {
		t.Errorf(".git/gitmem/left = %q %v, want h.md", b, err)
	}
}

// A FIFO, a folder, at .git/gitmem/left: the start does not wait on the
// FIFO, and the store keeps working with the list unsaved (a folder that
// holds a file cannot be replaced): the calls succeed, the failure is
// logged once, without the host's path to the repository.
func TestAFolderOrFIFOAtTheListOfFilesLeft(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"fifo", "folder"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			opt, dir, list := leftFixture(t)
			logs := captureLogs(t, &opt)
			switch kind {
			case "fifo":
				mkfifo(t, list)
			case "folder":
				if err := os.MkdirAll(filepath.Join(list, "x"), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			r := openWithin(t, dir, opt)
			for i := range 3 {
				if err := os.WriteFile(filepath.Join(dir, "memories", fmt.Sprintf("h%d.md", i)), []byte("HAND\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
					t.Fatalf("adopt: %v, want ErrNoChange (no room)", err)
				}
			}
			if _, err := r.Update(ctx, Meta{Subject: "rename"}, func(tx *Tx) error { return tx.Rename("a.md", "b.md") }); err != nil {
				t.Fatal(err)
			}
			settle(t, r)
			n := 0
			for _, l := range logs() {
				if strings.Contains(l, "could not save the files made by hand") {
					n++
					if strings.Contains(l, dir) {
						t.Errorf("the log names the host's path: %s", l)
					}
				}
			}
			if kind == "folder" && n != 1 {
				t.Errorf("%d lines say the list could not be saved, want 1", n)
			}
			if got := strings.Fields(gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD")); len(got) != 1 || got[0] != "memories/b.md" {
				t.Errorf("HEAD holds %v, want memories/b.md", got)
			}
		})
	}
}

// A file made by hand whose name holds a newline, the memory full: no
// memory path holds one, so the list must not name it (a line each side
// of the newline would name two other files).
func TestAFileMadeByHandWithANewlineInItsName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt, dir, list := leftFixture(t)
	r := openWithin(t, dir, opt)
	if err := os.WriteFile(filepath.Join(dir, "memories", "x.md\nh.md"), []byte("HAND\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Adopt(ctx); err != nil && !errors.Is(err, ErrNoChange) {
		t.Fatalf("adopt: %v", err)
	}
	if b, err := os.ReadFile(list); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if l == "x.md" || l == "h.md" {
				t.Errorf(".git/gitmem/left = %q names %q", b, l)
			}
		}
	}
	if got := strings.Fields(gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD")); len(got) != 1 || got[0] != "memories/a.md" {
		t.Errorf("HEAD holds %v, want memories/a.md", got)
	}
}

// A list of 100,000 files left, none of them on disk any more (removed
// by hand while gitmem was stopped): the start reads it and removes it.
// The time is logged, not asserted.
func TestAStartWithALongListOfFilesLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt, dir, list := leftFixture(t)
	var b strings.Builder
	for i := range 100000 {
		fmt.Fprintf(&b, "d%03d/h%05d.md\n", i%1000, i)
	}
	if err := os.WriteFile(list, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := openWithin(t, dir, opt)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("start and first look: %v", time.Since(start))
	if _, err := os.Lstat(list); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf(".git/gitmem/left after the start: %v, want none", err)
	}
}

// A file left renamed by hand while gitmem was stopped, another moved
// into a folder: the start names them where they are now, and the list
// no longer names their old places.
func TestFilesLeftRenamedWhileStopped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt, dir, list := leftFixture(t)
	r := openWithin(t, dir, opt)
	for _, rel := range []string{"h.md", "k.md"} {
		if err := os.WriteFile(filepath.Join(dir, "memories", rel), []byte("HAND "+rel+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
		t.Fatalf("adopt: %v, want ErrNoChange (no room)", err)
	}
	if b, err := os.ReadFile(list); err != nil || string(b) != "h.md\nk.md\n" {
		t.Fatalf(".git/gitmem/left = %q %v, want h.md and k.md", b, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	m := filepath.Join(dir, "memories")
	if err := os.Rename(filepath.Join(m, "h.md"), filepath.Join(m, "g.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(m, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(m, "k.md"), filepath.Join(m, "d", "k.md")); err != nil {
		t.Fatal(err)
	}
	r = openWithin(t, dir, opt)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(list); err != nil || string(b) != "d/k.md\ng.md\n" {
		t.Errorf(".git/gitmem/left = %q %v, want d/k.md and g.md", b, err)
	}
	if got := strings.Fields(gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD")); len(got) != 1 || got[0] != "memories/a.md" {
		t.Errorf("HEAD holds %v, want memories/a.md", got)
	}
}

// 100,000 files made by hand left for want of room, and the start after
// them: its time is logged (GITMEM_A8_BIG=1 only: it makes 100,000 files).
func TestAStartWithManyFilesLeft(t *testing.T) {
	if os.Getenv("GITMEM_A8_BIG") == "" {
		t.Skip("GITMEM_A8_BIG unset")
	}
	ctx := context.Background()
	opt, dir, list := leftFixture(t)
	opt.Logf = func(string, ...any) {}
	opt.Errorf = opt.Logf
	for i := range 100000 {
		p := filepath.Join(dir, "memories", fmt.Sprintf("d%03d", i%1000), fmt.Sprintf("h%05d.md", i))
		if i < 1000 {
			if err := os.Mkdir(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(p, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	r := openWithin(t, dir, opt)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("first start, 100,000 files made by hand: %v", time.Since(start))
	if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
		t.Fatalf("adopt: %v, want ErrNoChange (no room)", err)
	}
	fi, err := os.Stat(list)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf(".git/gitmem/left: %d bytes", fi.Size())
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		start = time.Now()
		r = openWithin(t, dir, opt)
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("start with the list: %v", time.Since(start))
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		os.Rename(list, list+".off")
		start = time.Now()
		r = openWithin(t, dir, opt)
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("start without the list: %v", time.Since(start))
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		os.Rename(list, list+".off") // the start wrote it again
		os.Rename(list+".off", list)
	}
}

// A huge .git/gitmem/left (64 MiB, put there by a hostile process or a
// slip): the start does not read it whole (it read it, then copied it
// into a string, and split it into a slice of lines: gigabytes of memory
// for a list that 100,000 files left make 1.5 MB), and the next adopt
// writes it again. Not parallel: it counts the bytes the process
// allocates during the start.
func TestAHugeListOfFilesLeftIsNotReadWhole(t *testing.T) {
	ctx := context.Background()
	opt, dir, list := leftFixture(t)
	f, err := os.Create(list)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("h.md\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(dir, "memories", "h.md"), []byte("HAND\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := openWithin(t, dir, opt)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 32<<20 {
		t.Errorf("the start allocated %d MiB, want the list not read whole", n>>20)
	}
	if b, err := os.ReadFile(list); err != nil || string(b) != "h.md\n" {
		t.Errorf(".git/gitmem/left = %.40q (%d bytes) %v, want h.md", b, len(b), err)
	}
}

// A rename onto a folder of files made by hand, the memory full, whose
// first file in path order is a named pipe (no file made by hand, never
// opened): the look at one of them goes on to the next, a file made by
// hand, and the rename is refused; a folder with the pipe alone is no
// folder of files made by hand, and the rename replaces it, unhung.
func TestARefusedCallOntoAFolderLooksPastAPipe(t *testing.T) {
	t.Parallel()
	for _, hand := range []bool{true, false} {
		t.Run(fmt.Sprint("hand file ", hand), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			opt := testOptions(t)
			opt.MaxFiles = 2
			r, dir := newRepoOpts(t, opt)
			write(t, r, "t1", "a.md", "A\n")
			write(t, r, "t2", "c.md", "C\n")
			settle(t, r)
			x := filepath.Join(dir, "memories", "x")
			if err := os.Mkdir(x, 0o700); err != nil {
				t.Fatal(err)
			}
			mkfifo(t, filepath.Join(x, "a.md"))
			if hand {
				if err := os.WriteFile(filepath.Join(x, "b.md"), []byte("HAND\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := r.Adopt(ctx); err != nil && !errors.Is(err, ErrNoChange) {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := r.Update(ctx, Meta{Subject: "rename"}, func(tx *Tx) error { return tx.Rename("c.md", "x") })
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("the rename hung")
			}
			settle(t, r)
			got := files(t, r)
			if hand {
				if !errors.Is(err, ErrExist) || got["c.md"] != "C\n" {
					t.Errorf("rename onto x: %v, the memory %v; want ErrExist, c.md kept", err, got)
				}
				if b, err := os.ReadFile(filepath.Join(x, "b.md")); err != nil || string(b) != "HAND\n" {
					t.Errorf("x/b.md = %q %v, want the hand file kept", b, err)
				}
			} else if err != nil || got["x"] != "C\n" {
				t.Errorf("rename onto x: %v, the memory %v; want x renamed from c.md", err, got)
			}
		})
	}
}

// gitmem killed right after the model renames a folder, and the list of
// files left rewritten by a hostile process before the restart to name
// the model's own files there, at both places: the replay moves the
// model's files as acknowledged (a version gitmem wrote is no file left),
// and leaves only the file made by hand where it is.
func TestAListNamingTheModelsFilesAtAReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt := testOptions(t)
	opt.MaxFiles = 3
	r, dir := newRepoOpts(t, opt)
	write(t, r, "t1", "d/a.md", "A\n")
	write(t, r, "t2", "d/b.md", "B\n")
	write(t, r, "t3", "c.md", "C\n")
	settle(t, r)
	if err := os.WriteFile(filepath.Join(dir, "memories", "d", "h.md"), []byte("HAND\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
		t.Fatalf("adopt: %v, want ErrNoChange (no room)", err)
	}
	stop := failAt(t, r, gd.StepPack, "")
	mv(t, r, "mv-d", "d", "e")
	crash(r)
	stop()
	list := filepath.Join(dir, ".git", "gitmem", "left")
	if err := os.WriteFile(list, []byte("c.md\nd/a.md\nd/b.md\nd/h.md\ne/a.md\ne/b.md\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = openWithin(t, dir, opt)
	settle(t, r)
	got := files(t, r)
	if len(got) != 3 || got["e/a.md"] != "A\n" || got["e/b.md"] != "B\n" || got["c.md"] != "C\n" {
		t.Errorf("the memory holds %v, want c.md, e/a.md, e/b.md as the model left them", got)
	}
	for _, rel := range []string{"d/a.md", "d/b.md"} {
		if _, err := os.Lstat(filepath.Join(dir, "memories", filepath.FromSlash(rel))); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("memories/%s on disk after the replay: %v", rel, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "memories", "d", "h.md")); err != nil || string(b) != "HAND\n" {
		t.Errorf("d/h.md = %q %v, want the hand file where it was made", b, err)
	}
	if b, err := os.ReadFile(list); err != nil || string(b) != "d/h.md\n" {
		t.Errorf(".git/gitmem/left = %q %v, want d/h.md", b, err)
	}
	del(t, r, "t5", "c.md")
	if _, err := r.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	if got := files(t, r); got["d/h.md"] != "HAND\n" || len(got) != 3 {
		t.Errorf("the memory holds %v, want d/h.md taken where it was made", got)
	}
	if out := gittest.Git(t, dir, "log", "-p", "HEAD"); strings.Contains(out, "<<<<<<<") {
		t.Errorf("a commit holds conflict markers:\n%s", out)
	}
}

// A named pipe put at .git/gitmem/kept (the hand edits kept for the next
// start, read at every start): the start does not wait on it, as it does
// not on one at .git/gitmem/left.
func TestAPipeAtTheKeptHandEditsDoesNotHangAStart(t *testing.T) {
	t.Parallel()
	opt, dir, _ := leftFixture(t)
	mkfifo(t, filepath.Join(dir, ".git", "gitmem", "kept"))
	r := openWithin(t, dir, opt)
	settle(t, r)
	write(t, r, "t2", "a.md", "A2\n")
}
