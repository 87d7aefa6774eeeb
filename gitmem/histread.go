package gitmem

// historyReader reads the history index and git's objects: what Log,
// Blame, Resolve, At and Diff need, built from those parts of a Repo (no
// Repo inside), so that reading the history depends on no more.
type historyReader struct {
	x      *historyIndex
	o      *objects
	gitDir string
	hooks  *testHooks
}

// hist is the Repo's history reader.
func (r *Repo) hist() historyReader {
	return historyReader{x: r.histIndex, o: &r.objects, gitDir: r.gitDir, hooks: r.opt.hooks}
}
