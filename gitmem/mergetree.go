package gitmem

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/policy"
)

// Merging a remote's history into the memory. The merge is one
// transaction of Repo.Update: the merged files are written into the
// transaction and the remote's commit becomes the commit's second parent,
// so the worktree, the journal, hand-edit adoption and the history index
// work as for any change. When the memory has nothing the remote lacks,
// the branch moves to the remote's commit instead (a fast-forward), if
// that commit's tree is one gitmem would have made itself.
//
// Nothing is lost: changes to different files combine; changes to one
// file are merged line by line against the merge base; a true conflict
// keeps both sides where the model can read them (see docs/protocol.md,
// "Merges"), and the merge commit names every conflict in a
// Memory-Conflict trailer.
//
// What a remote holds is not trusted: a change the memory could not hold
// — a symlink, a submodule, a name no model could write (.git*, control
// characters, a path outside memories/), a file over the size limit — is
// not taken; the memory keeps what it had there, and a Memory-Ignored
// trailer says what was left out and why. An executable file is taken as
// a regular file.

// Trailers of merge commits.
const (
	TrailerConflict = "Memory-Conflict"
	TrailerIgnored  = "Memory-Ignored"
)

// MergeConflict is a path both sides changed in ways that do not combine.
// Kind is "content" or "add/add" (both versions are in the file between
// conflict markers), or "LOCAL/REMOTE" for what each side did to the file
// — "edit/delete", "delete/edit", "rename/edit", "edit/rename",
// "rename/delete", "delete/rename", "rename/rename" — where the version
// that was edited, renamed or both is kept; "file/folder": the remote's
// file is kept beside the local folder under a new name (Path).
type MergeConflict struct {
	Kind string
	Path string // relative to memories/: where the result is
}

// IgnoredEntry is something of the remote's tree a merge did not take.
type IgnoredEntry struct {
	Path   string // repository path (memories/... or outside it)
	Reason string
}

// errUpToDate ends a pull transaction that has nothing to merge.
var errUpToDate = errors.New("already up to date")

// maxIgnoredTrailers bounds the Memory-Ignored trailers of one merge;
// maxMessageBytes the message of a commit a merge takes (gitmem's own are
// well under a kilobyte; git's pack format bounds nothing).
const (
	maxIgnoredTrailers = 100
	maxMessageBytes    = 1 << 20
)

// fentry is a file of a tree: its blob and mode (zero hash: absent).
type fentry struct {
	hash plumbing.Hash
	mode filemode.FileMode
}

func (e fentry) present() bool { return !e.hash.IsZero() }

// fchange is a path that differs between two trees.
type fchange struct{ old, new fentry }

// merger merges the remote commit theirs into a transaction over HEAD.
type merger struct {
	store  mergeStore // nil for clean, which reads the remote's commit alone
	hooks  *testHooks
	logf   func(format string, args ...any)
	g      *gd.Graph
	st     *gd.Store
	label  string // how the remote's side is named: origin/main
	theirs plumbing.Hash
	local  string // the short hash of the commit the merge is on
	limits policy.Limits
	// unrelated: merge theirs also when it shares no commit with ours
	// (SyncOptions.AllowUnrelatedHistories).
	unrelated bool
	index     []plumbing.Hash // theirs was made outside gitmem, maybe from an index gitmem wrote for one of these commits (staleIndex)
	// held reports whether the worktree file at memory path p held what
	// the change ch gives it (gitmem's blob, or no file: one gitmem
	// created) until at most staleWindow before made (or since): theirs,
	// made outside gitmem, may have read it there (staleIndex).
	held func(p string, ch fchange, made time.Time) bool

	conflicts []MergeConflict
	ignored   []IgnoredEntry
	beside    map[string]string // a clashing path -> the name its files went to (besidePath)
	commits   int               // commits the merge brings
	ff        bool
	facts     *mergeFacts // what run found, for a run on a later tip
	noRestart bool        // (commit) a run whose facts cannot be carried over says errTipMoved
	merged3   map[merge3Key]merge3Result
	sizes     map[plumbing.Hash]int64
	renamed   bool // the last run found renames on either side
}

// run computes the merge into tx: a fast-forward, a merge commit's tree,
// or errUpToDate.
func (m *merger) run(tx *Tx) error {
	m.conflicts, m.ignored, m.ff, m.beside = nil, nil, false, map[string]string{}
	ours := tx.head
	m.local = ours.String()[:7]
	if ours == m.theirs {
		return errUpToDate
	}
	f, err := m.factsFor(ours, tx.base)
	if err != nil {
		return err
	}
	if f.upToDate {
		return errUpToDate
	}
	m.commits = f.commits
	tx.mergedIDs = maps.Clone(f.mergedIDs)
	m.ignored = slices.Clone(f.ignored)
	if f.base == ours && len(m.ignored) == 0 && !f.sanitized {
		m.ff = true
		return m.fastForward(tx, f)
	}
	m.hooks.atMerge()
	renO, renT := renames(f.dO, f.ourRenames), renames(f.dT, f.theirRenames)
	m.renamed = len(renO) > 0 || len(renT) > 0
	if err := m.combine(tx, f.dO, f.dT, renO, renT); err != nil {
		return err
	}
	if err := m.checkLimits(tx); err != nil {
		return err
	}
	tx.merged = []plumbing.Hash{m.theirs}
	tx.SetSubject(fmt.Sprintf("memory: merge %s (%d commit(s))", m.label, m.commits))
	tx.AddTrailer("Merge-Remote", m.label)
	tx.AddTrailer("Merge-Head", m.theirs.String())
	for _, c := range m.conflicts {
		tx.AddTrailer(TrailerConflict, c.Kind+" "+policy.Display(c.Path))
	}
	for i, ig := range m.ignored {
		if i == maxIgnoredTrailers {
			tx.AddTrailer(TrailerIgnored, fmt.Sprintf("and %d more", len(m.ignored)-i))
			break
		}
		tx.AddTrailer(TrailerIgnored, ig.Path+" ("+ig.Reason+")")
	}
	return nil
}

