package gitdir

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// DiffTreeEntries, walked down into the folders that differ, finds the
// files git diff-tree finds, with their new blobs, between neighbouring
// commits and commits far apart, a file turned into a folder included.
func TestDiffTreeEntriesAgreesWithGit(t *testing.T) {
	t.Parallel()
	needGit(t)
	dir := history(t, 120)
	// A file that becomes a folder, and back.
	gittest.Git(t, dir, "read-tree", "main")
	gittest.Git(t, dir, "rm", "-q", "--cached", "deep/a/b/c.md")
	write := func(p, s string) {
		t.Helper()
		gittest.GitIn(t, dir, s, "hash-object", "-w", "--stdin")
		h := strings.TrimSpace(gittest.GitIn(t, dir, s, "hash-object", "--stdin"))
		gittest.Git(t, dir, "update-index", "--add", "--cacheinfo", "100644,"+h+","+p)
	}
	write("deep/a/b/c.md/inner.md", "now a folder\n")
	gittest.Git(t, dir, "-c", "user.name=T", "-c", "user.email=t@x", "commit", "-q", "-m", "file to folder")
	gittest.Git(t, dir, "rm", "-q", "--cached", "-r", "deep/a/b/c.md")
	write("deep/a/b/c.md", "a file again\n")
	gittest.Git(t, dir, "-c", "user.name=T", "-c", "user.email=t@x", "commit", "-q", "-m", "folder to file")
	commits := strings.Fields(gittest.Git(t, dir, "rev-list", "--first-parent", "--reverse", "main"))
	s := Open(dir + "/.git")
	defer s.Close()
	// Every commit's tree with one git rev-parse.
	var names []string
	for _, c := range commits {
		names = append(names, c+"^{tree}")
	}
	trees := map[string]plumbing.Hash{}
	for i, h := range strings.Fields(gittest.Git(t, dir, append([]string{"rev-parse"}, names...)...)) {
		trees[commits[i]] = plumbing.NewHash(h)
	}
	if len(trees) != len(commits) {
		t.Fatalf("%d trees for %d commits", len(trees), len(commits))
	}
	tree := func(c string) plumbing.Hash { return trees[c] }
	var walk func(a, b plumbing.Hash, prefix string, out *[]string)
	walk = func(a, b plumbing.Hash, prefix string, out *[]string) {
		err := s.DiffTreeEntries(a, b, func(x, y object.TreeEntry) error {
			name := x.Name + y.Name
			if x.Name != "" && y.Name != "" {
				name = x.Name
			}
			p := prefix + name
			if x.Mode != filemode.Dir && !x.Hash.IsZero() || y.Mode != filemode.Dir && !y.Hash.IsZero() {
				blob := plumbing.ZeroHash
				if y.Mode != filemode.Dir {
					blob = y.Hash
				}
				*out = append(*out, p+" "+blob.String())
			}
			var xt, yt plumbing.Hash
			if x.Mode == filemode.Dir {
				xt = x.Hash
			}
			if y.Mode == filemode.Dir {
				yt = y.Hash
			}
			if !xt.IsZero() || !yt.IsZero() {
				walk(xt, yt, p+"/", out)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	type pair struct{ a, b string }
	var pairs []pair
	var in strings.Builder
	for i := range commits {
		for _, j := range []int{i + 1, i + 7, i + 40} {
			if j < len(commits) {
				pairs = append(pairs, pair{commits[i], commits[j]})
				// A line "B A" of git diff-tree --stdin is git diff-tree A B:
				// B's changes from A, its "parent". Each line's output is
				// the line's first hash (--always: even when nothing
				// differs), then the changes.
				fmt.Fprintf(&in, "%s %s\n", commits[j], commits[i])
			}
		}
	}
	var wants [][]string
	for _, l := range strings.Split(strings.TrimSpace(gittest.GitIn(t, dir, in.String(), "diff-tree", "--stdin", "--always", "-r", "--no-renames")), "\n") {
		if !strings.HasPrefix(l, ":") {
			if len(wants) < len(pairs) && l != pairs[len(wants)].b {
				t.Fatalf("git diff-tree --stdin: %q for %s", l, pairs[len(wants)].b)
			}
			wants = append(wants, []string{})
			continue
		}
		f := strings.Fields(l) // :old new oldblob newblob status path
		wants[len(wants)-1] = append(wants[len(wants)-1], f[5]+" "+f[3])
	}
	if len(wants) != len(pairs) {
		t.Fatalf("git diff-tree --stdin: %d diffs for %d pairs", len(wants), len(pairs))
	}
	for k, p := range pairs {
		var got []string
		walk(tree(p.a), tree(p.b), "", &got)
		want := wants[k]
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s..%s:\ngot  %v\nwant %v", p.a[:7], p.b[:7], got, want)
		}
	}
	if len(pairs) < 100 {
		t.Fatalf("only %d pairs compared", len(pairs))
	}
}
