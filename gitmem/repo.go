package gitmem

import (
	"encoding/json"
	"errors"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

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
	// hand while gitmem was stopped (default: user.name and user.email from
	// git config, else operator <operator@gitmem.invalid>).
	Operator Signature
	// Now is the clock for commit times (default: time.Now).
	Now func() time.Time
	// IndexDelay is how long after the last change .git/index is rewritten
	// (default: 1s). The index only lets `git status` skip re-reading files.
	IndexDelay time.Duration
	// Logf receives operational messages (default: the standard logger).
	Logf func(format string, args ...any)
	// ReadOnly opens the repository for reading its history only: no lock,
	// no crash repair, no adoption of hand edits, and Update fails.
	ReadOnly bool
}

func (o *Options) defaults(dir string) {
	if o.Author == (Signature{}) {
		o.Author = Signature{"Claude", "claude@gitmem.invalid"}
	}
	if o.Committer == (Signature{}) {
		o.Committer = Signature{"gitmem", "gitmem@gitmem.invalid"}
	}
	if o.Operator == (Signature{}) {
		o.Operator = gitIdentity(dir)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.IndexDelay == 0 {
		o.IndexDelay = time.Second
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
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
	if r, err := git.PlainOpen(dir); err == nil {
		if c, err := r.Config(); err == nil {
			if c.User.Name != "" {
				id.Name = c.User.Name
			}
			if c.User.Email != "" {
				id.Email = c.User.Email
			}
		}
	}
	return id
}

// Repo is a gitmem repository: a git repository whose memories/ folder
// holds the memory files. Every change is one commit, written through the
// object store (no worktree scan), then mirrored to the worktree.
//
// A Repo is safe for concurrent use. Writers are serialised, within the
// process by a mutex and across processes by a lock file; readers work on
// immutable snapshots and never wait for a commit's fsyncs.
type Repo struct {
	dir    string
	gitDir string
	opt    Options
	wt     *worktree
	flock  *fileLock

	wmu sync.Mutex // one writer in this process; guards the fields below it
	idx *time.Timer

	omu    sync.Mutex // go-git's storage is not safe for concurrent use
	obj    *objects
	branch plumbing.ReferenceName

	hmu        sync.Mutex // guards the history index
	hist       []histRec
	histLoaded bool

	smu    sync.RWMutex // guards the published state
	loaded bool
	head   plumbing.Hash
	tree   *node
	ids    map[string]plumbing.Hash // Tool-Use-Id -> commit
	closed bool
}

// Init creates a gitmem repository in dir, or adopts what is there: a
// plain folder of memory files (the SDK's file backend layout, dir/memories)
// becomes the first commit; an existing repository is opened as is. It
// reports whether a new repository was created.
func Init(dir string, opt Options) (*Repo, bool, error) {
	created := false
	if _, err := os.Stat(filepath.Join(dir, ".git")); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, dirMode); err != nil {
			return nil, false, wrap("create the repository folder", err)
		}
		_, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
			InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
		})
		if err != nil {
			return nil, false, wrap("initialise the git repository", err)
		}
		// The objects hold the memory's content: keep them as private as
		// the memory files themselves.
		if err := os.Chmod(filepath.Join(dir, ".git"), dirMode); err != nil {
			return nil, false, wrap("initialise the git repository", err)
		}
		created = true
	}
	r, err := Open(dir, opt)
	return r, created, err
}