// mergeFacts is what a merge found out about the two histories for one
// tip of ours: all but dO, ourRenames and the tip depend on the merge
// base and theirs alone.
type mergeFacts struct {
	ours     plumbing.Hash
	oursTree *node // the tip's tree
	upToDate bool  // theirs is in ours

	base         plumbing.Hash
	commits      int // theirs' commits ours lacks
	mergedIDs    map[string]plumbing.Hash
	theirRenames [][2]string // the rename trailers of theirs' commits, oldest first
	ourRenames   [][2]string // of ours'
	dT           map[string]fchange
	sanitized    bool // dT is not theirs as it is (sanitize, staleIndex): never a fast-forward
	ignored      []IgnoredEntry
	dO           map[string]fchange
}

// factsFor finds the merge's facts for the tip ours (whose tree is
// oursTree). When the facts found before were for a tip ours descends
// from through plain commits of one parent each (tool calls made
// meanwhile), only what those changed is looked at: the merge base and
// everything of theirs stay.
func (m *merger) factsFor(ours plumbing.Hash, oursTree *node) (*mergeFacts, error) {
	if f := m.facts; f != nil && f.ours == ours {
		return f, nil
	}
	if g := m.carryFacts(ours, oursTree); g != nil {
		m.facts = g
		return g, nil
	}
	if m.noRestart {
		return nil, errTipMoved
	}
	// m.st is the merge's own View, which nothing else reads meanwhile:
	// its packs are read mapped, as git reads them, not with a pread per
	// entry of each delta chain (21,000 for a pull of 10,000 commits:
	// the commits to the merge base, the sizes of the files changed).
	var f *mergeFacts
	err := m.st.Mapped(func() (err error) {
		f, err = m.findFacts(ours)
		return err
	})
	if err != nil {
		return nil, err
	}
	f.oursTree = oursTree
	m.facts = f
	return f, nil
}

// carryFacts is the facts found for an earlier tip carried over to the
// tip ours (whose tree is oursTree), when ours descends from it through
// plain commits of one parent each (tool calls made meanwhile): only what
// those changed is looked at. nil: they cannot be.
func (m *merger) carryFacts(ours plumbing.Hash, oursTree *node) *mergeFacts {
	f := m.facts
	if f == nil || f.upToDate || f.ours.IsZero() {
		return nil
	}
	news, ok := m.store.linearSince(f.ours, ours)
	if !ok {
		return nil
	}
	g := *f
	g.ours, g.oursTree = ours, oursTree
	g.ourRenames = append(slices.Clip(f.ourRenames), renameTrailers(news)...)
	g.dO = maps.Clone(f.dO)
	diffNodes(lookup(f.oursTree, memDir), lookup(oursTree, memDir), "", func(p string, _ plumbing.Hash) {
		base, ok := g.dO[p]
		if !ok {
			base = fchange{old: fileAt(f.oursTree, p)} // ours was the base there
		}
		if now := fileAt(oursTree, p); now == base.old {
			delete(g.dO, p)
		} else {
			g.dO[p] = fchange{old: base.old, new: now}
		}
	})
	return &g
}

// fileAt is the file at memory path p of a tree (absent: zero).
func fileAt(root *node, p string) fentry {
	if n := lookup(root, full(p)); n.isFile() {
		return fentry{n.hash, n.mode}
	}
	return fentry{}
}

// findFacts finds the merge's facts for the tip ours from the histories.
func (m *merger) findFacts(ours plumbing.Hash) (*mergeFacts, error) {
	f := &mergeFacts{ours: ours}
	if !ours.IsZero() {
		if in, err := m.g.IsAncestor(m.theirs, ours); err != nil {
			return nil, wrap("read the history", err)
		} else if in {
			f.upToDate = true
			return f, nil
		}
	}
	var err error
	if !ours.IsZero() {
		if f.base, err = m.g.MergeBase(ours, m.theirs); err != nil {
			return nil, wrap("find the merge base", err)
		}
		if f.base.IsZero() && !m.unrelated {
			fresh, err := m.onlyFirstCommit(ours)
			if err != nil {
				return nil, err
			}
			if !fresh {
				return nil, &UnrelatedHistoriesError{Remote: m.label, Commit: m.theirs.String()}
			}
		}
	}
	theirCommits, err := m.g.Exclusive([]plumbing.Hash{m.theirs}, parentList(ours))
	if err != nil {
		return nil, wrap("read the remote's history", err)
	}
	ourCommits, err := m.g.Exclusive(parentList(ours), []plumbing.Hash{m.theirs})
	if err != nil {
		return nil, wrap("read the history", err)
	}
	f.commits = len(theirCommits)
	f.mergedIDs = map[string]plumbing.Hash{}
	for _, c := range theirCommits {
		if len(c.Message) > maxMessageBytes {
			// A commit is taken whole or not at all: its message would go
			// into the history index and every log.
			return nil, &RemoteError{Remote: m.label, Op: "merge", Err: fmt.Errorf("the commit %s has a message of %d bytes, over the limit of %d; nothing was merged", c.Hash, len(c.Message), maxMessageBytes)}
		}
	}
	for _, c := range theirCommits {
		_, _, trailers := parseMessage(c.Message)
		if id := trailerValue(trailers, TrailerToolUseID); id != "" {
			f.mergedIDs[id] = c.Hash
		}
	}
	f.theirRenames, f.ourRenames = renameTrailers(theirCommits), renameTrailers(ourCommits)
	bRoot, oRoot, tRoot, err := m.roots(f.base, ours)
	if err != nil {
		return nil, err
	}
	m.checkOutside(bRoot, tRoot)
	f.dT = map[string]fchange{}
	if err := m.diff(m.memTree(bRoot), m.memTree(tRoot), "", f.dT); err != nil {
		return nil, wrap("compare the remote's tree", err)
	}
	f.sanitized = m.sanitize(f.dT)
	stale, err := m.staleIndex(f.base, f.dT)
	if err != nil {
		return nil, err
	}
	f.sanitized = f.sanitized || stale
	f.ignored = m.ignored
	f.dO = map[string]fchange{}
	if err := m.diff(m.memTree(bRoot), m.memTree(oRoot), "", f.dO); err != nil {
		return nil, wrap("compare the trees", err)
	}
	return f, nil
}

// onlyFirstCommit reports whether h is a memory's first commit and holds
// nothing: a memory made (gitmem init, serve) but never written to, which
// joins a shared one as a clone would.
func (m *merger) onlyFirstCommit(h plumbing.Hash) (bool, error) {
	c, err := m.g.Commit(h)
	if err != nil {
		return false, wrap("read a commit", err)
	}
	if len(c.ParentHashes) > 0 {
		return false, nil
	}
	mem := m.memTree(c.TreeHash)
	if mem.IsZero() {
		return true, nil
	}
	t, err := m.st.Tree(mem)
	if err != nil {
		return false, wrap("read a tree", err)
	}
	return len(t.Entries) == 0, nil
}

