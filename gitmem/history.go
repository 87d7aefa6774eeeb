package gitmem

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// The history index: one record per commit reachable from HEAD — both
// sides of every merge — in topological order (every commit after its
// parents; otherwise in the order the commits reached this repository),
// with what log, blame and expire need: the trailers and the memory files
// each commit changed against its first parent. go-git's path-filtered log
// diffs every commit (21 s for 1,001 touching commits of 10,001), so gitmem
// keeps this index itself: appended at each commit, kept in
// .git/gitmem/history, caught up from git when HEAD moved elsewhere (a walk
// back over every parent to commits the index knows, so a merge costs the
// commits it brings), and rebuilt when the history was rewritten. It is a
// cache: git stays the truth. Version 5 records every parent (version 4,
// first-parent only, is rebuilt); version 6 each record's twin flag
// (version 5 is read and written anew with them).

// historyIndex is the history index in memory and its file,
// .git/gitmem/history: what it holds, who builds it, how it is saved.
// Reading git's objects to catch it up, and taking the writer lock to
// save it, are the Repo's (catchUp, saveGrowth, startBuild); this part
// only installs what they found and writes the file.
type historyIndex struct {
	path  string // .git/gitmem/history
	chunk int    // how much of the file tail reads at a time (tailChunk, or a test's)

	// buildMu lets one catch-up run at a time. Taken after the writer
	// turn (the writer turn), before mu and the object store's lock (objects.mu), and never
	// with either held: a catch-up takes objects.mu per commit, so that tool
	// calls, views and the commit pipeline go on meanwhile.
	buildMu sync.Mutex
	// fileMu guards writes of the file (and its removal). Taken after
	// the materialiser's lock (disk.mu: appendHistory) and before mu.
	fileMu sync.Mutex
	// mu guards every field below. Taken after fileMu, buildMu and the
	// log files' lock (publish), before objects.mu; never held across a read
	// of git's objects.
	mu      sync.Mutex
	recs    []histRec     // the index, oldest first (nil until loaded)
	loaded  bool          // recs was read from the file (or taken as empty)
	gen     int           // bumped when the index is dropped (a redaction, a rebuild)
	sound   bool          // the file recs was read from was whole to its end
	stop    bool          // closing: no new background build; a running one gives up
	want    plumbing.Hash // the commit the background build is to reach
	running bool          // a background build is under way

	wg     sync.WaitGroup // the background build
	saving atomic.Int32   // saves under way in this process: the writer lock is kept (release)
	reads  atomic.Int64   // times the file was opened to be read (for tests)
	// linksDecoded counts the records whose links tail decoded (not
	// compared as text: see descent), for tests.
	linksDecoded atomic.Int64
	tailBytes    atomic.Int64 // bytes tail read (for tests)
}

func newHistoryIndex(gitDir string, hooks *testHooks) *historyIndex {
	return &historyIndex{path: filepath.Join(gitDir, "gitmem", "history"), chunk: hooks.tail()}
}

// saveMode says how history saves an index it had to catch up.
type saveMode int

const (
	noSave   saveMode = iota
	saveHeld          // the caller holds the writer turn and the writer lock
	// saveFree: the caller holds no lock. The index is saved under the
	// writer lock: this process's when it owns it, else the lock taken
	// for the save alone when no other process holds it (a read-only
	// process, or one that let the lock go). A process that holds it is
	// a writer, which saves what it builds.
	saveFree
)

// errHistoryReset is a catch-up's error when the index was dropped while
// it read the history (a redaction): it is read again from the new HEAD.
var errHistoryReset = errors.New("gitmem: the history index was dropped meanwhile")

// history returns the index up to head, oldest first, loading or catching
// it up as needed, and saves it when it grew (save says how). The
// returned slice must not be modified.
func (r *Repo) history(head plumbing.Hash, save saveMode, progress Progress) ([]histRec, error) {
	hist, grew, err := r.hist().catchUp(head, progress)
	if err == nil && grew != nil && save != noSave {
		r.saveGrowth(*grew, save)
	}
	return hist, err
}

