package gitmem

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// checkpoint is materialiser.checkpoint, for the lease, the maintainer
// and Close.
func (r *Repo) checkpoint() error { return r.mat.checkpoint() }

// checkpoint makes everything published durable in git's own files and
// empties the log it was in: appends switch to the other log file, what
// the old file holds is materialised and synced (one syncfs), then the
// old file is emptied. Appends wait only for the switch.
//
// A log file is emptied only after a sync that covers everything it
// holds: a checkpoint that fails (a full disk) leaves the switched-from
// file to drain (logFiles.draining), and the next attempt finishes that
// one before it switches again.
func (m *materialiser) checkpoint() error {
	dt := m.disk.hold()
	defer dt.release()
	if m.log.isClosed() {
		// Closed (closeLog, under the disk lock): Close made the last checkpoint;
		// the maintenance loop may still call one before it stops.
		return nil
	}
	m.disk.checkpointed() // an attempt: a failing one is retried after Options.CheckpointEvery
	m.branches.keepBranch(dt)
	// A multi-pack-index naming a pack that is gone (one gitmem deleted as
	// git listed it, or a repack's temporary pack): git fails to read
	// what it says is there. A stat when there is none.
	gd.RemoveStaleMidx(m.gitDir)
	err := m.checkpointLocked(dt)
	m.noteCheckpoint(dt, err)
	return err
}

func (m *materialiser) checkpointLocked(dt diskTurn) error {
	if dt.d.recovering {
		return m.checkpointRecovered(dt)
	}
	old, err := m.log.switchOut(dt)
	if err != nil {
		return err
	}
	if old < 0 {
		// Nothing in the log that git's files lack once materialised.
		if err := m.materializeLocked(dt); err != nil {
			return err
		}
		m.state.clearBroken()
		return nil
	}
	if err := m.materializeLocked(dt); err != nil {
		return err
	}
	if err := m.syncMaterialized(dt); err != nil {
		return err
	}
	err = m.log.emptied(old)
	m.backlog.noteDrained() // calls held back by logMax
	if err != nil {
		return wrap("empty the write-ahead log", err)
	}
	m.disk.checkpointed()
	m.state.clearBroken()
	return nil
}

// noteCheckpoint logs a checkpoint's failure once (and again only when the
// reason changes), and its recovery. While checkpoints fail, new changes
// are refused (the log would only grow) and the attempt is retried every
// Options.CheckpointEvery.
func (m *materialiser) noteCheckpoint(dt diskTurn, err error) {
	prev := dt.d.ckptErr
	// The record first: whoever reads the line logged below finds it.
	if err != nil && (prev == nil || failureKind(prev) != failureKind(err)) && !m.log.gone() {
		m.noteHolder(dt, err)
	} else if err == nil {
		m.clearHolder(dt)
	}
	switch {
	case err != nil && (prev == nil || failureKind(prev) != failureKind(err)) && m.log.gone():
		m.opt.Errorf("gitmem: the acknowledged changes cannot be written to git's files (%v), and the write-ahead log (.git/gitmem/wal) is gone: the repository was deleted or moved while open; the changes git's files lack are in no file a next start would read, new changes are refused", err)
	case err != nil && (prev == nil || failureKind(prev) != failureKind(err)):
		m.opt.Errorf("gitmem: the acknowledged changes cannot be written to git's files yet (%v); they are safe in the write-ahead log, new changes are refused meanwhile, and gitmem retries every %v", err, m.disk.every)
	case err == nil && prev != nil:
		m.opt.Logf("gitmem: git's files hold every acknowledged change again")
	}
	dt.d.ckptErr = err
	m.disk.ckptFailing.Store(err != nil)
	if err != nil {
		m.state.refuse(err)
	}
}

// noteHolder records in .git/gitmem/holder that this process keeps the
// writer lock while its checkpoint fails with err, for a process that
// waits for the lock (see Holder). Called with the disk lock held, at
// the first failure and when its reason changes.
func (m *materialiser) noteHolder(dt diskTurn, err error) {
	if dt.d.holderSince.IsZero() {
		dt.d.holderSince = m.opt.Now()
	}
	rec := &holderRecord{Pid: os.Getpid(), Process: m.opt.Process, Since: dt.d.holderSince, Failing: failureText(err)}
	rec.Start, _ = gd.ProcessStart(rec.Pid)
	if werr := writeHolder(m.gitDir, rec); werr != nil {
		m.opt.Logf("gitmem: could not record in .git/gitmem/holder that the checkpoint fails: %s", scrubPaths(werr))
	}
}

// clearHolder clears the record noteHolder wrote, if any: a checkpoint
// succeeded, or the writer lock is let go. Called with the disk lock
// held, and the writer lock.
func (m *materialiser) clearHolder(dt diskTurn) {
	if dt.d.holderSince.IsZero() {
		return
	}
	dt.d.holderSince = time.Time{}
	writeHolder(m.gitDir, nil)
}

// letGo clears the record of a failing checkpoint as this process lets
// the writer lock go (Close): the next holder has its own. Called with
// the writer lock held.
func (m *materialiser) letGo() {
	dt := m.disk.hold()
	defer dt.release()
	m.clearHolder(dt)
}