// A merge is computed without the writer lock (commit): the objects it
// reads never change, and the transaction it fills starts from the
// writer's tip as it was. Under the lock, if the tip is still there, the
// result is committed as it is; if tool calls committed meanwhile, their
// changes are put onto the merge's result and only the files both they
// and the remote changed are merged again (carry), which costs what the
// calls changed, not what the merge did. Where that does not hold (a
// rename on either side, a conflict, a file where the merge makes a
// folder) the merge is made again on the new tip from what the first
// computation found (mergeFacts: the base, theirs' changes, the line
// merges). A tip that moved otherwise (another merge, another process's
// commits) makes the merge start over without the lock; after
// mergeAttempts, under it. The calls made while the merge was computed
// are carried once without the lock too, so that under it there are
// only those made since.

const (
	mergeAttempts = 3
	rebaseMax     = 1024 // commits a merge's facts are carried over at most
)

// errTipMoved: the branch moved while a merge was computed, so that it
// must start over.
var errTipMoved = errors.New("the branch moved while the merge was computed")

// commit computes the merge and commits it as one Update (see above).
func (m *merger) commit(ctx context.Context, meta Meta) (Commit, error) {
	for attempt := 1; ; attempt++ {
		pre := m.store.newTx()
		if err := m.run(pre); err != nil {
			return Commit{}, err
		}
		// The files it merges are checked for hand edits now, before the
		// writer turn: under it, a result made from this one is not looked
		// at again (Tx.checked), which held up every call (3–4 ms for
		// 1,000 files). An edit made after this look is one made after
		// the merge's commit: the worktree's follow keeps it
		// (keepHandEdits) and the next adopt takes it, as it takes one
		// made the moment after a check under the turn. A merge made
		// again under the turn (run) is looked at there.
		var checked pathSet
		if err := m.store.adoptFiles(ctx, pre.looked()); err != nil {
			m.logf("gitmem: could not commit a hand edit before a merge: %v", scrubPaths(err))
		} else {
			checked = newPathSet(pre.looked())
		}
		m.hooks.atMergeLooked()
		if c := m.carry(pre, m.store.newTx()); c != nil {
			pre = c
		}
		m.noRestart = attempt < mergeAttempts
		c, err := m.store.Update(ctx, meta, func(tx *Tx) error {
			if tx.head == pre.head {
				*tx = *pre
				tx.checked = checked
				return nil
			}
			if c := m.carry(pre, tx); c != nil {
				pre, *tx = c, *c
				tx.checked = checked
				return nil
			}
			return m.run(tx)
		})
		m.noRestart = false
		if !errors.Is(err, errTipMoved) {
			return c, err
		}
	}
}

// carry is the merge pre holds (computed on pre.head) carried over to
// the tip of tx, a later one it descends from through tool calls (plain
// commits of one parent each): pre's result with what those calls
// changed put onto it, the files that the remote changed too merged
// again. nil when it cannot be carried so (the tip did not move, or
// moved otherwise; renames on either side; a conflict, a file left out
// or a file where the merge makes a folder, before or after; the
// limits), and the merger is then as it was: run makes the merge on
// tx's tip. tx is not changed.
func (m *merger) carry(pre, tx *Tx) *Tx {
	if tx.head == pre.head || !pre.ff.IsZero() || m.renamed || len(m.conflicts) > 0 || len(m.beside) > 0 || m.facts == nil || m.facts.ours != pre.head {
		return nil
	}
	was, ignored, local := m.facts, len(m.ignored), m.local
	c, ok := m.carryOnto(pre, tx)
	if !ok || len(m.ignored) != ignored { // (a file left out now: its trailer is not in pre's message)
		m.facts, m.ignored, m.local, m.conflicts, m.beside = was, m.ignored[:ignored], local, nil, map[string]string{}
		return nil
	}
	return c
}

// carryOnto is carry's work; false leaves the merger's state for carry
// to put back.
func (m *merger) carryOnto(pre, tx *Tx) (*Tx, bool) {
	g := m.carryFacts(tx.head, tx.base)
	if g == nil || len(renames(g.dO, g.ourRenames)) > 0 {
		return nil, false
	}
	m.facts, m.local = g, tx.head.String()[:7]
	// What the merge changes, and the folders above: a call's path at or
	// under one of its files, or that is one of its folders, is merged
	// again (dT) or makes the merge start again.
	changed, folders := map[string]bool{}, map[string]bool{}
	for _, p := range pre.Paths() {
		changed[p] = true
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			folders[d] = true
		}
	}
	c := *pre
	c.head, c.base = tx.head, tx.base
	c.pending = maps.Clone(pre.pending)
	c.ops = slices.Clone(pre.ops)
	reads := slices.Clone(*pre.reads)
	c.reads = &reads
	var again []string
	ok := true
	diffNodes(lookup(pre.base, memDir), lookup(tx.base, memDir), "", func(p string, _ plumbing.Hash) {
		if !ok {
			return
		}
		if _, theirs := g.dT[p]; theirs {
			again = append(again, p)
		} else if p == "" || changed[p] || folders[p] {
			ok = false
			return
		}
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if changed[d] {
				ok = false
				return
			}
		}
		root, err := with(c.root, split(full(p)), lookup(tx.base, full(p))) // ours, as the call left it
		if err != nil {
			ok = false
			return
		}
		c.root = root
	})
	if !ok {
		return nil, false
	}
	cb := &combination{m: m, tx: &c, dO: g.dO, dT: g.dT, writes: map[string]result{}}
	for _, p := range again {
		var err error
		if g.dT[p].old.present() {
			err = cb.theirChange(p, nil, nil)
		} else {
			err = cb.put(p, result{entry: g.dT[p].new}, fentry{}, "")
		}
		if err != nil {
			return nil, false
		}
	}
	if err := m.apply(&c, cb.removes, cb.writes); err != nil || len(m.conflicts) > 0 || len(m.beside) > 0 || m.checkLimits(&c) != nil {
		return nil, false
	}
	return &c, true
}

