package gitmem

import (
	"errors"
	"io/fs"
	"os"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// checkpoint makes everything published durable in git's own files and
// empties the log it was in: appends switch to the other log file, what
// the old file holds is materialised and synced (one syncfs), then the
// old file is emptied. Appends wait only for the switch.
//
// A log file is emptied only after a sync that covers everything it
// holds: a checkpoint that fails (a full disk) leaves the switched-from
// file to drain (logFiles.draining), and the next attempt finishes that
// one before it switches again.
func (r *Repo) checkpoint() error {
	r.mmu.Lock()
	defer r.mmu.Unlock()
	if r.log.isClosed() {
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
	old, err := r.log.switchOut()
	if err != nil {
		return err
	}
	if old < 0 {
		// Nothing in the log that git's files lack once materialised.
		if err := r.materializeLocked(); err != nil {
			return err
		}
		r.state.clearBroken()
		return nil
	}
	if err := r.materializeLocked(); err != nil {
		return err
	}
	if err := r.syncMaterialized(); err != nil {
		return err
	}
	err = r.log.emptied(old)
	r.backlog.noteDrained() // calls held back by logMax
	if err != nil {
		return wrap("empty the write-ahead log", err)
	}
	r.lastCkpt.Store(time.Now().UnixNano())
	r.state.clearBroken()
	return nil
}

// noteCheckpoint logs a checkpoint's failure once (and again only when the
// reason changes), and its recovery. While checkpoints fail, new changes
// are refused (the log would only grow) and the attempt is retried every
// checkpointEvery.
func (r *Repo) noteCheckpoint(err error) {
	prev := r.ckptErr
	switch {
	case err != nil && (prev == nil || failureKind(prev) != failureKind(err)) && r.log.gone():
		r.opt.Errorf("gitmem: the acknowledged changes cannot be written to git's files (%v), and the write-ahead log (.git/gitmem/wal) is gone: the repository was deleted or moved while open; the changes git's files lack are in no file a next start would read, new changes are refused", err)
	case err != nil && (prev == nil || failureKind(prev) != failureKind(err)):
		r.opt.Errorf("gitmem: the acknowledged changes cannot be written to git's files yet (%v); they are safe in the write-ahead log, new changes are refused meanwhile, and gitmem retries every %v", err, checkpointEvery)
	case err == nil && prev != nil:
		r.opt.Logf("gitmem: git's files hold every acknowledged change again")
	}
	r.ckptErr = err
	r.ckptFailing.Store(err != nil)
	if err != nil {
		r.state.refuse(err)
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
	if err := r.log.empty(); err != nil {
		return err
	}
	r.recovering = false
	r.lastCkpt.Store(time.Now().UnixNano())
	r.state.clearBroken()
	return nil
}
