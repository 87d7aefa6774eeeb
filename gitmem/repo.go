package gitmem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/gitmem/internal/lock"
	"github.com/gitmem-dev/gitmem/policy"
)

// memDir is the folder of the repository that the model sees as /memories.
const memDir = "memories"

// Options configure a Repo. Zero values take the documented defaults.
type Options struct {
	// Author of changes whose Meta names none (default: Claude <claude@gitmem.invalid>).
	Author Signature
	// Committer of every gitmem commit (default: gitmem <gitmem@gitmem.invalid>).
	Committer Signature
	// Operator is the author of changes found on disk at start, made by
	// hand while gitmem was stopped (default, as git: GIT_AUTHOR_NAME and
	// GIT_AUTHOR_EMAIL, else user.name and user.email from git config, else
	// operator <operator@gitmem.invalid>; read when a commit first needs
	// it, not at Open).
	Operator Signature
	// Now is the clock for commit times (default: time.Now).
	Now func() time.Time
	// IndexDelay is how long after the first change it lacks .git/index
	// is rewritten (default: 1s): what `git status` compares the worktree
	// with, and what a `git commit` made by hand is built from. An idle
	// writer keeps the writer lock until then, unless another process
	// queues for it.
	IndexDelay time.Duration
	// ReleaseIdle is how long a writer keeps the writer lock without a
	// change before it gives it up (default: 200 ms), once .git/index
	// holds its changes (IndexDelay). Another process that queues for the
	// lock gets it sooner: the holder gives it up at once (within 10 ms;
	// up to 100 ms with MaterialiseEvery: Options.pollEvery). Longer keeps
	// the lock, and the descriptors a writer holds (the write-ahead log,
	// the lock), across quiet spells: the next change takes no lock and
	// opens no file for it.
	ReleaseIdle time.Duration
	// Logf receives operational messages (default: the standard logger).
	Logf func(format string, args ...any)
	// Errorf receives what went wrong and needs the operator to know:
	// damage done outside gitmem, and what gitmem did about it
	// (default: Logf).
	Errorf func(format string, args ...any)
	// ReadOnly opens the repository for reading its history only: nothing
	// is written (no lock held, no crash repair, no adoption of hand
	// edits), and Update fails. Only the history index, a cache, is saved
	// when a read had to catch it up and no other process holds the
	// writer lock (taken for the save alone, as a writer saves it), so
	// that the next reader does not do it again.
	ReadOnly bool
	// Adopt opens a git repository that gitmem did not create, and marks
	// it as gitmem's: gitmem then commits onto its branch.
	Adopt bool
	// OneCommand opens the repository for one operator command (revert,
	// restore, ...): the tool_use ids of the history, which a server reads
	// in the background from its start so that a retried call is
	// recognised at once, are not read ahead (a change with an id still
	// reads them first), the worktree is looked at for hand edits before
	// Open returns (a server's start looks right after: checkLater), and
	// .git/index is written at Close, not at start too.
	OneCommand bool
	// TouchedOnly makes a writer's start look at no worktree file for
	// hand edits (a repository without commits still gets its first
	// commit of what is there). A change still commits first the hand
	// edits of the files it reads or changes, as every change does
	// (Update); the others are left for the next start that looks at
	// every file (serve, push, pull, gc, ...), as `git commit -- PATH`
	// looks at that path alone. For an operator command that changes a
	// few files (revert, restore, expire): its start need not lstat
	// every file of the memory.
	TouchedOnly bool
	// OwnerOnly makes a writer refuse a repository whose .git belongs to
	// another user than the one this process runs as (ErrOtherOwner),
	// before writing anything: every file it made (objects, refs, the
	// log, worktree files) would be this user's, and the owner's serve
	// could no longer write them. git refuses such a repository outright
	// (safe.directory); a reader is not refused, and saves nothing there.
	OwnerOnly bool
	// MaterialiseEvery is how long, at most, a change waits to be
	// written to git's files (objects, the branch, the worktree) in the
	// background: once the first change waiting has waited this long,
	// all that wait are written together (one pack and one move of the
	// branch for all of them). 0: each group of changes at once, as it
	// is made. Plain git beside the repository sees a change up to this
	// late (or up to CheckpointEvery, which writes what waits too, if
	// that is sooner). The write-ahead log stays the commit point:
	// nothing is less durable, and a checkpoint, Close, another process
	// that asks for the writer lock and every read of git's files (Log,
	// Commit, Flush, ...) write what waits first. A folder of many stores
	// (stores.Dir) sets it: each pack and branch lock is a file made and
	// later removed, which with many busy stores was most of the
	// server's CPU. serve sets 10 ms for its one repository: written after
	// each call, that work took a core beside the next call's.
	MaterialiseEvery time.Duration
	// CheckpointEvery is how often, at most, what was written to git's
	// files since the last checkpoint is made durable there (one syncfs)
	// and the write-ahead log emptied (default: 1s), while changes come;
	// a checkpoint writes what waits to git's files first. Longer: fewer
	// syncfs, a longer log to replay after a crash.
	CheckpointEvery time.Duration
	// MaxFileBytes is the largest file a hand edit may make: a file over
	// it is neither read nor committed, and the error log names it
	// (0: policy.DefaultLimits.MaxFileBytes; negative: no limit).
	MaxFileBytes int64
	// MaxFiles is the most files hand edits may make the memory hold: a
	// file created by hand while the memory holds as many is neither
	// read nor committed, and stays on disk as it is until the memory
	// has room for it (the files made by hand are taken in path order).
	// The error log says how many were left, once (0:
	// policy.DefaultLimits.MaxFiles; negative: no limit).
	MaxFiles int
	// MaxTotalBytes is the largest total size of the memory's files that
	// hand edits may make: a file created by hand that would take the
	// memory past it is neither read nor committed, as for MaxFiles
	// (0: policy.DefaultLimits.MaxTotalBytes; negative: no limit).
	MaxTotalBytes int64
	// LockWait bounds a wait for the writer lock another process holds:
	// after it, the call gives up with a *LockHeldError and changes
	// nothing (0: the wait lasts as long as the call's context; a
	// server's calls). A process whose checkpoint keeps failing (a full
	// disk) keeps the lock until one succeeds.
	LockWait time.Duration
	// Waiting, if set, is told once per wait for another process's
	// writer lock, a second into it, what that process recorded (see
	// Holder).
	Waiting func(Holder)
	// Process names this process to another that waits for the writer
	// lock while this one keeps it with its checkpoint failing ("gitmem
	// serve"; default: the program's file name).
	Process string

	hooks *testHooks // the test suite's seams (nil outside tests)

	// gitOperator is the git identity of defaults' dir, read at its first
	// use (operator).
	gitOperator func() Signature
}