// Open opens the gitmem repository in dir. Under the writer lock it first
// finishes any change a crash interrupted (the worktree is made to match
// HEAD), then commits changes an operator made by hand under memories/
// while gitmem was stopped, attributed to the operator. A repository
// without commits gets its first commit here.
func Open(dir string, opt Options) (*Repo, error) {
	opt.defaults(dir)
	gitDir := filepath.Join(dir, ".git")
	if fi, err := os.Stat(gitDir); err != nil || !fi.IsDir() {
		return nil, ErrNotRepository
	}
	for _, d := range []string{filepath.Join(gitDir, "gitmem", "tmp"), filepath.Join(dir, memDir)} {
		if err := os.MkdirAll(d, dirMode); err != nil {
			return nil, wrap("prepare the repository", err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, wrap("open the repository", err)
	}
	fl, err := openFileLock(filepath.Join(gitDir, "gitmem", "lock"))
	if err != nil {
		root.Close()
		return nil, wrap("open the lock file", err)
	}
	r := &Repo{
		dir:    dir,
		gitDir: gitDir,
		opt:    opt,
		wt:     &worktree{root: root, tmpAbs: filepath.Join(gitDir, "gitmem", "tmp"), tmpRel: ".git/gitmem/tmp"},
		flock:  fl,
		obj:    openObjects(gitDir),
		ids:    map[string]plumbing.Hash{},
	}
	if opt.ReadOnly {
		if r.branch, err = r.obj.branch(); err != nil {
			r.wt.root.Close()
			fl.close()
			return nil, wrap("read HEAD", err)
		}
		return r, nil
	}
	if err := r.start(); err != nil {
		r.wt.root.Close()
		fl.close()
		return nil, err
	}
	return r, nil
}

func (r *Repo) start() error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if err := r.flock.lock(); err != nil {
		return wrap("lock the repository", err)
	}
	defer r.flock.unlock()
	branch, err := r.obj.branch()
	if err != nil {
		return wrap("read HEAD", err)
	}
	r.branch = branch
	r.clearStaleLocks()
	r.clearTempFiles()
	if err := r.refresh(true); err != nil {
		return err
	}
	if err := r.recover(); err != nil {
		return err
	}
	if err := r.adopt(); err != nil {
		return err
	}
	return wrap("write the index", writeIndex(r.gitDir, r.dir, r.snapshotTree()))
}

// clearStaleLocks removes lock files a killed process left behind. We hold
// the writer lock, so no gitmem process is using them; a lock older than a
// few seconds is not a live git command's either.
func (r *Repo) clearStaleLocks() {
	for _, p := range []string{
		filepath.Join(r.gitDir, filepath.FromSlash(string(r.branch))) + ".lock",
		filepath.Join(r.gitDir, "index.lock"),
	} {
		if fi, err := os.Stat(p); err == nil && time.Since(fi.ModTime()) > staleLock {
			r.opt.Logf("gitmem: removing stale lock file %s", filepath.Base(p))
			os.Remove(p)
		}
	}
}

// clearTempFiles removes the temporary files a killed gitmem left: we hold
// the writer lock, so no gitmem process is writing them now. (git's own
// temporary files have other names and are left alone.)
func (r *Repo) clearTempFiles() {
	var junk []string
	for _, pattern := range []string{
		filepath.Join(r.gitDir, "gitmem", "tmp", "*"),
		filepath.Join(r.gitDir, "gitmem", "pending-*"),
		filepath.Join(r.gitDir, "gitmem", "history-*"),
		filepath.Join(r.gitDir, "packed-refs-*"),
		filepath.Join(r.gitDir, "objects", "??", tmpObjPrefix+"*"),
	} {
		m, _ := filepath.Glob(pattern)
		junk = append(junk, m...)
	}
	for _, p := range junk {
		os.RemoveAll(p)
	}
	if len(junk) > 0 {
		r.opt.Logf("gitmem: removed %d temporary file(s) left by an interrupted run", len(junk))
	}
}

// refresh loads HEAD if it moved since we last looked (another process
// committed). Unchanged subtrees are reused, so this costs what changed.
// persist says the caller holds the writer lock (the history index file
// may be written). Called with wmu held.
func (r *Repo) refresh(persist bool) error {
	r.omu.Lock()
	head, err := r.obj.head(r.branch)
	r.omu.Unlock()
	if err != nil {
		return wrap("read the branch", err)
	}
	r.smu.RLock()
	same, old := r.loaded && head == r.head, r.tree
	r.smu.RUnlock()
	if same {
		return nil
	}
	var tree *node
	ids := map[string]plumbing.Hash{}
	if !head.IsZero() {
		r.omu.Lock()
		c, err := r.obj.commit(head)
		if err == nil {
			tree, err = r.loadTree(c.TreeHash, old)
		}
		r.omu.Unlock()
		if err != nil {
			return wrap("read the tree", err)
		}
		hist, err := r.history(head, persist, nil)
		if err != nil {
			return err
		}
		for i := range hist {
			if id := hist[i].id; id != "" {
				ids[id] = hist[i].hash
			}
		}
	}
	r.smu.Lock()
	r.head, r.tree, r.ids, r.loaded = head, tree, ids, true
	r.smu.Unlock()
	return nil
}

// loadTree reads a tree object into nodes, reusing old's nodes where the
// hashes match. Called with omu held.
func (r *Repo) loadTree(h plumbing.Hash, old *node) (*node, error) {
	if old != nil && old.isDir() && old.hash == h {
		return old, nil
	}
	t, err := r.obj.tree(h)
	if err != nil {
		return nil, err
	}
	kids := make(map[string]*node, len(t.Entries))
	for _, e := range t.Entries {
		var prev *node
		if old != nil && old.isDir() {
			prev = old.kids[e.Name]
		}
		switch {
		case e.Mode == filemode.Dir:
			k, err := r.loadTree(e.Hash, prev)
			if err != nil {
				return nil, err
			}
			kids[e.Name] = k
		case prev != nil && prev.mode == e.Mode && prev.hash == e.Hash:
			kids[e.Name] = prev
		default:
			k := &node{mode: e.Mode, hash: e.Hash}
			if k.isFile() {
				if k.size, err = r.obj.size(e.Hash); err != nil {
					return nil, err
				}
			}
			kids[e.Name] = k
		}
	}
	n := newDir(kids)
	n.hash = h
	return n, nil
}

// journal is written (and fsynced) before a commit's ref update and
// removed once the worktree mirrors it. Finding one at start means a crash
// came between: the paths it names are made to match HEAD, whichever side
// of the ref update the crash fell.
type journal struct {
	Paths []string `json:"paths"`
}

func (r *Repo) journalPath() string { return filepath.Join(r.gitDir, "gitmem", "pending") }

func (r *Repo) writeJournal(paths []string) error {
	data, _ := json.Marshal(journal{Paths: paths})
	dir := filepath.Dir(r.journalPath())
	if err := writeFileSync(dir, "pending-", r.journalPath(), data, 0o600); err != nil {
		return err
	}
	return syncDir(dir)
}

// recover finishes the worktree side of an interrupted commit.
func (r *Repo) recover() error {
	data, err := os.ReadFile(r.journalPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return wrap("read the journal", err)
	}
	// A commit was under way: a branch lock file, if any, is its own.
	os.Remove(filepath.Join(r.gitDir, filepath.FromSlash(string(r.branch))) + ".lock")
	var j journal
	if err := json.Unmarshal(data, &j); err != nil {
		r.opt.Logf("gitmem: ignoring an unreadable journal; the whole worktree will be checked")
		j.Paths = []string{memDir}
	}
	r.opt.Logf("gitmem: completing an interrupted change to %d path(s)", len(j.Paths))
	tree := r.snapshotTree()
	for _, p := range j.Paths {
		if err := r.wt.sync(p, lookup(tree, p), r.readBlob); err != nil {
			return wrap("repair the worktree", err)
		}
	}
	return wrap("remove the journal", os.Remove(r.journalPath()))
}

// adopt commits what an operator changed under memories/ while gitmem was
// stopped. A repository without commits gets its first commit here, with
// whatever files it already holds (the SDK file backend's layout).
func (r *Repo) adopt() error {
	found, err := r.wt.scan(func(rel string, dir bool) bool {
		_, err := policy.ParsePath(policy.Display(rel))
		return err != nil
	})
	if err != nil {
		return wrap("scan the worktree", err)
	}
	tree := r.snapshotTree()
	var changed []string
	for rel, h := range found {
		if n := lookup(tree, memDir+"/"+rel); !n.isFile() || n.hash != h {
			changed = append(changed, rel)
		}
	}
	var removed []string
	walkFiles(lookup(tree, memDir), "", func(rel string, _ *node) {
		if _, ok := found[rel]; !ok {
			removed = append(removed, rel)
		}
	})
	first := r.head.IsZero()
	if !first && len(changed) == 0 && len(removed) == 0 {
		return nil
	}
	meta := Meta{Subject: "memory: adopt changes made outside gitmem", Author: r.opt.Operator,
		Trailers: []Trailer{{TrailerCommand, "adopt"}}}
	if first {
		meta = Meta{Subject: "memory: init", Author: r.opt.Operator, Trailers: []Trailer{{TrailerCommand, "init"}}}
	}
	tx := r.newTx()
	tx.mirror = false
	for _, rel := range slices.Sorted(slices.Values(changed)) {
		data, err := r.wt.root.ReadFile(memDir + "/" + rel)
		if err != nil {
			return wrap("read "+rel, err)
		}
		if err := tx.WriteFile(rel, data); err != nil {
			return wrap("adopt "+rel, err)
		}
		meta.Trailers = append(meta.Trailers, Trailer{TrailerPath, policy.Display(rel)})
	}
	for _, rel := range slices.Sorted(slices.Values(removed)) {
		if err := tx.Remove(rel); err != nil {
			return wrap("adopt the removal of "+rel, err)
		}
		meta.Trailers = append(meta.Trailers, Trailer{TrailerPath, policy.Display(rel)})
	}
	if !first {
		r.opt.Logf("gitmem: committing %d file(s) changed outside gitmem", len(changed)+len(removed))
	}
	_, err = r.commit(tx, meta)
	return err
}

func (r *Repo) snapshotTree() *node {
	r.smu.RLock()
	defer r.smu.RUnlock()
	return r.tree
}

func (r *Repo) readBlob(h plumbing.Hash) ([]byte, error) {
	r.omu.Lock()
	defer r.omu.Unlock()
	return r.obj.blob(h)
}

// Snapshot returns a consistent, immutable view of the memory at HEAD.
// When another process has moved HEAD, the new state is loaded first.
func (r *Repo) Snapshot() (*View, error) {
	r.omu.Lock()
	head, err := r.obj.head(r.branch)
	r.omu.Unlock()
	if err != nil {
		return nil, wrap("read the branch", err)
	}
	r.smu.RLock()
	closed, cur := r.closed, r.head
	r.smu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if head != cur {
		r.wmu.Lock()
		err := r.refresh(false)
		r.wmu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	r.smu.RLock()
	defer r.smu.RUnlock()
	return &View{r: r, root: r.tree, head: r.head}, nil
}

// Update runs fn on a transaction over HEAD and, if fn succeeds, commits
// what it changed as exactly one commit (also when nothing changed), then
// mirrors it to the worktree. If fn fails nothing is written. When meta
// carries a Tool-Use-Id that already has a commit, fn is not run and an
// *AppliedError names that commit.
//
// The commit is durable when Update returns: objects are fsynced before
// the branch moves, the branch moves atomically, and the worktree files
// are fsynced.
func (r *Repo) Update(meta Meta, fn func(tx *Tx) error) (Commit, error) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.smu.RLock()
	closed := r.closed
	r.smu.RUnlock()
	if closed {
		return Commit{}, ErrClosed
	}
	if r.opt.ReadOnly {
		return Commit{}, ErrReadOnly
	}
	if err := r.flock.lock(); err != nil {
		return Commit{}, wrap("lock the repository", err)
	}
	defer r.flock.unlock()
	if err := r.refresh(true); err != nil {
		return Commit{}, err
	}
	if id := meta.ID(); id != "" {
		r.smu.RLock()
		h, ok := r.ids[id]
		r.smu.RUnlock()
		if ok {
			c, err := r.Commit(h.String())
			if err != nil {
				return Commit{}, err
			}
			return c, &AppliedError{ID: id, Commit: c}
		}
	}
	tx := r.newTx()
	if err := fn(tx); err != nil {
		return Commit{}, err
	}
	c, err := r.commit(tx, meta)
	if err == nil {
		r.scheduleIndex()
	}
	return c, err
}

func (r *Repo) newTx() *Tx {
	r.smu.RLock()
	defer r.smu.RUnlock()
	return &Tx{View: View{r: r, root: r.tree, head: r.head, pending: map[plumbing.Hash][]byte{}}, mirror: true}
}

// commit writes tx as one commit on HEAD. Called with wmu and the file
// lock held.
func (r *Repo) commit(tx *Tx, meta Meta) (Commit, error) {
	ow := newObjectWriter(r.gitDir)
	for _, data := range tx.pending {
		if _, err := ow.write(plumbing.BlobObject, data); err != nil {
			return Commit{}, wrap("write a blob", err)
		}
	}
	treeHash, err := writeTrees(ow.write, tx.root)
	if err != nil {
		return Commit{}, wrap("write the trees", err)
	}
	author := meta.Author
	if author.Name == "" {
		author.Name = r.opt.Author.Name
	}
	if author.Email == "" {
		author.Email = r.opt.Author.Email
	}
	when := r.opt.Now()
	meta.Trailers = append(mergeTrailers(meta.Trailers, tx.trailers), tx.extra...)
	if tx.subject != "" {
		meta.Subject = tx.subject
	}
	msg := meta.message()
	raw, err := encodeCommit(treeHash, tx.head, author, r.opt.Committer, when, msg)
	if err != nil {
		return Commit{}, wrap("encode the commit", err)
	}
	h, err := ow.write(plumbing.CommitObject, raw)
	if err != nil {
		return Commit{}, wrap("write the commit", err)
	}
	if err := ow.sync(); err != nil {
		return Commit{}, wrap("sync the objects", err)
	}
	// The journal goes first even when no path changes: at start it also
	// says that a branch lock file is ours to remove.
	paths := tx.touched()
	if !tx.mirror {
		paths = nil
	}
	if err := r.writeJournal(paths); err != nil {
		return Commit{}, wrap("write the journal", err)
	}
	r.omu.Lock()
	err = r.obj.updateRef(r.branch, tx.head, h)
	r.omu.Unlock()
	if err != nil {
		os.Remove(r.journalPath())
		return Commit{}, wrap("update the branch", err)
	}
	// Committed. From here on nothing may report failure: the change is
	// in history, and a worktree that could not follow is repaired from
	// the journal at the next start.
	r.smu.Lock()
	oldRoot := r.tree
	r.head, r.tree = h, tx.root
	if id := meta.ID(); id != "" {
		r.ids[id] = h
	}
	r.smu.Unlock()
	_, body, trailers := parseMessage(msg)
	subject := oneLine(meta.Subject)
	r.record(newRec(h, tx.head, when, author, subject, trailers), oldRoot, tx.root)
	if err := tx.mirrorTo(r.wt, len(paths) > 0); err != nil {
		r.opt.Logf("gitmem: the worktree could not follow commit %s (%v); it will be repaired at the next start", h, err)
	} else {
		os.Remove(r.journalPath())
	}
	return Commit{Hash: h.String(), Parents: parentList(tx.head), Author: author, Committer: r.opt.Committer,
		Time: when, Subject: subject, Body: body, Trailers: trailers}, nil
}

// record appends a commit gitmem just made to the history index, with
// the files that differ between the trees before and after it.
func (r *Repo) record(rec histRec, oldRoot, newRoot *node) {
	diffNodes(lookup(oldRoot, memDir), lookup(newRoot, memDir), "", rec.change)
	rec.sortPaths()
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if !r.histLoaded || r.histTip() != rec.parent {
		return // the next history() call catches up from git
	}
	r.hist = append(r.hist, rec)
	r.saveHistory(rec.parent, true, r.hist[len(r.hist)-1:])
}

func parentList(h plumbing.Hash) []string {
	if h.IsZero() {
		return nil
	}
	return []string{h.String()}
}

// writeTrees encodes and writes every folder of n not yet written, bottom
// up, and returns n's hash (the empty tree for nil).
func writeTrees(put func(plumbing.ObjectType, []byte) (plumbing.Hash, error), n *node) (plumbing.Hash, error) {
	if n == nil {
		return put(plumbing.TreeObject, nil)
	}
	if !n.isDir() || !n.hash.IsZero() {
		return n.hash, nil
	}
	for _, k := range n.kids {
		if _, err := writeTrees(put, k); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	h, err := put(plumbing.TreeObject, encodeTree(n))
	n.hash = h
	return h, err
}

// scheduleIndex rewrites .git/index once the repository has been idle for
// IndexDelay. Called with wmu held.
func (r *Repo) scheduleIndex() {
	if r.idx != nil {
		r.idx.Reset(r.opt.IndexDelay)
		return
	}
	r.idx = time.AfterFunc(r.opt.IndexDelay, func() {
		if err := r.Flush(); err != nil && !errors.Is(err, ErrClosed) {
			r.opt.Logf("gitmem: %v", err)
		}
	})
}

// Flush writes .git/index now, so that `git status` is clean at once.
func (r *Repo) Flush() error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	return r.flush()
}

func (r *Repo) flush() error {
	r.smu.RLock()
	closed := r.closed
	r.smu.RUnlock()
	if closed {
		return ErrClosed
	}
	if r.opt.ReadOnly {
		return nil
	}
	if err := r.flock.lock(); err != nil {
		return wrap("lock the repository", err)
	}
	defer r.flock.unlock()
	if err := r.refresh(true); err != nil {
		return err
	}
	return wrap("write the index", writeIndex(r.gitDir, r.dir, r.snapshotTree()))
}

// Close writes the index and releases the repository.
func (r *Repo) Close() error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if r.idx != nil {
		r.idx.Stop()
	}
	err := r.flush()
	if errors.Is(err, ErrClosed) {
		return nil
	}
	r.smu.Lock()
	r.closed = true
	r.smu.Unlock()
	r.wt.root.Close()
	r.flock.close()
	r.omu.Lock()
	r.obj.st.Close()
	r.omu.Unlock()
	return err
}

