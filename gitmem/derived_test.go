package gitmem

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// gitIn runs git in dir with stdin, and returns its output trimmed.
func gitIn(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(gittest.GitIn(t, dir, stdin, args...))
}

// fsckReport runs gitmem's Fsck (repairing or not) and returns its report.
func fsckReport(t *testing.T, dir string, repair bool) FsckReport {
	t.Helper()
	opt := testOptions(t)
	opt.ReadOnly = !repair
	rep, err := Fsck(context.Background(), dir, opt, repair)
	if err != nil {
		t.Fatalf("fsck (repair %v): %v", repair, err)
	}
	return rep
}

// fsckProblems is what fsckReport reports.
func fsckProblems(t *testing.T, dir string, repair bool) []string {
	t.Helper()
	var out []string
	for _, p := range fsckReport(t, dir, repair).Problems {
		out = append(out, p.What)
	}
	return out
}

// fscksClean checks that git fsck --strict and gitmem fsck find nothing.
func fscksClean(t *testing.T, dir string) {
	t.Helper()
	gittest.Fsck(t, dir)
	if ps := fsckProblems(t, dir, false); len(ps) > 0 {
		t.Errorf("gitmem fsck: %q", ps)
	}
}

// closedRepo is a repository of one change, closed, for git to work on.
func closedRepo(t *testing.T) string {
	t.Helper()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "one\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRedactAfterGitGCLeavesGitFsckClean: git gc writes a commit-graph,
// and git repack and git multi-pack-index a bitmap, reverse indexes and a
// multi-pack-index; a redaction then deletes the commits and packs they
// name. It removes them with what they name: git fsck --strict is clean
// after it ("Could not read ... for commit-graph" before), and so is
// gitmem fsck.
func TestRedactAfterGitGCLeavesGitFsckClean(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	for i, s := range []string{"plain\n", "key sk-live1secret\n", "more\n"} {
		write(t, r, "t"+string(rune('0'+i)), "a.md", s)
	}
	settle(t, r)
	gitIn(t, dir, "", "gc", "--quiet")
	gitIn(t, dir, "", "-c", "pack.writeReverseIndex=true", "repack", "-a", "-d", "-b", "-q")
	gitIn(t, dir, "", "multi-pack-index", "write", "--bitmap")
	if _, err := os.Stat(filepath.Join(dir, ".git", "objects", "info", "commit-graph")); err != nil {
		t.Fatal("git gc wrote no commit-graph: the test tests nothing")
	}
	if _, err := r.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)}, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	fscksClean(t, dir)
}

// TestFsckFindsStaleDerivedFiles: a commit-graph that names a commit git
// prune deleted, and a multi-pack-index that names a pack that is gone,
// make git fsck --strict fail. gitmem fsck names both and --repair
// removes them; then git fsck --strict is clean.
func TestFsckFindsStaleDerivedFiles(t *testing.T) {
	t.Parallel()
	dir := closedRepo(t)
	// A commit only a branch reaches, in the commit-graph; then the
	// branch goes, and git prune deletes the commit.
	side := gitIn(t, dir, "", "commit-tree", "-m", "side", "main^{tree}")
	gitIn(t, dir, "", "branch", "side", side)
	gitIn(t, dir, "", "commit-graph", "write", "--reachable")
	gitIn(t, dir, "", "branch", "-D", "side")
	gitIn(t, dir, "", "prune", "--expire=now")
	// A pack of objects other packs hold too, in the multi-pack-index;
	// then the pack goes.
	blob := gitIn(t, dir, "", "rev-parse", "main:memories/a.md")
	extra := gitIn(t, dir, blob+"\n", "pack-objects", ".git/objects/pack/pack")
	gitIn(t, dir, "", "multi-pack-index", "write")
	for _, ext := range []string{".pack", ".idx"} {
		os.Remove(filepath.Join(dir, ".git", "objects", "pack", "pack-"+extra+ext))
	}
	if out, err := gittest.Command(t, dir, "fsck", "--strict", "--no-dangling").CombinedOutput(); err == nil {
		t.Fatalf("git fsck --strict passes: the test tests nothing\n%s", out)
	}
	ps := strings.Join(fsckProblems(t, dir, false), "\n")
	for _, want := range []string{
		"git's .git/objects/info/commit-graph is stale: it names the commit " + side,
		"git's .git/objects/pack/multi-pack-index is stale: it names the pack pack-" + extra + ", which is gone",
	} {
		if !strings.Contains(ps, want) {
			t.Errorf("gitmem fsck does not say %q:\n%s", want, ps)
		}
	}
	fsckProblems(t, dir, true)
	fscksClean(t, dir)
}

// TestFsckRunsGitFsckStrictChecks: a commit whose author's time zone git
// fsck --strict refuses, put on the branch by hand, is named by gitmem
// fsck with git's message id.
func TestFsckRunsGitFsckStrictChecks(t *testing.T) {
	t.Parallel()
	dir := closedRepo(t)
	tree := gitIn(t, dir, "", "rev-parse", "main^{tree}")
	parent := gitIn(t, dir, "", "rev-parse", "main")
	bad := gitIn(t, dir, "tree "+tree+"\nparent "+parent+"\nauthor A <a@b> 1 0000\ncommitter C <c@d> 1 +0000\n\nbad zone\n",
		"hash-object", "-w", "--literally", "-t", "commit", "--stdin")
	gitIn(t, dir, "", "update-ref", "refs/heads/main", bad)
	gittest.Damaged(t, dir, "the branch is on a commit git fsck --strict refuses")
	if out, _ := gittest.Command(t, dir, "fsck", "--strict", "--no-dangling").CombinedOutput(); !strings.Contains(string(out), "badTimezone") {
		t.Fatalf("git fsck --strict: %s", out)
	}
	ps := strings.Join(fsckProblems(t, dir, false), "\n")
	if want := "object " + bad + " (commit) fails git fsck --strict: badTimezone: invalid author/committer line - bad time zone"; !strings.Contains(ps, want) {
		t.Errorf("gitmem fsck does not say %q:\n%s", want, ps)
	}
}