// mergeStore is what a merge needs of the memory it merges into, besides
// the objects it reads through a view of its own (merger.st, g): a
// transaction over HEAD to compute the merge on, the Update that commits
// it, and its commits and trees as the memory's readers share them. A
// Repo is one.
type mergeStore interface {
	newTx() *Tx
	// adoptFiles commits the hand edits of the files given first.
	adoptFiles(ctx context.Context, rels []string) error
	Update(ctx context.Context, meta Meta, fn func(tx *Tx) error) (Commit, error)
	linearSince(from, to plumbing.Hash) ([]*object.Commit, bool)
	// readTree reads the tree h into nodes, reusing old's (loadTree).
	readTree(h plumbing.Hash, old *node) (*node, error)
}

// readTree is loadTree with objects.mu held (mergeStore).
func (r *Repo) readTree(h plumbing.Hash, old *node) (n *node, err error) {
	r.objects.lock()
	defer r.objects.unlock()
	// Read mapped: a fast-forward over many commits reads each changed
	// tree and the size of each changed file, a pread each (9,000 for a
	// pull of 10,000 commits).
	err = r.objects.st.Mapped(func() (err error) {
		n, err = r.loadTree(h, old, "")
		return err
	})
	return n, err
}

// linearSince returns the commits from descends to through commits of
// one parent each (at most rebaseMax), oldest first, or false.
func (r *Repo) linearSince(from, to plumbing.Hash) ([]*object.Commit, bool) {
	r.objects.holdPacks()
	defer r.objects.dropPacks()
	var out []*object.Commit
	for to != from {
		if len(out) == rebaseMax {
			return nil, false
		}
		r.objects.lock() // a commit at a time: readers go on between
		c, err := r.objects.st.Commit(to)
		r.objects.unlock()
		if err != nil || len(c.ParentHashes) != 1 {
			return nil, false
		}
		out = append(out, c)
		to = c.ParentHashes[0]
	}
	slices.Reverse(out)
	return out, true
}

// roots reads the root trees of the merge base, ours and theirs.
func (m *merger) roots(base, ours plumbing.Hash) (b, o, t plumbing.Hash, err error) {
	for _, x := range []struct {
		commit plumbing.Hash
		tree   *plumbing.Hash
	}{{base, &b}, {ours, &o}, {m.theirs, &t}} {
		if x.commit.IsZero() {
			continue
		}
		c, cerr := m.g.Commit(x.commit)
		if cerr != nil {
			return b, o, t, wrap("read a commit", cerr)
		}
		*x.tree = c.TreeHash
	}
	return b, o, t, nil
}

// memTree is the memories/ subtree of a root tree (zero: none).
func (m *merger) memTree(root plumbing.Hash) plumbing.Hash {
	if root.IsZero() {
		return root
	}
	t, err := m.st.Tree(root)
	if err != nil {
		return plumbing.ZeroHash
	}
	for _, e := range t.Entries {
		if e.Name == memDir && e.Mode == filemode.Dir {
			return e.Hash
		}
	}
	return plumbing.ZeroHash
}

// checkOutside notes the entries of the remote's root, other than
// memories/, that changed since the merge base: a gitmem memory holds
// nothing else, and the merge does not take them.
func (m *merger) checkOutside(base, theirs plumbing.Hash) {
	entries := func(h plumbing.Hash) map[string]object.TreeEntry {
		out := map[string]object.TreeEntry{}
		if h.IsZero() {
			return out
		}
		if t, err := m.st.Tree(h); err == nil {
			for _, e := range t.Entries {
				out[e.Name] = e
			}
		}
		return out
	}
	b, t := entries(base), entries(theirs)
	for _, name := range slices.Sorted(maps.Keys(t)) {
		e := t[name]
		if name == memDir && e.Mode == filemode.Dir {
			continue
		}
		if be, ok := b[name]; !ok || be.Hash != e.Hash || be.Mode != e.Mode {
			m.ignore(oneLine(name), "outside memories/")
		}
	}
	if e, ok := t[memDir]; ok && e.Mode != filemode.Dir {
		m.ignore(memDir, "not a folder")
	}
}

func (m *merger) ignore(path, reason string) {
	m.ignored = append(m.ignored, IgnoredEntry{Path: path, Reason: reason})
}

// diff records in out every file path (relative to memories/) that
// differs between trees a and b, skipping equal subtrees. A path longer
// than a memory path can be is not followed.
func (m *merger) diff(a, b plumbing.Hash, prefix string, out map[string]fchange) error {
	if a == b {
		return nil
	}
	if len(prefix) > policy.MaxPathBytes {
		out[prefix] = fchange{new: fentry{hash: b, mode: filemode.Dir}}
		return nil
	}
	ea, twiceA, err := m.entries(a)
	if err != nil {
		return err
	}
	eb, twiceB, err := m.entries(b)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(mapUnion(ea, eb))) {
		x, y := ea[name], eb[name]
		if x.Hash == y.Hash && x.Mode == y.Mode {
			continue
		}
		p := join2(prefix, name)
		if name == "" || strings.Contains(name, "/") {
			// Not one path component (git fsck: emptyName, fullPathname):
			// joined, it would name a file the tree does not hold.
			if !y.Hash.IsZero() {
				m.ignore(memDir+"/"+displayPath(p), "not a valid memory path")
			}
			continue
		}
		if twiceA[name] || twiceB[name] {
			if twiceB[name] {
				m.ignore(memDir+"/"+displayPath(p), "named twice in its folder")
			}
			continue
		}
		var xt, yt plumbing.Hash
		var xf, yf fentry
		if x.Mode == filemode.Dir {
			xt = x.Hash
		} else if !x.Hash.IsZero() {
			xf = fentry{x.Hash, x.Mode}
		}
		if y.Mode == filemode.Dir {
			yt = y.Hash
		} else if !y.Hash.IsZero() {
			yf = fentry{y.Hash, y.Mode}
		}
		if xf.present() || yf.present() {
			out[p] = fchange{old: xf, new: yf}
		}
		if !xt.IsZero() || !yt.IsZero() {
			if err := m.diff(xt, yt, p, out); err != nil {
				return err
			}
		}
	}
	return nil
}

