package gitmem

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A .git/config that does not parse (neither gitmem nor git can read it)
// makes the repository damaged: Open refuses it, for reading and for
// writing, with a *DamagedError that names the file and says how to
// repair it, and writes nothing (the file is left as it was: before,
// Open appended gitmem's mark to it each time); fsck reports it with
// that repair, and fsck --repair neither claims it nor opens the
// repository. Before, Open went on (a server wrote commits into it),
// `gitmem show HEAD` failed with "open the repository failed: 1:2:
// expected section name", and fsck found nothing.
func TestAConfigThatDoesNotParseIsDamage(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "one\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, ".git", "config")
	const garbage = "[[[garbage\n"
	if err := os.WriteFile(config, []byte(garbage), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Damaged(t, dir, "its .git/config does not parse")
	refusedAsDamaged(t, dir, ".git/config", "[gitmem]")
	for _, repair := range []bool{false, true} {
		rep := fsckReport(t, dir, repair)
		found := false
		for _, p := range rep.Problems {
			if strings.Contains(p.What, ".git/config") {
				found = true
				if p.Repaired || !strings.Contains(p.Repair, "[gitmem]") {
					t.Errorf("fsck (repair %v): %+v", repair, p)
				}
			}
		}
		if !found {
			t.Errorf("fsck (repair %v) does not report .git/config: %+v", repair, rep.Problems)
		}
	}
	if data, err := os.ReadFile(config); err != nil || string(data) != garbage {
		t.Errorf(".git/config is now %q (%v)", data, err)
	}
}

// A `memories` that is a file, not the folder of the memory files: Open
// refuses the repository with a *DamagedError that says so and how to
// repair it, for reading too (before, a reader opened it: gitmem diff
// showed every memory file deleted by hand, and a store list named the
// store as sound while every request on it was refused); fsck reports it; fsck --repair moves the file aside to
// memories.was-a-file (kept as it is) and puts the memory files back as
// HEAD holds them, without a commit (the memory is not taken as deleted
// by hand). Before, Open failed with "prepare the repository failed:
// mkdir memories: not a directory", which a store's routes answer with
// "fsck says why", and fsck found nothing.
func TestMemoriesThatIsAFileIsDamage(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "one\n")
	head := write(t, r, "t2", "sub/b.md", "two\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join(dir, "memories")
	if err := os.RemoveAll(mem); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mem, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refusedAsDamaged(t, dir, "memories is a file", "fsck --repair")
	for _, repair := range []bool{false, true} {
		rep := fsckReport(t, dir, repair)
		if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].What, "memories is a file") || rep.Problems[0].Repaired != repair {
			t.Errorf("fsck (repair %v): %+v", repair, rep.Problems)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "memories.was-a-file")); err != nil || string(data) != "x\n" {
		t.Errorf("memories.was-a-file: %q (%v)", data, err)
	}
	for p, want := range map[string]string{"a.md": "one\n", "sub/b.md": "two\n"} {
		if data, err := os.ReadFile(filepath.Join(mem, filepath.FromSlash(p))); err != nil || string(data) != want {
			t.Errorf("memories/%s: %q (%v), want %q", p, data, err, want)
		}
	}
	if got := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD")); got != head.Hash {
		t.Errorf("HEAD moved to %s (%s)", got, gittest.Git(t, dir, "log", "-1", "--format=%s"))
	}
	if st := gittest.Git(t, dir, "status", "--porcelain", "--", "memories"); st != "" {
		t.Errorf("git status: %q", st)
	}
}

// refusedAsDamaged checks that Open refuses the repository at dir, for
// reading and for writing, with a *DamagedError whose problem and repair
// say what problem and repair hold, and no host path.
func refusedAsDamaged(t *testing.T, dir, problem, repair string) {
	t.Helper()
	for _, readOnly := range []bool{true, false} {
		opt := testOptions(t)
		opt.ReadOnly = readOnly
		r, err := Open(context.Background(), dir, opt)
		var de *DamagedError
		if !errors.As(err, &de) {
			if err == nil {
				r.Close()
			}
			t.Fatalf("Open (read-only %v): %v, want a *DamagedError", readOnly, err)
		}
		if !strings.Contains(de.Problem, problem) || !strings.Contains(de.Repair, repair) || strings.Contains(de.Error(), dir) {
			t.Errorf("Open (read-only %v): %q", readOnly, de.Error())
		}
	}
}

// A memories that is a symlink (to a folder elsewhere) is damage too: the
// worktree's files cannot be written through it (they would leave the
// repository), git would track the link itself, and serve acknowledged
// calls it could never write there. fsck --repair moves the link aside,
// leaving the folder it names as it is.
func TestMemoriesThatIsASymlinkIsDamage(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	head := write(t, r, "t1", "a.md", "one\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	mem := filepath.Join(dir, "memories")
	if err := os.Rename(mem, elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, mem); err != nil {
		t.Fatal(err)
	}
	refusedAsDamaged(t, dir, "memories is a symlink", "fsck --repair")
	fsckReport(t, dir, true)
	if fi, err := os.Lstat(mem); err != nil || !fi.IsDir() {
		t.Fatalf("memories after fsck --repair: %v %v", fi, err)
	}
	if data, err := os.ReadFile(filepath.Join(mem, "a.md")); err != nil || string(data) != "one\n" {
		t.Errorf("memories/a.md: %q (%v)", data, err)
	}
	if data, err := os.ReadFile(filepath.Join(elsewhere, "a.md")); err != nil || string(data) != "one\n" {
		t.Errorf("the folder the link named: %q (%v)", data, err)
	}
	if got := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD")); got != head.Hash {
		t.Errorf("HEAD moved to %s", got)
	}
}
