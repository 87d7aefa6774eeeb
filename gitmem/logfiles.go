package gitmem

import (
	"fmt"
	"path/filepath"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

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
	if missing := notInGit(r.obj, replay, r.diskHead); missing > 0 {
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
	r.toolIDs.durable(items)
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