// histGrowth is what a catch-up added: recs after oldTip (appendOnly),
// or an index that drops records HEAD no longer reaches (a rewritten
// history).
type histGrowth struct {
	oldTip     plumbing.Hash
	appendOnly bool
	recs       []histRec
	gen        int
}

// catchUp brings the index in memory up to head: the commits it lacks
// are read from git and recorded (their trees compared), with no lock but
// buildMu held for long — objects.mu is taken per object — so that tool calls, views
// and the commit pipeline go on meanwhile. It reports what it added (nil:
// the index was at head already).
func (hr historyReader) catchUp(head plumbing.Hash, progress Progress) ([]histRec, *histGrowth, error) {
	c := hr.x.startCatchUp()
	defer c.done()
	base, gen := hr.x.base()
	oldTip := tipOf(base)
	if oldTip == head {
		if !hr.x.isSound() {
			// Read from a file to write anew (of version 5, or torn
			// after head's record): saved as it is.
			return base, &histGrowth{oldTip: oldTip, gen: gen}, nil
		}
		return base, nil, nil
	}
	hr.o.holdPacks()
	defer hr.o.dropPacks()
	w, err := hr.walkNew(head, base)
	if err != nil {
		return nil, nil, err
	}
	return hr.record(c, base, gen, w, progress)
}

// catchingUp is the index's buildMu held: the one catch-up under way.
type catchingUp struct{ x *historyIndex }

// startCatchUp takes buildMu, waiting for a catch-up under way.
func (x *historyIndex) startCatchUp() catchingUp {
	x.buildMu.Lock()
	return catchingUp{x}
}

// tryCatchUp takes buildMu unless a catch-up is under way.
func (x *historyIndex) tryCatchUp() (catchingUp, bool) {
	if !x.buildMu.TryLock() {
		return catchingUp{}, false
	}
	return catchingUp{x}, true
}

func (c catchingUp) done() { c.x.buildMu.Unlock() }

// record records the commits a walk found (their trees compared, objects.mu
// taken per commit) and installs the index base grew into, unless it was
// dropped or changed meanwhile (errHistoryReset), within the catch-up c.
func (hr historyReader) record(c catchingUp, base []histRec, gen int, w newCommits, progress Progress) ([]histRec, *histGrowth, error) {
	oldTip := tipOf(base)
	hr.hooks.atCatchUp()
	recs := make([]histRec, 0, len(w.newer))
	for i, c := range w.newer {
		if hr.x.stopping() {
			return nil, nil, ErrClosed
		}
		hr.o.lock()
		rec, err := hr.recordOf(c)
		hr.o.unlock()
		if err != nil {
			return nil, nil, wrap("index the history", err)
		}
		recs = append(recs, rec)
		if progress != nil {
			progress(i+1, len(w.newer))
		}
	}
	hist := base
	if !w.reachedTip {
		// HEAD does not descend from the index's tip (the history was
		// reset or rewritten): keep the records HEAD still reaches.
		hist = reachable(base, w.known, w.boundary)
	}
	markTwins(hist, recs)
	hist = append(hist[:len(hist):len(hist)], recs...)
	if err := c.install(base, gen, hist); err != nil {
		return nil, nil, err
	}
	return hist, &histGrowth{oldTip: oldTip, appendOnly: w.reachedTip, recs: recs, gen: gen}, nil
}

// install makes hist the index, grown from base (of generation gen),
// unless the index was dropped or changed meanwhile (errHistoryReset).
func (c catchingUp) install(base []histRec, gen int, hist []histRec) error {
	x := c.x
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.gen != gen || len(x.recs) != len(base) || tipOf(x.recs) != tipOf(base) {
		return errHistoryReset
	}
	x.recs = hist
	return nil
}

