package gitmem

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// listAll is every folder and file a view holds, with its size (and a
// folder's count of files), depth first: what a listing shows.
func listAll(t *testing.T, v *View) []string {
	t.Helper()
	var out []string
	var walk func(p string)
	walk = func(p string) {
		kids, err := v.List(p)
		if err != nil {
			t.Fatalf("List(%q): %v", p, err)
		}
		for _, k := range kids {
			q := strings.TrimPrefix(p+"/"+k.Name, "/")
			info, err := v.Stat(q)
			if err != nil || info != k {
				t.Fatalf("Stat(%q) = %+v, %v; List gave %+v", q, info, err, k)
			}
			out = append(out, fmt.Sprintf("%s %d %d %v", q, k.Size, k.Files, k.Dir))
			if k.Dir {
				walk(q)
			}
		}
	}
	root, err := v.Stat("")
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, fmt.Sprintf("/ %d %d", root.Size, root.Files))
	walk("")
	return out
}

// cleanStore is a closed repository whose writer marked it clean: three
// files in nested folders, no longer racy when .git/index was written at
// Close. want is its memory as a writer's Snapshot shows it.
func cleanStore(t *testing.T) (dir string, want []string) {
	t.Helper()
	r, dir := newRepo(t)
	r.MarkWhenClean()
	write(t, r, "toolu_1", "a.md", "alpha\n")
	write(t, r, "toolu_2", "notes/b.md", "bravo bravo\n")
	write(t, r, "toolu_3", "notes/deep/c.md", "charlie\n")
	settle(t, r)
	time.Sleep(2 * gd.RacyWindow) // the files are no longer racy: Close's index vouches for them
	v, err := r.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want = listAll(t, v)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, want
}

