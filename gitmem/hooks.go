package gitmem

import (
	"regexp"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// testHooks are the test suite's seams into one Repo: given with the
// Options it is opened with (Options.hooks), before Open, and not changed
// after (env's fault hook excepted: SetFault is safe at any time), so that
// each test sets them on its own repositories and tests run in parallel.
// nil outside tests; every method works on nil.
type testHooks struct {
	// gc runs in a collection once the plan is taken, at "planned";
	// between writing the new pack and swapping it in: at "packed", then
	// (a full collection, after it looked for what commits made meanwhile
	// use) at "swap".
	gc func(stage string)
	// maintain runs in the maintenance loop of the writer lock's holder:
	// at "idle" once it found the lock idle to let go, before it takes the
	// writer turn to let it go; at "tried" once it gave the turn back
	// (the lock let go or kept).
	maintain func(stage string)
	// catchUp runs in a catch-up of the history index before the commits
	// are recorded.
	catchUp func()
	// merge runs in the middle of computing a merge; mergeLooked once a
	// merge's files were looked at for hand edits, before it takes the
	// writer turn to commit.
	merge, mergeLooked func()
	// syncIDs runs in syncIDs once HEAD was read, before the ids are.
	syncIDs func()
	// unrecovered runs in Unrecovered once it found the writer lock free,
	// before it reads the log files.
	unrecovered func()
	// redactFault runs once a redaction's record of the moves is written
	// and before the first ref moves; an error stops the redaction there,
	// as a kill would.
	redactFault func() error
	// redactShared runs in a shared redaction between the local
	// redaction and the first forced push (another agent pushes there).
	redactShared func()
	// redactMessage replaces redactMessage in this Repo's redactions:
	// the test plays a gitmem of other rules (another version).
	redactMessage func(m *regexp.Regexp, msg string) string
	// exchange runs in the mirror's checked write of the worktree file
	// q (syncChecked) with open set before it looks for a hand edit
	// there, and unset once it is done: in between, an edit that landed
	// after the look may be aside while gitmem's version is in place,
	// until it is put back.
	exchange func(q string, open bool)
	// adopted runs in an adopt once its commit p is prepared (the
	// writer's tip, queued for the log with the group being filled),
	// before the adopt notes what it read: another member of the group
	// may write and publish it then, and the worktree follow it.
	adopted func(p *prepared)
	// drift runs in an adopt once it found the files to take
	// (findDrift), before it reads them (buildAdopt).
	drift func()
	// startCheck runs in a start's look at every worktree file for hand
	// edits, made after Open returned (Repo.checkLater), with the writer
	// turn held, before it looks; awaitCheck runs when a call begins to
	// wait for that look to finish.
	startCheck, awaitCheck func()
	// link runs with the object store of a push, pull or sync (its own
	// View) once the link is made, for a test to count its reads.
	link func(st *gd.Store)
	// backlogMax, chunkMax, tailChunk and logMax replace the constants
	// of the same names when positive.
	backlogMax, chunkMax, tailChunk int
	logMax                          int64
	// noticeAfter replaces the constant lockNotice when positive.
	noticeAfter time.Duration
	// env is carried by the object store, log, worktree and syncs of the
	// Repo: its fault hook (SetFault) fails or pauses a write step.
	env *gd.Env
}

// lockNotice is how long a wait for the writer lock lasts before
// Options.Waiting is told (the constant lockNotice, or the test's).
func (h *testHooks) lockNotice() time.Duration {
	if h != nil && h.noticeAfter > 0 {
		return h.noticeAfter
	}
	return lockNotice
}

// gdEnv is the test's gd.Env (nil: none).
func (h *testHooks) gdEnv() *gd.Env {
	if h == nil {
		return nil
	}
	return h.env
}

// open is gd.Open carrying the test's gd.Env.
func (h *testHooks) open(gitDir string) *gd.Store {
	s := gd.Open(gitDir)
	s.Env = h.gdEnv()
	return s
}

func (h *testHooks) atGC(stage string) {
	if h != nil && h.gc != nil {
		h.gc(stage)
	}
}

func (h *testHooks) atMaintain(stage string) {
	if h != nil && h.maintain != nil {
		h.maintain(stage)
	}
}

func (h *testHooks) atLink(st *gd.Store) {
	if h != nil && h.link != nil {
		h.link(st)
	}
}

func (h *testHooks) atExchange(q string, open bool) {
	if h != nil && h.exchange != nil {
		h.exchange(q, open)
	}
}

func (h *testHooks) atAdopted(p *prepared) {
	if h != nil && h.adopted != nil {
		h.adopted(p)
	}
}

func (h *testHooks) atDrift() {
	if h != nil && h.drift != nil {
		h.drift()
	}
}

func (h *testHooks) atStartCheck() {
	if h != nil && h.startCheck != nil {
		h.startCheck()
	}
}

func (h *testHooks) atAwaitCheck() {
	if h != nil && h.awaitCheck != nil {
		h.awaitCheck()
	}
}

func (h *testHooks) atCatchUp() {
	if h != nil && h.catchUp != nil {
		h.catchUp()
	}
}

func (h *testHooks) atUnrecovered() {
	if h != nil && h.unrecovered != nil {
		h.unrecovered()
	}
}

func (h *testHooks) atSyncIDs() {
	if h != nil && h.syncIDs != nil {
		h.syncIDs()
	}
}

func (h *testHooks) atMerge() {
	if h != nil && h.merge != nil {
		h.merge()
	}
}

func (h *testHooks) atMergeLooked() {
	if h != nil && h.mergeLooked != nil {
		h.mergeLooked()
	}
}

func (h *testHooks) atRedactRecord() error {
	if h != nil && h.redactFault != nil {
		return h.redactFault()
	}
	return nil
}

func (h *testHooks) atRedactShared() {
	if h != nil && h.redactShared != nil {
		h.redactShared()
	}
}

// backlog is backlogMax, or the test's.
func (h *testHooks) backlog() int {
	if h == nil || h.backlogMax <= 0 {
		return backlogMax
	}
	return h.backlogMax
}

// logLimit is logMax, or the test's.
func (h *testHooks) logLimit() int64 {
	if h == nil || h.logMax <= 0 {
		return logMax
	}
	return h.logMax
}

// chunk is chunkMax, or the test's.
func (h *testHooks) chunk() int {
	if h == nil || h.chunkMax <= 0 {
		return chunkMax
	}
	return h.chunkMax
}

// tail is tailChunk, or the test's.
func (h *testHooks) tail() int {
	if h == nil || h.tailChunk <= 0 {
		return tailChunk
	}
	return h.tailChunk
}
