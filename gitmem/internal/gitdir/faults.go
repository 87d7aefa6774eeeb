package gitdir

import "sync/atomic"

// fault is the test suite's fault-injecting layer: when set, each write
// step that can fail on a real disk (an object, the journal, the branch,
// a worktree file, the index, the history index, a pack) calls it first
// with the step's name and repository-relative path, and an error it
// returns is that step's error — ENOSPC, EACCES or EIO at a chosen point.
// It is nil outside tests.
var fault atomic.Pointer[func(step, path string) error]

// SetFault installs the fault hook (nil removes it). It is safe while
// background work runs.
func SetFault(f func(step, path string) error) {
	if f == nil {
		fault.Store(nil)
		return
	}
	fault.Store(&f)
}

// Steps fault is called with.
const (
	StepObject   = "object"
	StepJournal  = "journal"
	StepRef      = "ref"
	StepWorktree = "worktree"
	StepIndex    = "index"
	StepHistory  = "history"
	StepPack     = "pack"
	StepWAL      = "wal"
	StepWALSync  = "wal-sync"
	StepWALGrow  = "wal-grow" // a log file grown ahead of need (GrowTo)
	StepSync     = "sync"
)

// Injected returns the error Fault gives the step, if any.
func Injected(step, path string) error {
	if f := fault.Load(); f != nil {
		return (*f)(step, path)
	}
	return nil
}