func (o *Options) defaults(dir string) {
	if o.Author == (Signature{}) {
		o.Author = Signature{"Claude", "claude@gitmem.invalid"}
	}
	if o.Committer == (Signature{}) {
		o.Committer = Signature{"gitmem", "gitmem@gitmem.invalid"}
	}
	if o.Operator == (Signature{}) && o.gitOperator == nil {
		// Read when a commit needs it (operator), not at Open: a store's
		// first call, a reader and most tool calls commit nothing of the
		// operator's, and the read is two config files.
		o.gitOperator = sync.OnceValue(func() Signature { return gitIdentity(dir) })
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.IndexDelay == 0 {
		o.IndexDelay = time.Second
	}
	if o.ReleaseIdle <= 0 {
		o.ReleaseIdle = releaseIdle
	}
	if o.CheckpointEvery <= 0 {
		o.CheckpointEvery = checkpointEvery
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	if o.Errorf == nil {
		o.Errorf = o.Logf
	}
	if o.MaxFileBytes == 0 {
		o.MaxFileBytes = policy.DefaultLimits.MaxFileBytes
	}
	if o.MaxFiles == 0 {
		o.MaxFiles = policy.DefaultLimits.MaxFiles
	}
	if o.MaxTotalBytes == 0 {
		o.MaxTotalBytes = policy.DefaultLimits.MaxTotalBytes
	}
	if o.Process == "" && len(os.Args) > 0 {
		o.Process = filepath.Base(os.Args[0])
	}
}

// operator is Operator, else the git identity of the repository (read
// once, at the first call).
func (o *Options) operator() Signature {
	if o.Operator != (Signature{}) || o.gitOperator == nil {
		return o.Operator
	}
	return o.gitOperator()
}

// checkOwner is ErrOtherOwner for a writer with OwnerOnly whose
// repository's .git is another user's (see Options.OwnerOnly).
func checkOwner(gitDir string, opt Options) error {
	if opt.OwnerOnly && !opt.ReadOnly && !ownedByUs(gitDir) {
		return ErrOtherOwner
	}
	return nil
}

// gitIdentity is the operator's git identity (repository, then global
// config), or a placeholder.
func gitIdentity(dir string) Signature {
	id := Signature{"operator", "operator@gitmem.invalid"}
	if c, err := config.LoadConfig(config.GlobalScope); err == nil {
		if c.User.Name != "" {
			id.Name = c.User.Name
		}
		if c.User.Email != "" {
			id.Email = c.User.Email
		}
	}
	// .git/config as go-git's open of the repository parses it, read
	// only if it is a regular file: a named pipe put there is not waited
	// on (go-git's open of it blocked).
	if c, err := gd.ReadConfig(filepath.Join(dir, ".git")); err == nil && c != nil {
		if c.User.Name != "" {
			id.Name = c.User.Name
		}
		if c.User.Email != "" {
			id.Email = c.User.Email
		}
	}
	// As git: the environment comes before the configuration.
	if v := os.Getenv("GIT_AUTHOR_NAME"); v != "" {
		id.Name = v
	}
	if v := os.Getenv("GIT_AUTHOR_EMAIL"); v != "" {
		id.Email = v
	}
	return id
}

// Repo is a gitmem repository: a git repository whose memories/ folder
// holds the memory files. Every change is one commit, written through the
// object store (no worktree scan), then mirrored to the worktree.
//
// A Repo is safe for concurrent use. Writers are serialised, within the
// process by the writer turn and across processes by a lock file (the
// lease, turn.go); readers work on immutable snapshots and never wait
// for a commit's fsyncs.
type Repo struct {
	dir    string
	gitDir string
	opt    Options
	// heldBack: read-only, how long CatchUp waited for the writer lock's
	// holder, which did not let it go (a time.Duration; Unrecovered).
	heldBack atomic.Int64

	// lease is the writer turn (one writer in this process; in the lock
	// order after the collector's lock) and the repository's lock files
	// (one writer across processes, taken with the turn held).
	lease *lock.Writer
	// life is cancelled when Close begins: every wait for the collector,
	// the turn or the lock files gives up (ErrClosed). closed is set by
	// Close with the turn held.
	life   context.Context
	cancel context.CancelFunc
	closed atomic.Bool
	// cleanMark: the clean mark is written as the writer lock is let go
	// with nothing left to write (MarkWhenClean, clean.go). markWaitedFor
	// is the commit for which a release began to keep the lock for a
	// memory file just written (racyMark), at markWaitedSince; guarded by
	// the turn.
	cleanMark       atomic.Bool
	markWaitedFor   plumbing.Hash
	markWaitedSince time.Time

	// The commit pipeline (pipeline.go): the committer makes a change
	// durable in the log and publishes it; the materialiser writes it to
	// git's files and the worktree (disk), the maintainer in the
	// background. Their locks, in order: disk.mu, logFiles.mu,
	// committer.queueMu, published.mu; backlog.mu is a leaf.
	state     published  // readers' HEAD and the writer's tip (published.go)
	committer committer  // the group being filled, the group commit (committer.go)
	log       logFiles   // the write-ahead log (logfiles.go)
	backlog   backlog    // published, not yet in git's files (backlog.go)
	disk      disk       // git's files and the worktree as written (materialise.go, checkpoint.go)
	maint     maintainer // the background loop (maintain.go)
	mirror    *mirror    // memories/ following the branch, hand edits found (mirror.go)

	// mat writes the published commits to git's files and the worktree,
	// and checkpoints (materialise.go, checkpoint.go).
	mat *materialiser

	objects objects // git's objects, shared by every part (objects.go)
	branch  plumbing.ReferenceName
	adopted bool // this Open marked a repository gitmem did not create

	histIndex *historyIndex // the history index, in memory and in .git/gitmem/history (history.go)
	toolIDs   *toolUseIDs   // the tool_use ids known to have made a commit, or to be making one (toolids.go)
	gitIndex  *gitIndex     // .git/index: what gitmem last wrote there, and when it writes it next (index.go)
	outside   outsideGit    // commits plain git moved the branch to, merged back (plaingit.go)

	sharer    sharer    // push, pull and sync sessions, one at a time (share.go)
	collector collector // one collection or redaction at a time (gc.go)
}

// Init creates a gitmem repository in dir, or adopts what is there: a
// plain folder of memory files (the SDK's file backend layout, dir/memories)
// becomes the first commit; an existing gitmem repository is opened as is,
// and another git repository only with Options.Adopt. It reports whether
// a new repository was created. A .git that an interrupted creation by an
// earlier gitmem left (ErrInterrupted) is replaced.
func Init(ctx context.Context, dir string, opt Options) (*Repo, bool, error) {
	created := false
	gitDir := filepath.Join(dir, ".git")
	_, err := os.Lstat(gitDir)
	if err == nil && gd.Interrupted(gitDir) {
		// Moved aside first, as a store's delete: what is left if this
		// is cut short is a temporary folder the next Init removes.
		aside := filepath.Join(dir, gd.NewTempPrefix+gd.ProcTag+"-interrupted")
		if err = os.Rename(gitDir, aside); err != nil {
			return nil, false, wrap("replace the repository an interrupted creation left", err)
		}
		os.RemoveAll(aside)
		err = fs.ErrNotExist
		if opt.Logf != nil {
			opt.Logf("gitmem: replaced the .git an interrupted creation left (no commit, no HEAD or no mark)")
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		if created, err = initGitDir(dir, opt.hooks.gdEnv()); err != nil {
			return nil, false, err
		}
	}
	r, err := Open(ctx, dir, opt)
	return r, created, err
}

// Create makes a new gitmem repository at dir, all or nothing: it is
// built in a temporary folder beside dir (gd.NewTempPrefix: those killed
// processes left are removed by this process's first Create there), fill
// makes its first changes, and once closed it is renamed into place. A
// dir that exists by then and is not an empty folder (another process's,
// say) is ErrExist, with nothing changed; so of two processes creating
// dir at once, one creates it. Nothing is synced while it is built: the
// whole folder once, complete, before the rename (gd.BuildAside).
func Create(ctx context.Context, dir string, opt Options, fill func(r *Repo) error) error {
	parent := filepath.Dir(dir)
	if _, done := newTempsCleared.LoadOrStore(parent, true); !done {
		gd.ClearNewTemps(parent)
	}
	tmp, err := os.MkdirTemp(parent, gd.NewTempPattern())
	if err != nil {
		return wrap("create the repository folder", err)
	}
	defer os.RemoveAll(tmp) // gone once renamed
	// Nothing is synced while it is built (a crash leaves a temporary
	// folder, removed later): the whole tree once, complete, before it
	// is renamed into place.
	done := gd.BuildAside(tmp)
	defer done()
	r, _, err := Init(ctx, tmp, opt)
	if err != nil {
		return err
	}
	err = fill(r)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := gd.SyncTree(opt.hooks.gdEnv(), tmp); err != nil {
		return wrap("create the repository folder", err)
	}
	done()
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Lstat(dir); serr == nil {
			return ErrExist
		}
		return wrap("create the repository folder", err)
	}
	return wrap("create the repository folder", gd.SyncDir(parent))
}

// newTempsCleared holds the folders (parents of a Create's dir) whose
// leftover temporary folders this process has removed: once each, as
// listing the folder is the whole cost of it (10 ms at 10,000 stores, per
// Create when it was done every time), and what a process killed since
// left is removed by the next process's first Create there.
var newTempsCleared sync.Map

// initGitDir creates dir (if needed) with a new git repository on branch
// main, marked as gitmem's, all or nothing: .git is built under a
// temporary name in dir (gd.NewTempPrefix, which a later initGitDir
// removes if this process is killed meanwhile) and renamed into place
// once complete. It reports false, and no error, when another process
// put a .git there first.
func initGitDir(dir string, env *gd.Env) (bool, error) {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return false, wrap("create the repository folder", err)
	}
	gd.ClearNewTemps(dir)
	// The objects hold the memory's content: .git is as private as the
	// memory files themselves (MkdirTemp's 0700).
	tmp, err := os.MkdirTemp(dir, gd.NewTempPattern())
	if err != nil {
		return false, wrap("initialise the git repository", err)
	}
	defer os.RemoveAll(tmp) // gone once renamed
	if err := gd.WriteNewGitDir(env, tmp); err != nil {
		return false, wrap("initialise the git repository", err)
	}
	gitDir := filepath.Join(dir, ".git")
	if err := os.Rename(tmp, gitDir); err != nil {
		if _, serr := os.Lstat(gitDir); serr == nil {
			return false, nil // another process's
		}
		return false, wrap("initialise the git repository", err)
	}
	if err := env.Injected(gd.StepInit, "rename"); err != nil {
		return true, wrap("initialise the git repository", err)
	}
	return true, wrap("initialise the git repository", gd.SyncDir(dir))
}

// Open opens the gitmem repository in dir. Under the writer lock it first
// finishes what a crash interrupted (a redaction, a change whose worktree
// copy is unfinished), then commits changes an operator made by hand under
// memories/ while gitmem was stopped, attributed to the operator: with
// Options.OneCommand before it returns, otherwise right after, in the
// background, every read that could miss them waiting for it (see
// checkLater). A repository without commits gets its first commit here.
//
// A git repository that gitmem did not create is refused (ErrForeign)
// unless opt.Adopt is set; a branch that is missing while commits exist,
// or damaged, is refused with a *DamagedError that says how to repair it.
// Read-only, Open writes nothing at all.
//
// Open waits for the writer lock while another process holds it (a
// gitmem gc --full, say), until ctx is done: it then returns ctx.Err(),
// having changed nothing. Once the lock is taken, the recovery finishes
// whatever ctx does.
func Open(ctx context.Context, dir string, opt Options) (*Repo, error) {
	opt.defaults(dir)
	gitDir := filepath.Join(dir, ".git")
	if fi, err := os.Stat(gitDir); err != nil || !fi.IsDir() {
		return nil, ErrNotRepository
	}
	if err := checkOwner(gitDir, opt); err != nil {
		return nil, err
	}
	marked, err := gd.Marked(opt.hooks.gdEnv(), gitDir)
	if err != nil {
		return nil, wrap("read .git/config", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, wrap("open the repository", err)
	}
	r := &Repo{
		dir:     dir,
		gitDir:  gitDir,
		opt:     opt,
		objects: objects{st: opt.hooks.open(gitDir)},
		lease:   lock.NewWriter(nil, nil), // read-only: no lock files
	}
	r.life, r.cancel = context.WithCancel(context.Background())
	r.histIndex = newHistoryIndex(gitDir, opt.hooks)
	r.toolIDs = newToolUseIDs()
	r.gitIndex = newGitIndex(r.life, gitDir, opt.hooks.gdEnv())
	r.mirror = newMirror(root, dir, gitDir, r.gitIndex, &opt)
	r.initPipeline()
	fail := func(err error) (*Repo, error) {
		r.cancel()
		r.mirror.close()
		r.lease.Close()
		r.objects.st.Close()
		return nil, err
	}
	if r.branch, err = gd.ReadHEAD(gitDir); err != nil {
		if gd.Interrupted(gitDir) {
			return fail(ErrInterrupted)
		}
		var ok bool
		if r.branch, ok = detachedBranch(gitDir, r.objects.st); !ok {
			return fail(wrap("read HEAD", err))
		}
	}
	if !marked && !r.madeByGitmem() {
		if gd.Interrupted(gitDir) {
			return fail(ErrInterrupted)
		}
		if !opt.Adopt {
			return fail(ErrForeign)
		}
		r.adopted = !opt.ReadOnly // a reader marks nothing
	}
	// A damaged repository is refused by every command, reading ones
	// too: a diff of hand edits would show every memory file deleted.
	if err := memoriesNotAFolder(dir); err != nil {
		return fail(err)
	}
	if opt.ReadOnly {
		// A reader needs the branch as much as a writer: without it the
		// history would read as empty (gitmem log printing nothing).
		if err := r.checkBranch(); err != nil {
			return fail(err)
		}
		return r, nil
	}
	for _, d := range []string{filepath.Join(gitDir, "gitmem", "tmp"), filepath.Join(dir, memDir)} {
		if err := os.MkdirAll(d, dirMode); err != nil {
			return fail(wrap("prepare the repository", err))
		}
	}
	lockFile, err := gd.OpenFileLock(filepath.Join(gitDir, "gitmem", "lock"))
	if err != nil {
		return fail(wrap("open the lock file", err))
	}
	intent, err := gd.OpenFileLock(filepath.Join(gitDir, "gitmem", "intent"))
	if err != nil {
		lockFile.Close()
		return fail(wrap("open the lock file", err))
	}
	r.lease = lock.NewWriter(lockFile, intent)
	if err := r.start(ctx, !marked); err != nil {
		return fail(err)
	}
	return r, nil
}

// madeByGitmem recognises a repository an earlier gitmem made before it
// marked its repositories: HEAD is a commit gitmem wrote.
func (r *Repo) madeByGitmem() bool { return madeByGitmem(r.gitDir, r.branch, r.objects.st) }

func madeByGitmem(gitDir string, branch plumbing.ReferenceName, st *gd.Store) bool {
	head, err := gd.ReadRef(gitDir, branch)
	if err != nil {
		return false
	}
	c, err := st.Commit(head)
	if err != nil {
		return false
	}
	_, _, trailers := parseMessage(c.Message)
	return trailerValue(trailers, TrailerCommand) != ""
}

// start makes the repository ready for writing: under the writer lock it
// checks the branch, clears what killed processes left, finishes an
// interrupted redaction and an interrupted change, and adopts hand edits
// (a server's start, after it returns: checkLater).
// Only a damaged repository stops it: a full disk or a read-only folder
// leaves a repository that can still be read (the failed step is logged
// and retried at the next change).
func (r *Repo) start(ctx context.Context, markIt bool) error {
	t, err := r.beginWrite(ctx, 0)
	if err != nil {
		return err
	}
	handed := false // the turn goes to the look at every file (checkLater)
	defer func() {
		if !handed {
			t.end()
		}
	}()
	if err := r.acquire(ctx); err != nil {
		return err
	}
	fail := func(err error) error {
		r.lease.Release()
		return err
	}
	if markIt {
		if err := gd.Mark(r.objects.st.Env, r.gitDir); err != nil {
			return fail(wrap("mark the repository", err))
		}
	}
	// One listing each of .git, .git/gitmem and .git/objects for both
	// sweeps.
	env := r.objects.st.Env
	top, own := gd.ListNames(env, r.gitDir), gd.ListNames(env, filepath.Join(r.gitDir, "gitmem"))
	objs := gd.ListNames(env, filepath.Join(r.gitDir, "objects"))
	r.clearStaleLocks(top, own, objs)
	r.clearTempFiles(top, own, objs)
	makeHolderFile(r.gitDir, r.objects.st.SpareFromReserve)
	if !slices.Contains(own, gd.ReserveName) { // made by an earlier start, as a rule
		r.objects.st.MakeReserve()
	}
	if slices.Contains(own, leftName) { // files made by hand an earlier process left
		r.mirror.loadLeft()
	}
	if err := r.checkBranch(); err != nil {
		return fail(err)
	}
	// .git/index as gitmem left it gives the tree and the worktree's lstat
	// data without reading every tree object and hashing every file.
	si := readStartIndex(r.gitDir)
	r.gitIndex.noteMadeFor(r.readIndexHead())
	if _, err := os.Stat(redactPath(r.gitDir)); err == nil {
		r.opt.Logf("gitmem: finishing an interrupted redaction")
		if err := r.finishRedaction(t, nil); err != nil {
			return fail(err)
		}
		si = nil // the history was rewritten: .git/index was written anew
	}
	if err := r.settleIn(t, si); err != nil {
		return fail(err)
	}
	r.mirror.loadIndexStats(si, r.snapshotTree())
	first := r.snapshotHead().IsZero()
	r.mirror.loadKept(r.snapshotTree())
	// Every file is looked at for hand edits: here for a memory without
	// commits (its first commit comes before anything else) and for one
	// command, which exits right after; for a server after Open returned,
	// with the turn this start holds (checkLater).
	later := !first && !r.opt.TouchedOnly && !r.opt.OneCommand
	if first || (!r.opt.TouchedOnly && !later) {
		r.adoptAll(first)
	}
	if !later {
		r.mirror.saveKept(r.objects.readBlob) // what a program still holds open waits for the next adopt, or start
	}
	// One command's Close writes .git/index (under the writer lock, as
	// the lease's release would): written here too, the 10,000 entries
	// would be written twice within the command. And none is written for
	// changes git's files could not take (a full disk): it would name
	// blobs git does not have; the release or Close after a checkpoint
	// that lands writes it.
	if err := r.materialize(); err != nil {
		r.opt.Logf("gitmem: %v", scrubPaths(err))
	} else if !r.opt.OneCommand {
		if err := r.writeIndex(); err != nil {
			r.opt.Logf("gitmem: could not write .git/index: %v", scrubPaths(err))
		}
	}
	if r.opt.OneCommand {
		return nil
	}
	if later {
		r.mirror.checking()
		handed = true
	}
	go func() {
		if handed {
			r.checkLater(t)
		}
		// The tool_use ids of the history are read in the background: the
		// first change with an id waits only for what is left of it.
		ids, err := r.beginWrite(r.life, 0)
		if err != nil {
			return // closed
		}
		defer ids.end()
		if r.lease.Held() {
			if err := r.syncIDs(true); err != nil && !errors.Is(err, ErrClosed) {
				r.opt.Logf("gitmem: %v", scrubPaths(err))
			}
		}
	}()
	return nil
}

// checkBranch refuses to go on when the branch HEAD names is missing while
// the repository holds commits: gitmem would start a new history over the
// old one (and a later gc would delete it). A missing branch is normal
// only in a new repository, or when the only commit is a first commit a
// crash interrupted before the branch was created.
func (r *Repo) checkBranch() error {
	_, err := r.readRef(r.branch)
	if !errors.Is(err, gd.ErrNoRef) {
		return wrap("read the branch", err)
	}
	j, err := r.mirror.readJournal()
	if err != nil {
		return err
	}
	if j != nil && j.Commit != "" && j.Parent == "" {
		return nil
	}
	tips, err := r.headCommits()
	if err != nil {
		return wrap("look for commits", err)
	}
	if len(tips) == 0 {
		return nil
	}
	return &DamagedError{
		Problem: fmt.Sprintf("HEAD names %s, which does not exist, but the repository holds commits (the newest is %s %q)",
			r.branch, tips[0].Hash[:7], tips[0].Subject),
		Repair: fmt.Sprintf("gitmem will not start a new history over them: run gitmem fsck --repair, or git update-ref %s %s", r.branch, tips[0].Hash),
	}
}

// clearStaleLocks removes the lock files a killed gitmem left: those that
// are provably its own (gd.ClearOwnLocks: the lock is one file with a
// second name of a process that no longer runs), and
// .git/gitmem/index-head.lock, which no git command takes (we hold the
// writer lock, so no gitmem process is writing it). A lock file of git's
// (the branch's, .git/index.lock) is never removed for its age: git may
// hold one for as long as a command runs (see gd.ErrLocked). What needs
// one waits for it, and fails naming it; git maintenance's
// objects/maintenance.lock too. top, own and objs are listings of .git,
// .git/gitmem and .git/objects (gd.ListNames).
func (r *Repo) clearStaleLocks(top, own, objs []string) {
	for _, l := range gd.ClearOwnLocks(r.objects.st.Env, r.gitDir, top, own, objs) {
		r.opt.Logf("gitmem: removed .git/%s, which a gitmem that was killed left", l)
	}
	if slices.Contains(own, filepath.Base(r.indexHeadPath())+".lock") {
		os.Remove(r.indexHeadPath() + ".lock")
	}
}

// clearTempFiles removes the temporary files a killed gitmem left: we hold
// the writer lock, so no gitmem process is writing them now. A pack a
// killed gc or clone left half-written (tmp_pack_*) goes too once it is
// older than gd.StaleTemp, the longest a live git could still be writing it.
// top, own and objs are listings of .git, .git/gitmem and .git/objects
// (gd.ListNames), shared with clearStaleLocks.
func (r *Repo) clearTempFiles(top, own, objs []string) {
	junk := gd.MatchNames(filepath.Join(r.gitDir, "gitmem"), own, "pending-*", "history-*", "redact-*", "reserve-*", "left-*", "kept-*")
	junk = append(junk, gd.MatchNames(r.gitDir, top, "packed-refs-*")...)
	env := r.objects.st.Env
	tmp := filepath.Join(r.gitDir, "gitmem", "tmp")
	junk = append(junk, gd.MatchNames(tmp, gd.ListNames(env, tmp), "*")...)
	for _, d := range gd.MatchNames(filepath.Join(r.gitDir, "objects"), objs, "??") {
		junk = append(junk, gd.MatchNames(d, gd.ListNames(env, d), gd.TmpObjPrefix+"*")...)
	}
	for _, p := range junk {
		os.RemoveAll(p)
	}
	// The pack folder, from one listing: temporary packs, gc's marks
	// where an earlier version kept them, indexes of a pack killed
	// between its index and itself, .keep files of one killed before it
	// appeared.
	n := len(junk) + gd.SweepPacks(env, r.gitDir, own)
	if n > 0 {
		r.opt.Logf("gitmem: removed %d temporary file(s) left by an interrupted run", n)
	}
}

// deleted reports whether the repository's .git was deleted while it was
// open (rm -rf, gitmem store delete by another process): its branch gone
// then is no damage, and nothing is to be put back.
func (r *Repo) deleted() bool {
	_, err := os.Lstat(r.gitDir)
	return errors.Is(err, fs.ErrNotExist)
}

// readHead returns the commit the branch points to now: zero in a new
// repository. Once the repository has a history, a branch that has gone
// missing is damage, never "no commits yet".
func (r *Repo) readHead() (plumbing.Hash, error) {
	h, err := r.readRef(r.branch)
	if errors.Is(err, gd.ErrNoRef) {
		had := r.snapshotHead()
		if !had.IsZero() && r.deleted() {
			return h, ErrDeleted
		}
		if !had.IsZero() {
			return h, &DamagedError{Problem: fmt.Sprintf("the branch %s has disappeared (it was at %s)", r.branch, had),
				Repair: fmt.Sprintf("run gitmem fsck --repair, or git update-ref %s %s", r.branch, had)}
		}
		return plumbing.ZeroHash, nil
	}
	return h, err
}

// refresh loads HEAD if it moved since we last looked (another process
// committed). Unchanged subtrees are reused, so this costs what changed.
// persist says the caller holds the writer lock (the history index file
// may be written). si, at start, may give the tree without reading tree
// objects (treeFromIndex). Called with the turn held.
func (r *Repo) refresh(t *writerTurn, si *startIndex, persist bool) error {
	head, err := r.readHead()
	if err != nil && persist && !errors.Is(err, ErrDeleted) {
		if h, ok := r.restoreBranch(); ok { // deleted outside gitmem
			head, err = h, nil
		}
	}
	if err != nil {
		return wrap("read the branch", err)
	}
	cur, old, loaded := r.state.loadedAt()
	same := loaded && head == cur
	if same {
		return nil
	}
	var tree *node
	if !head.IsZero() {
		fromIndex := false
		r.objects.lock()
		c, err := r.objects.st.Commit(head)
		if err != nil {
			err = objectError("commit", head, "", err)
		} else if tree = r.treeFromIndex(si, c.TreeHash); tree == nil {
			tree, err = r.loadTree(c.TreeHash, old, "")
		} else {
			fromIndex = true
		}
		r.objects.unlock()
		if fromIndex {
			held := r.gitIndex.lock()
			held.loaded(head, tree, si.list())
			held.unlock()
		}
		if err != nil {
			return err
		}
	}
	r.state.load(head, tree)
	r.toolIDs.markStale() // others committed: their ids are read when an id is next looked up
	return nil
}

// loadTree reads a tree object into nodes, reusing old's nodes where the
// hashes match. at is the tree's path, for error messages. Called with
// objects.mu held.
func (r *Repo) loadTree(h plumbing.Hash, old *node, at string) (*node, error) {
	if old != nil && old.isDir() && old.hash == h {
		return old, nil
	}
	t, err := r.objects.st.Tree(h)
	if err != nil {
		return nil, objectError("tree", h, at, err)
	}
	kids := make([]kid, 0, len(t.Entries))
	for _, e := range t.Entries {
		prev := old.kid(e.Name)
		p := join2(at, e.Name)
		switch {
		case e.Mode == filemode.Dir:
			k, err := r.loadTree(e.Hash, prev, p)
			if err != nil {
				return nil, err
			}
			kids = append(kids, kid{e.Name, k})
		case prev != nil && prev.mode == e.Mode && prev.hash == e.Hash:
			kids = append(kids, kid{e.Name, prev})
		default:
			k := &node{mode: e.Mode, hash: e.Hash}
			if k.isFile() {
				if k.size, err = r.objects.st.Size(e.Hash); err != nil {
					return nil, objectError("blob", e.Hash, p, err)
				}
			}
			kids = append(kids, kid{e.Name, k})
		}
	}
	n := newDir(kids)
	n.hash = h
	return n, nil
}

// objectError names an object that could not be read, and where it is,
// so that the operator can find it (gitmem fsck lists every damaged one).
func objectError(kind string, h plumbing.Hash, at string, err error) error {
	what := fmt.Sprintf("read the %s %s", kind, h)
	if at != "" {
		what += " (" + at + ")"
	}
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return &DamagedError{Problem: fmt.Sprintf("the %s %s%s is missing", kind, h, inPath(at)),
			Repair: "run gitmem fsck to list what is damaged; " + missingRepair(kind, h)}
	}
	return &StorageError{Op: what, Err: err}
}

// missingRepair says how to repair a missing or damaged object of the
// kind: a blob can be removed from history, a commit or a tree cannot.
func missingRepair(kind string, h plumbing.Hash) string {
	if kind == "blob" {
		return "copy the object from a clone or backup; or remove the file's content from every commit with gitmem redact --blob " + h.String() + " --yes"
	}
	return "copy it from a clone or backup (copying a clone's .git/objects/pack/ files into this repository's brings every object the clone has); no gitmem command can mend a history that misses a " + kind
}

func inPath(at string) string {
	if at == "" {
		return ""
	}
	return " (" + at + ")"
}

func (r *Repo) snapshotTree() *node {
	_, tree := r.state.snapshot()
	return tree
}

// snapshotHead is the commit readers see.
func (r *Repo) snapshotHead() plumbing.Hash {
	head, _ := r.state.snapshot()
	return head
}

// readFile is objects.readFile (opStore's).
func (r *Repo) readFile(h plumbing.Hash, p string) ([]byte, error) { return r.objects.readFile(h, p) }

func (o *objects) readBlob(h plumbing.Hash) ([]byte, error) {
	o.lock()
	defer o.unlock()
	return o.st.Blob(h)
}

// readFile reads the blob h of the memory file p (relative to
// memories/); a failure names the object and the file (objectError).
func (o *objects) readFile(h plumbing.Hash, p string) ([]byte, error) {
	data, err := o.readBlob(h)
	if err != nil {
		return nil, objectError("blob", h, memDir+"/"+p, err)
	}
	return data, nil
}

// Snapshot returns a consistent, immutable view of the memory at HEAD.
// When another process has moved HEAD, the new state is loaded first.
// paths, if any, are memory files (relative to memories/) the caller is
// about to read: one that an operator changed by hand is committed first
// (an adopt commit), so that the view shows it. A folder is not checked
// here (that would read the whole subtree); Adopt checks everything.
// Without paths, or with a folder among them, it waits for the start's
// look at every file when that is still under way (checkLater); a file
// is checked as above (adoptFiles).
// Only these slow paths wait (for the writer turn or lock): they give up
// when ctx is done.
func (r *Repo) Snapshot(ctx context.Context, paths ...string) (*View, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	cur := r.snapshotHead()
	if !r.lease.Held() { // another process may have committed
		head, err := r.readHead()
		var de *DamagedError
		switch {
		case errors.As(err, &de) && !r.opt.ReadOnly:
			if err := r.loadMoved(ctx, cur, head, true); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, wrap("read the branch", err)
		case head != cur:
			if err := r.loadMoved(ctx, cur, head, false); err != nil {
				return nil, err
			}
		}
	}
	files := r.filePaths(paths)
	if len(files) < len(paths) || len(paths) == 0 {
		// A folder, or whatever the caller goes on to read: the start's
		// look at every file, under way, is waited for.
		if err := r.awaitStartCheck(ctx); err != nil {
			return nil, err
		}
	}
	if len(files) > 0 && !r.opt.ReadOnly {
		if err := r.adoptLooked(ctx, files, false); err != nil {
			r.opt.Logf("gitmem: could not commit a hand edit before a view, which shows the memory as committed: %v", scrubPaths(err))
		}
	}
	head, tree := r.state.snapshot()
	return &View{r: r, root: tree, head: head}, nil
}

// loadMoved loads the branch another process moved from cur to head, for a
// process that does not hold the writer lock. A branch deleted outside
// gitmem, or moved with git off what this process acknowledged, is put
// back instead: under the writer lock (refresh, settleIn).
func (r *Repo) loadMoved(ctx context.Context, cur, head plumbing.Hash, deleted bool) error {
	t, err := r.beginWrite(ctx, 0)
	if err != nil {
		return err
	}
	defer t.end()
	if r.lease.Held() {
		return nil
	}
	if deleted {
		return r.own(ctx, t)
	}
	if off, _ := r.movedOff(cur, head); off {
		return r.own(ctx, t)
	}
	return r.refresh(t, nil, false)
}

// filePaths keeps the paths that are not folders at HEAD.
func (r *Repo) filePaths(paths []string) []string {
	tree := r.snapshotTree()
	var out []string
	for _, p := range paths {
		if p != "" && !lookup(tree, full(p)).isDir() {
			out = append(out, p)
		}
	}
	return out
}

// Update runs fn on a transaction over HEAD and, if fn succeeds, commits
// what it changed as exactly one commit (also when nothing changed), then
// mirrors it to the worktree. If fn fails nothing is written. When meta
// carries a Tool-Use-Id that already has a commit, fn is not run and an
// *AppliedError names that commit.
//
// If a file fn looked at or changed was edited by hand in the worktree,
// the edit is first committed (an adopt commit by the operator) and fn
// runs again on the new state: a hand edit is never overwritten.
//
// The commit is durable when Update returns: it is in the write-ahead
// log, fdatasynced with every change waiting at that moment; git's files
// and the worktree follow in the background (see pipeline.go). When
// calls come faster than that, past backlogMax commits not yet in git's
// files, Update first waits for them (at most backlogWait).
//
// Until fn has returned, every wait (the backlog, this process's writer
// turn, the writer lock another process holds) gives up when ctx is
// done: Update then returns ctx.Err() and nothing was written. Once the
// commit is prepared, it completes.
func (r *Repo) Update(ctx context.Context, meta Meta, fn func(tx *Tx) error) (Commit, error) {
	if err := r.awaitBacklog(ctx); err != nil {
		return Commit{}, err
	}
	return r.update(ctx, meta, fn)
}

// update is Update without the wait for the backlog: for the
// materialiser's own commits (mergeDisplaced), which would wait for
// itself.
func (r *Repo) update(ctx context.Context, meta Meta, fn func(tx *Tx) error) (Commit, error) {
	t, err := r.beginWrite(ctx, withOwn|writable)
	if err != nil {
		return Commit{}, err
	}
	defer t.end()
	unlock := t.end
	if id := meta.ID(); id != "" {
		if err := r.syncIDs(false); err != nil {
			return Commit{}, err
		}
		h, done, p, inFlight := r.toolIDs.lookup(id)
		switch {
		case inFlight: // the first call is still being written
			unlock()
			if err := r.committer.durable(p); err != nil {
				return Commit{}, err
			}
			if h, ok := p.merged[id]; ok { // it came with a merge (share.go)
				c, err := r.Commit(ctx, h.String())
				if err != nil {
					return Commit{}, err
				}
				return c, &AppliedError{ID: id, Commit: c}
			}
			return p.commit, &AppliedError{ID: id, Commit: p.commit}
		case done:
			unlock()
			c, err := r.Commit(ctx, h.String())
			if err != nil {
				return Commit{}, err
			}
			return c, &AppliedError{ID: id, Commit: c}
		}
	}
	var adopted *prepared
	for attempt := 0; ; attempt++ {
		tx := r.newTx()
		err := fn(tx)
		if look := tx.unchecked(); attempt < maxAdoptRounds && (len(look) > 0 || tx.checked == nil) {
			p, aerr := r.adoptDrift(repoPaths(look), false)
			if aerr != nil && !errors.Is(aerr, ErrNoChange) {
				err = aerr
			} else if p != nil {
				adopted = p
				continue // run fn again on what the operator wrote
			}
		}
		if err == nil {
			err = r.gaveUp(ctx.Err()) // the last moment a cancel stops the call
		}
		var p *prepared
		if err == nil {
			p, err = r.prepare(tx, meta)
		}
		if p != nil {
			r.scheduleIndex() // it needs the turn
		}
		unlock()
		if p == nil {
			if adopted != nil { // the operator's edit is committed all the same
				r.committer.durable(adopted)
			}
			return Commit{}, err
		}
		if err := r.committer.durable(p); err != nil {
			return Commit{}, err
		}
		return p.commit, nil
	}
}

// maxAdoptRounds bounds how often one Update commits hand edits before
// it goes ahead: an operator who keeps editing the same file cannot stall
// the model forever (the next round adopts the newer edit).
const maxAdoptRounds = 3

// newTx starts a transaction on the writer's tip. Called with the turn
// held.
func (r *Repo) newTx() *Tx {
	tip, tree := r.state.tipOf()
	return &Tx{View: View{r: r, root: tree, head: tip, pending: map[plumbing.Hash][]byte{}, reads: &[]string{}},
		base: tree, mirror: true}
}

func parentList(h plumbing.Hash) []plumbing.Hash {
	if h.IsZero() {
		return nil
	}
	return []plumbing.Hash{h}
}

// putFunc writes an object; base is, for a tree, the same folder's tree
// in the commit's parent (zero if none), which a pack may store it as a
// delta of.
type putFunc func(t plumbing.ObjectType, data []byte, base plumbing.Hash) (plumbing.Hash, error)

// writeTrees encodes and writes every folder of n not yet written, bottom
// up, and returns n's hash (the empty tree for nil). old is the tree n was
// made from (nil: none), whose folders are the new ones' bases.
func writeTrees(put putFunc, n, old *node) (plumbing.Hash, error) {
	if n == nil {
		return put(plumbing.TreeObject, nil, plumbing.ZeroHash)
	}
	if !n.isDir() || !n.hash.IsZero() {
		return n.hash, nil
	}
	for _, k := range n.kids {
		if !k.n.isDir() || !k.n.hash.IsZero() {
			continue // written already
		}
		if _, err := writeTrees(put, k.n, old.kid(k.name)); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	var base plumbing.Hash
	if old.isDir() {
		base = old.hash
	}
	h, err := put(plumbing.TreeObject, encodeTree(n), base)
	n.hash = h
	return h, err
}

// scheduleIndex rewrites .git/index IndexDelay after the first change it
// does not hold: under a steady stream of changes too, so that git's
// index (what `git status` compares with, what `git commit` is built from)
// is never more than about IndexDelay behind the branch. Called with the
// turn held.
func (r *Repo) scheduleIndex() {
	r.gitIndex.schedule(r.opt.IndexDelay, func() {
		if err := r.Flush(r.life); err != nil && !errors.Is(err, ErrClosed) {
			r.opt.Logf("gitmem: %v", scrubPaths(err))
		}
	})
}

// Flush writes .git/index now, so that `git status` is clean at once,
// after the start's look at every file for hand edits, when that is
// still under way (checkLater). Calls go on meanwhile: it holds neither the writer lock nor, while it
// writes the index, the materialiser's. Its wait for git's files to be
// brought up to date ends with ctx (ctx.Err()) or when Close begins
// (ErrClosed).
func (r *Repo) Flush(ctx context.Context) error {
	// The start's look at every file, under way, first: its adopt
	// commit, and what it read, are for git's files too.
	if err := r.awaitStartCheck(ctx); err != nil {
		return err
	}
	// A merge counted before the first flush is in git's files after it;
	// one counted later (the maintenance loop's, done meanwhile) is
	// written by a second flush. (Counting merges, not watching the head,
	// which every call under load moves.)
	merges := r.outside.merges()
	if err := r.flush(ctx); err != nil {
		return err
	}
	// The branch was moved outside gitmem: merged back now (or the merge
	// under way finishes), and git's files follow.
	if err := r.mergeDisplaced(ctx); err != nil {
		return err
	}
	if r.outside.merges() == merges {
		return nil
	}
	return r.flush(ctx)
}

// flush brings git's files up to what is committed and writes the index.
// Only the writer lock's holder does: a process without it has nothing
// to add. It was called with the turn held, and every call waited while it
// materialised a backlog and wrote a 10,000-entry index (under 64 HTTP
// clients, for up to 1-2 s every second); the index has its own lock.
func (r *Repo) flush(ctx context.Context) error {
	switch {
	case r.closed.Load():
		return ErrClosed
	case r.opt.ReadOnly || !r.lease.Held():
		return nil
	}
	dt, err := r.holdContext(ctx)
	if err != nil {
		return err
	}
	err = r.mat.materializeLocked(dt)
	dt.release()
	if err != nil {
		r.refuseAfter(err) // as the maintenance loop's failure does
		return err
	}
	r.gitMoved() // before the index git left, which tells what it did, is written over
	held, err := r.gitIndex.lockContext(ctx, r.life.Done())
	if err != nil {
		return r.gaveUp(err)
	}
	defer held.unlock()
	if !r.lease.Held() { // released meanwhile: the holder wrote the index
		return nil
	}
	return wrap("write the index", r.writeIndexHeld(held))
}

// Close makes everything durable in git's own files, writes the index and
// releases the repository; a one-command process packs first when it
// leaves many packs (packAfterCommand). Calls waiting for the writer turn or the
// writer lock (behind another process's gc, say) give up at once with
// ErrClosed; Close waits only for the calls under way in this process.
func (r *Repo) Close() error {
	r.packAfterCommand()
	r.cancel() // every wait for the collector, the turn or the lock files gives up
	// A background build of the history index gives up (it needs the turn to save).
	r.histIndex.stopBuild()
	r.collector.stopAll()                       // a collection running gives up
	r.collector.lock(context.Background(), nil) // cannot fail: no ctx, no closing
	defer r.collector.unlock()
	r.lease.Turn(context.Background(), nil) // cannot fail either
	t := &writerTurn{r: r}
	if r.closed.Load() {
		t.end()
		return nil
	}
	r.gitIndex.stopTimer()
	if r.deleted() {
		// Nothing to write back, nor to put back (that would make
		// the folder again, or say to repair it): the repository is
		// gone, with its write-ahead log and what it held.
		var err error
		if n := r.log.records(); n > 0 {
			err = &UnwrittenError{Changes: n, LogGone: true, Err: ErrDeleted}
		}
		r.shutdown(t)
		return err
	}
	var err error
	kept := r.mirror.handKept()
	if !r.lease.Held() && !r.opt.ReadOnly && (kept || r.gitMovedAway()) {
		// git took HEAD or the branch away while the lock was free: put
		// back under it (settleIn), so that git's view at exit is whole.
		// Hand edits kept and not yet taken are merged, or saved for the
		// next start, under it. Only if the lock is free: Close does not
		// wait for another process (its holder or the next start puts
		// them back).
		if oerr := r.ownIfFree(t); oerr != nil {
			r.opt.Errorf("gitmem: %v", oerr)
		}
	}
	if r.lease.Held() {
		r.putHeadBack()
		r.committer.drain()
		// A commit made with git meanwhile is put aside for the next
		// start to merge back, as release does (N9 F0).
		r.gitMoved()
		r.adoptKept()
		r.mirror.saveKept(r.objects.readBlob)
		kept := 0
		err = r.checkpoint()
		if err == nil {
			r.repairBeforeLettingGo()
		}
		held := r.gitIndex.lock() // until the writer lock is given up below
		if err == nil {
			err = wrap("write the index", r.writeIndexHeld(held))
		} else {
			kept = r.log.records()
		}
		gone := kept > 0 && r.log.gone()
		r.closeLog(true) // kept, empty after a checkpoint: the next start opens it again
		r.mat.letGo()
		if err == nil {
			r.markClean(held)
		}
		if kept > 0 {
			// Kept in the log for the next start: say how many of them
			// git's files lack (all it holds, if that cannot be told).
			ue := &UnwrittenError{Changes: kept, LogGone: gone, Err: err}
			if u, uerr := unrecoveredIn(r.gitDir, r.branch, r.objects.st); uerr == nil && u.Changes > 0 {
				ue.Changes, ue.IDs = u.Changes, u.IDs
			}
			err = ue
		}
		r.lease.Release()
		held.unlock()
	}
	r.shutdown(t)
	return err
}

// ownIfFree is own for Close: the writer lock is taken only if no
// process holds it. Called with the turn held.
func (r *Repo) ownIfFree(t *writerTurn) error {
	ok, err := r.lease.TryAcquire()
	if err != nil {
		return wrap("lock the repository", err)
	}
	if !ok {
		r.opt.Logf("gitmem: another process holds the writer lock: it puts back what git moved")
		return nil
	}
	dropClean(r.gitDir)
	if err := r.settleIn(t, nil); err != nil {
		r.lease.Release()
		return err
	}
	return nil
}

// shutdown marks the Repo closed and releases everything it holds; the
// background work stops where it is. Called with the turn held, which it
// gives back. (Close checkpoints first; a test's crash does not.)
func (r *Repo) shutdown(t *writerTurn) {
	r.cancel()
	r.gitIndex.stopTimer()
	r.closed.Store(true)
	r.lease.Disown() // the lock file is let go when it is closed, below
	t.end()
	r.maint.shutdown()
	r.histIndex.stopBuild()
	r.mirror.close()
	r.lease.Close()
	r.closeLog(true)
	r.objects.lock()
	r.objects.st.Close()
	r.objects.unlock()
}

// Dir is the repository's folder.
func (r *Repo) Dir() string { return r.dir }

// Adopted reports whether this Open adopted a git repository gitmem did
// not create (Options.Adopt), and the branch gitmem now commits onto. A
// repository gitmem created, or adopted by an earlier open, reports false.
func (r *Repo) Adopted() (branch string, ok bool) {
	return r.branch.Short(), r.adopted
}

// Commit returns the commit a revision names: a full or abbreviated hash,
// or anything go-git's revision syntax resolves (HEAD~2, main).
func (r *Repo) Commit(ctx context.Context, rev string) (Commit, error) {
	if err := r.awaitStartCheck(ctx); err != nil {
		return Commit{}, err
	}
	if err := r.gitUpToDate(ctx); err != nil {
		return Commit{}, err
	}
	return r.hist().commit(rev)
}

// commit is Commit, once git's files are up to date.
func (hr historyReader) commit(rev string) (Commit, error) {
	hr.o.lock()
	defer hr.o.unlock()
	h, err := hr.resolve(rev)
	if err != nil {
		return Commit{}, err
	}
	c, err := hr.o.st.Commit(h)
	if err != nil && plumbing.IsHash(rev) {
		return Commit{}, ErrUnknownRev // a hash the user typed: no commit of this memory
	}
	if err != nil {
		return Commit{}, wrap("read commit", err)
	}
	return commitOf(c), nil
}

// resolve turns a revision into a commit hash. Called with objects.mu held.
func (hr historyReader) resolve(rev string) (plumbing.Hash, error) {
	if plumbing.IsHash(rev) {
		return plumbing.NewHash(rev), nil
	}
	if h, ok := hr.resolveAncestor(rev); ok {
		return h, nil
	}
	if h, ok := hr.expandCommit(rev); ok {
		return h, nil
	}
	if !refRevision(rev) {
		return plumbing.ZeroHash, ErrUnknownRev
	}
	if !refFilesReadable(hr.o.st.Dir, rev) {
		return plumbing.ZeroHash, ErrUnknownRev
	}
	repo, err := git.Open(hr.o.st.Storage(), nil)
	if err != nil {
		return plumbing.ZeroHash, wrap("open the repository", err)
	}
	var h *plumbing.Hash
	if err := hr.o.st.Relisted(func() (err error) {
		h, err = repo.ResolveRevision(plumbing.Revision(rev))
		return err
	}); err != nil {
		return plumbing.ZeroHash, ErrUnknownRev
	}
	return *h, nil
}

// refRevision's files: go-git's ResolveRevision reads the ref rev names
// (before its ancestry steps) at each of git's rules (refs/NAME,
// refs/heads/NAME, ...) with a blocking open, which waits on a named pipe
// put there. refFilesReadable is false when one of those files is
// neither a regular file nor a folder (which go-git fails to read, the
// revision then unknown), so that the pipe is taken as such a folder.
var refRules = []string{"%s", "refs/%s", "refs/tags/%s", "refs/heads/%s", "refs/remotes/%s", "refs/remotes/%s/HEAD"}

func refFilesReadable(gitDir, rev string) bool {
	base, _, _ := strings.Cut(rev, "~")
	base, _, _ = strings.Cut(base, "^")
	if base == "@" {
		base = "HEAD"
	}
	for _, rule := range refRules {
		fi, err := os.Stat(filepath.Join(gitDir, filepath.FromSlash(fmt.Sprintf(rule, base))))
		if err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
			return false
		}
	}
	return true
}

// refRevision reports whether rev is a form go-git resolves as git does:
// a ref name (HEAD, main, origin/main, @) or a hash, with ~N and ^N steps
// after it. go-git's ResolveRevision skips what it does not know
// (HEAD@{1}, HASH:path, HASH^{tree}) and names the commit before it: a
// revert of HEAD@{1} reverted HEAD. gitmem names none of those.
func refRevision(rev string) bool {
	base := rev
	if i := strings.IndexAny(rev, "~^"); i >= 0 {
		if !isAncestrySteps(rev[i:]) {
			return false
		}
		base = rev[:i]
	}
	if base == "@" {
		return true
	}
	for i := 0; i < len(base); i++ {
		c := base[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return false
		}
	}
	return base != "" && !strings.Contains(base, "..")
}

// resolveAncestor resolves HEAD (or @) alone, or HEAD, a full hash or an
// abbreviated one (expandCommit) followed by ~N and ^N steps (restore
// --to HEAD~1), reading the commits with gitmem's own object reader:
// go-git's ResolveRevision reads them through its storage, whose first
// read loads the pack's whole index (90 ms in a 335 MB pack; show HEAD
// took 40 ms in the bench's 100,000 commits). ok is false for any other
// form, or a step that leads nowhere (go-git then says why). Called with
// objects.mu held.
func (hr historyReader) resolveAncestor(rev string) (plumbing.Hash, bool) {
	i := strings.IndexAny(rev, "~^")
	if i < 0 {
		i = len(rev)
		if rev != "HEAD" && rev != "@" {
			return plumbing.ZeroHash, false
		}
	}
	base, rest := rev[:i], rev[i:]
	var h plumbing.Hash
	switch {
	case base == "HEAD" || base == "@":
		if _, _, moved := headMoved(hr.gitDir, hr.branch); moved {
			return plumbing.ZeroHash, false // git checkout by hand: go-git reads HEAD as git does
		}
		var err error
		if h, err = gd.ReadRef(hr.gitDir, hr.branch); err != nil {
			return plumbing.ZeroHash, false
		}
	case plumbing.IsHash(base):
		h = plumbing.NewHash(base)
	default:
		var ok bool
		if h, ok = hr.expandCommit(base); !ok {
			return plumbing.ZeroHash, false
		}
	}
	parent := func(i int) bool { // h becomes its i-th parent (0: itself)
		c, err := hr.o.st.Commit(h)
		if err != nil || i > len(c.ParentHashes) {
			return false
		}
		if i > 0 {
			h = c.ParentHashes[i-1]
		}
		return true
	}
	for rest != "" {
		op := rest[0]
		rest = rest[1:]
		digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
		n := 1
		if digits > 0 {
			var err error
			if n, err = strconv.Atoi(rest[:digits]); err != nil || digits > 6 {
				return plumbing.ZeroHash, false
			}
		}
		rest = rest[digits:]
		switch op {
		case '^':
			if !parent(n) {
				return plumbing.ZeroHash, false
			}
		case '~':
			for range n {
				if !parent(1) {
					return plumbing.ZeroHash, false
				}
			}
		default:
			return plumbing.ZeroHash, false
		}
	}
	return h, parent(0)
}

// expandCommit resolves an abbreviated hash (what gitmem log shows) that
// one object alone begins with, a commit, with gitmem's own pack indexes:
// go-git's ResolveRevision loads a pack's whole index and maps every
// object's offset for it (90 ms in a 335 MB pack). As go-git (and git),
// a hash is preferred to a ref of the same name. Anything else (no such
// object, several, not a commit) is left to go-git, which says why.
// Called with objects.mu held.
func (hr historyReader) expandCommit(rev string) (plumbing.Hash, bool) {
	h, ok := hr.o.st.Expand(rev)
	if !ok {
		return plumbing.ZeroHash, false
	}
	if _, err := hr.o.st.Commit(h); err != nil {
		return plumbing.ZeroHash, false
	}
	return h, true
}

// ReadFileAt returns the content of a memory file (relative to memories/)
// as it was at a commit.
func (r *Repo) ReadFileAt(ctx context.Context, rev, p string) ([]byte, error) {
	if err := r.awaitStartCheck(ctx); err != nil {
		return nil, err
	}
	if err := r.gitUpToDate(ctx); err != nil {
		return nil, err
	}
	return r.hist().readFileAt(rev, p)
}

// readFileAt is ReadFileAt, once git's files are up to date.
func (hr historyReader) readFileAt(rev, p string) ([]byte, error) {
	hr.o.lock()
	defer hr.o.unlock()
	h, err := hr.resolve(rev)
	if err != nil {
		return nil, err
	}
	c, err := hr.o.st.Commit(h)
	if err != nil {
		return nil, wrap("read commit", err)
	}
	t, err := hr.o.st.Tree(c.TreeHash)
	if err != nil {
		return nil, wrap("read tree", err)
	}
	e, ok := hr.entryAt(t, memDir+"/"+p)
	if !ok || !e.Mode.IsFile() {
		return nil, ErrNotExist
	}
	data, err := hr.o.st.Blob(e.Hash)
	if err != nil {
		return nil, objectError("blob", e.Hash, memDir+"/"+p, err)
	}
	return data, nil
}

// entryAt finds the entry at the repository path p beneath tree t,
// reading the folders on the way with gitmem's own object reader:
// go-git's Tree.FindEntry reads them through go-git's storage, whose
// first read loads the whole index of a pack and maps every object's
// offset (0.35 s for a revert's one file in a 335 MB pack). Called with
// objects.mu held.
func (hr historyReader) entryAt(t *object.Tree, p string) (object.TreeEntry, bool) {
	for {
		name, rest, more := strings.Cut(p, "/")
		i := slices.IndexFunc(t.Entries, func(e object.TreeEntry) bool { return e.Name == name })
		switch {
		case i < 0:
			return object.TreeEntry{}, false
		case !more:
			return t.Entries[i], true
		case t.Entries[i].Mode != filemode.Dir:
			return object.TreeEntry{}, false
		}
		sub, err := hr.o.st.Tree(t.Entries[i].Hash)
		if err != nil {
			return object.TreeEntry{}, false
		}
		t, p = sub, rest
	}
}

// mergeTrailers sets each of extra's values in base (copied), appending the
// keys base does not have.
func mergeTrailers(base, extra []Trailer) []Trailer {
	out := append([]Trailer(nil), base...)
next:
	for _, e := range extra {
		for i := range out {
			if out[i].Key == e.Key {
				out[i].Value = e.Value
				continue next
			}
		}
		out = append(out, e)
	}
	return out
}