func tipOf(hist []histRec) plumbing.Hash {
	if len(hist) == 0 {
		return plumbing.ZeroHash
	}
	return hist[len(hist)-1].hash
}

// base is the index in memory, read from the file first if need be
// (without mu: a commit's publish takes it), and its generation.
func (x *historyIndex) base() ([]histRec, int) {
	x.mu.Lock()
	loaded, gen := x.loaded, x.gen
	x.mu.Unlock()
	if !loaded {
		recs, sound := x.readFile()
		x.mu.Lock()
		if !x.loaded && x.gen == gen {
			x.recs, x.loaded, x.sound = recs, true, sound
		}
		x.mu.Unlock()
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.recs, x.gen
}

// isSound reports whether the file the index in memory was read from
// needs no writing anew (see readFile).
func (x *historyIndex) isSound() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.sound
}

// isLoaded reports whether the index in memory was loaded (it is then
// kept up to every commit this process publishes on it).
func (x *historyIndex) isLoaded() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.loaded
}

// newCommits is what a walk back from a commit to the commits an index
// holds found.
type newCommits struct {
	newer      []*object.Commit      // not in the index, parents first
	known      map[plumbing.Hash]int // the index's records by hash
	boundary   []plumbing.Hash       // commits of the index the walk reached
	reachedTip bool                  // the index's tip among them (or the index is empty)
}

// walkNew walks back from head over every parent to the commits base
// holds, reading the commits it lacks (objects.mu taken per commit), so that a
// merge costs the commits it brings.
func (hr historyReader) walkNew(head plumbing.Hash, base []histRec) (newCommits, error) {
	w := newCommits{known: make(map[plumbing.Hash]int, len(base))}
	for i := range base {
		w.known[base[i].hash] = i
	}
	oldTip := tipOf(base)
	w.reachedTip = oldTip.IsZero()
	seen := map[plumbing.Hash]bool{}
	stack := []plumbing.Hash{head}
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if h.IsZero() || seen[h] {
			continue
		}
		seen[h] = true
		if _, ok := w.known[h]; ok {
			w.boundary = append(w.boundary, h)
			w.reachedTip = w.reachedTip || h == oldTip
			continue
		}
		if len(w.newer)%1024 == 1023 && hr.x.stopping() {
			return w, ErrClosed
		}
		hr.o.lock()
		c, err := hr.o.st.Commit(h)
		hr.o.unlock()
		if err != nil {
			return w, wrap("read the history", err)
		}
		w.newer = append(w.newer, c)
		for i := len(c.ParentHashes) - 1; i >= 0; i-- {
			stack = append(stack, c.ParentHashes[i])
		}
	}
	w.newer = gd.TopoSort(w.newer)
	return w, nil
}

// reachable keeps the records of hist (in order) that the boundary
// commits reach through their parents.
func reachable(hist []histRec, pos map[plumbing.Hash]int, boundary []plumbing.Hash) []histRec {
	keep := make([]bool, len(hist))
	stack := append([]plumbing.Hash(nil), boundary...)
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		i, ok := pos[h]
		if !ok || keep[i] {
			continue
		}
		keep[i] = true
		stack = append(stack, hist[i].parents...)
	}
	var out []histRec
	for i := range hist {
		if keep[i] {
			out = append(out, hist[i])
		}
	}
	return out
}

// saveGrowth saves what a catch-up added to the index, as save says
// (see saveMode).
func (r *Repo) saveGrowth(g histGrowth, save saveMode) {
	if save == saveFree {
		t, err := r.beginWrite(r.life, 0)
		if err != nil {
			return // closed
		}
		owned := r.lease.Held()
		if owned {
			defer r.histIndex.saveBegins()() // release keeps the lock until the save is done
		}
		t.end()
		if !owned {
			unlock := r.hist().lockForSave()
			if unlock == nil {
				return
			}
			defer unlock()
			// Under the lock: another process may have moved the branch
			// (a redaction rewrote it) since the history was read. The
			// index is saved only when it is the branch's.
			head, err := r.readHead()
			if err != nil || !r.histIndex.reaches(head) {
				return
			}
		}
	}
	if err := r.histIndex.save(g); err != nil {
		r.opt.Logf("gitmem: could not save the history index: %v", scrubPaths(err))
	}
}

