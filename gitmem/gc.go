package gitmem

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/gitmem/internal/lock"
)

// Packing. A commit per tool call leaves a loose object per blob, tree and
// commit, and a burst of calls a small pack without deltas. gc packs them
// with deltas (gitdir.Repack: each tree and file against an earlier
// version of the same path, no delta search) and merges packs so that
// there are few of them.
//
// gc does not hold up writers. The objects are immutable, so the new pack
// is written with no lock held, from a plan taken at the start: what is
// loose, which packs it replaces, the refs. Only the plan and the swap
// (removing what the new pack replaces) hold the materialiser's lock (disk.mu)
// and the object store's (objects.mu), for milliseconds; the writer turn is not
// held at all, and writers, whose changes are durable in the log, go on
// meanwhile. Loose files the new pack holds are deleted after the swap,
// with no lock: a reader that misses one finds it in the pack.
//
// One collection or redaction runs at a time (collector.mu, taken before
// the writer turn), and the process keeps the repository's writer lock
// while one runs, so no other process can rewrite history under it. A full collection keeps
// the unreachable objects that commits made while it ran refer to again.

// GCStats says what a collection did.
type GCStats struct {
	Packed  int           // objects written to the new pack
	Deltas  int           // of which stored as deltas
	Removed int           // loose objects and packs removed
	Locked  time.Duration // how long it held the materialiser and the object store (never the writer lock)
}

// collector is the collection part's state: one collection or redaction
// at a time, and whether one runs. What a collection does is its methods
// (collect, collectAll, packLooseBatches) over a gcTarget; GC, which also
// settles and finishes a redaction, is the Repo's.
type collector struct {
	// mu is held for a whole collection or redaction: one at a time. In
	// the lock order it comes after sharer.mu (a sync applies a
	// redaction) and before the writer turn (beginWrite's exclusive).
	mu   lock.Mutex
	busy atomic.Int32 // collections running: the writer lock is kept (see release)
	stop atomic.Bool  // Close asks a running collection to give up
}

// lock waits until no collection or redaction runs, and keeps any other
// from starting until unlock. It gives up when ctx is done (ctx.Err())
// or closing is closed (lock.ErrClosing).
func (c *collector) lock(ctx context.Context, closing <-chan struct{}) error {
	return c.mu.Lock(ctx, closing)
}
func (c *collector) unlock() { c.mu.Unlock() }

// running marks a collection as running until done: meanwhile the
// repository's writer lock is kept (see release).
func (c *collector) running() (done func()) {
	c.busy.Add(1)
	return func() { c.busy.Add(-1) }
}

// isRunning reports whether a collection runs.
func (c *collector) isRunning() bool { return c.busy.Load() > 0 }

// stopAll makes a collection under way give up (errGCStopped), and every
// later one: the repository is closing.
func (c *collector) stopAll() { c.stop.Store(true) }

// gcTarget is the repository a collection works on: its files under
// gitDir, and the parts of the store it locks out at moments.
type gcTarget struct {
	gitDir string
	hooks  *testHooks
	logf   func(format string, args ...any)
	store  gcStore
}

// gcStore is what a collection needs of the store besides its files.
type gcStore interface {
	// withObjects runs fn on the object store this process's readers
	// share, with its lock (objects.mu) held.
	withObjects(fn func(st *gd.Store) error) error
	// withDiskHeld runs fn with the materialiser's lock (disk.mu) held:
	// nothing is written to git's files meanwhile.
	withDiskHeld(fn func() error) error
	// clearTemp deletes the worktree's temporary files (all, or those a
	// crash left long ago: see worktree.clearTemp).
	clearTemp(all bool) int
}

func (r *Repo) gcTarget() gcTarget {
	return gcTarget{gitDir: r.gitDir, hooks: r.opt.hooks, logf: r.opt.Logf, store: r}
}

// withDiskHeld runs fn with the disk lock held (gcStore).
func (r *Repo) withDiskHeld(fn func() error) error {
	defer r.disk.hold().release()
	return fn()
}

