package gitmem

import "github.com/go-git/go-git/v5/plumbing"

// historyReader reads the history index and git's objects: what Log,
// Blame, Resolve, At and Diff need, built from those parts of a Repo (no
// Repo inside), so that reading the history depends on no more.
type historyReader struct {
	x      *historyIndex
	o      *objects
	gitDir string
	branch plumbing.ReferenceName
	hooks  *testHooks
}

// hist is the Repo's history reader.
func (r *Repo) hist() historyReader {
	return historyReader{x: r.histIndex, o: &r.objects, gitDir: r.gitDir, branch: r.branch, hooks: r.opt.hooks}
}
