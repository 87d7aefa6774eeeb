package gitmem

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// edit returns base with a few random edits (replace, delete, insert) of
// lines made unique by tag, so every diff is unambiguous.
func edit(rng *rand.Rand, base []string, tag string) []string {
	out := append([]string(nil), base...)
	for k := range 1 + rng.IntN(3) {
		if len(out) == 0 {
			out = append(out, fmt.Sprintf("%s-new-%d\n", tag, k))
			continue
		}
		i := rng.IntN(len(out))
		switch rng.IntN(3) {
		case 0:
			out[i] = fmt.Sprintf("%s-changed-%d\n", tag, k)
		case 1:
			out = append(out[:i], out[i+1:]...)
		default:
			out = append(out[:i], append([]string{fmt.Sprintf("%s-inserted-%d\n", tag, k)}, out[i:]...)...)
		}
	}
	return out
}

// merge3 agrees with `git merge-file` on clean merges (same result) and on
// which merges conflict.
func TestMerge3AgreesWithGitMergeFile(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	clean, conflicted := 0, 0
	cases := gittest.Size(t, 100, 400) // a git merge-file each
	for n := range cases {
		var base []string
		for i := range rng.IntN(12) {
			base = append(base, fmt.Sprintf("line %d\n", i))
		}
		ours, theirs := edit(rng, base, "ours"), edit(rng, base, "theirs")
		if n%10 == 0 {
			theirs = append([]string(nil), ours...) // the same change on both sides
		}
		files := map[string][]string{"base": base, "ours": ours, "theirs": theirs}
		for name, lines := range files {
			os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "")), 0o600)
		}
		out, err := gittest.Command(t, dir, "merge-file", "-p", "ours", "base", "theirs").Output()
		gitConflicts := 0
		if ee, ok := err.(*exec.ExitError); ok {
			gitConflicts = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		got, conflicts := merge3(base, ours, theirs)
		switch {
		case gitConflicts == 0 && len(conflicts) > 0:
			t.Fatalf("case %d: git merged cleanly, merge3 found %d conflicts\nbase %q\nours %q\ntheirs %q", n, len(conflicts), base, ours, theirs)
		case gitConflicts > 0 && len(conflicts) == 0:
			t.Fatalf("case %d: git found %d conflicts, merge3 merged to %q\nbase %q\nours %q\ntheirs %q", n, gitConflicts, got, base, ours, theirs)
		case gitConflicts == 0 && strings.Join(got, "") != string(out):
			t.Fatalf("case %d: merge3 %q, git %q\nbase %q\nours %q\ntheirs %q", n, strings.Join(got, ""), out, base, ours, theirs)
		}
		if gitConflicts == 0 {
			clean++
		} else {
			conflicted++
		}
	}
	if clean < cases/8 || conflicted < cases/8 {
		t.Fatalf("the generator made %d clean and %d conflicting cases of %d; it should make plenty of both", clean, conflicted, cases)
	}
}

func TestMerge3Basics(t *testing.T) {
	t.Parallel()
	l := func(s string) []string { return splitKeep(s) }
	got, c := merge3(l("a\nb\nc\nd\ne\n"), l("a\nB\nc\nd\ne\n"), l("a\nb\nc\nd\nE\n"))
	if len(c) != 0 || strings.Join(got, "") != "a\nB\nc\nd\nE\n" {
		t.Fatalf("non-overlapping: %q %v", got, c)
	}
	_, c = merge3(l("a\nb\nc\n"), l("a\nX\nc\n"), l("a\nY\nc\n"))
	if len(c) != 1 || c[0].BaseStart != 1 || c[0].BaseEnd != 2 {
		t.Fatalf("overlapping: %+v", c)
	}
}

// The moves a merge makes at once are ordered so that applied one after
// the other (as repairs.moveKept does) each path lands where the merge
// put it; a swap cannot be, and is left out.
func TestMergeMovesInOrder(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want [][2]string }{
		{[][2]string{{"a", "b"}, {"b", "c"}}, [][2]string{{"b", "c"}, {"a", "b"}}},
		{[][2]string{{"a", "b"}, {"c", "d"}}, [][2]string{{"a", "b"}, {"c", "d"}}},
		{[][2]string{{"a", "b"}, {"b", "a"}, {"c", "d"}}, [][2]string{{"c", "d"}}},
	} {
		got := inOrder(c.in)
		if !slices.Equal(got, c.want) {
			t.Errorf("inOrder(%q) = %q, want %q", c.in, got, c.want)
		}
		for _, p := range []string{"a", "b", "c"} { // one after the other, as at once
			at := p
			for _, mv := range got {
				at = movePath(at, mv[0], mv[1])
			}
			once := p
			for _, mv := range c.in {
				if p == mv[0] && slices.Contains(got, mv) {
					once = mv[1]
				}
			}
			if at != once {
				t.Errorf("%q: %s goes to %s, want %s", c.in, p, at, once)
			}
		}
	}
}