// Dir is the repository's folder.
func (r *Repo) Dir() string { return r.dir }

// Commit returns the commit a revision names: a full or abbreviated hash,
// or anything go-git's revision syntax resolves (HEAD~2, main).
func (r *Repo) Commit(rev string) (Commit, error) {
	r.omu.Lock()
	defer r.omu.Unlock()
	h, err := r.resolve(rev)
	if err != nil {
		return Commit{}, err
	}
	c, err := r.obj.commit(h)
	if err != nil {
		return Commit{}, wrap("read commit", err)
	}
	return commitOf(c), nil
}

// resolve turns a revision into a commit hash. Called with omu held.
func (r *Repo) resolve(rev string) (plumbing.Hash, error) {
	if plumbing.IsHash(rev) {
		return plumbing.NewHash(rev), nil
	}
	repo, err := git.Open(r.obj.st, nil)
	if err != nil {
		return plumbing.ZeroHash, wrap("open the repository", err)
	}
	h, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return plumbing.ZeroHash, ErrUnknownRev
	}
	return *h, nil
}

// ReadFileAt returns the content of a memory file (relative to memories/)
// as it was at a commit.
func (r *Repo) ReadFileAt(rev, p string) ([]byte, error) {
	r.omu.Lock()
	defer r.omu.Unlock()
	h, err := r.resolve(rev)
	if err != nil {
		return nil, err
	}
	c, err := r.obj.commit(h)
	if err != nil {
		return nil, wrap("read commit", err)
	}
	t, err := r.obj.tree(c.TreeHash)
	if err != nil {
		return nil, wrap("read tree", err)
	}
	e, err := t.FindEntry(memDir + "/" + p)
	if err != nil || !e.Mode.IsFile() {
		return nil, ErrNotExist
	}
	data, err := r.obj.blob(e.Hash)
	return data, wrap("read blob", err)
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
