package gitmem

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/gitmem/internal/lock"
)

// disk is git's files and the worktree as this process last wrote them:
// the materialiser's and the checkpoint's state.
type disk struct {
	// mu is held while git's files or the worktree are written:
	// materialisation, checkpoints, the branch and the worktree put back
	// after plain git, gc's swap. It guards every field below but the
	// atomics. In the lock order it comes after the index lock
	// (gitIndex.mu) and before the history file's lock, logFiles.mu, the
	// published state's and the object store's. What says "Called with
	// the disk lock held" takes a diskTurn. The background takes it
	// with hold; a read waits for it with holdContext, which its context
	// or Close ends.
	mu           lock.Mutex
	head         plumbing.Hash // the branch as written in git's files
	tree         *node         // its tree: what the worktree mirrors
	packsWritten []string      // packs materialised since the last sync
	held         []heldObjects // the objects materialised since the last checkpoint, and small packs not folded yet
	recovering   bool          // the log holds a crashed holder's changes: both files stay until they are git's
	spareFailed  time.Time     // when growing the spare log file last failed: not tried again for a minute
	ckptErr      error         // the last checkpoint's failure
	holderSince  time.Time     // when the checkpoints began to fail, as .git/gitmem/holder says (zero: it holds no record of ours)
	gitIndexSeen time.Time     // the .git/index written by git that undoGitCheckout last looked at

	every       time.Duration // Options.CheckpointEvery: how often a checkpoint is due
	lastCkpt    atomic.Int64  // unix nanos of the last checkpoint (attempt)
	ckptFailing atomic.Bool
}

// diskTurn is proof that disk.mu is held.
type diskTurn struct{ d *disk }

// hold takes the disk lock, however long it waits (the background:
// materialisation, checkpoints, Close); release gives it back.
func (d *disk) hold() diskTurn {
	d.mu.Lock(context.Background(), nil) // cannot fail: no ctx, no closing
	return diskTurn{d}
}

// holdContext takes the disk lock for a call: a wait for it ends with
// ctx (ctx.Err()) or when Close begins (ErrClosed). A free lock is taken
// whatever ctx and the Repo's life say: only a wait is given up.
func (r *Repo) holdContext(ctx context.Context) (diskTurn, error) {
	if err := r.disk.mu.Take(ctx, r.life.Done()); err != nil {
		return diskTurn{}, r.gaveUp(err)
	}
	return diskTurn{&r.disk}, nil
}

func (t diskTurn) release() { t.d.mu.Unlock() }

// head is the branch as written in git's files; tree is its tree, what
// the worktree mirrors.
func (t diskTurn) head() plumbing.Hash { return t.d.head }
func (t diskTurn) tree() *node         { return t.d.tree }

// setHead records that the branch was moved to h (its tree is the
// materialiser's to follow).
func (t diskTurn) setHead(h plumbing.Hash) { t.d.head = h }

// resetTo makes head and tree what git's files and the worktree are
// taken to hold (a start; a redaction, which rewrote them).
func (t diskTurn) resetTo(head plumbing.Hash, tree *node) { t.d.head, t.d.tree = head, tree }

// resetTo is diskTurn.resetTo with the disk lock taken.
func (d *disk) resetTo(head plumbing.Hash, tree *node) {
	t := d.hold()
	defer t.release()
	t.resetTo(head, tree)
}

// seeGitIndex notes the modification time of the .git/index git wrote,
// and reports whether it is one not seen before (undoGitCheckout).
func (t diskTurn) seeGitIndex(mtime time.Time) bool {
	if mtime.Equal(t.d.gitIndexSeen) {
		return false
	}
	t.d.gitIndexSeen = mtime
	return true
}

// setCheckpointEvery sets how often a checkpoint is due (Options.CheckpointEvery).
func (d *disk) setCheckpointEvery(every time.Duration) { d.every = every }

// checkpointed notes a checkpoint (or an attempt): the next is due in
// Options.CheckpointEvery.
func (d *disk) checkpointed() { d.lastCkpt.Store(time.Now().UnixNano()) }

// due says the last checkpoint (attempt) is Options.CheckpointEvery old.
func (d *disk) due() bool {
	return time.Since(time.Unix(0, d.lastCkpt.Load())) > d.every
}

// failing says the last checkpoint failed.
func (d *disk) failing() bool { return d.ckptFailing.Load() }

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

