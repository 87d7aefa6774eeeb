package gitmem

import (
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// mirror keeps memories/ following the branch, and finds what was edited
// there by hand (design D7). It owns the worktree's file I/O (worktree,
// with .git/gitmem/tmp and its spares), the stat cache, the repair state
// (repairs) and the journal. Its fields are touched only in the mirror's
// files (worktree*.go, drift.go, handedit.go, journal.go, mirror.go; see
// parts_test.go): the rest of the store goes through its methods.
//
// It has no lock of its own. Its parts' locks, statCache.mu, repairs.mu,
// roomless.mu, leftBefore.mu, tooBigMu and the worktree's writtenMu and sparesMu, are leaves of the lock
// order: each may be taken with any other lock held, and none is held
// while another lock is taken. What orchestrates it with the rest of the
// store (materializeSome's follow, adopting, checking out what git moved)
// runs on Repo, with the writer turn or the disk lock held as its comments say.
type mirror struct {
	wt           *worktree
	stats        *statCache // worktree files known to hold their HEAD blob
	repairs      *repairs   // paths to write, hand edits kept, versions shown
	gitDir       string     // the journal is gitDir/gitmem/pending (journal.go)
	env          *gd.Env    // the test suite's seams (nil: none)
	hooks        *testHooks // the test suite's other seams (nil: none)
	maxFileBytes int64      // Options.MaxFileBytes: a hand-made file over it is not read (0: no limit)
	maxFiles     int        // Options.MaxFiles: no file made by hand is taken while the memory holds as many (<= 0: no limit)
	maxTotal     int64      // Options.MaxTotalBytes: no file made by hand is taken that would make the memory larger (<= 0: no limit)
	logf         func(string, ...any)
	index        indexWriting         // .git/index's part: where it notes for what commit gitmem wrote it
	errorf       func(string, ...any) // Options.Errorf: what the operator must act on

	// undone counts git's checkouts undone (undoCheckout): an adopt's
	// look at the worktree is stale.
	undone atomic.Int64

	// tooBigLogged is the size each hand-made file over maxFileBytes had
	// when the error log last named it (leaveTooBig): named once, not at
	// every look. Only an adopt, with the writer turn held, changes it;
	// the worktree's follow reads it (leftByAdopt). Guarded by tooBigMu.
	tooBigMu      sync.Mutex
	tooBigLogged  map[string]int64
	tooBigChanges int // how often tooBigLogged's files changed (saveLeft)

	// roomless are the files made by hand that an adopt left because the
	// memory held maxFiles files, or would be over maxTotal bytes with
	// them (leaveRoomless): named once, and not looked at again while the
	// memory holds maxFiles files (skipRoomless).
	roomless roomless

	// leftBefore are the files a process killed before this one replayed
	// its log named as left by an adopt (loadLeft), until an adopt takes
	// them or a look at every file finds them gone. leftSaved is the
	// count of changes to the three sets when saveLeft last wrote them
	// (leftFailed: it could not); the writer turn guards both.
	leftBefore roomless
	leftSaved  int
	leftFailed bool

	// checked is closed once the start's look at every worktree file
	// for hand edits is done (drift.go, checkLater); closed from the
	// start when none is under way. Replaced by start before Open
	// returns, while the maintainer may look at it.
	checked atomic.Pointer[chan struct{}]
}

// indexWriting is what the mirror asks of .git/index's part (gitIndex):
// the file that says which commit gitmem last wrote it for (a later
// .git/index is another program's).
type indexWriting interface {
	headPath() string
}

// newMirror is the mirror of the repository folder dir, opened as root,
// whose git folder is gitDir, and whose .git/index is index's.
func newMirror(root *os.Root, dir, gitDir string, index indexWriting, opt *Options) *mirror {
	env := opt.hooks.gdEnv()
	m := &mirror{wt: newWorktree(root, dir, gitDir, env), stats: newStatCache(), repairs: newRepairs(),
		gitDir: gitDir, env: env, hooks: opt.hooks, maxFileBytes: opt.MaxFileBytes, maxFiles: opt.MaxFiles, maxTotal: opt.MaxTotalBytes, logf: opt.Logf, errorf: opt.Errorf, index: index}
	checked := make(chan struct{})
	close(checked)
	m.checked.Store(&checked)
	return m
}

// close removes the spare files and closes the worktree's root.
func (m *mirror) close() { m.wt.close() }

// inFlight notes that p, not yet materialised, changes its paths: no
// hand edit is looked for there until it is (the committer's
// pathsInFlight).
func (m *mirror) inFlight(p *prepared) { m.repairs.inFlight(p) }

// droppedPaths notes that ps were dropped: they never reach the worktree.
func (m *mirror) droppedPaths(ps []*prepared) { m.repairs.droppedPaths(ps) }

// pending is the paths the worktree could not follow yet.
func (m *mirror) pending() []string { return m.repairs.pending() }

// handKept reports whether a hand edit kept from an acknowledged change
// waits for an adopt commit.
func (m *mirror) handKept() bool { return m.repairs.handKept() }

// reset forgets what the mirror knew of the worktree (the paths to
// repair, the hand edits' bases, the stat cache): a redaction rewrote the
// history, and every file is written anew.
func (m *mirror) reset() {
	m.repairs.reset()
	m.stats.clear()
}

// statsRead is what reads of worktree files found since .git/index was
// last written (statCache.takeRead).
func (m *mirror) statsRead() map[string]statEntry { return m.stats.takeRead() }

// forget drops what is known of the files at or under the given
// repository paths (gitmem is about to write them).
func (m *mirror) forget(paths []string) { m.stats.forget(paths) }

// tooBig reports whether a hand-made file of size bytes is over the
// largest file size: adoptDrift neither reads nor commits it.
func (m *mirror) tooBig(size int64) bool {
	return m.maxFileBytes > 0 && size > m.maxFileBytes
}

// The worktree's file I/O, for the rest of the store.

func (m *mirror) scan(skip func(rel string, dir bool) bool) (map[string]plumbing.Hash, error) {
	return m.wt.scan(skip)
}
func (m *mirror) readFile(p string) ([]byte, error)         { return m.wt.readFile(p) }
func (m *mirror) readBlob(p string, n *node) ([]byte, bool) { return m.wt.readBlob(p, n) }
func (m *mirror) readUnlessRacy(p string, size int64, now time.Time) ([]byte, [2]fs.FileInfo, error) {
	return m.wt.readUnlessRacy(p, size, now)
}
func (m *mirror) flushList() []string    { return m.wt.flushList() }
func (m *mirror) dropSpares()            { m.wt.dropSpares() }
func (m *mirror) clearTemp(all bool) int { return m.wt.clearTemp(all) }
func (m *mirror) sync(p string, n *node, blob func(plumbing.Hash) ([]byte, error)) error {
	return m.wt.sync(p, n, blob)
}