func (r *Repo) clearTemp(all bool) int { return r.mirror.clearTemp(all) }

// errGCStopped is a collection's error when Close stopped it.
var errGCStopped = errors.New("the repository was closed")

// LooseObjects estimates the number of loose objects as git does: it
// counts one fan-out folder and multiplies by 256.
func (r *Repo) LooseObjects() int {
	n, _ := looseEstimate(r.gitDir)
	return n
}

// looseEstimate estimates the number and size of the loose objects in
// gitDir from one fan-out folder.
func looseEstimate(gitDir string) (int, int64) {
	dir := filepath.Join(gitDir, "objects", "17")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	var size int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			size += fi.Size()
		}
	}
	return len(ents) * 256, size * 256
}

// Background collections start when about this much waits to be packed
// (loose objects or packs without gitmem's deltas), or this many packs.
const (
	gcDueBytes = 64 << 20
	gcDuePacks = 16
	// autoPackLimit is how many packs of changes a one-command process
	// leaves before it packs them (git's gc.autoPackLimit): it has no
	// background collection (foldAfterCommand).
	autoPackLimit = 50
	// settledPack is where a pack gc did not write stops being a burst
	// waiting to be packed: one this big holds a history (git's own gc or
	// fast-import, a fetch), with git's deltas. It is left alone like gc's
	// own packs — merged only when the geometric progression asks — where
	// merging it at once made a start or an exit repack the whole history
	// (500,000 objects: 27 s).
	settledPack = 20_000
)

// A burst's pack is stored uncompressed up to gd.StoredPackMax objects:
// gc must take every such pack as a burst (this fails to compile if not).
const _ = uint(settledPack - gd.StoredPackMax - 1)

// burst reports whether p is a pack gc did not write and that is small
// enough to be a burst of changes (or a small fetch): packed at the next
// collection.
func burst(p gd.Pack) bool { return !p.Repacked && p.Objects < settledPack }

// GCDue reports whether a background collection is due: about
// looseLimit loose objects, gcDuePacks packs that gc did not write (a
// burst of changes is materialised as one), or gcDueBytes in either.
func (r *Repo) GCDue(looseLimit int) bool { return gcDue(r.gitDir, looseLimit) }

// gcDue is GCDue of the repository at gitDir.
func gcDue(gitDir string, looseLimit int) bool {
	n, size := looseEstimate(gitDir)
	if n >= looseLimit {
		return true
	}
	packs, _ := gd.ListPacks(gitDir)
	fresh, bytes := bursts(packs)
	return fresh >= gcDuePacks || size+bytes >= gcDueBytes
}

// bursts is how many of packs are bursts (burst), which an incremental
// collection packs, and their size.
func bursts(packs []gd.Pack) (n int, bytes int64) {
	for _, p := range packs {
		if burst(p) {
			n++
			bytes += p.Bytes
		}
	}
	return n, bytes
}

// packAfterCommand packs the repository as GC does (incremental) when a
// one-command process (Options.OneCommand) that holds the writer lock at
// its end — a command that wrote: revert, restore, expire, pull, ... —
// leaves more than autoPackLimit bursts, as git's commands run gc --auto
// after a commit. Each such command writes a pack, and nothing else
// merges them unless a server runs: 253 packs after ~250 reverts, and a
// revert spent 17% of its CPU opening their indexes. Near the limit,
// what the command acknowledged goes to git's files first (the
// checkpoint Close would make), for its own pack to be counted and
// packed. Called by Close before it stops anything; a failure is logged
// (the packs stay for the next command or gc).
func (r *Repo) packAfterCommand() {
	if !r.opt.OneCommand || !r.lease.Held() || r.closed.Load() {
		return
	}
	count := func() int {
		packs, _ := gd.ListPacks(r.gitDir)
		n, _ := bursts(packs)
		return n
	}
	if count() < autoPackLimit || r.settle() != nil { // settled, its own pack may pass the limit
		return
	}
	n := count()
	if n <= autoPackLimit {
		return
	}
	if _, err := r.GC(r.life, false); err != nil {
		r.opt.Logf("gitmem: could not pack the memory's %d packs of changes: %v", n, scrubPaths(err))
	}
}

