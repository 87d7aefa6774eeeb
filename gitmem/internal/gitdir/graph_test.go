package gitdir

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// randomHistory writes a random history with git fast-import: branches
// that fork and merge, files changed, renamed and deleted; it returns
// every commit. Commit times go up by tick seconds a commit, or by
// none: with tick 0 every commit has the same time, as many commits made
// within one second do (git's times are whole seconds), and a walk
// ordered by time can meet a parent before its child.
func randomHistory(t *testing.T, dir string, seed uint64, n, tick int) []plumbing.Hash {
	t.Helper()
	needGit(t)
	gittest.Git(t, "", "init", "-q", "--bare", dir)
	rng := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	heads := []int{} // marks of branch tips
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "commit refs/heads/b%d\nmark :%d\ncommitter t <t@x> %d +0000\ndata 2\nc\n", rng.IntN(4), i, 1700000000+i*tick)
		switch {
		case len(heads) == 0:
		case len(heads) > 1 && rng.IntN(4) == 0: // a merge of two tips
			x, y := rng.IntN(len(heads)), rng.IntN(len(heads))
			fmt.Fprintf(&b, "from :%d\n", heads[x])
			if y != x {
				fmt.Fprintf(&b, "merge :%d\n", heads[y])
			}
		default:
			fmt.Fprintf(&b, "from :%d\n", heads[rng.IntN(len(heads))])
		}
		for range rng.IntN(3) + 1 {
			p := fmt.Sprintf("memories/d%d/f%d.md", rng.IntN(3), rng.IntN(6))
			switch rng.IntN(5) {
			case 0:
				fmt.Fprintf(&b, "D %s\n", p)
			default:
				c := fmt.Sprintf("%d\n", rng.IntN(20)) // contents repeat: old blobs come back
				fmt.Fprintf(&b, "M 100644 inline %s\ndata %d\n%s\n", p, len(c), c)
			}
		}
		heads = append(heads, i)
		if len(heads) > 5 {
			heads = heads[1:]
		}
	}
	b.WriteString("done\n")
	gittest.GitIn(t, dir, b.String(), "fast-import", "--quiet", "--done", "--export-marks="+filepath.Join(dir, "marks"))
	var all []plumbing.Hash
	for _, l := range strings.Fields(gittest.Git(t, dir, "rev-list", "--all")) {
		all = append(all, plumbing.NewHash(l))
	}
	return all
}

func gitLines(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	out, err := gittest.Command(t, dir, args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
			return nil
		}
		t.Fatalf("git %v: %v", args, err)
	}
	var ls []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			ls = append(ls, strings.Fields(l)[0])
		}
	}
	return ls
}

// The walks agree with git: Exclusive with rev-list A --not B, Missing
// holds every object rev-list --objects lists (and nothing B lacks
// beyond), MergeBase is one of git merge-base --all; also when commit
// times tie.
func TestGraphAgreesWithGit(t *testing.T) {
	t.Parallel()
	// An even seed's commits are a minute apart, an odd seed's all at one
	// time.
	for seed := range uint64(gittest.Size(t, 2, 8)) {
		tick := 60
		if seed%2 == 1 {
			tick = 0
		}
		dir := filepath.Join(gittest.TempDir(t), "r.git")
		all := randomHistory(t, dir, seed, 80, tick)
		s := Open(dir)
		defer s.Close()
		g := NewGraph(s)
		rng := rand.New(rand.NewPCG(seed, 2))
		for range 25 {
			a, b := all[rng.IntN(len(all))], all[rng.IntN(len(all))]
			got, err := g.Exclusive([]plumbing.Hash{a}, []plumbing.Hash{b})
			if err != nil {
				t.Fatal(err)
			}
			var gotHex []string
			for _, c := range got {
				gotHex = append(gotHex, c.Hash.String())
			}
			want := gitLines(t, dir, "rev-list", a.String(), "--not", b.String())
			slices.Sort(gotHex)
			slices.Sort(want)
			if !slices.Equal(gotHex, want) {
				t.Fatalf("seed %d: Exclusive(%s, not %s) = %d commits, git rev-list %d", seed, a, b, len(gotHex), len(want))
			}
			// Parents first.
			pos := map[plumbing.Hash]int{}
			for i, c := range got {
				pos[c.Hash] = i
			}
			for i, c := range got {
				for _, p := range c.ParentHashes {
					if j, ok := pos[p]; ok && j > i {
						t.Fatalf("seed %d: %s comes before its parent %s", seed, c.Hash, p)
					}
				}
			}

			objs, _, err := g.Missing([]plumbing.Hash{a}, []plumbing.Hash{b})
			if err != nil {
				t.Fatal(err)
			}
			have := map[string]bool{}
			for _, h := range objs {
				have[h.String()] = true
			}
			need := map[string]bool{}
			for _, h := range gitLines(t, dir, "rev-list", "--objects", a.String(), "--not", b.String()) {
				need[h] = true
				if !have[h] {
					t.Fatalf("seed %d: Missing(%s, not %s) lacks %s, which the other side needs", seed, a, b, h)
				}
			}
			reachB := map[string]bool{}
			for _, h := range gitLines(t, dir, "rev-list", "--objects", b.String()) {
				reachB[h] = true
			}
			reachA := map[string]bool{}
			for _, h := range gitLines(t, dir, "rev-list", "--objects", a.String()) {
				reachA[h] = true
			}
			for h := range have {
				if !reachA[h] {
					t.Fatalf("seed %d: Missing lists %s, which %s does not reach", seed, h, a)
				}
				if !need[h] && !reachB[h] {
					t.Fatalf("seed %d: Missing lists %s beyond what git sends, and the other side lacks it", seed, h)
				}
			}

			base, err := g.MergeBase(a, b)
			if err != nil {
				t.Fatal(err)
			}
			bases := gitLines(t, dir, "merge-base", "--all", a.String(), b.String())
			if len(bases) == 0 != base.IsZero() || (len(bases) > 0 && !slices.Contains(bases, base.String())) {
				t.Fatalf("seed %d: MergeBase(%s, %s) = %s, git says %v", seed, a, b, base, bases)
			}
			in, _ := g.IsAncestor(b, a)
			wantIn := gittest.Command(t, dir, "merge-base", "--is-ancestor", b.String(), a.String()).Run() == nil
			if in != wantIn {
				t.Fatalf("seed %d: IsAncestor(%s, %s) = %v, git says %v", seed, b, a, in, wantIn)
			}
		}
	}
}

