package gitmem

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

var hunkContext = regexp.MustCompile(`(?m)^(@@ [^@]* @@).*$`)

// The unified diff gitmem prints is the one git prints, hunk for hunk.
func TestUnifiedMatchesGitDiff(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 6))
	for n := range 200 {
		var base []string
		for i := range rng.IntN(40) {
			base = append(base, fmt.Sprintf("line %d\n", i))
		}
		a := strings.Join(base, "")
		b := strings.Join(edit(rng, base, "x"), "")
		if n%7 == 0 && b != "" {
			b = strings.TrimSuffix(b, "\n") // no newline at the end
		}
		os.WriteFile(filepath.Join(dir, "a"), []byte(a), 0o600)
		os.WriteFile(filepath.Join(dir, "b"), []byte(b), 0o600)
		out, _ := gittest.Command(t, dir, "diff", "--no-index", "--no-color", "-U3", "a", "b").Output() // exit 1 means "differs"
		want := string(out)
		if i := strings.Index(want, "@@"); i >= 0 {
			want = want[i:]
		} else {
			want = ""
		}
		// git names the enclosing "function" after a hunk header; memory
		// files have none, and gitmem prints none.
		want = hunkContext.ReplaceAllString(want, "$1")
		if got := unifiedHunks(a, b, 3); got != want {
			t.Fatalf("case %d:\n--- gitmem\n%s--- git\n%s", n, got, want)
		}
	}
}

// The worktree's diff lists hand edits gitmem will adopt, and not a file
// whose name no model could write, which it never adopts.
func TestDiffWorktreeLeavesOutWhatIsNeverAdopted(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for name, text := range map[string]string{"edited.md": "by hand\n", "tab\tname.md": "never a memory\n"} {
		if err := os.WriteFile(filepath.Join(dir, "memories", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	changes, err := r.DiffWorktree()
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Path != "edited.md" {
		t.Fatalf("changes: %+v", changes)
	}
}

// A file whose name no model could write, committed by other means
// (plain git), is left out of the worktree's diff on both sides: it is no
// deletion waiting to be adopted.
func TestDiffWorktreeLeavesOutACommittedOddName(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := os.WriteFile(filepath.Join(dir, "memories", "tab\tname.md"), []byte("y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, dir, "add", "-A")
	gittest.Git(t, dir, "-c", "user.name=T", "-c", "user.email=t@x", "commit", "-q", "-m", "plain git")
	if r, err = Open(context.Background(), dir, testOptions(t)); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if changes, err := r.DiffWorktree(); err != nil || len(changes) != 0 {
		t.Fatalf("changes: %+v, %v", changes, err)
	}
}
