package gitdir

import (
	"bytes"
	"container/heap"
	"fmt"
	"slices"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Walks over the commit graph for sharing: what one side has that the
// other lacks, and where two histories meet. They visit commits newest
// first by commit time, as git does, and stop as soon as nothing left in
// the queue can change the answer, so their cost follows the commits
// since the histories parted, not the length of the history. Time order
// is not always parents after children: commit times are whole seconds,
// so a parent and its child often tie, and a clock can go backwards. The
// walks go on while a commit not yet visited is as new as one whose
// answer it could change (and a few commits more, for clocks), so that
// they answer as git does.

// Graph reads commits for walks and remembers what it decoded. It is not
// safe for concurrent use.
type Graph struct {
	s       *Store
	commits map[plumbing.Hash]*object.Commit
}

// NewGraph returns a Graph over the store's objects.
func NewGraph(s *Store) *Graph {
	return &Graph{s: s, commits: map[plumbing.Hash]*object.Commit{}}
}

// Commit returns a decoded commit.
func (g *Graph) Commit(h plumbing.Hash) (*object.Commit, error) {
	if c, ok := g.commits[h]; ok {
		return c, nil
	}
	c, err := g.s.Commit(h)
	if err != nil {
		return nil, err
	}
	g.commits[h] = c
	return c, nil
}

// Has reports whether the store holds the commit h (Store.HasObject).
func (g *Graph) Has(h plumbing.Hash) bool {
	if h.IsZero() {
		return false
	}
	if _, ok := g.commits[h]; ok {
		return true
	}
	return g.s.HasObject(h)
}

// queue is a max-heap of commits by commit time (ties: by hash, so that
// walks are deterministic).
type queue []*object.Commit

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	a, b := q[i].Committer.When, q[j].Committer.When
	if !a.Equal(b) {
		return a.After(b)
	}
	return q[i].Hash.String() < q[j].Hash.String()
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*object.Commit)) }
func (q *queue) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}

const (
	flagSeen = 1 << iota
	flagOut  // uninteresting: reachable from the other side
	flagP1   // merge base walk: reachable from the first tip
	flagP2   // ... from the second
	flagStale
	flagResult
)

// slop is how many commits a walk goes on after its stop condition, as
// git does, so that a few commits with skewed clocks do not end it early.
const slop = 5

// Exclusive returns the commits reachable from tips and not from not,
// parents before children. Commits of not that the store lacks are
// skipped (the other side has them; nothing of ours descends from them).
func (g *Graph) Exclusive(tips, not []plumbing.Hash) ([]*object.Commit, error) {
	flags := map[plumbing.Hash]int{}
	var q queue
	push := func(h plumbing.Hash, f int) error {
		if flags[h]&flagSeen != 0 {
			if f&flagOut != 0 && flags[h]&flagOut == 0 {
				return g.markOut(h, flags)
			}
			return nil
		}
		if f&flagOut != 0 && !g.Has(h) {
			return nil // the other side's; nothing of ours descends from it
		}
		c, err := g.Commit(h)
		if err != nil {
			return err
		}
		flags[h] = f | flagSeen
		heap.Push(&q, c)
		return nil
	}
	for _, h := range not {
		if err := push(h, flagOut); err != nil {
			return nil, err
		}
	}
	for _, h := range tips {
		if err := push(h, 0); err != nil {
			return nil, err
		}
	}
	var out []*object.Commit
	var oldestIn time.Time // of out
	extra := slop
	for q.Len() > 0 {
		c := heap.Pop(&q).(*object.Commit)
		f := flags[c.Hash] & flagOut
		if f == 0 {
			if len(out) == 0 || c.Committer.When.Before(oldestIn) {
				oldestIn = c.Committer.When
			}
			out = append(out, c)
		}
		for _, p := range c.ParentHashes {
			if err := push(p, f); err != nil {
				return nil, err
			}
		}
		// Done when only the other side's commits are left, and none is
		// as new as a commit taken: one that is may still reach it (a
		// parent met before its child, when commit times tie).
		if allOut(q, flags) && (len(out) == 0 || q.Len() == 0 || q[0].Committer.When.Before(oldestIn)) {
			if extra--; extra < 0 {
				break
			}
		} else {
			extra = slop
		}
	}
	out = slices.DeleteFunc(out, func(c *object.Commit) bool { return flags[c.Hash]&flagOut != 0 })
	return TopoSort(out), nil
}