func mapUnion(a, b map[string]object.TreeEntry) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// entries is the tree h by name, and the names it holds more than once
// (git fsck: duplicateEntries; which of them was meant is unknown).
func (m *merger) entries(h plumbing.Hash) (map[string]object.TreeEntry, map[string]bool, error) {
	out, twice := map[string]object.TreeEntry{}, map[string]bool{}
	if h.IsZero() {
		return out, twice, nil
	}
	t, err := m.st.Tree(h)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range t.Entries {
		if _, dup := out[e.Name]; dup {
			twice[e.Name] = true
		}
		out[e.Name] = e
	}
	return out, twice, nil
}

// sanitize checks every entry the remote's side sets: a path, mode or
// size the memory cannot hold is not taken (its change is dropped, so the
// memory keeps what it had) and noted; an executable file becomes a
// regular one. It reports whether it made any change.
func (m *merger) sanitize(d map[string]fchange) bool {
	changed := false
	for _, p := range slices.Sorted(maps.Keys(d)) {
		c := d[p]
		if !c.new.present() {
			if checkRel(p) != nil { // the remote deleted something the memory cannot hold anyway
				delete(d, p)
			}
			continue
		}
		reason := ""
		switch {
		case checkRel(p) != nil:
			reason = "not a valid memory path"
		case c.new.mode == filemode.Symlink:
			reason = "a symlink"
		case c.new.mode == filemode.Submodule:
			reason = "a submodule"
		case c.new.mode == filemode.Dir:
			reason = "nested too deep"
		case c.new.mode != filemode.Regular && c.new.mode != filemode.Executable && c.new.mode != filemode.Deprecated:
			reason = "not a regular file"
		}
		if reason == "" {
			if n, err := m.st.Size(c.new.hash); err != nil {
				reason = "its content is missing"
			} else if m.limits.MaxFileBytes > 0 && n > m.limits.MaxFileBytes {
				reason = fmt.Sprintf("%d bytes, over the limit of %d per file", n, m.limits.MaxFileBytes)
			}
		}
		if reason != "" {
			m.ignore(memDir+"/"+displayPath(p), reason)
			delete(d, p)
			changed = true
			continue
		}
		if c.new.mode != filemode.Regular {
			c.new.mode = filemode.Regular
			d[p] = c
			changed = true
		}
	}
	return changed
}

// displayPath is a path from a tree as it can be shown on one line.
func displayPath(p string) string {
	if len(p) > 300 {
		p = p[:300] + "..."
	}
	return strings.ToValidUTF8(oneLine(p), "\uFFFD")
}

// fastForward makes tx the remote's tree (f.dT changed), for the branch
// to move to it. The renames among the commits it brings (their
// trailers) move the hand edits kept of their files (repairs.moveKept),
// as a rename commit of the memory's own does.
func (m *merger) fastForward(tx *Tx, f *mergeFacts) error {
	dT := f.dT
	c, err := m.g.Commit(m.theirs)
	if err != nil {
		return wrap("read the remote's commit", err)
	}
	root, err := m.store.readTree(c.TreeHash, tx.root)
	if err != nil {
		return err
	}
	if err := m.checkUsage(lookup(root, memDir), lookup(tx.root, memDir)); err != nil {
		return err
	}
	tx.root = root
	paths := slices.Sorted(maps.Keys(dT))
	for _, p := range paths {
		if !dT[p].new.present() {
			tx.ops = append(tx.ops, op{kind: 'r', from: p})
		}
	}
	for _, p := range paths {
		if dT[p].new.present() {
			tx.ops = append(tx.ops, op{kind: 'w', to: p})
		}
	}
	tx.ff = m.theirs
	tx.pulled = nil
	for _, mv := range f.theirRenames {
		if checkRel(mv[0]) == nil && checkRel(mv[1]) == nil {
			tx.pulled = append(tx.pulled, [2]string{full(mv[0]), full(mv[1])})
		}
	}
	return nil
}

// renameTrailers is what the rename commits among commits (oldest first)
// moved: from, to, relative to memories/.
func renameTrailers(commits []*object.Commit) [][2]string {
	var out [][2]string
	for _, c := range commits {
		_, _, trailers := parseMessage(c.Message)
		if trailerValue(trailers, TrailerCommand) != "rename" {
			continue
		}
		from := strings.TrimPrefix(trailerValue(trailers, TrailerPath), "/memories/")
		to := strings.TrimPrefix(trailerValue(trailers, TrailerNewPath), "/memories/")
		if from != "" && to != "" {
			out = append(out, [2]string{from, to})
		}
	}
	return out
}

// renames finds what one side renamed: the base path a file had, to the
// path it has on that side. The side's rename commits (their
// Memory-Command: rename trailers, oldest first) say where a file went,
// also when it was edited after; a file deleted at one path and added
// with the same content at another (an adopted hand rename) counts too.
func renames(d map[string]fchange, moves [][2]string) map[string]string {
	out := map[string]string{}
	track := map[string]string{} // base path deleted on this side -> where it went
	for p, c := range d {
		if c.old.present() && !c.new.present() {
			track[p] = p
		}
	}
	if len(track) == 0 {
		return out
	}
	for _, mv := range moves {
		for bp, cur := range track {
			track[bp] = movePath(cur, mv[0], mv[1])
		}
	}
	taken := map[string]bool{}
	added := func(p string) bool { c, ok := d[p]; return ok && !c.old.present() && c.new.present() }
	for _, bp := range slices.Sorted(maps.Keys(track)) {
		if cur := track[bp]; cur != bp && added(cur) && !taken[cur] {
			out[bp], taken[cur] = cur, true
		}
	}
	byBlob := map[plumbing.Hash][]string{}
	for _, p := range slices.Sorted(maps.Keys(d)) {
		if added(p) && !taken[p] {
			byBlob[d[p].new.hash] = append(byBlob[d[p].new.hash], p)
		}
	}
	for _, bp := range slices.Sorted(maps.Keys(track)) {
		if _, ok := out[bp]; ok {
			continue
		}
		if l := byBlob[d[bp].old.hash]; len(l) > 0 {
			out[bp] = l[0]
			byBlob[d[bp].old.hash] = l[1:]
		}
	}
	return out
}

// result is a version of a file the merge writes: an existing blob (the
// remote's or the memory's) or new content (a line merge).
type result struct {
	entry fentry
	data  []byte // non-nil: merged content
}

func (w result) present() bool { return w.entry.present() || w.data != nil }