// GC packs the repository. Incremental (full false): the loose objects,
// the packs gc did not write, and the smallest of the ones it did (so
// that each pack left is at least twice the size of all smaller ones
// together) become one pack; its cost follows what is new, not the
// history's length. Full: every object reachable from a ref goes into one
// pack and every other pack and loose object is deleted, so objects
// nothing refers to are gone for good.
//
// Writers are not held up (see the top of this file). GC is also what
// frees a full disk: it first deletes what interrupted runs left
// (half-written packs, temporary files), and when the new pack does not
// fit it packs the loose objects in small batches, each batch's loose
// files deleted before the next is written. A redaction whose old objects
// could not be deleted yet is completed here. Close stops a collection
// under way at once (within a few hundred objects): GC then returns
// ErrClosed, and the next one does it all again.
func (r *Repo) GC(ctx context.Context, full bool) (GCStats, error) {
	turn, err := r.beginWrite(ctx, exclusive|ownIfYouCan|writable)
	if err != nil {
		return GCStats{}, err
	}
	defer turn.end()
	defer r.collector.running()()
	if _, err := os.Stat(redactPath(r.gitDir)); err == nil {
		if err := r.settle(); err != nil {
			return GCStats{}, err
		}
		return GCStats{}, r.finishRedaction(turn, nil)
	}
	turn.endTurn() // writers go on; no other collection until it ends
	if full {
		// What is acknowledged goes to git's files first, for the refs to
		// name it.
		if err := r.settle(); err != nil {
			return GCStats{}, err
		}
	}
	t := r.gcTarget()
	st, err := r.collector.collect(t, full)
	for try := 1; try < 3 && errors.Is(err, fs.ErrNotExist); try++ {
		// A pack it planned to merge is gone: the fold wrote the
		// objects of the small ones again as one and deleted them, or
		// another gitmem or git deleted one. A new plan finds them
		// where they are now (falling back to small batches held every
		// call up).
		st, err = r.collector.collect(t, full)
	}
	if errors.Is(err, errGCStopped) {
		// Close stopped it: what it wrote is a temporary file the next
		// collection deletes, and every object is where it was.
		return st, ErrClosed
	}
	if err != nil && !full {
		// Most likely a full disk: spend the reserve on small batches.
		r.opt.Logf("gitmem: gc: %v; packing the loose objects and small packs in small batches", scrubPaths(err))
		st, err = t.packLooseBatches()
	}
	if err != nil {
		return st, wrap("pack the repository", err)
	}
	if !full {
		// On a full disk, changes acknowledged meanwhile may not have fit
		// in git's files; now they may.
		if err := r.settle(); err != nil {
			return st, err
		}
	}
	return st, nil
}

// collect is a collection that holds no lock while it plans and packs,
// and the object store's lock (objects.mu) while it swaps the new pack in; a full
// one also the materialiser's (disk.mu), for what commits made meanwhile use
// to be settled. Called with c locked.
func (c *collector) collect(t gcTarget, full bool) (GCStats, error) {
	pl, err := t.plan(full, false)
	if err != nil || pl.empty() {
		return GCStats{Removed: pl.removed, Locked: pl.locked}, err
	}
	t.hooks.atGC("planned")
	res, err := t.pack(pl, c.stop.Load)
	if err != nil {
		if errors.Is(err, gd.ErrStopped) {
			err = errGCStopped
		}
		return GCStats{Removed: pl.removed, Locked: pl.locked}, err
	}
	t.hooks.atGC("packed")
	keep := map[plumbing.Hash]bool{}
	var held time.Time
	var loose []plumbing.Hash
	var removed int
	swap := func() error {
		held = time.Now()
		return t.store.withObjects(func(st *gd.Store) (err error) {
			loose, removed, err = t.swap(st, pl, res, keep)
			return err
		})
	}
	if full {
		// Most of what commits made meanwhile use is found with no lock
		// held; the swap looks at what was committed after that.
		s := t.hooks.open(t.gitDir)
		err := t.keepUsedAgain(s, pl, res, keep)
		s.Close()
		if err != nil {
			return GCStats{Removed: pl.removed, Locked: pl.locked}, err
		}
		t.hooks.atGC("swap")
		err = t.store.withDiskHeld(swap)
	} else {
		err = swap()
	}
	st := t.remove(pl, res, loose, removed)
	st.Locked = pl.locked + time.Since(held)
	return st, err
}