// materialiser writes the published commits into git's files and the
// worktree (materialise.go), and makes them durable there so that the
// log can be emptied (checkpoint.go). Its state is the disk (its lock,
// disk.mu, is the first of the pipeline's: see disk); it reaches the
// other parts it writes through, each taken after the disk lock: the log
// files, the backlog, the published state, the object store (objects.mu), the
// mirror, the history index, and the branch's keeper.
type materialiser struct {
	disk    *disk
	log     *logFiles
	backlog *backlog
	state   *published
	objs    *objects
	obj     *gd.Store
	mirror  *mirror // the files a sync covers, the paths waiting for repair
	hist    *historyIndex
	follow  worktreeFollower
	// branches keeps the branch on the acknowledged commits when
	// something outside gitmem moved or deleted it.
	branches branchKeeper
	gitDir   string
	branch   *plumbing.ReferenceName // the Repo's, read once at Open
	// life is the Repo's lifetime (Repo.life): the branch's move gives
	// up its wait for a lock another program holds when Close begins,
	// and Close's own tries the lock once (gd.Store.UpdateRef).
	life context.Context
	opt  *Options
}

// worktreeFollower brings the worktree to commits materialised (the
// Repo's, for now: it reaches the mirror, .git/index and the objects).
// Both are called with the disk lock held.
type worktreeFollower interface {
	// undoCheckout puts back the files git checked out for cur.
	undoCheckout(cur plumbing.Hash, to *node)
	// followWorktree writes the paths items change.
	followWorktree(dt diskTurn, items []*prepared, prevHead plumbing.Hash, prev *node)
}

// branchKeeper puts the branch back on the acknowledged commits after
// something outside gitmem moved or deleted it (plaingit.go).
type branchKeeper interface {
	keepBranch(dt diskTurn)
	putBranchBack(was, at plumbing.Hash, why string) error
	takeBranchBack(dt diskTurn, cur, to plumbing.Hash) (moved plumbing.Hash, err error)
}

// materialize writes the published commits into git's files: loose
// objects, the branch, the worktree, the history index. Nothing is
// fsynced: the log keeps them durable until the next checkpoint.
func (r *Repo) materialize() error {
	dt := r.disk.hold()
	defer dt.release()
	return r.mat.materializeLocked(dt)
}