func (w result) same(v result) bool {
	return w.data == nil && v.data == nil && w.entry.hash == v.entry.hash
}

// combine applies the remote's changes (dT, against the merge base) to
// the transaction, which holds ours, in the light of our own (dO).
func (m *merger) combine(tx *Tx, dO, dT map[string]fchange, renO, renT map[string]string) error {
	cb := &combination{m: m, tx: tx, dO: dO, dT: dT, writes: map[string]result{}}
	for _, bp := range slices.Sorted(maps.Keys(dT)) {
		if !dT[bp].old.present() {
			continue // added on their side: below
		}
		if err := cb.theirChange(bp, renO, renT); err != nil {
			return err
		}
	}
	theirTarget := map[string]bool{}
	for _, q := range renT {
		theirTarget[q] = true
	}
	for _, q := range slices.Sorted(maps.Keys(dT)) {
		if c := dT[q]; !c.old.present() && !theirTarget[q] {
			if err := cb.put(q, result{entry: c.new}, fentry{}, ""); err != nil {
				return err
			}
		}
	}
	tx.pulled = inOrder(cb.moved)
	return m.apply(tx, cb.removes, cb.writes)
}

// inOrder is moves, made at once (from, to), in an order that moves a
// path as they do when applied one after the other (repairs.moveKept):
// a move onto a path another one moves away comes after it. Moves that
// form a cycle (a swap) are left out.
func inOrder(moves [][2]string) [][2]string {
	var out [][2]string
	for len(moves) > 0 {
		away := map[string]bool{}
		for _, mv := range moves {
			away[mv[0]] = true
		}
		var rest [][2]string
		for _, mv := range moves {
			if away[mv[1]] {
				rest = append(rest, mv) // after the move away from its target
			} else {
				out = append(out, mv)
			}
		}
		if len(rest) == len(moves) {
			break // a cycle
		}
		moves = rest
	}
	return out
}

// combination is the result of a merge being made (combine): the files
// it writes and the paths it removes, over the transaction (ours) and
// both sides' changes against the merge base.
type combination struct {
	m       *merger
	tx      *Tx
	dO, dT  map[string]fchange
	writes  map[string]result
	removes []string
	moved   [][2]string // our files it moves where the remote renamed them (repository paths)
}

// oursAt is our file at p.
func (cb *combination) oursAt(p string) fentry {
	n := lookup(cb.tx.base, full(p))
	if !n.isFile() {
		return fentry{}
	}
	return fentry{n.hash, n.mode}
}

// baseAt is the file at p at the merge base.
func (cb *combination) baseAt(p string) fentry {
	if c, ok := cb.dO[p]; ok {
		return c.old
	}
	if c, ok := cb.dT[p]; ok {
		return c.old
	}
	return cb.oursAt(p) // neither side changed it
}

// put makes q hold the remote's version t, merged line by line (base:
// what q held at the merge base) with what q holds so far: ours, or
// what the merge already wrote there. So a file one side renamed onto
// a path where the other wrote one keeps both, and the path is an
// add/add conflict besides the rename's. A conflict of kind is noted,
// or, without one, a content conflict the line merge found.
func (cb *combination) put(q string, t result, base fentry, kind string) error {
	o, ok := cb.writes[q]
	if !ok {
		o = result{entry: cb.oursAt(q)}
	}
	both := false // both sides added a file at q
	switch {
	case !o.present() || o.same(result{entry: base}):
		cb.writes[q] = t
	case o.same(t):
	default:
		data, clean, err := cb.m.merge3(result{entry: base}, o, t)
		if err != nil {
			return err
		}
		cb.writes[q] = result{data: data}
		if !base.present() {
			both = true
		} else if kind == "" && !clean {
			kind = "content"
		}
	}
	if kind != "" {
		cb.m.conflict(kind, q)
	}
	if both {
		cb.m.conflict("add/add", q)
	}
	return nil
}

// theirChange applies the remote's change of the file the merge base
// held at bp (renamed, edited or deleted), in the light of ours.
func (cb *combination) theirChange(bp string, renO, renT map[string]string) error {
	c := cb.dT[bp]
	oq, oRenamed := renO[bp]
	oc, oChanged := cb.dO[bp]
	oDeleted := oChanged && !oc.new.present() && !oRenamed
	tq, tRenamed := renT[bp]
	switch {
	case tRenamed:
		t := result{entry: cb.dT[tq].new}
		switch {
		case oRenamed && oq == tq: // both moved it to the same place
			return cb.put(tq, t, c.old, "")
		case oRenamed:
			return cb.put(tq, t, cb.baseAt(tq), "rename/rename")
		case oDeleted:
			return cb.put(tq, t, cb.baseAt(tq), "delete/rename")
		case oChanged: // our edit goes with their rename
			cb.removes = append(cb.removes, bp)
			cb.moved = append(cb.moved, [2]string{full(bp), full(tq)})
			data, _, err := cb.m.merge3(result{entry: c.old}, result{entry: cb.oursAt(bp)}, t)
			if err != nil {
				return err
			}
			return cb.put(tq, result{data: data}, cb.baseAt(tq), "edit/rename")
		default:
			cb.removes = append(cb.removes, bp)
			cb.moved = append(cb.moved, [2]string{full(bp), full(tq)})
			return cb.put(tq, t, cb.baseAt(tq), "")
		}
	case c.new.present(): // they edited it
		switch {
		case oRenamed:
			return cb.put(oq, result{entry: c.new}, c.old, "rename/edit")
		case oDeleted:
			return cb.put(bp, result{entry: c.new}, c.old, "delete/edit")
		default:
			return cb.put(bp, result{entry: c.new}, c.old, "")
		}
	default: // they deleted it
		switch {
		case oRenamed:
			cb.m.conflict("rename/delete", oq)
		case oDeleted:
		case oChanged:
			cb.m.conflict("edit/delete", bp)
		default:
			cb.removes = append(cb.removes, bp)
		}
		return nil
	}
}

func (m *merger) conflict(kind, p string) {
	m.conflicts = append(m.conflicts, MergeConflict{Kind: kind, Path: p})
}

// Conflict markers. A region both sides changed differently is written
// as both versions, ours first.
const (
	markerOurs   = "<<<<<<< "
	markerSep    = "=======\n"
	markerTheirs = ">>>>>>> "
)