// markOut marks a commit already seen, and the seen commits beneath it,
// as reachable from the other side.
func (g *Graph) markOut(h plumbing.Hash, flags map[plumbing.Hash]int) error {
	stack := []plumbing.Hash{h}
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if flags[h]&flagOut != 0 || flags[h]&flagSeen == 0 {
			continue
		}
		flags[h] |= flagOut
		c, err := g.Commit(h)
		if err != nil {
			return err
		}
		stack = append(stack, c.ParentHashes...)
	}
	return nil
}

func allOut(q queue, flags map[plumbing.Hash]int) bool {
	for _, c := range q {
		if flags[c.Hash]&flagOut == 0 {
			return false
		}
	}
	return true
}

// TopoSort orders commits parents first (among themselves), keeping the
// given order where the graph allows: a depth-first walk from the newest.
func TopoSort(cs []*object.Commit) []*object.Commit {
	in := make(map[plumbing.Hash]*object.Commit, len(cs))
	for _, c := range cs {
		in[c.Hash] = c
	}
	done := map[plumbing.Hash]bool{}
	out := make([]*object.Commit, 0, len(cs))
	type frame struct {
		c    *object.Commit
		next int
	}
	for _, start := range cs {
		if done[start.Hash] {
			continue
		}
		done[start.Hash] = true
		stack := []frame{{start, 0}}
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next < len(top.c.ParentHashes) {
				p := top.c.ParentHashes[top.next]
				top.next++
				if pc, ok := in[p]; ok && !done[p] {
					done[p] = true
					stack = append(stack, frame{pc, 0})
				}
				continue
			}
			out = append(out, top.c)
			stack = stack[:len(stack)-1]
		}
	}
	return out
}

// MergeBase returns the best common ancestor of a and b (zero when the
// histories share none): of the commits reachable from both that no other
// such commit descends from, the newest by commit time (ties: the lowest
// hash). It is git's paint-down walk: commits are painted with the sides
// that reach them; a commit painted by both is a result, and paints its
// ancestors stale, which also drops a result found earlier that another
// result reaches.
func (g *Graph) MergeBase(a, b plumbing.Hash) (plumbing.Hash, error) {
	if a == b {
		return a, nil
	}
	flags := map[plumbing.Hash]int{}
	var q queue
	put := func(h plumbing.Hash, f int) error {
		c, err := g.Commit(h)
		if err != nil {
			return err
		}
		flags[h] |= f
		heap.Push(&q, c) // a commit may be queued again with new flags
		return nil
	}
	if err := put(a, flagP1); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := put(b, flagP2); err != nil {
		return plumbing.ZeroHash, err
	}
	var results []*object.Commit
	extra := slop
	for q.Len() > 0 {
		if allStale(q, flags) {
			// Every commit left is below a common ancestor. A result found
			// before another result that reaches it (its child met later:
			// commit times tie, whole seconds, or a clock went backwards)
			// is still standing: paint on while the walk can reach one.
			if !mayReachResult(q, results, flags) {
				if extra--; extra < 0 {
					break
				}
			} else {
				extra = slop
			}
		}
		c := heap.Pop(&q).(*object.Commit)
		f := flags[c.Hash] & (flagP1 | flagP2 | flagStale)
		if f == flagP1|flagP2 {
			if flags[c.Hash]&flagResult == 0 {
				flags[c.Hash] |= flagResult
				results = append(results, c)
			}
			f |= flagStale
		}
		for _, p := range c.ParentHashes {
			if flags[p]&f == f {
				continue
			}
			if err := put(p, f); err != nil {
				return plumbing.ZeroHash, err
			}
		}
	}
	var best *object.Commit
	for _, c := range results {
		if flags[c.Hash]&flagStale != 0 {
			continue // another result reaches it
		}
		if best == nil || c.Committer.When.After(best.Committer.When) ||
			c.Committer.When.Equal(best.Committer.When) && c.Hash.String() < best.Hash.String() {
			best = c
		}
	}
	if best == nil {
		return plumbing.ZeroHash, nil
	}
	return best.Hash, nil
}

// mayReachResult reports whether a walk down from the queue can still
// reach a result another result may reach: two or more stand, and the
// newest queued commit is no older than the oldest of them.
func mayReachResult(q queue, results []*object.Commit, flags map[plumbing.Hash]int) bool {
	if len(q) == 0 {
		return false
	}
	standing := 0
	var oldest time.Time
	for _, c := range results {
		if flags[c.Hash]&flagStale == 0 {
			if standing++; standing == 1 || c.Committer.When.Before(oldest) {
				oldest = c.Committer.When
			}
		}
	}
	return standing > 1 && !q[0].Committer.When.Before(oldest)
}