// collectAll is a collection start to end, for a redaction, which holds
// the writer turn, the writer lock and c throughout: every temporary pack goes (one
// could hold the old content).
func (c *collector) collectAll(t gcTarget, full bool) (GCStats, error) {
	pl, err := t.plan(full, true)
	if err != nil || pl.empty() {
		return GCStats{Removed: pl.removed}, err
	}
	res, err := t.pack(pl, nil)
	if err != nil {
		return GCStats{Removed: pl.removed}, err
	}
	var loose []plumbing.Hash
	var removed int
	err = t.store.withObjects(func(st *gd.Store) (err error) {
		loose, removed, err = t.swap(st, pl, res, map[plumbing.Hash]bool{})
		return err
	})
	return t.remove(pl, res, loose, removed), err
}

// gcPlan is what a collection packs and replaces, taken at its start.
type gcPlan struct {
	full    bool
	all     bool            // a redaction's: every temporary file and pack goes
	tips    []plumbing.Hash // the refs' objects
	loose   []plumbing.Hash
	packs   []gd.Pack     // the packs the new one replaces
	removed int           // garbage files deleted
	locked  time.Duration // objects.mu held to read the refs
}

func (pl gcPlan) empty() bool {
	return len(pl.loose) == 0 && (len(pl.packs) == 0 || len(pl.packs) == 1 && pl.packs[0].Repacked && !pl.full)
}

// plan clears the garbage (every temporary file with all, the worktree
// dropping its spares first so that no write reuses one the clearing
// deleted; else those a crash left long ago, never the running
// process's: see clearTemp) and takes the plan. The loose objects are
// listed before the refs are read, so the refs name nothing written
// after the list; a commit materialised meanwhile is kept by swap.
func (t gcTarget) plan(full, all bool) (gcPlan, error) {
	s := t.hooks.open(t.gitDir) // for what needs no lock: the files
	defer s.Close()
	pl := gcPlan{full: full, all: all, removed: s.ClearGarbage(all) + t.store.clearTemp(all)}
	var err error
	if pl.loose, err = s.LooseHashes(); err != nil {
		return pl, err
	}
	packs, err := gd.ListPacks(t.gitDir)
	if err != nil {
		return pl, err
	}
	if !all {
		// A pack in flight (no ref names it yet) or another program's
		// keep is left alone; gitmem's own are packed again (see gd.Keep).
		// A redaction takes them all.
		packs = slices.DeleteFunc(packs, func(p gd.Pack) bool { return p.Kept && !p.Ours })
	}
	if pl.packs = packs; !full {
		pl.packs = packsToMerge(packs, len(pl.loose))
	}
	held := time.Now()
	err = t.store.withObjects(func(st *gd.Store) (err error) {
		pl.tips, err = st.RefTips()
		pl.locked = time.Since(held)
		return err
	})
	return pl, err
}