// merge3 merges three versions of a file (absent ones are empty): a
// region both changed differently holds both versions between conflict
// markers. It reports whether there was no such region.
func (m *merger) merge3(base, ours, theirs result) ([]byte, bool, error) {
	// The same three blobs merge the same way: a merge made again on a
	// later tip (commit) takes what the first one made, but a conflict's
	// markers name the tip.
	key, keyed := merge3Key{base.entry.hash, ours.entry.hash, theirs.entry.hash}, base.data == nil && ours.data == nil && theirs.data == nil
	if r, ok := m.merged3[key]; keyed && ok && (r.clean || r.local == m.local) {
		return r.data, r.clean, nil
	}
	var texts [3][]string
	for i, v := range []result{base, ours, theirs} {
		data := v.data
		if v.entry.present() {
			var err error
			if data, err = m.st.Blob(v.entry.hash); err != nil {
				return nil, false, wrap("read a file to merge", err)
			}
		}
		texts[i] = splitKeep(string(data))
	}
	data, clean := mergeMarked(texts, "local "+m.local, m.label+" "+m.theirs.String()[:7])
	data = append([]byte{}, data...) // non-nil, also when empty
	if keyed {
		if m.merged3 == nil {
			m.merged3 = map[merge3Key]merge3Result{}
		}
		m.merged3[key] = merge3Result{data, clean, m.local}
	}
	return data, clean, nil
}

// merge3Key is the blobs of a line merge: base, ours, theirs.
type merge3Key [3]plumbing.Hash

// merge3Result is a line merge's result; local names the tip its markers
// name (merger.local).
type merge3Result struct {
	data  []byte
	clean bool
	local string
}

// mergeMarked merges three versions of a text, split into lines: a region
// both changed differently holds both versions between conflict markers
// naming them. It reports whether there was no such region.
//
// Conflict markers never nest: a region both changed that meets a
// conflict block (an earlier merge's, not yet resolved) of the base or
// of either side takes in the whole block. When the region is that
// block on every side, its two halves are merged each on its own (lines
// both sides changed kept one after the other); otherwise each side's
// lines of the region are written without the markers they hold. Every
// line is kept, one block deep.
func mergeMarked(texts [3][]string, ours, theirs string) ([]byte, bool) {
	lines, conflicts := mergeAround(texts[0], texts[1], texts[2], markedBlocks, func(c Conflict) []string {
		o, t := unmarked(c.Ours), unmarked(c.Theirs)
		bo, bt, ok1 := blockHalves(texts[0][c.BaseStart:c.BaseEnd])
		oo, ot, ok2 := blockHalves(c.Ours)
		to, tt, ok3 := blockHalves(c.Theirs)
		if ok1 && ok2 && ok3 {
			o, t = mergeBoth(bo, oo, to), mergeBoth(bt, ot, tt)
		}
		out := []string{markerOurs + ours + "\n"}
		out = append(out, endLine(o)...)
		out = append(out, markerSep)
		out = append(out, endLine(t)...)
		return append(out, markerTheirs+theirs+"\n")
	})
	return []byte(strings.Join(lines, "")), len(conflicts) == 0
}

// mergeBoth merges three versions of lines, keeping a region both changed
// differently as both versions, one after the other.
func mergeBoth(base, ours, theirs []string) []string {
	out, _ := mergeFill(base, ours, theirs, func(c Conflict) []string {
		return append(endLine(unmarked(c.Ours)), unmarked(c.Theirs)...)
	})
	return out
}

// blockHalves splits lines that are one conflict block, nothing around it
// and no other marker in it, into its two halves.
func blockHalves(lines []string) (ours, theirs []string, ok bool) {
	n := len(lines)
	if n < 3 || !strings.HasPrefix(lines[0], markerOurs) || !strings.HasPrefix(lines[n-1], markerTheirs) {
		return nil, nil, false
	}
	sep := -1
	for i, l := range lines[1 : n-1] {
		if !isMarker(l) {
			continue
		}
		if sep >= 0 || strings.TrimSuffix(l, "\n") != strings.TrimSuffix(markerSep, "\n") {
			return nil, nil, false
		}
		sep = i + 1
	}
	if sep < 0 {
		return nil, nil, false
	}
	return lines[1:sep], lines[sep+1 : n-1], true
}

// isMarker reports whether a line is a conflict marker line.
func isMarker(line string) bool {
	return strings.HasPrefix(line, markerOurs) || strings.HasPrefix(line, markerTheirs) ||
		line == markerSep || line == strings.TrimSuffix(markerSep, "\n")
}

// markedBlocks returns the conflict blocks in lines, outermost, as
// [start, end) line ranges: from a "<<<<<<< " line to the ">>>>>>> "
// line that closes it (one left open runs to the end).
func markedBlocks(lines []string) [][2]int {
	var out [][2]int
	depth, start := 0, 0
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, markerOurs):
			if depth == 0 {
				start = i
			}
			depth++
		case strings.HasPrefix(l, markerTheirs) && depth > 0:
			if depth--; depth == 0 {
				out = append(out, [2]int{start, i + 1})
			}
		}
	}
	if depth > 0 {
		out = append(out, [2]int{start, len(lines)})
	}
	return out
}

// unmarked is lines without their conflict marker lines.
func unmarked(lines []string) []string {
	out := lines[:0:0]
	for _, l := range lines {
		if !isMarker(l) {
			out = append(out, l)
		}
	}
	return out
}

// endLine makes sure the last line ends with a newline, so that a marker
// after it starts a line of its own.
func endLine(lines []string) []string {
	if n := len(lines); n > 0 && !strings.HasSuffix(lines[n-1], "\n") {
		lines = append(slices.Clip(lines[:n-1]), lines[n-1]+"\n")
	}
	return lines
}

