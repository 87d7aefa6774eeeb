package gitmem

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/policy"
)

// The commit pipeline. A change becomes durable with one fdatasync, shared
// by every change waiting at that moment (group commit):
//
//  1. prepare (under wmu): the transaction's objects are encoded and
//     hashed in memory and the commit becomes the writer's tip. The next
//     transaction builds on it at once; readers do not see it yet.
//  2. durable (group commit): the first waiter writes every prepared
//     commit to the write-ahead log (gitdir.WAL) and fdatasyncs once;
//     then the commits are published to readers (Snapshot) and their
//     callers acknowledged. The log has two files: appends go to one while
//     a checkpoint empties the other.
//  3. materialise (in the background, and before any operation that reads
//     git's own files): the loose objects, the branch and the worktree
//     files are written, without an fsync each, and the history index is
//     appended. git and other processes see the commit from here on.
//  4. checkpoint (at most every checkpointEvery, when the log grows, and
//     before the writer lock is released): the log switches files; what
//     was materialised is made durable with one syncfs; the old file is
//     emptied.
//
// A crash at any point loses nothing acknowledged: the next owner of the
// writer lock replays the log (the objects are in it, raw, so the hashes
// are the same), then checkpoints.
//
// The process keeps the writer lock while it writes and gives it up when
// it has been idle for releaseIdle, or as soon as another process queues
// for it (.git/gitmem/intent), after a checkpoint: the lock's holder is
// the only one with a non-empty log.

const (
	checkpointEvery = time.Second
	checkpointBytes = 16 << 20
	foldBelow       = 1024      // a group of fewer objects ...
	foldBelowBytes  = 256 << 10 // ... and fewer bytes waits in memory to be folded
	foldAt          = 32        // folded once this many wait ...
	foldBytes       = 8 << 20   // ... or they hold this much
	releaseIdle     = 200 * time.Millisecond
	backlogWait     = 10 * time.Second
	spareAt         = 32 << 10
	spareCap        = checkpointBytes + 4<<20
	pollEvery       = 10 * time.Millisecond
)

// backlogMax bounds the commits answered but not yet materialised
// (about 40 KB of memory each under load), those being materialised
// included: past it a call waits (awaitBacklog), at most backlogWait, for
// the materialiser, which takes at most chunkMax commits at a time so
// that waiting calls go on after each. A burst of thousands of calls is
// absorbed; a load the disk cannot keep up with is slowed to its pace.
// (A test sets others: testHooks.)
//
// logMax bounds the write-ahead log the same way, in bytes (both files):
// the commits answered and not yet checkpointed. The backlog alone let a
// log of large records (a file grown to tens of kilobytes, rewritten at
// every insert) reach 272 MiB under load.
const (
	backlogMax = 8192
	chunkMax   = 2048
	logMax     = int64(64 << 20)
)

// prepared is a commit that exists in memory and in the log (once durable)
// but maybe not yet in git's files.
type prepared struct {
	hash, parent plumbing.Hash
	tree         *node
	objs         []gd.Object
	paths        []string // repository paths it changes in the worktree
	rec          histRec
	id           string
	merged       map[string]plumbing.Hash // tool_use ids of the commits a merge or fast-forward brings (share.go)
	read         map[string][]byte        // an adopt's: the worktree files it read (repository paths), before any merge
	commit       Commit
	done         bool // published (durable)
	// plain: tree is its parent's with only paths changed (a
	// transaction's own edits, mirrored; no merge, no fast-forward).
	plain bool
}

// heldObjects are objects materialised together, in one pack, held in
// memory (readable) until a checkpoint has found them in git's files
// (secureMaterialized), and a small pack's until it is folded
// (foldSmall).
type heldObjects struct {
	pack  plumbing.Hash
	objs  []gd.Object
	bytes int  // the objects' content
	done  bool // safe, and not to be folded: dropped from memory once synced
}

func newHeld(pack plumbing.Hash, objs []gd.Object) heldObjects {
	g := heldObjects{pack: pack, objs: objs}
	for _, o := range objs {
		g.bytes += len(o.Data)
	}
	return g
}

// small reports whether g waits in memory to be folded (foldSmall).
func (g heldObjects) small() bool {
	return !g.done && len(g.objs) < foldBelow && g.bytes < foldBelowBytes
}

// batch is a group of prepared commits written with one fdatasync.
type batch struct {
	items []*prepared
}

// pipeline is the Repo's commit pipeline state. Fields are grouped by the
// mutex that guards them.
type pipeline struct {
	owned atomic.Bool // this process holds the writer lock (changed under wmu)

	// smu (with the published state)
	tip     plumbing.Hash // the newest commit prepared (durable or not)
	tipTree *node
	waiting map[string]*prepared // Tool-Use-Id -> a commit prepared, not yet durable
	broken  error                // the log failed; nothing is written until a checkpoint succeeds

	qmu   sync.Mutex // the batch being filled
	queue *batch

	fmu      sync.Mutex // one log writer at a time; the log files' state
	walFiles [2]*gd.WAL
	active   int          // the log file appends go to
	logBytes atomic.Int64 // what both files hold (read without fmu by awaitBacklog)

	mmu          sync.Mutex // materialisation and checkpoints
	umu          sync.Mutex // guards unmat and drained
	unmat        []*prepared
	drained      chan struct{} // closed when some of unmat was materialised
	taken        int           // commits taken from unmat and being materialised
	diskHead     plumbing.Hash // the branch as written in git's files
	diskTree     *node         // its tree
	packsWritten []string      // packs materialised since the last sync
	held         []heldObjects // the objects materialised since the last checkpoint, and small packs not folded yet
	lastCkpt     atomic.Int64  // unix nanos of the last checkpoint (attempt)
	lastUse      atomic.Int64  // unix nanos of the last change

	recovering  bool      // (mmu) the log holds a crashed holder's changes: both files stay until they are git's
	spareFailed time.Time // (mmu) when growing the spare log file last failed: not tried again for a minute
	draining    int       // (mmu, fmu) the log file a failed checkpoint switched from, which still holds changes; -1 if none
	ckptErr     error     // (mmu) the last checkpoint's failure
	ckptFailing atomic.Bool

	gitIndexSeen time.Time    // (mmu) the .git/index written by git that undoGitCheckout last looked at
	undone       atomic.Int64 // checkouts of git's undone (undoCheckout): an adopt's look at the worktree is stale

	displacedWait atomic.Bool  // a commit under refs/gitmem/displaced/ waits to be merged back
	mergedBack    atomic.Int64 // merges back made (counted once published)
	dmu           sync.Mutex   // held while merging them

	pmu      sync.Mutex          // guards inflight (and Repo.pend)
	inflight flight              // worktree paths of commits not yet materialised
	handBase map[string]handBase // files edited by hand before the worktree caught up: the version the edit started from
	seen     map[string][]shown  // each memory file's versions (by path under memories/) of its last commits, oldest first (mergeHandEdit)
	past     pastVersions        // the memory files' versions of the last checkoutDepth commits materialised (mergeHandEdit)
	gitSeen  atomic.Int64        // unix nanos: when a git command was last seen holding .git/index.lock (gitBusy)

	intent *gd.FileLock
	stop   chan struct{}
	wake   chan struct{}
	loopWG sync.WaitGroup
}

func (r *Repo) initPipeline() {
	r.queue = &batch{}
	r.waiting = map[string]*prepared{}
	r.inflight = flight{paths: map[string]int{}, below: map[string]int{}}
	r.handBase = map[string]handBase{}
	r.seen = map[string][]shown{}
	r.draining = -1
	r.stop = make(chan struct{})
	r.wake = make(chan struct{}, 1)
	r.drained = make(chan struct{})
}