// saveBegins notes a save under way, so that the writer lock is kept
// until it is done (savesUnderWay); the function it returns notes its end.
func (x *historyIndex) saveBegins() func() {
	x.saving.Add(1)
	return func() { x.saving.Add(-1) }
}

// savesUnderWay reports whether a save this process began is not done.
func (x *historyIndex) savesUnderWay() bool { return x.saving.Load() > 0 }

// reaches reports whether the index in memory ends at head, the branch
// as read under the writer lock taken for a save. When the branch moved
// on (this process's calls, before it let the lock go), a background
// build under way goes on to it, and saves then.
func (x *historyIndex) reaches(head plumbing.Hash) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	current := head == tipOf(x.recs)
	if !current && x.running && !x.stop {
		x.want = head
	}
	return current
}

// lockForSave takes the writer lock for a process that does not own it,
// to save the history index, and returns what lets it go; nil when
// another process holds it (that writer saves what it builds), when the
// lock cannot be taken (no write access: a reader that cannot write
// saves nothing), or when the repository's files are another user's
// (sudo gitmem log must not leave a file the service cannot read). A lock
// of its own file description: this process's writer lock (r.flock) is
// not touched.
func (hr historyReader) lockForSave() func() {
	dir := filepath.Join(hr.gitDir, "gitmem")
	if !ownedByUs(dir) {
		return nil
	}
	l, err := gd.OpenFileLock(filepath.Join(dir, "lock"))
	if err != nil {
		return nil
	}
	if ok, err := l.TryLock(); err != nil || !ok {
		l.Close()
		return nil
	}
	return func() {
		l.Unlock()
		l.Close()
	}
}

// save brings the index file up to the index in memory, which grew by
// g, unless the index was dropped since (a redaction). Another process
// may have written the same records already: the file's own tip decides;
// a file that was not sound when read is written anew. The file is
// written without mu (a commit's publish takes it), under fileMu. Called
// with the writer lock held.
func (x *historyIndex) save(g histGrowth) error {
	x.fileMu.Lock()
	defer x.fileMu.Unlock()
	x.mu.Lock()
	hist, sound, current := x.recs, x.sound, x.gen == g.gen
	x.mu.Unlock()
	if !current {
		return nil
	}
	tip := x.fileTip()
	switch {
	case tip == tipOf(hist) && sound:
		return nil // already there
	case g.appendOnly && tip == g.oldTip && !tip.IsZero() && sound:
		return x.appendFile(g.recs, hist)
	}
	if err := x.writeFile(hist); err != nil {
		return err
	}
	x.mu.Lock()
	x.sound = x.sound || x.gen == g.gen
	x.mu.Unlock()
	return nil
}

// startBuild catches the index up to head in the background, and saves
// it (a build under way goes on to head when it is done). Tool calls do
// not wait for it: their ids were read without the index (walkIDs).
func (r *Repo) startBuild(head plumbing.Hash) {
	if !r.histIndex.buildWanted(head) {
		return
	}
	go func() {
		defer r.histIndex.wg.Done()
		var done plumbing.Hash
		for {
			want, ok := r.histIndex.nextBuild(done)
			if !ok {
				return
			}
			_, err := r.history(want, saveFree, nil)
			if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, errHistoryReset) {
				r.opt.Logf("gitmem: could not build the history index: %v", scrubPaths(err))
			}
			done = want
		}
	}()
}