// apply writes the merge's result into the transaction: removals first,
// then the files. A file that cannot go where the remote had it (a folder
// is there, or a file where its folder should be) is written beside: its
// first clashing name gets ~REMOTE, or ~REMOTE-2, ~REMOTE-3, ..., the
// first that neither the memory nor the merge's other writes hold.
func (m *merger) apply(tx *Tx, removes []string, writes map[string]result) error {
	for _, p := range removes {
		if _, ok := writes[p]; ok {
			continue
		}
		if err := tx.Remove(p); err != nil && !errors.Is(err, ErrNotExist) {
			return err
		}
	}
	paths := slices.Sorted(maps.Keys(writes))
	for _, p := range paths {
		w := writes[p]
		err := m.write(tx, p, w)
		if !errors.Is(err, ErrIsDir) && !errors.Is(err, ErrNotDir) {
			if err != nil {
				return err
			}
			continue
		}
		q, ok := m.besidePath(tx, p, paths)
		if !ok {
			// No name beside fits (the path is at the length limit): the
			// remote's file is left out, named, and the sync goes on.
			m.ignore(memDir+"/"+displayPath(p), "clashes with a file or folder here, and no name beside it fits")
			continue
		}
		if err := m.write(tx, q, w); err != nil {
			return err
		}
		m.conflict("file/folder", q)
	}
	return nil
}

func (m *merger) write(tx *Tx, p string, w result) error {
	if w.entry.present() {
		size, ok := m.sizes[w.entry.hash]
		if !ok {
			var err error
			if size, err = m.st.Size(w.entry.hash); err != nil {
				return wrap("read a file to merge", err)
			}
			if m.sizes == nil {
				m.sizes = map[plumbing.Hash]int64{}
			}
			m.sizes[w.entry.hash] = size
		}
		return tx.putBlob(p, w.entry.hash, size)
	}
	return tx.WriteFile(p, w.data)
}

// besidePath is where p goes when it clashes with what the transaction
// holds (a file where a folder is needed, or a folder where the file
// goes): its first clashing component renamed name~REMOTE, then
// name~REMOTE-2, ..., to a name nothing holds — neither the transaction
// nor any of the merge's writes (so nothing is written over) — and cut
// short where the name or the path would be too long (false: none fits).
// The files of one clashing folder go to one name.
func (m *merger) besidePath(tx *Tx, p string, writes []string) (string, bool) {
	parts := strings.Split(p, "/")
	i := 0
	for ; i < len(parts); i++ {
		n := lookup(tx.root, full(strings.Join(parts[:i+1], "/")))
		if n == nil {
			break
		}
		if last := i == len(parts)-1; !last && !n.isDir() || last && n.isDir() {
			break
		}
	}
	i = min(i, len(parts)-1)
	key := strings.Join(parts[:i+1], "/")
	if c, ok := m.beside[key]; ok {
		if q := strings.Join(append([]string{c}, parts[i+1:]...), "/"); lookup(tx.root, full(q)) == nil && checkRel(q) == nil {
			return q, true
		}
	}
	held := func(c string) bool {
		if lookup(tx.root, full(c)) != nil {
			return true
		}
		for _, w := range writes {
			if w == c || strings.HasPrefix(w, c+"/") {
				return true
			}
		}
		return false
	}
	base := strings.SplitN(m.label, "/", 2)[0]
	for attempt := 1; attempt <= 1000; attempt++ {
		suffix := "~" + base
		if attempt > 1 {
			suffix += fmt.Sprintf("-%d", attempt)
		}
		// Too long a name or path is cut short: the clashing name first,
		// then, under it, the file's own name.
		name, rest := parts[i], slices.Clone(parts[i+1:])
		over := max(len(name)+len(suffix)-policy.MaxSegmentBytes, len(policy.Display(p))+len(suffix)-policy.MaxPathBytes, 0)
		cut := min(over, len(name)-1)
		name, over = cutName(name, len(name)-cut), over-cut
		if n := len(rest); over > 0 && n > 0 {
			rest[n-1] = cutName(rest[n-1], len(rest[n-1])-over)
		}
		c := strings.Join(append(slices.Clone(parts[:i]), name+suffix), "/")
		q := strings.Join(append([]string{c}, rest...), "/")
		if checkRel(q) == nil && !held(c) {
			m.beside[key] = c
			return q, true
		}
		if len(policy.Display(q)) > policy.MaxPathBytes {
			return "", false // a longer suffix fits no better
		}
	}
	return "", false
}

// cutName is name cut to at most n bytes (at least one), on a character
// boundary.
func cutName(name string, n int) string {
	if n >= len(name) {
		return name
	}
	return strings.ToValidUTF8(name[:max(n, 1)], "")
}

// checkLimits refuses a merge whose result is over the memory's limits
// (when the memory was not already over them).
func (m *merger) checkLimits(tx *Tx) error {
	return m.checkUsage(lookup(tx.root, memDir), lookup(tx.base, memDir))
}

func (m *merger) checkUsage(after, before *node) error {
	files, size := 0, int64(0)
	if after.isDir() {
		files, size = after.files, after.size
	}
	bf, bs := 0, int64(0)
	if before.isDir() {
		bf, bs = before.files, before.size
	}
	l := m.limits
	switch {
	case l.MaxFiles > 0 && files > l.MaxFiles && files > bf:
		return &LimitError{What: fmt.Sprintf("%d files, over the limit of %d", files, l.MaxFiles)}
	case l.MaxTotalBytes > 0 && size > l.MaxTotalBytes && size > bs:
		return &LimitError{What: fmt.Sprintf("%d bytes, over the limit of %d", size, l.MaxTotalBytes)}
	}
	return nil
}

// LimitError refuses a pull whose result would pass the memory's limits;
// nothing was merged.
type LimitError struct{ What string }

func (e *LimitError) Error() string {
	return "gitmem: the merged memory would hold " + e.What + "; nothing was merged (raise the limit to take it)"
}

// putBlob makes p hold an existing blob (already in the object store).
func (tx *Tx) putBlob(p string, h plumbing.Hash, size int64) error {
	if p == "" {
		return ErrIsDir
	}
	if err := checkRel(p); err != nil {
		return err
	}
	if old := lookup(tx.root, full(p)); old.isDir() {
		return ErrIsDir
	}
	root, err := with(tx.root, split(full(p)), &node{mode: filemode.Regular, hash: h, size: size})
	if err != nil {
		return err
	}
	tx.root = root
	tx.ops = append(tx.ops, op{kind: 'w', to: p})
	return nil
}

// conflictPaths are the memory paths a merge commit's Memory-Conflict
// trailers name (never nil).
func (h *histRec) conflictPaths() map[string]bool {
	out := map[string]bool{}
	for _, t := range h.trailers {
		if strings.EqualFold(t.Key, TrailerConflict) {
			if _, p, ok := strings.Cut(t.Value, " "); ok {
				out[strings.TrimPrefix(p, "/memories/")] = true
			}
		}
	}
	return out
}