// Of several best common ancestors (a criss-cross merge: a and b each
// merge x and y), MergeBase takes the newest by commit time, and of
// those at one time the lowest hash: the rule its doc gives, which
// TestGraphAgreesWithGit cannot tell (git merge-base --all lists both,
// and git's own choice among them follows its walk, not a rule).
func TestMergeBaseOfACrissCrossTakesTheNewestThenTheLowestHash(t *testing.T) {
	t.Parallel()
	needGit(t)
	for _, tc := range []struct {
		name       string
		xAt, yAt   int // x's and y's commit times, after the root's
		wantNewest string
	}{
		{"x newer", 60, 0, "x"},
		{"y newer", 0, 60, "y"},
		{"one time", 0, 0, ""}, // the lowest hash
	} {
		dir := filepath.Join(gittest.TempDir(t), "r.git")
		gittest.Git(t, "", "init", "-q", "--bare", dir)
		var b strings.Builder
		commit := func(branch string, mark, at int, parents ...int) {
			fmt.Fprintf(&b, "commit refs/heads/%s\nmark :%d\ncommitter t <t@x> %d +0000\ndata 2\nc\n", branch, mark, 1700000000+at)
			for i, p := range parents {
				if i == 0 {
					fmt.Fprintf(&b, "from :%d\n", p)
				} else {
					fmt.Fprintf(&b, "merge :%d\n", p)
				}
			}
			fmt.Fprintf(&b, "M 100644 inline %s.md\ndata 2\n%d\n", branch, mark)
		}
		commit("root", 1, 0)
		commit("x", 2, 100+tc.xAt, 1)
		commit("y", 3, 100+tc.yAt, 1)
		commit("a", 4, 300, 2, 3)
		commit("b", 5, 300, 3, 2)
		b.WriteString("done\n")
		gittest.GitIn(t, dir, b.String(), "fast-import", "--quiet", "--done")
		ref := func(name string) plumbing.Hash {
			return plumbing.NewHash(strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "refs/heads/"+name)))
		}
		x, y, a, bb := ref("x"), ref("y"), ref("a"), ref("b")
		if bases := gitLines(t, dir, "merge-base", "--all", a.String(), bb.String()); len(bases) != 2 {
			t.Fatalf("%s: git merge-base --all: %v, want x and y", tc.name, bases)
		}
		want := map[string]plumbing.Hash{"x": x, "y": y}[tc.wantNewest]
		if tc.wantNewest == "" {
			want = x
			if y.String() < x.String() {
				want = y
			}
		}
		s := Open(dir)
		g := NewGraph(s)
		for _, pair := range [][2]plumbing.Hash{{a, bb}, {bb, a}} {
			got, err := g.MergeBase(pair[0], pair[1])
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s: MergeBase(%s, %s) = %s, want %s (x %s, y %s)", tc.name, pair[0], pair[1], got, want, x, y)
			}
		}
		s.Close()
	}
}

// A walk whose answer is settled stops: Exclusive of a commit against
// itself (status when the memory and the remote agree) reads a few
// commits, not the history.
func TestExclusiveOfItselfStopsEarly(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(gittest.TempDir(t), "r.git")
	all := randomHistory(t, dir, 9, 200, 60)
	s := Open(dir)
	defer s.Close()
	for _, h := range all[:5] {
		g := NewGraph(s)
		got, err := g.Exclusive([]plumbing.Hash{h}, []plumbing.Hash{h})
		if err != nil || len(got) != 0 {
			t.Fatalf("Exclusive(%s, not itself) = %d commits, %v", h, len(got), err)
		}
		if len(g.commits) > 4*slop {
			t.Errorf("Exclusive(%s, not itself) read %d commits of %d", h, len(g.commits), len(all))
		}
	}
}