// buildWanted makes head the commit the background build is to reach,
// and reports whether a build is to start for it (none runs, none is
// stopped); the caller then starts it, and calls wg.Done when it ends.
func (x *historyIndex) buildWanted(head plumbing.Hash) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.want = head
	if x.stop || x.running {
		return false
	}
	x.running = true
	x.wg.Add(1)
	return true
}

// nextBuild is the commit the background build is to reach next, after
// done; false when it is there, or stopped (the build then ends).
func (x *historyIndex) nextBuild(done plumbing.Hash) (plumbing.Hash, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.want == done || x.stop {
		x.running = false
		return plumbing.ZeroHash, false
	}
	return x.want, true
}

// stopBuild stops the background build (it gives up where it is: the
// next process catches the index up) and waits for it.
func (x *historyIndex) stopBuild() {
	x.mu.Lock()
	x.stop = true
	x.mu.Unlock()
	x.wg.Wait()
}

// stopping reports whether Close began: long reads give up.
func (x *historyIndex) stopping() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.stop
}

// recordOf indexes a commit read from git. Called with objects.mu held.
func (hr historyReader) recordOf(c *object.Commit) (histRec, error) {
	subject, _, trailers := parseMessage(c.Message)
	var parentTree plumbing.Hash
	rec := newRec(c.Hash, c.ParentHashes, c.Author.When, Signature{c.Author.Name, c.Author.Email}, subject, trailers)
	if p := rec.parent(); !p.IsZero() {
		p, err := hr.o.st.Commit(p)
		if err != nil {
			return rec, err
		}
		parentTree = p.TreeHash
	}
	a, err := hr.memTree(parentTree)
	if err != nil {
		return rec, err
	}
	b, err := hr.memTree(c.TreeHash)
	if err != nil {
		return rec, err
	}
	err = hr.diffTrees(a, b, "", rec.change)
	rec.sortPaths()
	return rec, err
}

// memTree returns the hash of the memories/ tree in a root tree (zero if
// none). Called with objects.mu held.
func (hr historyReader) memTree(root plumbing.Hash) (plumbing.Hash, error) {
	if root.IsZero() {
		return plumbing.ZeroHash, nil
	}
	t, err := hr.o.st.Tree(root)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	for _, e := range t.Entries {
		if e.Name == memDir && e.Mode == filemode.Dir {
			return e.Hash, nil
		}
	}
	return plumbing.ZeroHash, nil
}

// diffTrees calls fn for every file path that differs between trees a and
// b (zero: empty) with its blob in b (zero: none), skipping subtrees with
// equal hashes. The two entry lists are merged in git's order (a folder
// sorts as its name and "/"), without maps. Called with objects.mu held.
func (hr historyReader) diffTrees(a, b plumbing.Hash, prefix string, fn func(string, plumbing.Hash)) error {
	if a == b {
		return nil
	}
	// A file that became a folder (or back) comes as two entries: one
	// removed, one added, which reports the same paths.
	return hr.o.st.DiffTreeEntries(a, b, func(x, y object.TreeEntry) error {
		n := x.Name
		if n == "" {
			n = y.Name
		}
		p := join2(prefix, n)
		var xt, yt plumbing.Hash
		if x.Mode == filemode.Dir {
			xt = x.Hash
		}
		if y.Mode == filemode.Dir {
			yt = y.Hash
		}
		if (x.Mode != filemode.Dir && !x.Hash.IsZero()) || (y.Mode != filemode.Dir && !y.Hash.IsZero()) {
			var blob plumbing.Hash
			if y.Mode != filemode.Dir {
				blob = y.Hash
			}
			fn(p, blob)
		}
		if !xt.IsZero() || !yt.IsZero() {
			return hr.diffTrees(xt, yt, p, fn)
		}
		return nil
	})
}