// materializeLocked materialises what was published when it started,
// chunkMax commits at a time; all at once when they do not start from
// the branch as git's files hold it (replayed after a crash, the branch
// may be at any of them: moveBranch and keepHandEdits must see them all).
func (m *materialiser) materializeLocked(dt diskTurn) error {
	n, from := m.backlog.pending()
	whole := n > 0 && from != dt.d.head
	for n > 0 {
		k := min(n, m.opt.hooks.chunk())
		if whole {
			k = n
		}
		err := m.materializeSome(dt, k)
		m.backlog.noteDrained()
		if err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// materializeSome materialises the first k commits published: their
// objects and the branch (writeCommits), then the worktree
// (followWorktree) and the history index file (appendHistory).
func (m *materialiser) materializeSome(dt diskTurn, k int) error {
	items := m.backlog.take(k)
	prevHead, prev := dt.d.head, dt.d.tree // prev: what the worktree mirrors
	moved, err := m.writeCommits(dt, items)
	if err != nil {
		m.backlog.requeue(items)
		return err
	}
	// The commits are in git's files. The worktree follows; a path that
	// cannot (a full disk) waits in repairs.pend and the journal.
	if !moved.IsZero() {
		m.follow.undoCheckout(moved, prev) // git reset --hard: its files are no hand edits
	}
	dt.d.tree = items[len(items)-1].tree
	m.follow.followWorktree(dt, items, prevHead, prev)
	m.appendHistory(items)
	return nil
}

// writeCommits writes the objects of items to git's files and points the
// branch at the last of them. moved is where something outside gitmem
// had moved the branch (moveBranch; zero: nowhere).
func (m *materialiser) writeCommits(dt diskTurn, items []*prepared) (moved plumbing.Hash, err error) {
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
	// full one, whose swap waits for the disk lock, held here until the
	// branch names them. The object store's lock is taken only to add the
	// pack: writing it took as long as the group was large, and every call
	// reading a file waited for it, holding the writer lock. The objects
	// stay readable from memory until the checkpoint.
	pack, err := m.objs.st.WritePackFiles(objs, false, gd.Own)
	if err != nil {
		return plumbing.ZeroHash, wrap("write the objects", err)
	}
	m.addPack(dt, pack)
	if last := items[len(items)-1]; last.hash != dt.d.head {
		if moved, err = m.moveBranch(dt, items); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	// The objects stay readable from memory until the checkpoint has
	// found them in git's files (secureMaterialized).
	dt.d.held = append(dt.d.held, newHeld(pack, objs))
	m.foldSmall(dt)
	return moved, nil
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
// Called with the disk lock held (dt).
func (m *materialiser) moveBranch(dt diskTurn, items []*prepared) (moved plumbing.Hash, err error) {
	last := items[len(items)-1]
	onChain := items[0].parent == dt.d.head
	for _, p := range items { // after a crash, some may be on the branch already
		onChain = onChain || p.hash == dt.d.head
	}
	if onChain {
		m.objs.lock()
		err := m.objs.st.UpdateRef(m.life, *m.branch, dt.d.head, last.hash, false)
		m.objs.unlock()
		if err == nil {
			dt.d.head = last.hash
			return plumbing.ZeroHash, nil
		}
		if cur, rerr := gd.ReadRef(m.gitDir, *m.branch); !errors.Is(rerr, gd.ErrNoRef) && (rerr != nil || cur == dt.d.head) {
			return plumbing.ZeroHash, wrap("update the branch", err) // not moved: a disk fault
		}
	}
	cur, err := gd.ReadRef(m.gitDir, *m.branch)
	if errors.Is(err, gd.ErrNoRef) && !dt.d.head.IsZero() {
		// Deleted outside gitmem: put back, on the acknowledged commits.
		if err := m.branches.putBranchBack(dt.d.head, last.hash, "the last acknowledged change"); err != nil {
			return plumbing.ZeroHash, err
		}
		dt.d.head = last.hash
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, wrap("read the branch", err)
	}
	return m.branches.takeBranchBack(dt, cur, last.hash)
}

// appendHistory appends materialised commits to the history index file
// when it ends where they start (else the next reader catches up from
// git).
func (m *materialiser) appendHistory(items []*prepared) {
	if err := m.hist.appendMaterialised(items); err != nil {
		m.opt.Logf("gitmem: could not save the history index: %v", scrubPaths(err))
	}
}

// syncMaterialized makes what materialisation wrote durable (one syncfs),
// and records the worktree paths still waiting for repair in the journal.
// Called with the disk lock held (dt).
func (m *materialiser) syncMaterialized(dt diskTurn) error {
	if err := m.secureMaterialized(dt); err != nil {
		return err
	}
	ref := filepath.Join(m.gitDir, filepath.FromSlash(string(*m.branch)))
	files := append(m.mirror.flushList(), dt.d.packsWritten...)
	files = append(files, ref, filepath.Dir(ref))
	if err := gd.SyncFS(m.objs.st.Env, m.gitDir, files); err != nil {
		return wrap("sync the repository", err)
	}
	dt.d.packsWritten = nil
	dt.d.held = slices.DeleteFunc(dt.d.held, func(g heldObjects) bool {
		if g.done {
			m.objs.st.Drop(g.objs)
		}
		return g.done
	})
	pend := m.mirror.pending()
	if len(pend) > 0 {
		if err := m.mirror.writeJournal(journal{Paths: pend}); err != nil {
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
// log holds the same — and the log says so at ERROR. Called with the
// disk lock held (dt), after materialisation.
func (m *materialiser) secureMaterialized(dt diskTurn) error {
	var gone []gd.Object
	for i := range dt.d.held {
		g := &dt.d.held[i]
		if gd.PackExists(m.gitDir, g.pack) {
			g.done = g.done || !g.small() // a small one waits to be folded
			continue
		}
		gone = append(gone, g.objs...)
		g.done = true // written again below, or in a pack that replaced it
	}
	if len(gone) == 0 {
		return nil
	}
	m.objs.lock()
	missing := m.objs.st.Missing(gone)
	m.objs.unlock()
	if len(missing) > 0 {
		m.opt.Errorf("gitmem: %d object(s) of acknowledged commits were deleted from git's files by another program before a checkpoint; gitmem writes them again", len(missing))
		h, err := m.objs.st.WritePackFiles(missing, false, gd.Own)
		if err != nil {
			return wrap("write the objects again", err)
		}
		m.addPack(dt, h)
	}
	return nil
}

// forgetHeld drops the objects held for secureMaterialized and
// foldSmall, all of them durable in git's files (a checkpoint made them
// so): called as the writer lock is let go. The next holder may rewrite
// or delete their packs — a redaction removes a secret, a gc repacks —
// and this process, taking the lock again, must not write them back from
// memory as if acknowledged objects had been deleted by another program;
// its small packs are left to gc to merge.
func (m *materialiser) forgetHeld() {
	dt := m.disk.hold()
	defer dt.release()
	for _, g := range dt.d.held {
		m.objs.st.Drop(g.objs)
	}
	dt.d.held = nil
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
// with the disk lock held (dt), after materialisation.
func (m *materialiser) foldSmall(dt diskTurn) {
	packs, bytes := 0, 0
	for _, g := range dt.d.held {
		if g.small() {
			packs, bytes = packs+1, bytes+g.bytes
		}
	}
	if packs < foldAt && bytes < foldBytes {
		return
	}
	// Gathered only for a fold: made at every materialisation, the list
	// of the objects held was the largest of a call's allocations under
	// the many-stores row's load (6% of its bytes; issue 25).
	var small []gd.Object
	var folded []plumbing.Hash
	for _, g := range dt.d.held {
		if g.small() {
			small = append(small, g.objs...)
			folded = append(folded, g.pack)
		}
	}
	h, err := m.objs.st.WritePackFiles(small, true, gd.Own)
	if err != nil {
		return
	}
	m.addPack(dt, h)
	// The small ones are one group now, in the new pack, whose objects
	// memory lets go of at the next checkpoint.
	dt.d.held = slices.DeleteFunc(dt.d.held, heldObjects.small)
	dt.d.held = append(dt.d.held, heldObjects{pack: h, objs: small, bytes: bytes, done: true})
	m.removeFolded(dt, slices.DeleteFunc(folded, func(p plumbing.Hash) bool { return p == h }))
}

// dropHeld forgets the objects held in memory (a redaction deleted
// them). Called with the disk lock held (dt).
func (m *materialiser) dropHeld(dt diskTurn) {
	for _, g := range dt.d.held {
		m.objs.st.Drop(g.objs)
	}
	dt.d.held = nil
}

// removeFolded deletes packs materialisation wrote whose objects are in
// another pack now (a reader that misses one finds them there), and
// forgets them; not while git maintenance runs (gd.LockMaintenance): they
// stay for gc. Called with the disk lock held (dt).
func (m *materialiser) removeFolded(dt diskTurn, packs []plumbing.Hash) {
	unlock, ok := gd.LockMaintenance(m.opt.hooks.gdEnv(), m.gitDir)
	if !ok {
		return
	}
	gd.RemovePacks(m.gitDir, packs)
	unlock()
	gone := map[string]bool{}
	for _, h := range packs {
		base := filepath.Join(m.gitDir, "objects", "pack", "pack-"+h.String())
		gone[base+".pack"], gone[base+".idx"] = true, true
	}
	dt.d.packsWritten = slices.DeleteFunc(dt.d.packsWritten, func(p string) bool { return gone[p] })
	m.objs.lock()
	m.objs.st.DropPacks(packs) // no reading of the pack folder again at the next read
	m.objs.unlock()
}

// addPack makes a pack materialisation wrote one the store reads from,
// and one the next checkpoint syncs. Called with the disk lock held (dt).
func (m *materialiser) addPack(dt diskTurn, h plumbing.Hash) {
	m.objs.lock()
	m.objs.st.AddPack(h)
	m.objs.unlock()
	base := filepath.Join(m.gitDir, "objects", "pack", "pack-"+h.String())
	dt.d.packsWritten = append(dt.d.packsWritten, base+".pack", base+".idx", filepath.Dir(base))
}

// gitUpToDate materialises what is published, for a read of git's own
// files (a commit, a tree, the history) that must see it. Its error is
// the wait's for the disk lock (holdContext): ctx's, or ErrClosed. A
// materialisation that fails is logged and the read goes on (what it
// did not write is still readable from memory).
func (r *Repo) gitUpToDate(ctx context.Context) error {
	dt, err := r.holdContext(ctx)
	if err != nil {
		return err
	}
	defer dt.release()
	if err := r.mat.materializeLocked(dt); err != nil {
		r.opt.Logf("gitmem: %v", scrubPaths(err))
	}
	return nil
}

// settle materialises and checkpoints everything, for operations that
// read or rewrite git's files directly (gc, redact) or hand the
// repository over.
func (r *Repo) settle() error {
	if !r.lease.Held() {
		return nil
	}
	return r.checkpoint()
}