func allStale(q queue, flags map[plumbing.Hash]int) bool {
	for _, c := range q {
		if flags[c.Hash]&flagStale == 0 {
			return false
		}
	}
	return true
}

// IsAncestor reports whether a is b or reachable from b.
func (g *Graph) IsAncestor(a, b plumbing.Hash) (bool, error) {
	if a == b {
		return true, nil
	}
	base, err := g.MergeBase(a, b)
	return base == a, err
}

// Missing returns the objects (commits, trees, blobs) reachable from
// tips that a side holding every commit reachable from haves lacks: the
// commits of Exclusive, and of each of their trees the entries that no
// parent's tree holds at the same path. It reads what changed, not whole
// trees, so its cost follows the new commits. An object may be listed
// that the other side has already (a file reverted to an old version),
// never one it lacks be left out.
func (g *Graph) Missing(tips, haves []plumbing.Hash) ([]plumbing.Hash, []*object.Commit, error) {
	commits, err := g.Exclusive(tips, haves)
	if err != nil {
		return nil, nil, err
	}
	seen := map[plumbing.Hash]bool{}
	var out []plumbing.Hash
	for _, c := range commits {
		out = append(out, c.Hash)
		var parents []plumbing.Hash
		for _, p := range c.ParentHashes {
			pc, err := g.Commit(p)
			if err != nil {
				return nil, nil, err
			}
			parents = append(parents, pc.TreeHash)
		}
		if out, err = g.newTrees(c.TreeHash, parents, seen, out); err != nil {
			return nil, nil, err
		}
	}
	return out, commits, nil
}

// newTrees appends tree t and what it holds that none of the trees in
// old (at the same path; zero: none) holds. Trees are read raw (no
// decoding into go-git's types): a push of many commits reads many. Each
// old tree is walked beside t in git's order of entries, and against one
// old tree (a commit of one parent) the entries in the bytes both begin
// and end with are passed over unread, as DiffTreeEntries does.
func (g *Graph) newTrees(t plumbing.Hash, old []plumbing.Hash, seen map[plumbing.Hash]bool, out []plumbing.Hash) ([]plumbing.Hash, error) {
	if seen[t] || slices.Contains(old, t) {
		return out, nil
	}
	seen[t] = true
	out = append(out, t)
	data, err := g.rawTree(t)
	if err != nil {
		return nil, err
	}
	type cursor struct {
		data []byte
		i    int
	}
	var olds []cursor
	for _, o := range old {
		if o.IsZero() {
			continue
		}
		od, err := g.rawTree(o)
		if err != nil {
			return nil, err
		}
		olds = append(olds, cursor{data: od})
	}
	i, suf := 0, -1
	if len(olds) == 1 {
		od := olds[0].data
		for pre := commonPrefix(data, od); ; {
			nul := bytes.IndexByte(data[i:], 0)
			if nul < 0 || i+nul+21 > pre {
				break
			}
			i += nul + 21
		}
		olds[0].i = i
		suf = commonSuffix(data[i:], od[i:])
	}
	for i < len(data) {
		if suf >= 0 && len(data)-i <= suf && len(data)-i == len(olds[0].data)-olds[0].i {
			break // the rest is the same entries
		}
		e, next, err := treeEntryAt(data, i)
		if err != nil {
			return nil, err
		}
		i = next
		var sub []plumbing.Hash
		same := false
		for k := range olds {
			c := &olds[k]
			for c.i < len(c.data) {
				o, onext, err := treeEntryAt(c.data, c.i)
				if err != nil {
					return nil, err
				}
				d := compareEntries(o, e)
				if d < 0 {
					c.i = onext
					continue
				}
				if d == 0 {
					c.i = onext
					if o.hash == e.hash {
						same = true
					} else if o.tree {
						sub = append(sub, o.hash)
					}
				}
				break
			}
		}
		switch {
		case same:
		case e.tree:
			if out, err = g.newTrees(e.hash, sub, seen, out); err != nil {
				return nil, err
			}
		case e.gitlink: // a commit of another repository
		case !seen[e.hash]:
			seen[e.hash] = true
			out = append(out, e.hash)
		}
	}
	return out, nil
}

// rawTree reads a tree object's content.
func (g *Graph) rawTree(h plumbing.Hash) ([]byte, error) {
	t, data, err := g.s.ReadObject(h)
	if err == nil && t != plumbing.TreeObject {
		err = fmt.Errorf("%s is a %s, not a tree", h, t)
	}
	return data, err
}