// diffNodes calls fn for every file path that differs between the
// in-memory trees a and b, with its blob in b (zero: none), skipping
// shared and equal subtrees.
func diffNodes(a, b *node, prefix string, fn func(string, plumbing.Hash)) {
	if sameNode(a, b) {
		return
	}
	aDir, bDir := a.isDir(), b.isDir()
	var blob plumbing.Hash
	if b != nil && !bDir {
		blob = b.hash
	}
	if !aDir && !bDir {
		fn(prefix, blob)
		return
	}
	if !aDir && a != nil || !bDir && b != nil {
		fn(prefix, blob) // a file became a folder or the other way round
	}
	zipKids(a, b, func(name string, x, y *node) {
		if !sameNode(x, y) {
			diffNodes(x, y, join2(prefix, name), fn)
		}
	})
}

func join2(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "/" + name
}

// scan calls fn for the history's records, newest first, until fn returns
// false. want, if not nil, is text that every record fn needs holds in its
// raw index line (contains); it lets a fresh process skip parsing the rest
// of a long index.
func (r *Repo) scan(ctx context.Context, want []byte, progress Progress, fn func(*histRec) bool) error {
	head, err := r.branchHead(ctx)
	if err != nil {
		return err
	}
	if !r.histIndex.isLoaded() && !head.IsZero() {
		if ok, err := r.histIndex.tail(head, want, fn); ok || err != nil {
			return err
		}
	}
	hist, err := r.indexed(ctx, progress)
	if err != nil {
		return err
	}
	for i := len(hist) - 1; i >= 0; i-- {
		if !fn(&hist[i]) {
			return nil
		}
	}
	return nil
}

// contains is scan's want for records that hold s in a field's text: s
// as the index line has it (escaped).
func contains(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(escaper.Replace(s))
}

// syncIDs brings the tool_use id map up to the branch after others moved
// it (and at start): the history index file is read on from where the
// last read stopped (all of it the first time, or when it was rewritten),
// without parsing whole records. When the file does not reach HEAD
// (commits made with plain git, a merge, a file missing or damaged), the
// commits it lacks are read for their ids alone (walkIDs). Called with
// the writer turn held, owning the writer lock. In the background (start's read),
// it gives up when Close begins (ErrClosed).
func (r *Repo) syncIDs(background bool) error {
	if !r.toolIDs.isStale() {
		return nil
	}
	if err := r.gitUpToDate(context.Background()); err != nil { // this process's own commits are in the file too
		return err // ErrClosed: Close began
	}
	r.toolIDs.beginSync()
	head := r.snapshotHead()
	r.opt.hooks.atSyncIDs()
	ok, err := r.readIDs(head, background)
	if err == nil && !ok {
		err = r.walkIDs(head)
	}
	if err != nil {
		return err
	}
	r.toolIDs.synced()
	return nil
}

// walkIDs makes the id map the ids of every commit head reaches, without
// waiting for the history index to be caught up: the commits the index in
// memory lacks are read for their Tool-Use-Id trailers alone (no trees
// compared: about 1 s for 100,000 commits, where recording them took
// 4-140 s), and the index is caught up and saved in the background
// (startBuild). The map is made anew, so that the ids of commits the
// branch no longer reaches (a reset, a redaction) are forgotten, as the
// rewritten index forgets them. Called with the writer turn held.
func (r *Repo) walkIDs(head plumbing.Hash) error {
	base, gen := r.histIndex.base()
	w, err := r.hist().walkNew(head, base)
	if err != nil {
		return err
	}
	kept := base
	if !w.reachedTip {
		kept = reachable(base, w.known, w.boundary)
	}
	ids := make(map[string]plumbing.Hash, len(kept)+len(w.newer))
	for i := range kept {
		if kept[i].id != "" {
			ids[kept[i].id] = kept[i].hash
		}
	}
	for _, c := range w.newer {
		_, _, trailers := parseMessage(c.Message)
		if id := trailerValue(trailers, TrailerToolUseID); id != "" {
			ids[id] = c.Hash
		}
	}
	r.toolIDs.replace(ids)
	// A few commits (a merge, an operator's commit) are recorded here
	// and now, unless a build is under way; more, in the background.
	if len(w.newer) <= inlineCatchUp && r.recordHere(base, gen, w) {
		return nil
	}
	r.startBuild(head)
	return nil
}