// packsToMerge chooses the packs an incremental collection merges: every
// burst (a small pack gc did not write: a burst of changes, without
// deltas, or a small fetch), and of the others (gc's, and the big packs
// of a history git wrote) the smallest ones, so that the packs left form a geometric
// progression (each at least twice the objects of the new pack and all
// smaller ones): a read looks in a few packs, and an object is rewritten
// a logarithmic number of times.
func packsToMerge(packs []gd.Pack, loose int) []gd.Pack {
	var merge, ours []gd.Pack
	n := loose
	for _, p := range packs {
		if burst(p) {
			merge = append(merge, p)
			n += p.Objects
		} else {
			ours = append(ours, p)
		}
	}
	slices.SortFunc(ours, func(a, b gd.Pack) int { return a.Objects - b.Objects })
	geometric := func(rest []gd.Pack, acc int) bool {
		for _, p := range rest {
			if p.Objects < 2*acc {
				return false
			}
			acc += p.Objects
		}
		return true
	}
	for split := 0; ; split++ {
		if geometric(ours[split:], n) {
			return append(merge, ours[:split]...)
		}
		n += ours[split].Objects
	}
}

// pack writes the new pack, with no lock held: a Store of its own reads
// the objects (immutable), and nothing else writes the pack folder's
// temporary files. stop, when not nil, is polled.
func (t gcTarget) pack(pl gcPlan, stop func() bool) (gd.RepackResult, error) {
	s := t.hooks.open(t.gitDir)
	defer s.Close()
	opt := gd.RepackOptions{Tips: pl.tips, Stop: stop, Keep: gd.Own}
	if !pl.full {
		opt.Only = make(map[plumbing.Hash]bool, len(pl.loose))
		for _, h := range pl.loose {
			opt.Only[h] = true
		}
		for _, p := range pl.packs {
			hs, err := gd.PackHashes(gd.PackIndexPath(t.gitDir, p.Hash))
			if err != nil {
				return gd.RepackResult{}, err
			}
			for _, h := range hs {
				opt.Only[h] = true
			}
		}
	}
	res, err := s.Repack(opt)
	if err == nil && !res.Pack.IsZero() {
		err = gd.MarkRepacked(t.gitDir, res.Pack)
	}
	return res, err
}

// swap makes the new pack the store's, and for a full collection
// deletes the loose objects it does not hold (unreachable) but those that
// commits made since use (keep, completed here). It returns the loose
// objects left to delete: those the pack holds. st is the shared store,
// with objects.mu held (withObjects), and for a full collection disk.mu (or the
// writer turn): nothing is materialised meanwhile.
func (t gcTarget) swap(st *gd.Store, pl gcPlan, res gd.RepackResult, keep map[plumbing.Hash]bool) (packed []plumbing.Hash, removed int, err error) {
	st.Reindex()
	if pl.full {
		if err := t.keepUsedAgain(st, pl, res, keep); err != nil {
			return nil, 0, err
		}
	}
	var unreachable []plumbing.Hash
	for _, h := range pl.loose {
		switch {
		case res.Holds(h):
			packed = append(packed, h)
		case pl.full && !keep[h]:
			unreachable = append(unreachable, h)
		}
	}
	return packed, gd.RemoveLoose(t.gitDir, unreachable), nil
}

// remove deletes, with no lock held, what the new pack replaces: the
// plan's packs and the loose objects it holds, and git's derived files
// that name what is gone. A reader that misses one finds it in the new
// pack.
func (t gcTarget) remove(pl gcPlan, res gd.RepackResult, loose []plumbing.Hash, removed int) GCStats {
	var old []plumbing.Hash
	for _, p := range pl.packs {
		if p.Hash != res.Pack {
			old = append(old, p.Hash)
		}
	}
	removed += t.removeReplaced(old, pl.all) + gd.RemoveLoose(t.gitDir, loose)
	if pl.full {
		// Commits nothing reaches are gone: a commit-graph git wrote may
		// name them.
		s := t.hooks.open(t.gitDir)
		removed += gd.RemoveDerived(t.gitDir, gd.StaleDerived(t.gitDir, true, s.OnDisk, noTree))
		s.Close()
	}
	return GCStats{Packed: len(res.Objects), Deltas: res.Deltas, Removed: pl.removed + removed}
}