// A repository its writer left clean is viewed from the mark and the
// worktree's folders, as a writer's open would show it, without opening
// it (no writer lock taken, nothing written); and again after a writer
// opened and closed it with nothing to write.
func TestCleanViewShowsTheMemoryAsCommitted(t *testing.T) {
	t.Parallel()
	dir, want := cleanStore(t)
	before := gittest.Git(t, dir, "status", "--porcelain", "--ignored")
	v, ok := CleanView(dir)
	if !ok {
		m, _ := os.ReadFile(cleanPath(filepath.Join(dir, ".git")))
		t.Fatalf("CleanView of a repository its writer left clean: false; mark:\n%s", m)
	}
	if got := listAll(t, v); !slices.Equal(got, want) {
		t.Fatalf("clean view:\n%s\nwant (the writer's):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if after := gittest.Git(t, dir, "status", "--porcelain", "--ignored"); after != before {
		t.Fatalf("CleanView changed the repository: %q -> %q", before, after)
	}
	r, err := Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := CleanView(dir); ok {
		t.Fatal("CleanView while a writer holds the repository: true")
	}
	r.MarkWhenClean()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	v, ok = CleanView(dir)
	if !ok {
		t.Fatal("CleanView after a writer that wrote nothing closed: false")
	}
	if got := listAll(t, v); !slices.Equal(got, want) {
		t.Fatalf("clean view after a reopen:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Only a writer told to (MarkWhenClean, a store's) writes the mark, and
// any writer's open removes it: a gitmem repository that is no store, or
// a store a writer not told so (the CLI) has opened, is opened as before.
func TestCleanViewNeedsAMarkingWriter(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "toolu_1", "a.md", "alpha\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := CleanView(dir); ok {
		t.Fatal("CleanView of a repository whose writer was not told to mark it: true")
	}
	dir, _ = cleanStore(t)
	r, err := Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := CleanView(dir); ok {
		t.Fatal("CleanView after a writer that does not mark opened it: true")
	}
}

// Whatever changed since the mark was written, the mark is not trusted:
// a hand edit (which a writer's start commits before a view shows it), a
// change acknowledged by a writer that knows nothing of the mark (its log
// file grew), git moving the branch or HEAD. Each of these failed with
// CleanView looking at the mark alone.
func TestCleanViewRefusesWhatChangedSinceTheMark(t *testing.T) {
	t.Parallel()
	mem := func(dir, p string) string { return filepath.Join(dir, "memories", filepath.FromSlash(p)) }
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir string)
	}{
		{"a hand edit of the same size", func(t *testing.T, dir string) {
			if err := os.WriteFile(mem(dir, "a.md"), []byte("ALPHA\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"a file made by hand", func(t *testing.T, dir string) {
			if err := os.WriteFile(mem(dir, "notes/new.md"), []byte("new\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"a hidden file made by hand", func(t *testing.T, dir string) {
			if err := os.WriteFile(mem(dir, ".hidden"), []byte("new\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"a file removed by hand", func(t *testing.T, dir string) {
			if err := os.Remove(mem(dir, "notes/deep/c.md")); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(mem(dir, "notes/deep")); err != nil {
				t.Fatal(err)
			}
		}},
		{"an empty folder", func(t *testing.T, dir string) {
			if err := os.Mkdir(mem(dir, "empty"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"a symlink", func(t *testing.T, dir string) {
			if err := os.Symlink("a.md", mem(dir, "link.md")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a log file grown by a writer that does not know the mark", func(t *testing.T, dir string) {
			f, err := os.OpenFile(filepath.Join(dir, ".git", "gitmem", "wal2"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write([]byte{0}); err != nil {
				t.Fatal(err)
			}
		}},
		{"a commit made with git", func(t *testing.T, dir string) {
			gittest.Git(t, dir, "commit", "--allow-empty", "-q", "-m", "by hand")
		}},
		{"HEAD moved to another branch", func(t *testing.T, dir string) {
			gittest.Git(t, dir, "branch", "other")
			gittest.Git(t, dir, "symbolic-ref", "HEAD", "refs/heads/other")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, _ := cleanStore(t)
			tc.change(t, dir)
			if _, ok := CleanView(dir); ok {
				t.Fatalf("CleanView after %s: true", tc.name)
			}
		})
	}
}

// A writer that lets the lock go while the process keeps the repository
// open (release, after a quiet spell) marks it clean too, once the files
// it has just written are past the racy window (it waits for that once):
// a store's writer is let go that way far more often than closed. And the
// next change removes the mark before it writes anything.
func TestAReleaseMarksTheRepositoryClean(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	r.MarkWhenClean()
	write(t, r, "toolu_1", "a.md", "alpha\n")
	settle(t, r) // a.md was just written: racy when the release below writes its mark
	// The release keeps the lock while a.md is racy (once for a commit,
	// TestAReleaseKeepsTheLockForARacyFile), and lets it go with the mark
	// after the racy window, as the maintainer's next poll does.
	released := false
	for i := 0; i < 2 && !released; i++ {
		if i > 0 {
			time.Sleep(gd.RacyWindow)
		}
		tw, err := r.beginWrite(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		released = r.release(tw)
		tw.end()
	}
	if !released {
		t.Fatal("the release did not let the lock go")
	}
	v, ok := CleanView(dir)
	if !ok {
		t.Fatal("CleanView after a release with nothing left to write: false")
	}
	if info, err := v.Stat("a.md"); err != nil || info.Size != int64(len("alpha\n")) {
		t.Fatalf("a.md in the clean view: %+v, %v", info, err)
	}
	write(t, r, "toolu_2", "b.md", "bravo\n")
	if _, err := os.Stat(cleanPath(filepath.Join(dir, ".git"))); !os.IsNotExist(err) {
		t.Fatalf("the mark after a change: %v", err)
	}
}

// TestAReleaseKeepsTheLockForARacyFile: a release that finds a memory file
// it cannot vouch for yet (changed within the racy window: just
// materialised) keeps the lock, the turn given back, rather than waiting
// for the window under the turn (which held up the first call after a
// store's pause): the maintainer's next polls let it go, after twice the
// window for that commit whatever they find. Here a.md's change time is
// in the future, racy for as long as the test runs: the mark leaves it
// out, so none is written.
func TestAReleaseKeepsTheLockForARacyFile(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	r.MarkWhenClean()
	write(t, r, "toolu_1", "b.md", "bravo\n")
	a := filepath.Join(dir, "memories", "a.md")
	if err := os.WriteFile(a, []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(a, later, later); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Adopt(context.Background()); err != nil { // a hand-made a.md, committed: .git/index cannot vouch for it
		t.Fatal(err)
	}
	settle(t, r)
	release := func() bool {
		tw, err := r.beginWrite(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		defer tw.end()
		return r.release(tw)
	}
	if release() {
		t.Fatal("the first release let the lock go with a racy memory file")
	}
	if !r.lease.Held() {
		t.Fatal("the lock is not held after a release that kept it")
	}
	released := false
	for i := 0; i < 4 && !released; i++ {
		time.Sleep(gd.RacyWindow)
		released = release()
	}
	if !released {
		t.Fatal("releases for the same commit kept the lock past twice the racy window")
	}
	if _, ok := CleanView(dir); ok {
		t.Fatal("CleanView true with a.md racy at the mark")
	}
	if _, err := os.Stat(cleanPath(filepath.Join(dir, ".git"))); !os.IsNotExist(err) {
		t.Fatalf("a mark written without a.md: %v", err)
	}
}