// recordHere records and saves the commits walkIDs found, unless a
// catch-up is under way; it reports whether it did. Called with the writer turn held,
// owning the writer lock.
func (r *Repo) recordHere(base []histRec, gen int, w newCommits) bool {
	c, ok := r.histIndex.tryCatchUp()
	if !ok {
		return false
	}
	_, grew, err := r.hist().record(c, base, gen, w, nil)
	c.done()
	if err != nil {
		return false
	}
	if grew != nil {
		r.saveGrowth(*grew, saveHeld)
	}
	return true
}

// inlineCatchUp is the most commits walkIDs records itself: their trees
// are compared in milliseconds.
const inlineCatchUp = 64

// rebuildHistoryIndex makes the history index file whole again: what it
// holds up to the damage, the rest recorded from git, written anew.
func (r *Repo) rebuildHistoryIndex(ctx context.Context) error {
	t, err := r.beginWrite(ctx, withOwn)
	if err != nil {
		return err
	}
	defer t.end()
	r.histIndex.drop(false) // read again: up to the damage
	head := r.snapshotHead()
	r.toolIDs.forgetFile(true)
	if _, err := r.history(head, saveHeld, nil); err != nil {
		return err
	}
	if err := r.histIndex.rewriteFile(head); err != nil {
		return wrap("write the history index", err)
	}
	return r.syncIDs(false)
}

// drop forgets the index in memory: loaded says whether it is then
// taken as empty (a redaction removed the file) or read again from the
// file when next needed. A catch-up under way does not install what it
// read (errHistoryReset).
func (x *historyIndex) drop(loaded bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.recs, x.loaded, x.sound = nil, loaded, true
	x.gen++
}

// remove drops the index and removes its file (a redaction: the records
// name what was removed). A save under way finishes first, or sees the
// index dropped.
func (x *historyIndex) remove() {
	x.fileMu.Lock()
	defer x.fileMu.Unlock()
	x.drop(true)
	os.Remove(x.path)
}

// rewriteFile writes the index file again from the index in memory, up
// to head.
func (x *historyIndex) rewriteFile(head plumbing.Hash) error {
	x.fileMu.Lock()
	defer x.fileMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	i := slices.IndexFunc(x.recs, func(h histRec) bool { return h.hash == head })
	if i < 0 {
		return errors.New("the index does not hold HEAD")
	}
	return x.writeFile(x.recs[:i+1])
}

// appendPublished adds to the index in memory the records of commits
// just published that follow its tip; a merge brings commits the index
// lacks: history() catches up. Called from publish, with the log files'
// lock held.
func (x *historyIndex) appendPublished(items []*prepared) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range items {
		if x.loaded && p.rec.hash == p.hash && len(p.rec.parents) <= 1 && tipOf(x.recs) == p.rec.parent() {
			x.recs = append(x.recs, p.rec)
		}
	}
}

// appendMaterialised appends to the index file the records of commits
// written to git's files, when the file ends where they start (or is
// missing and they start the history); else the next reader catches up
// from git. Called with the materialiser's lock held.
func (x *historyIndex) appendMaterialised(items []*prepared) error {
	var recs []histRec
	parent := items[0].parent
	prev := parent
	for _, p := range items {
		// A merge or a fast-forward brings commits the file lacks: the
		// next reader catches up from git.
		if p.rec.hash != p.hash || len(p.rec.parents) > 1 || p.rec.parent() != prev {
			break
		}
		recs = append(recs, p.rec)
		prev = p.hash
	}
	if len(recs) == 0 {
		return nil
	}
	x.fileMu.Lock()
	defer x.fileMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if tip := x.fileTip(); tip != parent || tip.IsZero() {
		if !tip.IsZero() || !parent.IsZero() {
			return nil
		}
	}
	return x.appendFile(recs, x.recs)
}