// failureText is a checkpoint's failure as another process is told it:
// host paths shortened (scrubPaths), without "gitmem: ".
func failureText(err error) string { return strings.TrimPrefix(scrubPaths(err), "gitmem: ") }

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
// refused while recovering). Called with the disk lock held (dt).
func (m *materialiser) checkpointRecovered(dt diskTurn) error {
	if err := m.materializeLocked(dt); err != nil {
		return err
	}
	if err := m.syncMaterialized(dt); err != nil {
		return err
	}
	if err := m.log.empty(); err != nil {
		return err
	}
	dt.d.recovering = false
	m.disk.checkpointed()
	m.state.clearBroken()
	return nil
}

// openLog opens the two log files. Records they hold were acknowledged by
// a holder of the lock that crashed before its checkpoint: they are
// published again, as durable commits not yet in git's files (their
// objects readable from memory), and a checkpoint makes them git's. When
// it cannot (a full disk), they stay readable, the log keeps them, and
// new changes are refused until a checkpoint succeeds. Called with the writer turn
// and the writer lock held, after refresh.
func (r *Repo) openLog() (replayed bool, err error) {
	replay, atTree, err := r.mat.openLog()
	if err != nil || len(replay) == 0 {
		return false, err
	}
	// The files the killed process's adopts left stay where they are when
	// the replay's follow moves their folder, as they would have.
	r.mirror.loadLeft()
	items := make([]*prepared, 0, len(replay))
	tree := atTree
	for _, rec := range replay {
		r.objects.st.Put(rec.Objects)
		p := &prepared{hash: rec.Head, parent: rec.Parent, objs: rec.Objects, paths: rec.Paths}
		r.objects.lock()
		c, err := r.objects.st.Commit(rec.Head)
		if err == nil {
			tree, err = r.loadTree(c.TreeHash, tree, "")
		}
		if err == nil {
			p.rec, err = r.hist().recordOf(c)
		}
		r.objects.unlock()
		if err != nil {
			return true, wrap("recover the write-ahead log", err)
		}
		p.tree, p.id, p.commit = tree, p.rec.id, commitOf(c)
		items = append(items, p)
	}
	r.toolIDs.durable(items)
	last := items[len(items)-1]
	r.state.setTip(last.hash, last.tree)
	for _, p := range items {
		r.mirror.inFlight(p)
	}
	r.mat.recovering()
	r.committer.publish(items)
	r.checkpoint() // a failure refuses changes until a retry succeeds
	return true, nil
}

// openLog opens the two log files and returns the records they hold
// that git's files may lack (none: nothing to recover), and the tree
// git's files hold, from which the records' trees are read. Records of
// commits the branch has moved on from since (by other means, after the
// crash) are in git's files: the log is emptied.
func (m *materialiser) openLog() (replay []gd.WALRecord, atTree *node, err error) {
	replay, err = m.log.open(m.objs.st.Env, m.gitDir)
	if err != nil || len(replay) == 0 {
		return nil, nil, err
	}
	dt := m.disk.hold() // (no loop runs yet: to read what git's files hold)
	at, atTree := dt.head(), dt.tree()
	dt.release()
	if missing := notInGit(m.objs.st, replay, at); missing > 0 {
		m.opt.Logf("gitmem: recovering %d acknowledged change(s) from the write-ahead log", missing)
	}
	// A commit was under way: a branch lock file, if any, is its own.
	gd.RemoveLock(filepath.Join(m.gitDir, filepath.FromSlash(string(*m.branch))) + ".lock")
	known := at == replay[0].Parent
	for _, rec := range replay {
		known = known || at == rec.Head
	}
	if !known {
		// The branch moved by other means after the crash. When it moved on
		// from the last acknowledged commit, the log is in git's files
		// already; otherwise materialisation keeps the branch's commit and
		// merges it back (moveBranch).
		st := m.objs.st.View()
		in, err := gd.NewGraph(st).IsAncestor(replay[len(replay)-1].Head, at)
		st.Close()
		if err == nil && in {
			return nil, nil, m.log.empty()
		}
	}
	return replay, atTree, nil
}

// recovering notes that the log holds a crashed holder's changes, now
// published: both files stay until a checkpoint has made them git's
// (checkpointRecovered).
func (m *materialiser) recovering() {
	dt := m.disk.hold()
	dt.d.recovering = true
	dt.release()
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
func (m *materialiser) prepareSpareLog() {
	dt := m.disk.hold() // no checkpoint switches files meanwhile
	defer dt.release()
	if time.Since(dt.d.spareFailed) < time.Minute {
		return
	}
	if err := m.log.growSpare(dt, m.gitDir, m.disk.every); err != nil {
		dt.d.spareFailed = time.Now() // not at every change: retried in a minute
		m.opt.Logf("gitmem: could not make the write-ahead log larger ahead of need: %v", scrubPaths(err))
	}
}

// closeLog is materialiser.closeLog, for the lease and Close.
func (r *Repo) closeLog(exit bool) { r.mat.closeLog(exit) }

// closeLog closes the log files (see logFiles.close).
func (m *materialiser) closeLog(exit bool) {
	dt := m.disk.hold() // not while prepareSpareLog grows one
	defer dt.release()
	m.log.close(dt, exit)
}
