package gitmem

import (
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// writeIndex writes .git/index for HEAD's tree, so that `git status` and
// `git diff` find the worktree clean without re-reading every file. Only
// lstat data gitmem has checked against HEAD's blob goes in (a file it
// cannot vouch for gets zeroes, which git re-reads): an index that paired
// a hand-edited file's lstat data with HEAD's blob would hide the edit
// from git and from gitmem's next start.
func (r *Repo) writeIndex() error {
	r.smu.RLock()
	head, current := r.head, r.indexHead == r.head && !r.head.IsZero()
	r.smu.RUnlock()
	if current {
		return nil // it holds HEAD's tree already (read at start, or written since)
	}
	var entries []gd.IndexEntry
	now := time.Now()
	var walk func(n *node, prefix string)
	walk = func(n *node, prefix string) {
		for name, k := range n.kids {
			p := join2(prefix, name)
			if k.isDir() {
				walk(k, p)
				continue
			}
			e := gd.IndexEntry{Path: p, Hash: k.hash, Mode: k.mode}
			if k.isFile() {
				if fi, err := r.wt.root.Lstat(p); err == nil && fi.Mode().IsRegular() {
					if same, err := r.sameAsTree(p, fi, k.hash); err == nil && same && !gd.StatOf(fi).Racy(now) {
						e.Stat = gd.StatOf(fi)
					}
				}
			}
			entries = append(entries, e)
		}
	}
	if root := r.snapshotTree(); root != nil {
		walk(root, "")
	}
	if err := gd.WriteIndex(r.gitDir, entries); err != nil {
		return err
	}
	r.smu.Lock()
	r.indexHead = head
	r.smu.Unlock()
	return nil
}