// filePath is the index file's path (readIDs reads it on its own).
func (x *historyIndex) filePath() string { return x.path }

// readIDs reads the ids of the records after where the last read stopped
// (toolIDs.fileMark) and reports whether the file now ends at head. A
// file that does not go on from there — shorter, or the record before
// it is not the one read last any more (rewritten) — is read again from the
// start into a new map. With stoppable it gives up when Close begins
// (ErrClosed), having changed nothing.
func (r *Repo) readIDs(head plumbing.Hash, stoppable bool) (bool, error) {
	f, err := gd.OpenRegular(r.histIndex.filePath(), os.O_RDONLY, 0) // a named pipe put there is not waited on
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, gd.ErrNotRegular) {
		return head.IsZero(), nil
	}
	if err != nil {
		return false, wrap("read the history index", err)
	}
	defer f.Close()
	off, prev := r.toolIDs.fileMark()
	hdr := []byte(historyHeader + "\n")
	if off > int64(len(hdr)) && lastRecord(f, off) != prev {
		off = 0 // rewritten since the last read
	}
	ids := map[string]plumbing.Hash{}
	fresh := off == 0
	if fresh {
		buf := make([]byte, len(hdr))
		if _, err := io.ReadFull(f, buf); err != nil || !bytes.Equal(buf, hdr) {
			return false, nil
		}
		off, prev = int64(len(hdr)), plumbing.ZeroHash
	} else if _, err := f.Seek(off, io.SeekStart); err != nil {
		return false, wrap("read the history index", err)
	}
	// Read from the start, the records are checked to follow their
	// parents, as readFile does: a record lost or doubled in the
	// middle (a damaged file that still ends at HEAD) would leave ids
	// unknown, and a retry would be made again. The caller then rebuilds
	// the file.
	var known map[plumbing.Hash]bool
	if fresh {
		known = map[plumbing.Hash]bool{}
	}
	damaged := false
	br := bufio.NewReaderSize(f, idsBuffer(f, off))
	for n := 1; ; n++ {
		if stoppable && n%idsStopEvery == 0 && r.histIndex.stopping() {
			return false, ErrClosed // Close gives the read up: the next process reads them
		}
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) { // a long record: gather it
			line = append([]byte(nil), line...) // before the next read reuses the buffer
			for errors.Is(err, bufio.ErrBufferFull) {
				var more []byte
				more, err = br.ReadSlice('\n')
				line = append(line, more...)
			}
		}
		if err != nil {
			break // the end, or a torn last line: stop before it
		}
		if len(line) < 42 || !plumbing.IsHash(string(line[:40])) || line[40] != '\t' {
			break
		}
		h := plumbing.NewHash(string(line[:40]))
		if known != nil {
			if damaged = known[h] || !parentsKnown(line, known); damaged {
				break
			}
			known[h] = true
		}
		if id, ok := lineToolUseID(line); ok {
			ids[id] = h
		}
		off += int64(len(line))
		prev = h
	}
	if damaged {
		r.toolIDs.forgetFile(false) // read again from the start, once rebuilt
		return false, nil
	}
	r.toolIDs.readFromFile(ids, fresh, off, prev)
	return prev == head, nil
}

// idsBuffer is the size of readIDs' buffer for f from off: 256 KiB, or
// what is left of f when that is less. Every open of a store reads its
// history index; most are a few records, and a 256 KiB buffer each,
// fresh memory in a server that just started, was 64 page faults an open
// (about 2 ms on a machine slow at them).
func idsBuffer(f *os.File, off int64) int {
	size := 256 << 10
	if fi, err := f.Stat(); err == nil {
		if left := fi.Size() - off + 1; left < int64(size) {
			size = max(int(left), 512)
		}
	}
	return size
}

// idsStopEvery is how many records readIDs reads between two looks at
// whether Close wants it to stop.
const idsStopEvery = 256
