package gitmem

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// Unrecovered is what a gitmem killed before its checkpoint (kill -9, a
// power cut, a full disk at exit) left in the write-ahead log and git's
// own files do not hold yet: acknowledged changes, safe in the log, that
// the next process to take the writer lock recovers (serve, any writing
// command, gitmem fsck --repair). Until then git, and gitmem's read-only
// commands, do not show them.
type Unrecovered struct {
	Changes int      // acknowledged changes not in git's files
	IDs     []string // the tool_use ids among them, oldest first
	// Holder is the process that holds the writer lock while its
	// checkpoint fails (as it recorded it; see Holder): the log it
	// holds is its own, not read, and git's files lack what it
	// acknowledged since. The zero Holder when none.
	Holder Holder
	// HeldBack is how long this reader waited, in CatchUp, for the
	// process that holds the writer lock to write what it holds back and
	// let the lock go, which it did not (0: it did, or none holds it):
	// changes it acknowledged may be missing from what the reader shows.
	// Holder then names it as the kernel does (Locker), if it recorded
	// nothing.
	HeldBack time.Duration
}

// Unrecovered reports the acknowledged changes the write-ahead log holds
// that git's files lack, for a Repo opened ReadOnly (a writer recovered
// them when it opened). It reads the log without writing anything: a log
// a writer's open would refuse (a folder in its place, content that is
// not a log) is the *DamagedError that open returns. When
// another process holds the writer lock it reports none: that process
// recovered the log when it took the lock, and wrote to git's files what
// it had acknowledged when this reader asked it to (CatchUp),
// unless its checkpoint fails (then Holder names it) or it did not let
// its lock go when asked (HeldBack).
func (r *Repo) Unrecovered() (Unrecovered, error) {
	if !r.opt.ReadOnly {
		return Unrecovered{}, nil
	}
	if d := time.Duration(r.heldBack.Load()); d > 0 {
		return Unrecovered{HeldBack: d, Holder: waitedFor(r.gitDir)}, nil
	}
	// The lock is held shared while the log is read: a writer taking
	// it meanwhile (a serve taking it back after a reader's CatchUp) and
	// appending a change would make that change look left by a crash.
	lk, err := gd.OpenReadLock(filepath.Join(r.gitDir, "gitmem", "lock"))
	switch {
	case errors.Is(err, fs.ErrNotExist): // no writer ever ran here
	case err != nil:
		return Unrecovered{}, wrap("check the writer lock", err)
	default:
		defer lk.Close()
		free, err := lk.TryLockShared()
		if err != nil {
			return Unrecovered{}, wrap("check the writer lock", err)
		}
		if !free {
			return Unrecovered{Holder: readHolder(r.gitDir)}, nil
		}
		defer lk.Unlock()
	}
	r.opt.hooks.atUnrecovered()
	return unrecoveredIn(r.gitDir, r.branch, r.objects.st)
}

// unrecoveredIn reads both log files of the repository at gitDir (in the
// order their generations give) and returns the records after the last
// one git's branch holds, whose objects st reads (only through views of
// its own: no lock is needed). Called when no process holds the writer
// lock, or by its holder before it opens the log.
func unrecoveredIn(gitDir string, branch plumbing.ReferenceName, st *gd.Store) (Unrecovered, error) {
	var recs [2][]gd.WALRecord
	var gens [2]uint32
	for i, name := range []string{"wal", "wal2"} {
		g, rs, err := gd.ReadWAL(gitDir, name)
		if err != nil {
			return Unrecovered{}, walOpenError(name, err) // as a writer's open says it
		}
		gens[i], recs[i] = g, rs
	}
	first := 0
	if gens[1] < gens[0] {
		first = 1
	}
	log := append(recs[first], recs[1-first]...)
	if len(log) == 0 {
		return Unrecovered{}, nil
	}
	head, _ := gd.ReadRef(gitDir, branch) // a missing branch holds none of them
	missing := log[len(log)-notInGit(st, log, head):]
	u := Unrecovered{Changes: len(missing)}
	for _, rec := range missing {
		if id := walToolUseID(rec); id != "" {
			u.IDs = append(u.IDs, id)
		}
	}
	return u, nil
}

// notInGit is how many of the log's last records the branch at head
// lacks: those after the newest one it holds (the branch's own commit, or
// one it moved on from, as a hand commit after a crash does). A record
// whose commit git's files lack (most of a long log after a crash) is
// passed over at the cost of a lookup in the packs as last listed: asking
// the graph would read the pack folder again for each (a miss does), a
// folder of thousands of packs after bursts of changes.
func notInGit(obj *gd.Store, log []gd.WALRecord, head plumbing.Hash) int {
	if head.IsZero() {
		return len(log)
	}
	st := obj.View()
	defer st.Close()
	g := gd.NewGraph(st)
	for i := len(log) - 1; i >= 0; i-- {
		if log[i].Head == head {
			return len(log) - 1 - i
		}
		if !st.OnDisk(log[i].Head) {
			continue
		}
		if in, err := g.IsAncestor(log[i].Head, head); err == nil && in {
			return len(log) - 1 - i
		}
	}
	return len(log)
}

// walToolUseID is the tool_use id of a log record's commit ("" if none).
func walToolUseID(rec gd.WALRecord) string {
	for _, o := range rec.Objects {
		if o.Hash != rec.Head || o.Type != plumbing.CommitObject {
			continue
		}
		_, msg, ok := bytes.Cut(o.Data, []byte("\n\n"))
		if !ok {
			return ""
		}
		_, _, trailers := parseMessage(string(msg))
		return trailerValue(trailers, TrailerToolUseID)
	}
	return ""
}
