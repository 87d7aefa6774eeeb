package gittest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The checks find every repository (worktree, bare, one in a worktree),
// pass clean ones, and fail on a broken object, on a missing one and on
// a stray file among the objects (git exits 0 for that one).
func TestFsckTree(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	work, bare, inner := filepath.Join(root, "work"), filepath.Join(root, "deep", "shared.git"), filepath.Join(root, "work", "sub")
	Git(t, root, "init", "-q", work)
	Git(t, root, "init", "-q", "--bare", bare)
	Git(t, root, "init", "-q", inner)
	os.WriteFile(filepath.Join(work, "a.md"), []byte("a\n"), 0o600)
	Git(t, work, "add", "a.md")
	Git(t, work, "commit", "-q", "-m", "a")
	Git(t, work, "push", "-q", bare, "HEAD:refs/heads/main")
	if got, err := repositories(root); err != nil || !slices.Equal(got, []string{bare, work, inner}) {
		t.Fatalf("repositories: %q, %v", got, err)
	}
	if got, err := repositories(filepath.Join(root, "gone")); err != nil || len(got) != 0 {
		t.Fatalf("repositories of a folder that is gone: %q, %v", got, err)
	}
	if err := FsckTree(t.TempDir(), root); err != nil {
		t.Fatal(err)
	}
	if author := Git(t, work, "log", "-1", "--format=%an <%ae>"); author != "gittest <gittest@example.com>\n" {
		t.Errorf("author %q", author)
	}

	// A stray file among the objects: git says "bad sha1 file", exits 0.
	os.MkdirAll(filepath.Join(inner, ".git", "objects", "ab"), 0o755)
	os.WriteFile(filepath.Join(inner, ".git", "objects", "ab", "junk"), []byte("x"), 0o600)
	// The bare repository's objects gone, its branch still there.
	Git(t, bare, "repack", "-q", "-a", "-d")
	packs, _ := filepath.Glob(filepath.Join(bare, "objects", "pack", "*"))
	for _, p := range packs {
		os.Remove(p)
	}
	err := FsckTree(t.TempDir(), root)
	if err == nil {
		t.Fatal("FsckTree passes a broken repository")
	}
	for _, want := range []string{"in " + bare + ": exit status", "invalid sha1 pointer", "in " + inner + ": git exited 0", "bad sha1 file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the failure does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "in "+work+":") {
		t.Errorf("the clean worktree fails:\n%v", err)
	}

	// Damaged leaves them out.
	s := stateOf(t)
	Damaged(t, bare, "its objects are deleted")
	Damaged(t, inner, "a stray file")
	if n, err := fsckTree(s.home, root, s.damaged); n != 1 || err != nil {
		t.Fatalf("%d checked: %v", n, err)
	}
}

// CatFiles reads each object named, in order, as git cat-file does: one
// holding newlines and one empty included.
func TestCatFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	Git(t, dir, "init", "-q")
	a := strings.TrimSpace(GitIn(t, dir, "two\nlines\n", "hash-object", "-w", "--stdin"))
	empty := strings.TrimSpace(GitIn(t, dir, "", "hash-object", "-w", "--stdin"))
	got := CatFiles(t, dir, empty, a, a)
	want := []Object{{"blob", []byte{}}, {"blob", []byte("two\nlines\n")}, {"blob", []byte("two\nlines\n")}}
	if len(got) != len(want) {
		t.Fatalf("%d objects, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Type != want[i].Type || string(got[i].Data) != string(want[i].Data) {
			t.Errorf("object %d: %s %q, want %s %q", i, got[i].Type, got[i].Data, want[i].Type, want[i].Data)
		}
	}
}

// A commit-graph and a multi-pack-index are checked when the repository
// has them (git fsck starts git commit-graph verify and git
// multi-pack-index verify only then): a damaged one fails.
func TestFsckChecksCommitGraphAndMultiPackIndex(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"info/commit-graph", "pack/multi-pack-index"} {
		dir := t.TempDir()
		Git(t, dir, "init", "-q")
		os.WriteFile(filepath.Join(dir, "a.md"), []byte("a\n"), 0o600)
		Git(t, dir, "add", "a.md")
		Git(t, dir, "commit", "-q", "-m", "a")
		Git(t, dir, "repack", "-q", "-a", "-d")
		Git(t, dir, "commit-graph", "write", "--reachable")
		Git(t, dir, "multi-pack-index", "write")
		if err := FsckTree(t.TempDir(), dir); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, ".git", "objects", file)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-1] ^= 0xff // the checksum itself: no reader stops before it on a bad offset
		os.Chmod(p, 0o644)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := FsckTree(t.TempDir(), dir); err == nil || !strings.Contains(err.Error(), "incorrect checksum") {
			t.Errorf("a damaged %s: %v", file, err)
		}
	}
}