// removeReplaced deletes packs the new pack replaces, holding git's
// maintenance lock (see gd.LockMaintenance), waited for a few seconds;
// while git maintenance still runs they stay for the next collection,
// but a redaction's (all), which must delete the old content, waits
// longer and then deletes them all the same.
func (t gcTarget) removeReplaced(packs []plumbing.Hash, all bool) int {
	wait := 5 * time.Second
	if all {
		wait = 30 * time.Second
	}
	for deadline := time.Now().Add(wait); ; time.Sleep(50 * time.Millisecond) {
		unlock, ok := gd.LockMaintenance(t.hooks.gdEnv(), t.gitDir)
		if ok {
			defer unlock()
			break
		}
		if time.Now().After(deadline) {
			if !all {
				t.logf("gitmem: gc left %d pack(s) for the next collection: git maintenance holds .git/objects/maintenance.lock", len(packs))
				return 0
			}
			break
		}
	}
	return gd.RemovePacks(t.gitDir, packs)
}

// noTree tells StaleDerived nothing of a commit's tree.
func noTree(plumbing.Hash) (plumbing.Hash, bool) { return plumbing.ZeroHash, false }

// keepUsedAgain finds the objects a full collection must keep although
// its pack does not hold them: those the refs reach now through commits
// made while it ran (an object unreachable at the start can be used
// again: gitmem does not write a loose copy twice). It adds them to keep,
// leaving out what keep holds already (and what that reaches), and writes
// the ones that no loose file and no pack that stays holds as one pack,
// kept from git's gc as every pack gitmem writes (see gd.Keep). s reads
// the refs and objects: a Store of the collection's own before the swap
// (most of the work, no lock held), then r.objects.st under the swap's locks for
// the commits made in between.
func (t gcTarget) keepUsedAgain(s *gd.Store, pl gcPlan, res gd.RepackResult, keep map[plumbing.Hash]bool) error {
	tips, err := s.RefTips()
	if err != nil {
		return err
	}
	var found []plumbing.Hash
	err = s.Reachable(tips, func(h plumbing.Hash) bool { return keep[h] || res.Holds(h) }, func(_ plumbing.ObjectType, h plumbing.Hash) {
		found = append(found, h)
	})
	if err != nil || len(found) == 0 {
		return err
	}
	stays := map[plumbing.Hash]bool{} // in packs written since the plan
	packs, _ := gd.ListPacks(t.gitDir)
	for _, p := range packs {
		if p.Hash == res.Pack || slices.ContainsFunc(pl.packs, func(q gd.Pack) bool { return q.Hash == p.Hash }) {
			continue
		}
		hs, err := gd.PackHashes(gd.PackIndexPath(t.gitDir, p.Hash))
		if err != nil {
			return err
		}
		for _, h := range hs {
			stays[h] = true
		}
	}
	var write []plumbing.Hash
	for _, h := range found {
		keep[h] = true
		hex := h.String()
		if _, err := os.Stat(filepath.Join(t.gitDir, "objects", hex[:2], hex[2:])); err == nil || stays[h] {
			continue
		}
		write = append(write, h)
	}
	if len(write) == 0 {
		return nil
	}
	_, err = s.PackObjects(write, gd.Own)
	return err
}

// packLooseBatches packs the loose objects and the small packs of
// bursts in batches that start small, each batch's files deleted before
// the next is written: on a full disk, where one pack of everything does
// not fit.
func (t gcTarget) packLooseBatches() (st GCStats, err error) {
	err = t.store.withDiskHeld(func() error {
		return t.store.withObjects(func(s *gd.Store) error {
			loose, err := s.LooseHashes()
			if err != nil {
				return err
			}
			packs, err := gd.ListPacks(t.gitDir)
			if err != nil {
				return err
			}
			packs = slices.DeleteFunc(packs, func(p gd.Pack) bool { return !burst(p) || p.Kept && !p.Ours })
			n, removed, err := s.PackSmall(loose, packs)
			s.Reindex()
			st = GCStats{Packed: n, Removed: removed}
			return err
		})
	})
	return st, err
}
