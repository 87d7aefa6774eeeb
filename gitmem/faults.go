package gitmem

// fault is the test suite's fault-injecting layer: when set, each write
// step that can fail on a real disk (an object, the journal, the branch,
// a worktree file, the index, the history index, a pack) calls it first
// with the step's name and repository-relative path, and an error it
// returns is that step's error — ENOSPC, EACCES or EIO at a chosen point.
// It is nil outside tests.
var fault func(step, path string) error

// Steps fault is called with.
const (
	stepObject   = "object"
	stepJournal  = "journal"
	stepRef      = "ref"
	stepWorktree = "worktree"
	stepIndex    = "index"
	stepHistory  = "history"
	stepPack     = "pack"
)

func injected(step, path string) error {
	if fault == nil {
		return nil
	}
	return fault(step, path)
}
