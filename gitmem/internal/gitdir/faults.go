package gitdir

import "sync/atomic"

// Env is the test suite's way into the write steps beneath one
// repository: the Store, log, pack, index and sync calls made for that
// repository carry it, so that each test sets its own and tests run in
// parallel. nil outside tests; every method works on nil.
type Env struct {
	// fault, when set, is called first by each write step that can fail
	// on a real disk (an object, the journal, the branch, a worktree
	// file, the index, a pack, the log, a sync), and by the journal's
	// read (StepJournalRead), with the step's name and
	// repository-relative path, and an error it returns is that step's
	// error — ENOSPC, EACCES or EIO at a chosen point.
	fault atomic.Pointer[func(step, path string) error]
	// beforeObjectTemp, when set, runs just before a loose object's
	// temporary file is made in its folder.
	beforeObjectTemp func(folder string)
	// relist, when set, runs when a read that failed is about to list
	// the packs again (Store.Relisted).
	relist atomic.Pointer[func()]
	// procStart, when set, reads a process's start time in place of
	// /proc/PID/stat (SetProcStart).
	procStart atomic.Pointer[func(pid int) (uint64, bool)]
	// dataSync, when set, runs before each data sync of a log file
	// (SetDataSync).
	dataSync atomic.Pointer[func(name string)]
	// What this repository's work cost, for tests to count: the pack
	// folder's listings (PackListings), the folders ListNames listed
	// (DirListings), the parses of .git/config (ConfigParses).
	packListings, dirListings, configParses atomic.Int64
}

// PackListings is how many times the pack folder was read, by every
// Store of this Env (a listing costs the folder's length: a lookup that
// misses reads it again).
func (e *Env) PackListings() int64 {
	if e == nil {
		return 0
	}
	return e.packListings.Load()
}

// DirListings is how many folders ListNames listed for this Env.
func (e *Env) DirListings() int64 {
	if e == nil {
		return 0
	}
	return e.dirListings.Load()
}

// ConfigParses is how many times .git/config was parsed for this Env.
func (e *Env) ConfigParses() int64 {
	if e == nil {
		return 0
	}
	return e.configParses.Load()
}

// count adds one to one of e's counts (nothing on nil).
func (e *Env) count(c func(*Env) *atomic.Int64) {
	if e != nil {
		c(e).Add(1)
	}
}

// SetDataSync installs the hook run with a log file's name before each
// sync of its data (Fdatasync; nil removes it).
func (e *Env) SetDataSync(f func(name string)) {
	if f == nil {
		e.dataSync.Store(nil)
		return
	}
	e.dataSync.Store(&f)
}

// SetProcStart installs the reader of a process's start time (field 22
// of /proc/PID/stat, in clock ticks since boot; false: not known) that
// judges whether a lock's owner still runs (nil: /proc is read).
func (e *Env) SetProcStart(f func(pid int) (start uint64, ok bool)) {
	if f == nil {
		e.procStart.Store(nil)
		return
	}
	e.procStart.Store(&f)
}

// startOf is the start time of the process pid (see SetProcStart).
func (e *Env) startOf(pid int) (uint64, bool) {
	if e != nil {
		if f := e.procStart.Load(); f != nil {
			return (*f)(pid)
		}
	}
	return readProcStart(pid)
}

// SetRelist installs the hook run before a failed read lists the packs
// again (nil removes it). It is safe while background work runs.
func (e *Env) SetRelist(f func()) {
	if f == nil {
		e.relist.Store(nil)
		return
	}
	e.relist.Store(&f)
}

// relisting runs the relist hook, if any.
func (e *Env) relisting() {
	if e == nil {
		return
	}
	if f := e.relist.Load(); f != nil {
		(*f)()
	}
}

// SetFault installs the fault hook (nil removes it). It is safe while
// background work runs.
func (e *Env) SetFault(f func(step, path string) error) {
	if f == nil {
		e.fault.Store(nil)
		return
	}
	e.fault.Store(&f)
}

// Steps the fault hook is called with.
const (
	StepObject  = "object"
	StepJournal = "journal"
	// StepJournalRead is the journal's read at a start (a read step: the
	// one a test fails with EMFILE or EIO, which a real read may give).
	StepJournalRead = "journal-read"
	StepRef         = "ref"
	StepWorktree    = "worktree"
	StepIndex       = "index"
	StepHistory     = "history"
	StepPack        = "pack"
	// StepPackIndex: a pack is in place, its index is renamed next.
	StepPackIndex = "pack-index"
	StepWAL       = "wal"
	StepWALSync   = "wal-sync"
	StepWALGrow   = "wal-grow" // a log file grown ahead of need (GrowTo)
	StepSync      = "sync"
	// StepMaintenance: git's objects/maintenance.lock is taken, the packs
	// another pack replaced are deleted next (LockMaintenance).
	StepMaintenance = "maintenance"
	// StepWriterWait: a worktree file is held open for writing by another
	// descriptor than gitmem's; it is looked at again next (a read step,
	// whose error is not used: a test ends the write there).
	StepWriterWait = "writer-wait"
)

// Injected returns the error the fault hook gives the step, if any.
func (e *Env) Injected(step, path string) error {
	if e == nil {
		return nil
	}
	if f := e.fault.Load(); f != nil {
		return (*f)(step, path)
	}
	return nil
}
