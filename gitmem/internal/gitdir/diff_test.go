package gitdir

import (
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
	tree := func(c string) plumbing.Hash {
		return plumbing.NewHash(strings.TrimSpace(gittest.Git(t, dir, "rev-parse", c+"^{tree}")))
	}
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
	pairs := 0
	for i := range commits {
		for _, j := range []int{i + 1, i + 7, i + 40} {
			if j >= len(commits) {
				continue
			}
			var got []string
			walk(tree(commits[i]), tree(commits[j]), "", &got)
			var want []string
			for _, l := range strings.Split(strings.TrimSpace(gittest.Git(t, dir, "diff-tree", "-r", "--no-renames", commits[i], commits[j])), "\n") {
				if l == "" {
					continue
				}
				f := strings.Fields(l) // :old new oldblob newblob status path
				want = append(want, f[5]+" "+f[3])
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("%s..%s:\ngot  %v\nwant %v", commits[i][:7], commits[j][:7], got, want)
			}
			pairs++
		}
	}
	if pairs < 100 {
		t.Fatalf("only %d pairs compared", pairs)
	}
}