// own takes the writer lock for this process if it does not hold it yet:
// behind any process already queued for it, then it loads what others
// committed meanwhile, replays a log a crash left, and repairs unfinished
// worktree paths. Called with wmu held.
func (r *Repo) own() error {
	if r.owned.Load() {
		r.smu.RLock()
		broken := r.broken
		r.smu.RUnlock()
		if broken != nil {
			// The log or git's files failed earlier: a checkpoint that
			// succeeds now (the fault is gone) lets changes through again.
			if err := r.checkpoint(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := r.acquire(); err != nil {
		return err
	}
	if err := r.settleIn(); err != nil {
		r.flock.Unlock()
		return err
	}
	return nil
}

// acquire takes the writer lock, queueing behind any process already
// waiting for it (the intent lock is held while waiting, which tells the
// holder to let go).
func (r *Repo) acquire() error {
	if err := r.intent.Lock(); err != nil {
		return wrap("lock the repository", err)
	}
	err := r.flock.Lock()
	r.intent.Unlock()
	return wrap("lock the repository", err)
}

// settleIn makes a freshly taken writer lock ours: what others committed
// is loaded, a log a crash left is replayed, unfinished worktree paths
// are repaired, and the background work starts. Called with wmu and the
// writer lock held.
func (r *Repo) settleIn() error {
	// A branch git moved off what this process acknowledged while the
	// lock was free is not taken: it is put back below.
	r.smu.RLock()
	had, loaded := r.head, r.loaded
	r.smu.RUnlock()
	var off, rewritten bool
	cur, err := r.readRef(r.branch)
	if err == nil && loaded {
		off, rewritten = r.movedOff(had, cur)
	}
	if rewritten {
		r.dropHeld() // a redaction deleted them: never written again
	}
	if !off {
		if err := r.refresh(true); err != nil {
			return err
		}
	}
	r.smu.RLock()
	r.diskHead, r.diskTree = r.head, r.tree
	r.smu.RUnlock()
	if off {
		r.takeBack(cur)
	}
	replayed, err := r.openLog()
	if err != nil {
		return err
	}
	r.repairPending()
	if !replayed {
		r.checkoutMoved()
		// The log is empty: a checkpoint is due a checkpointEvery from
		// now, not at the first change (a replay's checkpoint set it).
		r.lastCkpt.Store(time.Now().UnixNano())
	}
	if len(r.displaced()) > 0 { // left by a start or a run that could not merge them
		r.displacedWait.Store(true)
	}
	r.owned.Store(true)
	r.putHeadBack() // git checkout or git switch while the lock was free
	r.lastUse.Store(time.Now().UnixNano())
	r.loopWG.Add(1)
	go r.maintainLoop()
	return nil
}

// openLog opens the two log files. Records they hold were acknowledged by
// a holder of the lock that crashed before its checkpoint: they are
// published again, as durable commits not yet in git's files (their
// objects readable from memory), and a checkpoint makes them git's. When
// it cannot (a full disk), they stay readable, the log keeps them, and
// new changes are refused until a checkpoint succeeds. Called with wmu
// and the writer lock held, after refresh.
func (r *Repo) openLog() (replayed bool, err error) {
	var recs [2][]gd.WALRecord
	for i, name := range []string{"wal", "wal2"} {
		w, rs, err := gd.OpenWAL(r.obj.Env, r.gitDir, name)
		if err != nil {
			for _, w := range r.walFiles[:i] {
				w.Close(false)
			}
			return false, &DamagedError{Problem: fmt.Sprintf("the write-ahead log .git/gitmem/%s cannot be read (%v)", name, err),
				Repair: "if gitmem was not killed while writing it, move it aside and run gitmem fsck"}
		}
		r.walFiles[i], recs[i] = w, rs
	}
	r.noteLogBytes()
	first := 0
	if r.walFiles[1].Gen() < r.walFiles[0].Gen() {
		first = 1
	}
	r.active = 1 - first // appends go to the newer file
	r.draining = -1
	replay := append(recs[first], recs[1-first]...)
	if len(replay) == 0 {
		return false, nil
	}
	if missing := r.notInGit(replay, r.diskHead); missing > 0 {
		r.opt.Logf("gitmem: recovering %d acknowledged change(s) from the write-ahead log", missing)
	}
	// A commit was under way: a branch lock file, if any, is its own.
	gd.RemoveLock(filepath.Join(r.gitDir, filepath.FromSlash(string(r.branch))) + ".lock")
	known := r.diskHead == replay[0].Parent
	for _, rec := range replay {
		known = known || r.diskHead == rec.Head
	}
	if !known {
		// The branch moved by other means after the crash. When it moved on
		// from the last acknowledged commit, the log is in git's files
		// already; otherwise materialisation keeps the branch's commit and
		// merges it back (moveBranch).
		st := r.obj.View()
		in, err := gd.NewGraph(st).IsAncestor(replay[len(replay)-1].Head, r.diskHead)
		st.Close()
		if err == nil && in {
			return false, r.emptyLog()
		}
	}
	items := make([]*prepared, 0, len(replay))
	tree := r.diskTree
	for _, rec := range replay {
		r.obj.Put(rec.Objects)
		p := &prepared{hash: rec.Head, parent: rec.Parent, objs: rec.Objects, paths: rec.Paths}
		r.omu.Lock()
		c, err := r.obj.Commit(rec.Head)
		if err == nil {
			tree, err = r.loadTree(c.TreeHash, tree, "")
		}
		if err == nil {
			p.rec, err = r.recordOf(c)
		}
		r.unlockObj()
		if err != nil {
			return true, wrap("recover the write-ahead log", err)
		}
		p.tree, p.id, p.commit = tree, p.rec.id, commitOf(c)
		items = append(items, p)
	}
	r.smu.Lock()
	for _, p := range items {
		if p.id != "" {
			r.ids[p.id] = p.hash
		}
	}
	last := items[len(items)-1]
	r.tip, r.tipTree = last.hash, last.tree
	r.smu.Unlock()
	r.pmu.Lock()
	for _, p := range items {
		for _, q := range p.paths {
			r.inflight.add(q)
		}
	}
	r.pmu.Unlock()
	r.mmu.Lock()
	r.recovering = true
	r.mmu.Unlock()
	r.publish(items)
	r.checkpoint() // a failure refuses changes until a retry succeeds
	return true, nil
}

// prepare encodes tx as a commit on the writer's tip, in memory, and makes
// it the new tip. Called with wmu held, after own.
func (r *Repo) prepare(tx *Tx, meta Meta) (*prepared, error) {
	if !tx.ff.IsZero() {
		return r.prepareFastForward(tx) // a pull (share.go)
	}
	var objs []gd.Object
	put := func(t plumbing.ObjectType, data []byte, base plumbing.Hash) (plumbing.Hash, error) {
		h := plumbing.ComputeHash(t, data)
		objs = append(objs, gd.Object{Type: t, Hash: h, Data: data, Base: base})
		return h, nil
	}
	blobs := map[plumbing.Hash]bool{}
	for _, o := range tx.ops { // the blobs written that the final tree still holds
		if o.kind != 'w' {
			continue
		}
		if n := lookup(tx.root, full(o.to)); n.isFile() && !blobs[n.hash] {
			if data, ok := tx.pending[n.hash]; ok {
				blobs[n.hash] = true
				put(plumbing.BlobObject, data, plumbing.ZeroHash)
			}
		}
	}
	treeHash, _ := writeTrees(put, tx.root, tx.base)
	author := meta.Author
	if author.Name == "" {
		author.Name = r.opt.Author.Name
	}
	if author.Email == "" {
		author.Email = r.opt.Author.Email
	}
	author = author.safe()
	when := r.opt.Now()
	meta.Trailers = append(mergeTrailers(meta.Trailers, tx.trailers), tx.extra...)
	if tx.subject != "" {
		meta.Subject = tx.subject
	}
	msg := meta.message()
	parents := append(parentList(tx.head), tx.merged...)
	raw, err := encodeCommit(treeHash, parents, author, r.opt.Committer, when, msg)
	if err != nil {
		return nil, wrap("encode the commit", err)
	}
	h, _ := put(plumbing.CommitObject, raw, plumbing.ZeroHash)
	_, body, trailers := parseMessage(msg)
	subject := oneLine(meta.Subject)
	p := &prepared{hash: h, parent: tx.head, tree: tx.root, objs: objs, id: meta.ID(), merged: tx.mergedIDs,
		rec: newRec(h, parents, when, author, subject, trailers)}
	diffNodes(lookup(tx.base, memDir), lookup(tx.root, memDir), "", p.rec.change)
	p.rec.sortPaths()
	if tx.mirror {
		p.paths = tx.touched()
		p.plain = len(tx.merged) == 0
	}
	var ps []string
	for _, q := range parents {
		ps = append(ps, q.String())
	}
	p.commit = Commit{Hash: h.String(), Parents: ps, Author: author, Committer: r.opt.Committer,
		Time: when, Subject: subject, Body: body, Trailers: trailers}
	return r.enqueue(p, tx.head)
}

// enqueue makes a prepared commit the writer's tip and queues it for the
// log. Called with wmu held. The check, the new tip and the place in the
// queue are one step under qmu: a group failing meanwhile (dropQueued)
// either drops this commit with it or is seen here, never half of each,
// so that no commit built on a dropped one is queued or left waiting.
func (r *Repo) enqueue(p *prepared, base plumbing.Hash) (*prepared, error) {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	// The new tip, unless the pipeline dropped what this was built on.
	// Its objects are readable at once: the next transaction may build on
	// it before it is durable.
	r.smu.Lock()
	if r.tip != base || r.broken != nil {
		err := r.broken
		r.smu.Unlock()
		if err == nil {
			err = &StorageError{Op: "write the change", Err: errors.New("an earlier change it was built on failed")}
		}
		return nil, err
	}
	r.tip, r.tipTree = p.hash, p.tree
	if p.id != "" {
		r.waiting[p.id] = p
	}
	for id := range p.merged {
		if _, done := r.ids[id]; !done {
			r.waiting[id] = p
		}
	}
	r.obj.Put(p.objs)
	r.smu.Unlock()
	r.pmu.Lock()
	for _, q := range p.paths {
		r.inflight.add(q)
	}
	r.pmu.Unlock()
	r.queue.items = append(r.queue.items, p)
	return p, nil
}

// durable returns once p is in the log and published, or with the error
// that kept its group from being written. The first caller to find its
// group unwritten writes it, and every other group member's with it.
func (r *Repo) durable(p *prepared) error {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	if p.done {
		return nil
	}
	r.qmu.Lock()
	b := r.queue
	if !slices.Contains(b.items, p) {
		// p's group failed before we got here. What was queued since
		// is a later group's: its own callers write it.
		r.qmu.Unlock()
		return r.failure()
	}
	r.queue = &batch{}
	r.qmu.Unlock()
	return r.writeBatch(b)
}

// failure is the error a failed group leaves for its members.
func (r *Repo) failure() error {
	r.smu.RLock()
	defer r.smu.RUnlock()
	if r.broken != nil {
		return r.broken
	}
	return &StorageError{Op: "write the change", Err: errors.New("an earlier change in its group failed")}
}

// writeBatch writes a group to the log, then publishes it. On failure
// every commit built on the group (the group after it too) is dropped and
// the tip goes back to what is durable. Called with fmu held.
func (r *Repo) writeBatch(b *batch) error {
	recs := make([]gd.WALRecord, len(b.items))
	for i, p := range b.items {
		recs[i] = gd.WALRecord{Head: p.hash, Parent: p.parent, Paths: p.paths, Objects: p.objs}
	}
	r.smu.RLock()
	err := r.broken
	r.smu.RUnlock()
	if err == nil {
		err = r.walFiles[r.active].Append(recs)
		r.noteLogBytes()
	}
	if err != nil {
		return r.dropQueued(b, wrap("write the change to the log", err))
	}
	r.publish(b.items)
	if r.walFiles[r.active].Len() > checkpointBytes {
		r.signal()
	}
	return nil
}

// publish makes durable commits visible: their blobs to readers, their
// state to Snapshot, their records to the history index, and queues them
// for materialisation.
func (r *Repo) publish(items []*prepared) {
	last := items[len(items)-1]
	r.smu.Lock()
	r.head, r.tree = last.hash, last.tree
	for _, p := range items {
		if p.id != "" {
			r.ids[p.id] = p.hash
			delete(r.waiting, p.id)
		}
		for id, h := range p.merged {
			if _, done := r.ids[id]; !done {
				r.ids[id] = h
			}
			if r.waiting[id] == p {
				delete(r.waiting, id)
			}
		}
	}
	r.smu.Unlock()
	r.hmu.Lock()
	for _, p := range items {
		// A merge brings commits the index lacks: history() catches up.
		if r.histLoaded && p.rec.hash == p.hash && len(p.rec.parents) <= 1 && r.histTip() == p.rec.parent() {
			r.hist = append(r.hist, p.rec)
		}
	}
	r.hmu.Unlock()
	r.umu.Lock()
	r.unmat = append(r.unmat, items...)
	r.umu.Unlock()
	for _, p := range items {
		p.done = true
	}
	r.lastUse.Store(time.Now().UnixNano())
	r.signal()
}

// dropQueued fails a group and everything prepared after it, and sets the
// tip back to what is durable. Until a checkpoint succeeds nothing more is
// written: the log may hold part of the failed group.
func (r *Repo) dropQueued(b *batch, err error) error {
	r.qmu.Lock()
	r.smu.Lock()
	dropped := append(slices.Clip(b.items), r.queue.items...)
	r.queue = &batch{}
	r.tip, r.tipTree = r.head, r.tree
	for _, p := range dropped {
		for id, w := range r.waiting {
			if w == p {
				delete(r.waiting, id)
			}
		}
	}
	r.broken = err
	r.smu.Unlock()
	r.qmu.Unlock()
	r.pmu.Lock()
	for _, p := range dropped {
		r.obj.Drop(p.objs)
		for _, q := range p.paths {
			r.inflight.done(q)
		}
	}
	r.pmu.Unlock()
	r.opt.Errorf("gitmem: %v; %d change(s) refused", err, len(dropped))
	r.signal()
	return err
}

func (r *Repo) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// materialize writes the published commits into git's files: loose
// objects, the branch, the worktree, the history index. Nothing is
// fsynced: the log keeps them durable until the next checkpoint.
func (r *Repo) materialize() error {
	r.mmu.Lock()
	defer r.mmu.Unlock()
	return r.materializeLocked()
}

// materializeLocked materialises what was published when it started,
// chunkMax commits at a time; all at once when they do not start from
// the branch as git's files hold it (replayed after a crash, the branch
// may be at any of them: moveBranch and keepHandEdits must see them all).
func (r *Repo) materializeLocked() error {
	r.umu.Lock()
	n := len(r.unmat)
	whole := n > 0 && r.unmat[0].parent != r.diskHead
	r.umu.Unlock()
	for n > 0 {
		k := min(n, r.opt.hooks.chunk())
		if whole {
			k = n
		}
		err := r.materializeSome(k)
		r.noteDrained()
		if err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// noteLogBytes records what the log files hold. Called with fmu held.
func (r *Repo) noteLogBytes() {
	var n int64
	for _, w := range r.walFiles {
		if w != nil {
			n += w.Len()
		}
	}
	r.logBytes.Store(n)
}

// noteDrained wakes the calls waiting for the backlog to shrink.
func (r *Repo) noteDrained() {
	r.umu.Lock()
	r.taken = 0
	close(r.drained)
	r.drained = make(chan struct{})
	r.umu.Unlock()
}

// awaitBacklog holds a call back while backlogMax commits answered are
// not yet materialised, or the log holds logMax bytes (until a checkpoint
// empties it), at most backlogWait, and not when materialising
// fails (the call then meets the failure). Under a load the disk cannot
// keep up with, calls are so answered at the rate their changes reach
// git's files, and the memory the backlog holds, and how far git's files
// lag, stay bounded (the calls that passed the check at once may each
// add one more).
func (r *Repo) awaitBacklog() {
	var timeout <-chan time.Time
	for {
		r.umu.Lock()
		n, drained := len(r.unmat)+r.taken, r.drained
		r.umu.Unlock()
		r.smu.RLock()
		broken := r.broken != nil
		r.smu.RUnlock()
		if n < r.opt.hooks.backlog() && r.logBytes.Load() < r.opt.hooks.logLimit() || drained == nil || broken || r.ckptFailing.Load() {
			return
		}
		if timeout == nil {
			t := time.NewTimer(backlogWait)
			defer t.Stop()
			timeout = t.C
		}
		r.signal()
		select {
		case <-drained:
		case <-timeout:
			return
		}
	}
}

// materializeSome materialises the first k commits published.
func (r *Repo) materializeSome(k int) error {
	r.umu.Lock()
	items := slices.Clone(r.unmat[:k])
	r.taken = k
	clear(r.unmat[:k]) // the array's head no longer holds them (their objects) alive
	if r.unmat = r.unmat[k:]; len(r.unmat) == 0 {
		r.unmat = nil
	}
	r.umu.Unlock()
	requeue := func(err error) error {
		r.umu.Lock()
		r.unmat = append(items, r.unmat...)
		r.umu.Unlock()
		return err
	}
	var objs []gd.Object
	for _, p := range items {
		objs = append(objs, p.objs...)
	}
	// One pack, two files, however many objects (a file each, loose,
	// cost more and git prune deletes them before the branch names them:
	// see secureMaterialized), kept from git's gc for good (gd.Own: see
	// gd.Keep). Own at once, though no ref names its commits yet: gitmem's
	// gc takes it before the branch moves only as an incremental
	// collection, which keeps every object of the packs it merges, or as a
	// full one, whose swap waits for mmu, held here until the branch names
	// them. The object store's lock is taken only to add the pack: writing
	// it took as long as the group was large, and every call reading a
	// file waited for it, holding the writer lock. The objects stay
	// readable from memory until the checkpoint.
	pack, err := r.obj.WritePackFiles(objs, false, gd.Own)
	if err != nil {
		return requeue(wrap("write the objects", err))
	}
	r.addPack(pack)
	last := items[len(items)-1]
	prevHead := r.diskHead
	var moved plumbing.Hash // where something outside gitmem had moved the branch
	if last.hash != r.diskHead {
		var err error
		if moved, err = r.moveBranch(items); err != nil {
			return requeue(err)
		}
	}
	// The objects stay readable from memory until the checkpoint has
	// found them in git's files (secureMaterialized).
	r.held = append(r.held, newHeld(pack, objs))
	r.foldSmall()
	// The commits are in git's files. The worktree follows; a path that
	// cannot (a full disk) waits in r.pend and the journal.
	var paths []string
	for _, p := range items {
		paths = append(paths, p.paths...)
	}
	// Sorted once: a union per commit was quadratic in a large group.
	slices.Sort(paths)
	paths = slices.Compact(paths)
	prev := r.diskTree // what the worktree mirrors
	if !moved.IsZero() {
		r.undoCheckout(moved, prev) // git reset --hard: its files are no hand edits
	}
	r.diskTree = last.tree
	r.pmu.Lock()
	retry := r.pend // paths an earlier pass could not write
	r.pmu.Unlock()
	r.awaitGit()
	kept, checks := r.keepHandEdits(items, prevHead, prev, paths, retry)
	paths = union(paths, retry)
	r.forgetStats(paths)
	var failed []string
	for _, q := range paths {
		if kept[q] {
			continue
		}
		var err error
		if of, ok := checks[q]; ok {
			err = r.mirrorChecked(q, lookup(last.tree, q), of)
		} else {
			err = r.wt.sync(q, lookup(last.tree, q), r.readBlob)
		}
		if err != nil {
			failed = append(failed, q)
			r.opt.Logf("gitmem: the worktree could not follow %s (%v); it will be repaired", q, err)
		}
	}
	now := time.Now()
	r.pmu.Lock()
	for _, p := range items { // the versions a hand edit may have been made on
		for i, rel := range p.rec.paths {
			r.show(rel, prev, p.rec.blobs[i], now)
		}
	}
	r.pend = failed
	for _, p := range items {
		for _, q := range p.paths {
			r.inflight.done(q)
		}
	}
	r.pmu.Unlock()
	r.appendHistory(items)
	return nil
}

// keepHandEdits returns the files among paths that were edited by hand
// before the worktree caught up with items (it lags them by milliseconds,
// longer on a full disk, or a crash's whole downtime): the worktree holds
// neither what gitmem last wrote there (prev) nor a version one of items
// gives the file, nor what an adopt among them read there. They are not
// overwritten; the next adopt commit merges the hand edit into the
// acknowledged version (adoptDrift), from the base noted here in
// r.handBase. Paths gitmem has yet to repair (own) are gitmem's own
// writes. A file deleted by hand is not kept: the acknowledged version
// comes back. For every other memory file, checks says what the worktree
// may hold as gitmem's own, for the write that follows (mirrorChecked):
// an edit that lands between this check and that write is kept too.
// Called with mmu held, before the stat cache forgets paths.
func (r *Repo) keepHandEdits(items []*prepared, prevHead plumbing.Hash, prev *node, paths, own []string) (kept map[string]bool, checks map[string]*ownFiles) {
	versions := []*node{prev} // the trees whose files are gitmem's own writes
	for _, p := range items {
		versions = append(versions, p.tree)
	}
	if base := items[0].parent; base != prevHead && !base.IsZero() {
		// Replayed after a crash: the worktree may hold what it did
		// before the first of them, where the crash stopped it.
		r.omu.Lock()
		c, err := r.obj.Commit(base)
		if err == nil {
			var t *node
			if t, err = r.loadTree(c.TreeHash, prev, ""); err == nil {
				versions = append(versions, t)
			}
		}
		r.unlockObj()
	}
	// A path is looked up only in the versions that may hold another file
	// there than the version before: with a group of n commits of a path
	// each, n lookups, not n for every path. Those are prev and the
	// crash's base, the first commit, any that is no plain transaction on
	// the one before, and a plain one whose paths hold the path or a
	// folder above it. (A path beneath it makes it a folder: no file.)
	always := []int{0}
	if len(versions) > len(items)+1 {
		always = append(always, len(items)+1)
	}
	at := map[string][]int{}
	for j, p := range items {
		if j == 0 || !p.plain || p.parent != items[j-1].hash {
			always = append(always, j+1)
			continue
		}
		for _, x := range p.paths {
			at[x] = append(at[x], j+1)
		}
	}
	var adopts []*prepared // in order
	for _, p := range items {
		if p.read != nil {
			adopts = append(adopts, p)
		}
	}
	skip := newPathSet(own)
	kept, checks = map[string]bool{}, map[string]*ownFiles{}
	for _, q := range paths {
		if skip.covers(q) || !under(q, []string{memDir}) {
			continue
		}
		of := &ownFiles{hashes: map[plumbing.Hash]bool{}, texts: map[plumbing.Hash][]byte{}}
		add := func(is []int) {
			for _, i := range is {
				if n := lookup(versions[i], q); n.isFile() {
					of.hashes[n.hash] = true
				}
			}
		}
		add(always)
		add(at[q])
		for a := q; ; {
			k := strings.LastIndexByte(a, '/')
			if k < 0 {
				break
			}
			a = a[:k]
			add(at[a])
		}
		for _, p := range adopts { // what adopts read is gitmem's to replace, nothing later
			if data, ok := p.read[q]; ok {
				h := plumbing.ComputeHash(plumbing.BlobObject, data)
				of.hashes[h], of.texts[h] = true, data
				of.lastRead = h
			}
		}
		if r.handEdited(versions, of, q) {
			kept[q] = true
			continue
		}
		checks[q] = of
		r.pmu.Lock()
		delete(r.handBase, q) // gitmem writes it again: an older edit was taken
		r.pmu.Unlock()
	}
	return kept, checks
}

// ownFiles is what a worktree file may hold as gitmem's own: blobs gitmem
// wrote or was writing there, and texts adopts read there.
type ownFiles struct {
	hashes   map[plumbing.Hash]bool
	texts    map[plumbing.Hash][]byte // those that are no blob of the repository's
	lastRead plumbing.Hash            // the last text an adopt read (zero: none)
	found    plumbing.Hash            // what the worktree held when checked (zero: no file)
}

// text is the content of one of them.
func (r *Repo) ownText(of *ownFiles, h plumbing.Hash) ([]byte, error) {
	if h.IsZero() {
		return nil, nil
	}
	if t, ok := of.texts[h]; ok {
		return t, nil
	}
	return r.readBlob(h)
}

// handEdited reports whether the worktree file at q holds an edit made by
// hand: none of the versions gitmem wrote or was writing there — the
// first of versions is what the worktree mirrors (old) — nor a text an
// adopt read. If so its base is noted for the adopt commit's merge: the
// last text an adopt read there, or else old.
func (r *Repo) handEdited(versions []*node, of *ownFiles, q string) bool {
	old := lookup(versions[0], q)
	if old.isDir() {
		return false
	}
	fi, err := r.wt.lstat(q)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	if old.isFile() {
		if same, err := r.sameAsTree(q, fi, old); err != nil || same {
			of.found = old.hash
			return false
		}
	}
	// A file over the largest file size that no version gitmem wrote
	// there is as long as was made by hand: it is not read (adoptDrift
	// leaves it too).
	if !r.tooBig(fi.Size()) || r.ownSize(of, fi.Size()) {
		data, err := r.wt.readFile(q)
		if err != nil {
			return false
		}
		h := plumbing.ComputeHash(plumbing.BlobObject, data)
		if of.hashes[h] {
			of.found = h
			return false // gitmem's own write, done or left as it was by a crash, or what an adopt took
		}
	}
	base := handBase{}
	if old.isFile() {
		base.hash = old.hash
	}
	if !of.lastRead.IsZero() {
		base = handBase{hash: of.lastRead, text: of.texts[of.lastRead]}
	}
	r.pmu.Lock()
	_, noted := r.handBase[q]
	if !noted { // kept already: its base is the older one
		r.handBase[q] = base
	}
	r.pmu.Unlock()
	if !noted { // once until the adopt takes it, not at every change under load
		r.opt.Logf("gitmem: %s was edited by hand before an acknowledged change to it reached the worktree; the edit is kept, and merged into that change by the next adopt commit", q)
	}
	return true
}

// ownSize reports whether a version of allows may be size bytes long (one
// whose size cannot be read counts as one).
func (r *Repo) ownSize(of *ownFiles, size int64) bool {
	for h := range of.hashes {
		if t, ok := of.texts[h]; ok {
			if int64(len(t)) == size {
				return true
			}
			continue
		}
		if n, err := r.obj.Size(h); err != nil || n == size {
			return true
		}
	}
	return false
}

// mirrorChecked makes the worktree at the memory path q match n (nil:
// absent), as wt.sync does, but every file it replaces or removes is moved
// aside in the same step (worktree.put) and compared with what of allows:
// one that holds anything else was edited by hand after keepHandEdits
// looked. It is kept: put back as it is, its base (what the file held
// when checked) noted in r.handBase for the next adopt commit's merge
// (mergeHandEdit). One that another program still holds open for writing
// is waited for, or put back (keepWriting). Called with mmu held.
func (r *Repo) mirrorChecked(q string, n *node, of *ownFiles) error {
	if n.isDir() {
		return r.wt.sync(q, n, r.readBlob)
	}
	if err := r.obj.Env.Injected(gd.StepWorktree, q); err != nil {
		return err
	}
	w := r.wt
	var want []byte
	if n != nil {
		// Read first, so that what q's lookup finds below is as fresh as
		// can be when the file is put.
		var err error
		if want, err = r.readBlob(n.hash); err != nil {
			return err
		}
	}
	fi, err, folders := w.lstatFolders(q)
	there := err == nil // something at q, as far as known: put's first try
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	case err == nil && fi.IsDir():
		return w.sync(q, n, r.readBlob) // a folder where a file was (its files are not checked)
	case err != nil && n == nil:
		return nil
	}
	if n != nil {
		if err == nil && fi.Mode().IsRegular() && fi.Size() == n.size { // the lstat tells most apart
			if _, ok := w.readBlob(q, n); ok {
				return nil
			}
		}
		if !folders { // else q's folders were found real just now
			if err := w.ensureDir(path.Dir(q)); err != nil {
				return err
			}
		}
	}
	wantFile := n != nil
	// expect is what the file at q may hold as gitmem's own; base is what
	// it was made from, which a hand edit found in it is merged from.
	expect := func(h plumbing.Hash) bool { return of.hashes[h] }
	var base []byte
	baseRead := false // read when a hand edit is found: it costs a blob read, maybe from a pack
	mergeBase := func() []byte {
		if !baseRead {
			b, err := r.ownText(of, of.found)
			if err != nil {
				b = nil // merged from nothing: both sides kept between markers
			}
			base, baseRead = b, true
		}
		return base
	}
	tmp := ""
	defer func() {
		if tmp != "" {
			w.root.Remove(tmp)
		}
	}()
	kept := false // a hand edit was found, put back, its base noted
	for {
		aside, placed := "", true
		var asideInfo fs.FileInfo
		put, putFile := want, wantFile
		if putFile {
			if tmp == "" {
				if tmp, err = w.writeTemp(put); err != nil {
					return err
				}
			}
			if aside, asideInfo, placed, err = w.put(tmp, q, there); err != nil {
				return err
			}
			if placed {
				tmp = ""
			}
		} else if aside, err = w.moveAside(q); err != nil {
			return err
		}
		hand := false
		if aside != "" {
			data, file, err := w.takeAside(aside, asideInfo)
			if errors.Is(err, errWriting) && placed {
				return r.keepWriting(q, aside, put, putFile, mergeBase())
			}
			if err != nil {
				return fmt.Errorf("read the file it replaced (left in .git/gitmem/tmp): %w", err)
			}
			if hand = file && !expect(plumbing.ComputeHash(plumbing.BlobObject, data)); hand {
				if kept {
					// An edit of what an earlier round put: merged into
					// the edit that round kept.
					want = mergeHand(mergeBase(), want, data)
				} else {
					// Put back as it is (where the change removes the
					// file too), and merged by the next adopt, which
					// also finds the version the edit was made from when
					// that is older than what q held (a program that read
					// the file before gitmem's last change to it).
					want = data
					if r.keepHand(q, mergeBase()) {
						r.opt.Logf("gitmem: %s was edited by hand while gitmem wrote an acknowledged change to it; the edit is kept, and merged into that change by the next adopt commit", q)
					}
				}
				kept, wantFile = true, true
			}
		}
		if placed && !hand {
			if !putFile {
				w.touchDir(w.prune(path.Dir(q)))
			}
			return nil
		}
		there = putFile // what this round put, or what appeared at q meanwhile
		// Another round. q holds what this one put there, or, when a file
		// appeared at q after it was moved aside, one made from nothing.
		if placed && putFile {
			h := plumbing.ComputeHash(plumbing.BlobObject, put)
			expect = func(g plumbing.Hash) bool { return g == h }
			base, baseRead = put, true
		} else {
			expect = func(plumbing.Hash) bool { return false }
			base, baseRead = nil, true
		}
		if hand && tmp != "" { // it holds the older want
			w.root.Remove(tmp)
			tmp = ""
		}
	}
}

// keepWriting puts back at the memory path q the file mirrorChecked took
// aside (aside names it) while another program still holds it open for
// writing: what it writes stays in the memory folder. q is then kept as a
// hand edit made on base (what q held when checked), which the next adopt
// commit merges with the acknowledged version, once the program is done
// (adoptDrift reads no file open for writing). put is what mirrorChecked
// had put at q (putFile: a file), which comes back aside. Called with mmu
// held.
func (r *Repo) keepWriting(q, aside string, put []byte, putFile bool, base []byte) error {
	w := r.wt
	back, backInfo, _, err := w.put(aside, q, putFile)
	if err != nil {
		return fmt.Errorf("put back the file another program writes (left in .git/gitmem/tmp): %w", err)
	}
	if back != "" {
		// gitmem's own version, unless an edit of it landed in the same
		// instant: two programs writing one file at once, of which the one
		// still writing keeps the file.
		data, file, err := w.takeAside(back, backInfo)
		if err == nil && file && (!putFile || !bytes.Equal(data, put)) {
			r.opt.Logf("gitmem: %s was written by two programs at once while gitmem wrote an acknowledged change to it; the file of the one still writing is kept", q)
		}
	}
	if r.keepHand(q, base) {
		r.opt.Logf("gitmem: %s was being written by another program when gitmem wrote an acknowledged change to it; the program's file is kept, and merged into that change by the next adopt commit", q)
	}
	return nil
}

// keepHand notes that the worktree file at q holds a hand edit made on
// base (nil: no file), for the next adopt commit's merge (r.handBase),
// unless an older base is noted already. It reports whether it noted it:
// what is logged of a kept edit is logged once until an adopt takes it,
// not at every change of the file under load.
func (r *Repo) keepHand(q string, base []byte) (noted bool) {
	b := handBase{text: base}
	if base != nil {
		b.hash = plumbing.ComputeHash(plumbing.BlobObject, base)
	}
	r.pmu.Lock()
	defer r.pmu.Unlock()
	if _, ok := r.handBase[q]; ok {
		return false
	}
	r.handBase[q] = b
	return true
}

// moveBranch points the branch at the last of items. The branch holds
// the commit gitmem last wrote there, or one of items after a crash. When
// something else moved it meanwhile — a git commit made by hand while
// gitmem holds the writer lock, a branch moved after a crash — that commit
// is kept as refs/gitmem/displaced/<hash> (durably, before the branch
// moves), the branch is put on the acknowledged commits all the same, and
// the displaced commit is merged back soon after (mergeDisplaced): the
// branch loses neither. moved is that commit (zero: none). A branch that
// is damaged or missing is left alone and the commits wait in the log.
// Called with mmu held.
func (r *Repo) moveBranch(items []*prepared) (moved plumbing.Hash, err error) {
	last := items[len(items)-1]
	onChain := items[0].parent == r.diskHead
	for _, p := range items { // after a crash, some may be on the branch already
		onChain = onChain || p.hash == r.diskHead
	}
	if onChain {
		r.omu.Lock()
		err := r.obj.UpdateRef(r.branch, r.diskHead, last.hash, false)
		r.unlockObj()
		if err == nil {
			r.diskHead = last.hash
			return plumbing.ZeroHash, nil
		}
		if cur, rerr := r.readRef(r.branch); !errors.Is(rerr, gd.ErrNoRef) && (rerr != nil || cur == r.diskHead) {
			return plumbing.ZeroHash, wrap("update the branch", err) // not moved: a disk fault
		}
	}
	cur, err := r.readRef(r.branch)
	if errors.Is(err, gd.ErrNoRef) && !r.diskHead.IsZero() {
		// Deleted outside gitmem: put back, on the acknowledged commits.
		if err := r.putBranchBack(r.diskHead, last.hash, "the last acknowledged change"); err != nil {
			return plumbing.ZeroHash, err
		}
		r.diskHead = last.hash
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, wrap("read the branch", err)
	}
	return r.takeBranchBack(cur, last.hash)
}

// takeBranchBack points the branch, which something outside gitmem moved
// to cur, at the acknowledged commit to, keeping cur (durably, first) for
// mergeDisplaced to merge back. When the branch moves again meanwhile
// (another git command), that commit is kept too, and so on a few times;
// moved is the last commit kept. Called with mmu held.
func (r *Repo) takeBranchBack(cur, to plumbing.Hash) (moved plumbing.Hash, err error) {
	for try := 0; ; try++ {
		r.omu.Lock()
		var made time.Time // when git made the commit (its committer date)
		c, err := r.obj.Commit(cur)
		if err == nil {
			made = c.Committer.When
			err = r.keepDisplaced(cur)
		}
		kept := err == nil
		if err == nil {
			err = r.obj.UpdateRef(r.branch, cur, to, false)
		}
		r.unlockObj()
		if kept {
			r.opt.Logf("gitmem: the branch was moved outside gitmem (to %s); the acknowledged commits stay on it and %s is merged back", cur, cur)
			r.smu.Lock()
			if r.displacedIndex == nil {
				r.displacedIndex = map[plumbing.Hash][]plumbing.Hash{}
			}
			r.displacedIndex[cur] = r.indexCandidates(made) // what a git commit may have been made from
			r.smu.Unlock()
			r.displacedWait.Store(true)
		}
		if err == nil {
			break
		}
		now, rerr := r.readRef(r.branch)
		if !kept || rerr != nil || now == cur || try == 4 {
			r.signal()
			return plumbing.ZeroHash, wrap("update the branch", err)
		}
		cur = now
	}
	r.diskHead = to
	r.signal()
	return cur, nil
}

// displacedRefs is where commits the branch was moved to outside gitmem
// wait to be merged back.
const displacedRefs = "refs/gitmem/displaced/"

// keepDisplaced makes h reachable as refs/gitmem/displaced/<h>, durably.
// Called with omu held.
func (r *Repo) keepDisplaced(h plumbing.Hash) error {
	name := plumbing.ReferenceName(displacedRefs + h.String())
	if cur, err := r.readRef(name); err == nil && cur == h {
		return nil
	}
	return r.obj.UpdateRef(name, plumbing.ZeroHash, h, true)
}

// displaced lists the commits waiting to be merged back, by ref, loose or
// packed (git gc packs refs). A ref is named after the commit it was made
// for, but holds the commit to merge: a redaction may have rewritten it.
func (r *Repo) displaced() map[plumbing.ReferenceName]plumbing.Hash {
	out, err := gd.ListRefs(r.gitDir)
	if err != nil {
		return map[plumbing.ReferenceName]plumbing.Hash{}
	}
	maps.DeleteFunc(out, func(name plumbing.ReferenceName, _ plumbing.Hash) bool {
		return !strings.HasPrefix(name.String(), displacedRefs)
	})
	return out
}

// mergeDisplaced merges each commit the branch was moved to outside
// gitmem back into it, one merge commit each by the operator (conflicts
// are marked as in a pull), and drops its ref once merged. Called without
// wmu, by the maintenance loop and Flush.
func (r *Repo) mergeDisplaced() error {
	r.dmu.Lock() // one at a time: Flush waits for the loop's
	defer r.dmu.Unlock()
	if !r.displacedWait.Swap(false) {
		return nil
	}
	for name, h := range r.displaced() {
		st := r.obj.View()
		r.smu.RLock()
		idx, ok := r.displacedIndex[plumbing.NewHash(strings.TrimPrefix(name.String(), displacedRefs))]
		if !ok {
			idx = []plumbing.Hash{r.indexFor} // displaced by an earlier run: the index file is the best clue left
		}
		r.smu.RUnlock()
		m := &merger{r: r, g: gd.NewGraph(st), st: st, label: "outside-gitmem", theirs: h, limits: policy.DefaultLimits, index: idx}
		meta := Meta{Subject: "memory: merge outside-gitmem", Author: r.opt.Operator, Trailers: []Trailer{{TrailerCommand, "merge"}}}
		_, err := r.update(meta, m.run)
		st.Close()
		if err == nil {
			r.mergedBack.Add(1)
		}
		if errors.Is(err, ErrClosed) {
			return err
		}
		if err != nil && !errors.Is(err, errUpToDate) {
			r.opt.Logf("gitmem: %s, which the branch was moved to outside gitmem, could not be merged back (%v); it is kept as %s and tried again at the next start", h, err, name)
			continue
		}
		for _, c := range m.conflicts {
			r.opt.Logf("gitmem: merging %s back: conflict (%s) in %s", h, c.Kind, c.Path)
		}
		r.omu.Lock()
		if err := r.obj.Storage().RemoveReference(name); err != nil {
			r.opt.Logf("gitmem: could not delete %s after merging it back: %v", name, err)
		}
		r.unlockObj()
		r.smu.Lock()
		delete(r.displacedIndex, plumbing.NewHash(strings.TrimPrefix(name.String(), displacedRefs)))
		r.smu.Unlock()
	}
	return nil
}

// appendHistory appends materialised commits to the history index file
// when it ends where they start (else the next reader catches up from
// git).
func (r *Repo) appendHistory(items []*prepared) {
	var recs []histRec
	prev := items[0].parent
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
		return
	}
	r.hfmu.Lock()
	defer r.hfmu.Unlock()
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if tip := r.fileTip(); tip != items[0].parent || tip.IsZero() {
		if !tip.IsZero() || !items[0].parent.IsZero() {
			return
		}
	}
	if err := r.appendHistoryFile(recs, r.hist); err != nil {
		r.opt.Logf("gitmem: could not save the history index: %v", err)
	}
}

// checkpoint makes everything published durable in git's own files and
// empties the log it was in: appends switch to the other log file, what
// the old file holds is materialised and synced (one syncfs), then the
// old file is emptied. Appends wait only for the switch.
//
// A log file is emptied only after a sync that covers everything it
// holds: a checkpoint that fails (a full disk) leaves the switched-from
// file in r.draining, and the next attempt finishes that one before it
// switches again.
func (r *Repo) checkpoint() error {
	r.mmu.Lock()
	defer r.mmu.Unlock()
	if r.walFiles[r.active] == nil {
		// Closed (closeLog, under mmu): Close made the last checkpoint;
		// the maintenance loop may still call one before it stops.
		return nil
	}
	r.lastCkpt.Store(time.Now().UnixNano()) // an attempt: a failing one is retried after checkpointEvery
	r.keepBranch()
	// A multi-pack-index naming a pack that is gone (one gitmem deleted as
	// git listed it, or a repack's temporary pack): git fails to read
	// what it says is there. A stat when there is none.
	gd.RemoveStaleMidx(r.gitDir)
	err := r.checkpointLocked()
	r.noteCheckpoint(err)
	return err
}

func (r *Repo) checkpointLocked() error {
	if r.recovering {
		return r.checkpointRecovered()
	}
	r.fmu.Lock()
	if r.draining < 0 {
		cur, next := r.walFiles[r.active], r.walFiles[1-r.active]
		if cur.Len() == 0 {
			// Nothing in the log that git's files lack once materialised.
			r.fmu.Unlock()
			if err := r.materializeLocked(); err != nil {
				return err
			}
			r.clearBroken()
			return nil
		}
		if next.Len() != 0 { // cannot happen: a file is emptied before it is switched to
			r.fmu.Unlock()
			return &StorageError{Op: "switch the write-ahead log", Err: errors.New("both log files hold changes")}
		}
		if err := next.Reset(max(cur.Gen(), next.Gen()) + 1); err != nil {
			r.fmu.Unlock()
			return wrap("switch the write-ahead log", err)
		}
		r.draining, r.active = r.active, 1-r.active
	}
	old := r.walFiles[r.draining]
	r.fmu.Unlock()
	if err := r.materializeLocked(); err != nil {
		return err
	}
	if err := r.syncMaterialized(); err != nil {
		return err
	}
	r.fmu.Lock()
	err := old.Reset(max(r.walFiles[0].Gen(), r.walFiles[1].Gen()) + 1)
	if err == nil {
		r.draining = -1
	}
	r.noteLogBytes()
	r.fmu.Unlock()
	r.noteDrained() // calls held back by logMax
	if err != nil {
		return wrap("empty the write-ahead log", err)
	}
	r.lastCkpt.Store(time.Now().UnixNano())
	r.clearBroken()
	return nil
}

// clearBroken lets changes through again after a checkpoint succeeded.
func (r *Repo) clearBroken() {
	r.smu.Lock()
	r.broken = nil
	r.smu.Unlock()
}

// noteCheckpoint logs a checkpoint's failure once (and again only when the
// reason changes), and its recovery. While checkpoints fail, new changes
// are refused (the log would only grow) and the attempt is retried every
// checkpointEvery.
func (r *Repo) noteCheckpoint(err error) {
	prev := r.ckptErr
	switch {
	case err != nil && (prev == nil || failureKind(prev) != failureKind(err)) && r.logGone():
		r.opt.Errorf("gitmem: the acknowledged changes cannot be written to git's files (%v), and the write-ahead log (.git/gitmem/wal) is gone: the repository was deleted or moved while open; the changes git's files lack are in no file a next start would read, new changes are refused", err)
	case err != nil && (prev == nil || failureKind(prev) != failureKind(err)):
		r.opt.Errorf("gitmem: the acknowledged changes cannot be written to git's files yet (%v); they are safe in the write-ahead log, new changes are refused meanwhile, and gitmem retries every %v", err, checkpointEvery)
	case err == nil && prev != nil:
		r.opt.Logf("gitmem: git's files hold every acknowledged change again")
	}
	r.ckptErr = err
	r.ckptFailing.Store(err != nil)
	if err != nil {
		r.smu.Lock()
		if r.broken == nil {
			r.broken = err
		}
		r.smu.Unlock()
	}
}

// failureKind is what tells one reason of a failure from another: a file
// operation's failure without the file's name (a temporary file's is new
// at every attempt), anything else its text.
func failureKind(err error) string {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Op + ": " + pe.Err.Error()
	case errors.As(err, &le):
		return le.Op + ": " + le.Err.Error()
	}
	return err.Error()
}

// checkpointRecovered makes the changes recovered from the log git's own,
// then empties both log files. No change was appended meanwhile (they are
// refused while recovering). Called with mmu held.
func (r *Repo) checkpointRecovered() error {
	if err := r.materializeLocked(); err != nil {
		return err
	}
	if err := r.syncMaterialized(); err != nil {
		return err
	}
	if err := r.emptyLog(); err != nil {
		return err
	}
	r.recovering = false
	r.lastCkpt.Store(time.Now().UnixNano())
	r.clearBroken()
	return nil
}

// emptyLog empties both log files once git's files hold all they do.
func (r *Repo) emptyLog() error {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	gen := max(r.walFiles[0].Gen(), r.walFiles[1].Gen()) + 1
	defer r.noteLogBytes()
	for i, w := range r.walFiles {
		if err := w.Reset(gen + uint32(i)); err != nil {
			return wrap("empty the write-ahead log", err)
		}
	}
	r.active, r.draining = 1, -1
	return nil
}

// syncMaterialized makes what materialisation wrote durable (one syncfs),
// and records the worktree paths still waiting for repair in the journal.
// Called with mmu held.
func (r *Repo) syncMaterialized() error {
	if err := r.secureMaterialized(); err != nil {
		return err
	}
	ref := filepath.Join(r.gitDir, filepath.FromSlash(string(r.branch)))
	files := append(r.wt.flushList(), r.packsWritten...)
	files = append(files, ref, filepath.Dir(ref))
	if err := gd.SyncFS(r.obj.Env, r.gitDir, files); err != nil {
		return wrap("sync the repository", err)
	}
	r.packsWritten = nil
	r.held = slices.DeleteFunc(r.held, func(g heldObjects) bool {
		if g.done {
			r.obj.Drop(g.objs)
		}
		return g.done
	})
	r.pmu.Lock()
	pend := slices.Clone(r.pend)
	r.pmu.Unlock()
	if len(pend) > 0 {
		if err := r.writeJournal(journal{Paths: pend}); err != nil {
			return wrap("write the journal", err)
		}
	}
	return nil
}

// secureMaterialized makes sure git's files hold the objects
// materialised since the last checkpoint, before the log that holds them
// is emptied.
//
// git's gc, repack, prune and maintenance delete no pack gitmem writes:
// each has a .keep for good (see gd.Keep), made before it appears. Each
// pack is still looked for on disk: the objects of one that is gone
// (something that ignores .keep deleted it: rm, a tool of its own; or
// gitmem's gc replaced it) are looked for in git's files as they are now
// (gd.Store.Missing), and any missing is written again from memory — the
// log holds the same — and the log says so at ERROR. Called with mmu
// held, after materialisation.
func (r *Repo) secureMaterialized() error {
	var gone []gd.Object
	for i := range r.held {
		g := &r.held[i]
		if gd.PackExists(r.gitDir, g.pack) {
			g.done = g.done || !g.small() // a small one waits to be folded
			continue
		}
		gone = append(gone, g.objs...)
		g.done = true // written again below, or in a pack that replaced it
	}
	if len(gone) == 0 {
		return nil
	}
	r.omu.Lock()
	missing := r.obj.Missing(gone)
	r.unlockObj()
	if len(missing) > 0 {
		r.opt.Errorf("gitmem: %d object(s) of acknowledged commits were deleted from git's files by another program before a checkpoint; gitmem writes them again", len(missing))
		h, err := r.obj.WritePackFiles(missing, false, gd.Own)
		if err != nil {
			return wrap("write the objects again", err)
		}
		r.addPack(h)
	}
	return nil
}

// foldSmall writes the small packs materialisation wrote (groups of
// fewer than foldBelow objects and foldBelowBytes: a call or two each, or
// the dozen calls a group holds under load) again as one, from memory,
// once foldAt of them wait or they hold foldBytes, and deletes them: the
// pack folder does not fill with them (under load a pack per group was
// ~80 packs a second, for gc to merge once a minute), and memory holds
// at most about foldBytes of them. Only as changes are materialised: once they
// stop, nothing is deleted, so that a git fsck run then does not meet a
// pack vanishing under it (it fails on one). The new pack is durable
// before the small ones go: what they hold may be in no log any more.
// Best effort: on a full disk the small packs stay as they are. Called
// with mmu held, after materialisation.
func (r *Repo) foldSmall() {
	var small []gd.Object
	var folded []plumbing.Hash
	bytes := 0
	for _, g := range r.held {
		if g.small() {
			small = append(small, g.objs...)
			folded = append(folded, g.pack)
			bytes += g.bytes
		}
	}
	if len(folded) < foldAt && bytes < foldBytes {
		return
	}
	h, err := r.obj.WritePackFiles(small, true, gd.Own)
	if err != nil {
		return
	}
	r.addPack(h)
	// The small ones are one group now, in the new pack, whose objects
	// memory lets go of at the next checkpoint.
	r.held = slices.DeleteFunc(r.held, heldObjects.small)
	r.held = append(r.held, heldObjects{pack: h, objs: small, bytes: bytes, done: true})
	r.removeFolded(slices.DeleteFunc(folded, func(p plumbing.Hash) bool { return p == h }))
}

// dropHeld forgets the objects held in memory (a redaction deleted
// them). Called with mmu held.
func (r *Repo) dropHeld() {
	for _, g := range r.held {
		r.obj.Drop(g.objs)
	}
	r.held = nil
}

// removeFolded deletes packs materialisation wrote whose objects are in
// another pack now (a reader that misses one finds them there), and
// forgets them; not while git maintenance runs (gd.LockMaintenance): they
// stay for gc. Called with mmu held.
func (r *Repo) removeFolded(packs []plumbing.Hash) {
	unlock, ok := gd.LockMaintenance(r.gitDir)
	if !ok {
		return
	}
	gd.RemovePacks(r.gitDir, packs)
	unlock()
	gone := map[string]bool{}
	for _, h := range packs {
		base := filepath.Join(r.gitDir, "objects", "pack", "pack-"+h.String())
		gone[base+".pack"], gone[base+".idx"] = true, true
	}
	r.packsWritten = slices.DeleteFunc(r.packsWritten, func(p string) bool { return gone[p] })
	r.omu.Lock()
	r.obj.Reindex()
	r.unlockObj()
}

// addPack makes a pack materialisation wrote one the store reads from,
// and one the next checkpoint syncs. Called with mmu held.
func (r *Repo) addPack(h plumbing.Hash) {
	r.omu.Lock()
	r.obj.AddPack(h)
	r.unlockObj()
	base := filepath.Join(r.gitDir, "objects", "pack", "pack-"+h.String())
	r.packsWritten = append(r.packsWritten, base+".pack", base+".idx", filepath.Dir(base))
}

// maintainLoop materialises soon after each group, checkpoints now and
// then, and gives the writer lock up when idle or asked for.
func (r *Repo) maintainLoop() {
	defer r.loopWG.Done()
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	var headChecked time.Time
	for {
		select {
		case <-r.stop:
			return
		case <-r.wake:
		case <-t.C:
		}
		if !r.owned.Load() {
			return // released by Close
		}
		if err := r.materialize(); err != nil {
			// Acknowledged changes are safe in the log; new ones wait
			// until git's files can take them (a full disk).
			r.smu.Lock()
			if r.broken == nil {
				r.broken = err
				r.opt.Errorf("gitmem: %v; changes are refused until it can be written", err)
			}
			r.smu.Unlock()
		}
		r.prepareSpareLog()
		var size int64
		full := false
		r.fmu.Lock()
		if w, o := r.walFiles[r.active], r.walFiles[1-r.active]; w != nil && o != nil {
			size = w.Len()
			// Nearly full, and the other file takes more: switch to it
			// now rather than grow this one while the writers wait.
			full = r.draining < 0 && size > w.Cap()*3/4 && o.Cap() > w.Cap()
		}
		r.fmu.Unlock()
		r.smu.RLock()
		broken := r.broken != nil
		r.smu.RUnlock()
		due := time.Since(time.Unix(0, r.lastCkpt.Load())) > checkpointEvery
		// The lock is about to be given up (idle, or another process
		// waits for it): the checkpoint release needs is made here,
		// without the writer lock, so that a burst of calls beginning
		// meanwhile is not held up by it (up to 200 ms under the lock at
		// the end of a 64-client run, measured). release then finds the
		// log empty. Not again at every poll while checkpoints fail.
		wanted := r.lockWanted()
		leaving := wanted || r.idle()
		if (size > 0 && (size > checkpointBytes || due || full || (leaving && !broken))) || (broken && due) {
			r.checkpoint() // a failure is logged once and retried when due
		}
		// HEAD moved with git (git checkout, git switch): put back every
		// second, and before the lock is let go.
		if now := time.Now(); leaving || now.Sub(headChecked) > checkpointEvery {
			headChecked = now
			if _, _, moved := r.headMoved(); moved {
				r.wmu.Lock()
				r.putHeadBack()
				r.wmu.Unlock()
			}
		}
		if r.displacedWait.Load() {
			r.mergeDisplaced()
		}
		if wanted || r.idle() { // idle again: calls may have come meanwhile
			if r.wmu.TryLock() {
				released := r.release()
				r.wmu.Unlock()
				if released {
					return
				}
			}
		}
	}
}

// idle reports whether no change was made for releaseIdle.
func (r *Repo) idle() bool {
	return time.Since(time.Unix(0, r.lastUse.Load())) > releaseIdle
}

// lockWanted reports whether another process is queued for the writer
// lock (it holds the intent lock while it waits).
func (r *Repo) lockWanted() bool {
	ok, err := r.intent.TryLock()
	if err != nil {
		return false
	}
	if ok {
		r.intent.Unlock()
	}
	return !ok
}

// release checkpoints and gives the writer lock up, unless a change is
// still being made. Called with wmu held; reports whether it released.
func (r *Repo) release() bool {
	if !r.owned.Load() {
		return true
	}
	r.qmu.Lock()
	queued := len(r.queue.items)
	r.qmu.Unlock()
	r.smu.RLock()
	pending := r.tip != r.head
	r.smu.RUnlock()
	if queued > 0 || pending || r.gcBusy.Load() > 0 || r.histSaving.Load() > 0 {
		return false
	}
	if r.ckptFailing.Load() && time.Since(time.Unix(0, r.lastCkpt.Load())) < checkpointEvery {
		return false // the last attempt failed: retried when due, not at every poll
	}
	if r.checkpoint() != nil {
		return false // keep the lock (and the log) until git's files take the changes
	}
	r.imu.Lock()
	defer r.imu.Unlock() // an index written by Flush meanwhile is the holder's
	if err := r.writeIndexLocked(); err != nil {
		r.opt.Logf("gitmem: could not write .git/index: %v", err)
	}
	r.closeLog(false)
	r.wt.dropSpares()
	r.owned.Store(false)
	r.flock.Unlock()
	return true
}

// prepareSpareLog makes the log file appends do not go to large enough
// for a second of load, once the one they go to has taken spareAt bytes
// since the last checkpoint: zeros written and fsynced now, with no writer
// waiting, and the checkpoint switches to it before the active file must
// grow. An append that finds its file full grows it (zeros written and an
// fsync with the log's mutex held, every writer waiting): from 68 KiB to
// 27 MB under 64 clients, seven times in the first second, up to 33 ms
// each (measured). A file under light load stays small, and so does one
// on a file system with less than 16 times the growth free.
func (r *Repo) prepareSpareLog() {
	r.mmu.Lock() // no checkpoint switches files meanwhile
	defer r.mmu.Unlock()
	r.fmu.Lock()
	var cur, spare *gd.WAL
	if r.draining < 0 {
		cur, spare = r.walFiles[r.active], r.walFiles[1-r.active]
	}
	if cur == nil || spare == nil || cur.Len() < spareAt || time.Since(r.spareFailed) < time.Minute {
		r.fmu.Unlock()
		return
	}
	want := max(int64(spareCap), cur.Cap())
	r.fmu.Unlock()
	// Not on a file system short of space: the calls' own writes come
	// first (a log file that must grow still grows, as it needs). The
	// spare's size changes here, under mmu alone: whoever reads it holds
	// mmu (the checkpoint, closeLog, scrubLog) or is this loop.
	if spare.Cap() < want && gd.FreeSpace(r.gitDir) >= 16*(want-spare.Cap()) {
		if err := spare.GrowTo(want); err != nil {
			r.spareFailed = time.Now() // not at every change: retried in a minute
			r.opt.Logf("gitmem: could not make the write-ahead log larger ahead of need: %v", err)
		}
	}
}

// closeLog closes the log files, removing them when asked (they are
// empty after a checkpoint).
func (r *Repo) closeLog(remove bool) {
	r.mmu.Lock() // not while prepareSpareLog grows one
	defer r.mmu.Unlock()
	r.fmu.Lock()
	defer r.fmu.Unlock()
	for i, w := range r.walFiles {
		if w != nil {
			w.Close(remove)
		}
		r.walFiles[i] = nil
	}
}

// drain writes whatever is queued. Called with wmu held, so nothing new
// is prepared meanwhile.
func (r *Repo) drain() {
	r.qmu.Lock()
	var last *prepared
	if n := len(r.queue.items); n > 0 {
		last = r.queue.items[n-1]
	}
	r.qmu.Unlock()
	if last != nil {
		r.durable(last)
	}
}

// gitUpToDate materialises what is published, for a read of git's own
// files (a commit, a tree, the history) that must see it.
func (r *Repo) gitUpToDate() {
	if err := r.materialize(); err != nil {
		r.opt.Logf("gitmem: %v", err)
	}
}

// settle materialises and checkpoints everything, for operations that
// read or rewrite git's files directly (gc, redact) or hand the
// repository over.
func (r *Repo) settle() error {
	if !r.owned.Load() {
		return nil
	}
	return r.checkpoint()
}

// coverer tells the paths drifted leaves alone: a path is covered when it
// or a folder above it is in the set.
type coverer interface{ covers(p string) bool }

// pendingFor is the worktree paths that are gitmem's own unfinished work
// (not yet materialised, or waiting for a repair), as far as a check of
// the given repository paths can ask: those at, above or beneath one of
// them. They are never taken for hand edits. It is a copy taken at one
// instant, so that a check sees one state while materialisation goes on;
// under load thousands of paths wait, and copying or scanning them all
// for each call cost more than the rest of the check.
func (r *Repo) pendingFor(paths []string) pathSet {
	s := pathSet{}
	r.pmu.Lock()
	defer r.pmu.Unlock()
	for _, q := range r.pend {
		for _, p := range paths {
			if within(q, p) || within(p, q) {
				s[q] = true
			}
		}
	}
	for _, p := range paths {
		r.inflight.collect(p, s)
	}
	return s
}

// flight counts the worktree paths of the commits not yet materialised
// and, for each folder, how many of them lie beneath it: what is in
// flight at, above or beneath a path is then a few lookups.
type flight struct {
	paths map[string]int // path -> commits in flight that change it
	below map[string]int // folder -> the sum of paths' counts beneath it
}

func (f *flight) add(q string) {
	f.paths[q]++
	for d := q; strings.Contains(d, "/"); {
		d = path.Dir(d)
		f.below[d]++
	}
}

func (f *flight) done(q string) {
	if f.paths[q] <= 0 {
		return
	}
	if f.paths[q]--; f.paths[q] == 0 {
		delete(f.paths, q)
	}
	for d := q; strings.Contains(d, "/"); {
		d = path.Dir(d)
		if f.below[d]--; f.below[d] <= 0 {
			delete(f.below, d)
		}
	}
}

// collect adds to s the paths in flight at, above or beneath p.
func (f *flight) collect(p string, s pathSet) {
	for a := p; ; a = path.Dir(a) {
		if f.paths[a] > 0 {
			s[a] = true
		}
		if !strings.Contains(a, "/") {
			break
		}
	}
	if f.below[p] > 0 {
		for q := range f.paths {
			if within(q, p) {
				s[q] = true
			}
		}
	}
}
