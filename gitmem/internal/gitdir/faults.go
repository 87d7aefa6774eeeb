package gitdir

// Fault is the test suite's fault-injecting layer: when set, each write
// step that can fail on a real disk (an object, the journal, the branch,
// a worktree file, the index, the history index, a pack) calls it first
// with the step's name and repository-relative path, and an error it
// returns is that step's error — ENOSPC, EACCES or EIO at a chosen point.
// It is nil outside tests.
var Fault func(step, path string) error

// Steps fault is called with.
const (
	StepObject   = "object"
	StepJournal  = "journal"
	StepRef      = "ref"
	StepWorktree = "worktree"
	StepIndex    = "index"
	StepHistory  = "history"
	StepPack     = "pack"
)

// Injected returns the error Fault gives the step, if any.
func Injected(step, path string) error {
	if Fault == nil {
		return nil
	}
	return Fault(step, path)
}
