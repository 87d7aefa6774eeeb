package stores

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
)

// Errors of the stores directory. Callers test them with errors.Is.
var (
	ErrNotFound = errors.New("no such store")
	ErrExists   = errors.New("a store with this name already exists")
	ErrArchived = errors.New("the store is archived")
	// ErrInTheWay: a create found a file, not a folder, at the store's
	// name in the stores folder.
	ErrInTheWay = errors.New("a file that is not a store is in the way")
)

// ErrOutOfFiles is a store that could not be opened because the server
// had no file descriptor to spare: the process's limit (EMFILE) or the
// system's (ENFILE). Nothing is wrong with the store, and nothing was
// changed: the same request a moment later may be answered.
var ErrOutOfFiles = errors.New("the server has too many files open")

// OutOfFiles is what a client of the server is told of a request that
// failed on store name for want of file descriptors: while the store
// opened (ErrOutOfFiles), or later, before anything was changed (a
// failure gitmem.OutOfFiles says so of; a request whose change was
// committed does not fail). A retry helps. ok is false for any other
// error.
func OutOfFiles(name string, err error) (msg string, ok bool) {
	switch {
	case errors.Is(err, ErrOutOfFiles):
		return "store " + name + " could not be opened: " + outOfFilesMsg, true
	case gitmem.OutOfFiles(err):
		return "store " + name + " could not complete the request: " + outOfFilesMsg, true
	}
	return "", false
}

const outOfFilesMsg = "the server has too many files open; nothing was changed; retry after 1 s"

// OpenError is a store whose repository could not be opened: damaged
// (Err is then a *gitmem.DamagedError), or its folder not readable. Err
// is for an operator: it may name host files.
type OpenError struct {
	Name string
	Err  error
}

func (e *OpenError) Error() string { return "store " + e.Name + ": " + e.Err.Error() }
func (e *OpenError) Unwrap() error { return e.Err }

// Unopened is what a client of the server (the operator API, the
// Memory Stores API, the console) is told of a request that failed on
// store name because its repository is damaged (err holds a
// *gitmem.DamagedError) or cannot be opened (an *OpenError): what is
// wrong, that nothing was changed, and what its operator runs on the
// server, which a retry does not replace; no host path. ok is false for
// any other error.
func Unopened(name string, err error) (msg string, ok bool) {
	var damaged *gitmem.DamagedError
	var unopened *OpenError
	var what string
	switch {
	case errors.As(err, &damaged):
		msg, what = "store "+name+" is damaged: "+damaged.Problem, "how"
	case errors.As(err, &unopened):
		msg, what = "store "+name+" cannot be opened: its folder or repository cannot be read", "why"
	default:
		return "", false
	}
	return msg + "; nothing was changed. Retrying does not help: an operator repairs it on the server, where gitmem --repo STORES/" + name +
		" fsck says " + what + " (STORES is the server's --stores folder)", true
}

// Options configure a Dir.
type Options struct {
	// Repo is how stores are opened (clock, log, default author).
	// ReadOnly and Adopt are set by the Dir as each use needs; a zero
	// MaterialiseEvery, CheckpointEvery, IndexDelay or ReleaseIdle is
	// WriteEvery.
	Repo gitmem.Options
	// MaxOpen bounds the stores open at once, and so the file descriptors
	// and memory they hold (default 256). The least recently used store
	// that no call is using is closed to make room.
	MaxOpen int
	// IdleClose closes a store no call has used for this long (default
	// 5 minutes; negative: never).
	IdleClose time.Duration
	// GCLoose packs an open store's loose objects in the background once
	// about this many have piled up (0: never), as serve does for one
	// repository: looked at every packEvery, in the stores used since the
	// last look.
	GCLoose int
}

// WriteEvery is how long, at most, a store's changes wait to be written
// to git's files (gitmem's Options.MaterialiseEvery), and how often a
// busy store checkpoints (CheckpointEvery), rewrites .git/index
// (IndexDelay) and how long a store keeps its writer lock idle
// (ReleaseIdle): each of them writes what waits, so that one pack, one
// move of the branch, one index and one checkpoint serve the changes of
// the period. With a hundred stores each taking a change or two a
// second, those written for each change, files made and removed, were
// most of serve's CPU (issue 25). The write-ahead log stays the commit
// point; plain git beside a store sees a change up to this late.
const WriteEvery = 2 * time.Second

// packEvery is how often the background looks for stores to pack: as
// often as serve does for one repository, so that a store under load
// gets the same bound on its packs. Only the stores used since the last
// look are looked at, so the cost follows the stores in use, not the
// stores open.
const packEvery = 5 * time.Second

// Dir is a directory of stores: each store NAME is the gitmem repository
// DIR/NAME. Stores are opened on first use and closed when idle or when
// more than MaxOpen are open, so a Dir of any size costs what its active
// stores cost; opening the Dir reads nothing. A Dir is safe for concurrent
// use.
type Dir struct {
	root string
	opt  Options

	mu   sync.Mutex
	open map[string]*entry
	// creating holds a lock per name being created, deleted or opened:
	// the creates, deletes and opens of one name take turns (the second
	// of two creates finds the first's store; an open never meets a
	// half-made or half-deleted store); those of different names run at
	// once. Guarded by mu.
	creating map[string]*nameLock
	lru      *list.List // of *entry, most recently used first
	closed   bool
	// packed is when the background last chose stores to pack: a store
	// not used since needs no new look.
	packed time.Time
	stop   chan struct{}
	done   chan struct{}
	// life is cancelled by Close: a store being opened stops waiting for
	// its writer lock (another process's gc, say).
	life   context.Context
	cancel context.CancelFunc
	// step, when set (by tests), is told of the steps of a create, a
	// delete or a metadata change, and of a call that waits for one.
	step func(string)
}

func (d *Dir) note(step string) {
	if d.step != nil {
		d.step(step)
	}
}

// entry is an open (or opening) store.
type entry struct {
	name  string
	elem  *list.Element
	ready chan struct{} // closed once repo (or err) is set
	repo  *gitmem.Repo
	err   error
	refs  int       // Acquire calls not yet released; guarded by Dir.mu
	used  time.Time // when last released; guarded by Dir.mu

	// gate orders, within this process, what reads the metadata (tool
	// calls: shared) against what changes it or closes the store
	// (exclusive), so a call never runs against metadata that changed
	// under it.
	gate sync.RWMutex

	mmu      sync.Mutex // guards the cached metadata and cache
	meta     Meta
	metaHead string // the HEAD the cached metadata is known valid at
	gone     bool   // deleted or closed; guarded by gate
	cache    map[any]any

	// tipMeta is the metadata at tip, the newest commit a change of this
	// process was built on (metaAt; at first, the HEAD the store opened
	// at): the next change, built on the commit made then, reads that one
	// commit. tmu guards them. It is not mmu: a metadata read (current)
	// holds mmu while it waits for the writer turn to load what another
	// process committed, and metaAt runs with the turn held.
	tmu     sync.Mutex
	tip     string
	tipMeta Meta

	seen commitsSeen // commits current and metaAt read, for both

	// deleting is closed when a delete of the store ends; nil when none
	// runs. Guarded by Dir.mu.
	deleting chan struct{}
}

// Open returns the Dir of stores in root, creating the folder if needed.
func Open(root string, opt Options) (*Dir, error) {
	if opt.MaxOpen <= 0 {
		opt.MaxOpen = 256
	}
	if opt.IdleClose == 0 {
		opt.IdleClose = 5 * time.Minute
	}
	for _, d := range []*time.Duration{&opt.Repo.MaterialiseEvery, &opt.Repo.CheckpointEvery, &opt.Repo.IndexDelay, &opt.Repo.ReleaseIdle} {
		if *d == 0 {
			*d = WriteEvery
		}
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create the stores folder: %w", err)
	}
	d := &Dir{root: root, opt: opt, open: map[string]*entry{}, creating: map[string]*nameLock{}, lru: list.New(),
		stop: make(chan struct{}), done: make(chan struct{})}
	d.life, d.cancel = context.WithCancel(context.Background())
	go d.background()
	return d, nil
}

// Root is the folder the stores are in.
func (d *Dir) Root() string { return d.root }

func (d *Dir) path(name string) string { return filepath.Join(d.root, name) }

func (d *Dir) logf(format string, args ...any) {
	if d.opt.Repo.Logf != nil {
		d.opt.Repo.Logf(format, args...)
	}
}

// repoOptions are the options of store name's repository: the Dir's,
// with its log lines naming the store ("gitmem: store alice: ..."), as
// the Dir's own do. One process logs for every store, and a line such as
// "90,000 file(s) made by hand in memories/ ... (remove them, ...)" is of
// no use to an operator who cannot tell which store it is about.
func (d *Dir) repoOptions(name string) gitmem.Options {
	opt := d.opt.Repo
	opt.Logf, opt.Errorf = storeLog(name, opt.Logf), storeLog(name, opt.Errorf)
	return opt
}

// storeLog is logf with each line naming store name (nil stays nil: the
// repository's default).
func storeLog(name string, logf func(string, ...any)) func(string, ...any) {
	if logf == nil {
		return nil
	}
	return func(format string, args ...any) {
		logf("gitmem: store %s: "+strings.TrimPrefix(format, "gitmem: "), append([]any{name}, args...)...)
	}
}

// background closes idle stores and packs loose objects. (It reads
// nothing at start: opening a Dir costs the same for any number of
// stores.)
func (d *Dir) background() {
	defer close(d.done)
	idle := time.Hour // a tick that does nothing when idle stores stay open
	if d.opt.IdleClose > 0 {
		idle = max(d.opt.IdleClose/4, 10*time.Millisecond)
	}
	idleTick, gcTick := time.NewTicker(idle), time.NewTicker(packEvery)
	defer idleTick.Stop()
	defer gcTick.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-idleTick.C:
			if d.opt.IdleClose > 0 {
				d.closeIdle(time.Now().Add(-d.opt.IdleClose))
			}
		case <-gcTick.C:
			if d.opt.GCLoose > 0 {
				d.pack()
			}
		}
	}
}

// pack packs the loose objects of the open stores, used since the last
// look, that have piled up GCLoose of them.
func (d *Dir) pack() {
	d.packWith(func(r *gitmem.Repo) (gitmem.GCStats, error) { return r.GC(context.Background(), false) })
}

// packWith is pack with the collection gc.
func (d *Dir) packWith(gc func(r *gitmem.Repo) (gitmem.GCStats, error)) {
	d.mu.Lock()
	since := d.packed
	d.packed = time.Now()
	var open []*entry
	for _, e := range d.open {
		if isReady(e) && e.err == nil && (e.refs > 0 || !e.used.Before(since)) {
			e.refs++ // kept open meanwhile
			open = append(open, e)
		}
	}
	d.mu.Unlock()
	for _, e := range open {
		// The gate is not held across the collection: a metadata change
		// waiting for it would hold up every later call of the store
		// (RWMutex lets no reader in while a writer waits). A collection
		// needs none: it changes no metadata, and a store closed or
		// deleted meanwhile stops it (ErrClosed).
		e.gate.RLock()
		gone := e.gone
		e.gate.RUnlock()
		if !gone && e.repo.GCDue(d.opt.GCLoose) {
			st, err := gc(e.repo)
			switch {
			case errors.Is(err, gitmem.ErrClosed): // closed or deleted meanwhile
			case err != nil:
				d.logf("gitmem: store %s: background gc: %v", e.name, err)
			default:
				d.logf("gitmem: store %s: packed %d loose objects", e.name, st.Packed)
			}
		}
		d.release(e)
	}
}

// closeIdle closes the stores unused since cutoff.
func (d *Dir) closeIdle(cutoff time.Time) {
	d.mu.Lock()
	var idle []*entry
	for e := d.lru.Back(); e != nil; e = e.Prev() {
		en := e.Value.(*entry)
		if en.refs == 0 && isReady(en) && en.used.Before(cutoff) {
			idle = append(idle, en)
			d.remove(en)
		}
	}
	d.mu.Unlock()
	for _, en := range idle {
		d.closeEntry(en)
	}
}

func isReady(e *entry) bool {
	select {
	case <-e.ready:
		return true
	default:
		return false
	}
}

// remove takes an entry out of the pool. Called with d.mu held.
func (d *Dir) remove(e *entry) {
	if d.open[e.name] == e {
		delete(d.open, e.name)
		d.lru.Remove(e.elem)
	}
}

// closeEntry closes a store taken out of the pool, once no call uses it.
// Its Close error is logged, and returned for Dir.Close to report.
func (d *Dir) closeEntry(e *entry) error {
	<-e.ready
	e.gate.Lock()
	defer e.gate.Unlock()
	if e.gone || e.repo == nil {
		return nil
	}
	e.gone = true
	err := e.repo.Close()
	if errors.Is(err, gitmem.ErrDeleted) {
		// Deleted by another process (gitmem store delete): the
		// changes it had not yet written went with it, as deleting
		// the store meant.
		err = nil
	}
	if err != nil {
		d.logf("gitmem: store %s: close: %v", e.name, err)
		return fmt.Errorf("store %s: %w", e.name, err)
	}
	return nil
}

// Store is a store in use: Acquire it, use it, Release it.
type Store struct {
	d *Dir
	e *entry
}

// Name is the store's name.
func (s *Store) Name() string { return s.e.name }

// Cache returns the value kept with the open store under key, made by
// mk the first time: state derived from the repository (package
// memstore's index of it), kept while the store is open and dropped with
// it when it is closed.
func (s *Store) Cache(key any, mk func() any) any {
	s.e.mmu.Lock()
	defer s.e.mmu.Unlock()
	v, ok := s.e.cache[key]
	if !ok {
		if s.e.cache == nil {
			s.e.cache = map[any]any{}
		}
		v = mk()
		s.e.cache[key] = v
	}
	return v
}

// Release ends this use of the store.
func (s *Store) Release() {
	s.d.mu.Lock()
	s.e.refs--
	s.e.used = time.Now()
	s.d.mu.Unlock()
}

// Acquire opens the store (or finds it open) for use until Release. A
// name that is not a store is ErrNotFound. The wait for the store to open
// (behind another process's writer lock, say) gives up when ctx is done:
// Acquire then returns ctx.Err(), and the opening goes on for the next
// Acquire.
func (d *Dir) Acquire(ctx context.Context, name string) (*Store, error) {
	if err := policy.CheckStoreName(name); err != nil {
		return nil, ErrNotFound
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, gitmem.ErrClosed
	}
	e := d.open[name]
	if e != nil && e.deleting != nil {
		// Being deleted: what the delete leaves (no store, or the
		// store if it failed) is what this call gets. It does not open
		// the store meanwhile.
		ch := e.deleting
		d.mu.Unlock()
		d.note("waits for a delete")
		select {
		case <-ch:
			return d.Acquire(ctx, name)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if e != nil {
		e.refs++
		d.lru.MoveToFront(e.elem)
	} else {
		e = &entry{name: name, ready: make(chan struct{}), refs: 1}
		e.elem = d.lru.PushFront(e)
		d.open[name] = e
		go d.load(e)
	}
	d.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		d.release(e)
		return nil, ctx.Err()
	}
	err := e.err
	if err == nil && !exists(d.path(name)) {
		// Deleted behind our back (by another process): the next
		// Acquire starts afresh and finds no store.
		err = ErrNotFound
		d.mu.Lock()
		first := d.open[name] == e
		d.remove(e)
		d.mu.Unlock()
		if first {
			d.logf("gitmem: store %s was deleted by another process: closed", name)
			go d.closeEntry(e)
		}
	}
	if err != nil {
		d.release(e)
		return nil, err
	}
	return &Store{d, e}, nil
}

// load opens e's store for the Acquire calls waiting for it, within the
// Dir's life (Close ends a wait for the writer lock). A store that fails
// to open leaves the pool: the next Acquire tries again.
func (d *Dir) load(e *entry) {
	unlock := d.lockName(e.name) // not while a create or a delete of it runs
	e.repo, e.meta, e.metaHead, e.err = d.openStore(e.name)
	e.tip, e.tipMeta = e.metaHead, e.meta
	unlock()
	if e.err != nil {
		d.mu.Lock()
		d.remove(e)
		d.mu.Unlock()
	} else {
		d.evict() // before the store is handed out: the bound holds when Acquire returns
	}
	close(e.ready)
}

func (d *Dir) release(e *entry) {
	d.mu.Lock()
	e.refs--
	d.mu.Unlock()
}

func exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ".git"))
	return err == nil
}

// openStore opens a store for writing and reads its metadata.
func (d *Dir) openStore(name string) (*gitmem.Repo, Meta, string, error) {
	dir := d.path(name)
	if !exists(dir) {
		return nil, Meta{}, "", ErrNotFound
	}
	opt := d.repoOptions(name)
	opt.ReadOnly, opt.Adopt = false, false
	r, err := gitmem.Open(d.life, dir, opt)
	if err != nil {
		return nil, Meta{}, "", d.openErr(name, err)
	}
	m, found, head, err := readMeta(r, "", nil)
	if err == nil && !found {
		err = ErrNotFound // a gitmem repository, but not made a store
	}
	if err != nil {
		r.Close()
		if !exists(dir) { // deleted (by another process) meanwhile
			err = ErrNotFound
		}
		return nil, Meta{}, "", err
	}
	r.MarkWhenClean() // a store: CleanView may answer its next first view
	return r, m, head, nil
}

// CleanView answers a view of the store name, which no call has open in
// this Dir, from its clean mark and its worktree, without opening it
// (gitmem.CleanView: nothing written to it since a store's writer let it
// go, nor edited by hand). false: the caller acquires the store, as for
// any call (a store open here, being created or deleted, or not there).
func (d *Dir) CleanView(name string) (*gitmem.View, bool) {
	if policy.CheckStoreName(name) != nil {
		return nil, false
	}
	d.mu.Lock()
	_, open := d.open[name]
	closed := d.closed
	d.mu.Unlock()
	if open || closed {
		return nil, false
	}
	defer d.lockName(name)() // not while a create or a delete of it runs
	return gitmem.CleanView(d.path(name))
}

// openErr words a failure to open a store's repository. A store whose
// folder is gone now was deleted (by another process) while it opened:
// there is no store, whatever the open met on the way (a log file or a
// branch that vanished under it).
func (d *Dir) openErr(name string, err error) error {
	if errors.Is(err, gitmem.ErrNotRepository) || errors.Is(err, gitmem.ErrForeign) || !exists(d.path(name)) {
		return ErrNotFound
	}
	if gitmem.OutOfFiles(err) {
		return fmt.Errorf("store %s: %w (%w)", name, ErrOutOfFiles, err)
	}
	return &OpenError{Name: name, Err: err}
}

// evict closes the least recently used stores no call is using while more
// than MaxOpen are open.
func (d *Dir) evict() {
	d.mu.Lock()
	var out []*entry
	for e := d.lru.Back(); e != nil && len(d.open) > d.opt.MaxOpen; {
		prev := e.Prev()
		if en := e.Value.(*entry); en.refs == 0 && isReady(en) {
			d.remove(en)
			out = append(out, en)
		}
		e = prev
	}
	d.mu.Unlock()
	for _, en := range out {
		d.closeEntry(en)
	}
}

// OpenCount is the number of stores open now.
func (d *Dir) OpenCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.open)
}

// Close closes every open store and stops the background work. It reports
// the stores whose Close failed (a last checkpoint that failed keeps the
// acknowledged changes in the store's write-ahead log: *gitmem.UnwrittenError).
func (d *Dir) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.cancel() // a store being opened stops waiting for its lock
	var all []*entry
	for _, e := range d.open {
		all = append(all, e)
	}
	d.open = map[string]*entry{}
	d.lru.Init()
	d.mu.Unlock()
	close(d.stop)
	<-d.done
	var errs []error
	for _, e := range all {
		errs = append(errs, d.closeEntry(e))
	}
	return errors.Join(errs...)
}

// Use runs fn with the store's repository and its current metadata. Within
// this process no metadata change (archive, update) or close runs while fn
// does, so fn acts on the metadata it was given.
func (s *Store) Use(fn func(r *gitmem.Repo, m Meta) error) error {
	s.e.gate.RLock()
	defer s.e.gate.RUnlock()
	if s.e.gone {
		return ErrNotFound
	}
	m, err := s.e.current()
	if err == nil {
		err = fn(s.e.repo, m)
	}
	if errors.Is(err, gitmem.ErrDeleted) { // by another process, since it was acquired
		return ErrNotFound
	}
	return err
}

// current returns the metadata, reading what changed it since it was
// last read (another process may have committed).
func (e *entry) current() (Meta, error) {
	e.mmu.Lock()
	defer e.mmu.Unlock()
	m, found, head, err := readMeta(e.repo, e.metaHead, &e.seen)
	if err != nil {
		return Meta{}, err
	}
	if found {
		e.meta = m
	}
	e.metaHead = head
	return e.meta, nil
}

// metaAt returns the metadata at tip, a transaction's head, under the
// writer turn: the commits since the newest whose metadata is known here
// are read, whoever made them.
func (e *entry) metaAt(tip string) (Meta, error) {
	e.tmu.Lock()
	defer e.tmu.Unlock()
	if tip == e.tip {
		return e.tipMeta, nil
	}
	m, found, err := metaAt(e.repo, tip, known{e.tip, e.tipMeta}, &e.seen)
	if err == nil && !found {
		err = ErrNotFound // a store commit no longer in the history (a rewrite by hand)
	}
	if err != nil {
		return Meta{}, err
	}
	e.tip, e.tipMeta = tip, m
	return m, nil
}

// ArchivedAt reports whether the store is archived at tip, the commit a
// change builds on (its transaction's Head), for a check made inside
// Repo.Update, under the writer lock: it sees an archive another process
// committed after the call read the metadata. Called inside a Use. The
// commits since the tip of the last such check are read: none when the
// tip has not moved, one after a change of this process's.
func (s *Store) ArchivedAt(tip string) (bool, error) {
	m, err := s.e.metaAt(tip)
	return m.IsArchived(), err
}

// change runs fn exclusively (no call is using the store meanwhile) with
// the metadata at the commit the change builds on, read under the writer
// lock; fn's result is committed as the metadata after action.
func (s *Store) change(action string, author gitmem.Signature, fn func(m *Meta) error) (Meta, error) {
	s.e.gate.Lock()
	defer s.e.gate.Unlock()
	if s.e.gone {
		return Meta{}, ErrNotFound
	}
	s.d.note("metadata change: begun")
	c, m, err := writeMeta(s.e.repo, action, author, func(tip string) (Meta, error) {
		m, err := s.e.metaAt(tip)
		if err != nil {
			return Meta{}, err
		}
		m.Metadata = cloneMap(m.Metadata)
		return m, fn(&m)
	})
	if err != nil {
		return Meta{}, err
	}
	s.e.mmu.Lock()
	s.e.meta, s.e.metaHead = m, c.Hash
	s.e.mmu.Unlock()
	s.e.tmu.Lock()
	s.e.tip, s.e.tipMeta = c.Hash, m
	s.e.tmu.Unlock()
	return m, nil
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Info is a store and its metadata.
type Info struct {
	Name string
	Meta
	// Err, in a List, is why the store could not be read (its Meta is
	// then zero): one damaged store does not hide the others.
	Err error
}

// Title is the store's display name, or its folder name when it has none.
func (i Info) Title() string {
	if i.DisplayName != "" {
		return i.DisplayName
	}
	return i.Name
}

// Create makes a new store, a gitmem repository with its first metadata
// commit, authored by author (zero: the operator's git identity). A new
// store is built under a temporary name in the stores folder and renamed
// into place once complete (gitmem.Create): a create that fails or is
// killed leaves no store, and of two processes creating one name at once
// one creates it, the other gets ErrExists. An empty folder at the name
// is no store, and is replaced. A gitmem repository already in the folder
// that is not yet a store becomes one in place; a file there is
// ErrInTheWay; anything else there is ErrExists.
func (d *Dir) Create(name string, m Meta, author gitmem.Signature) (Info, error) {
	if err := policy.CheckStoreName(name); err != nil {
		return Info{}, err
	}
	if err := m.check(); err != nil {
		return Info{}, err
	}
	defer d.lockName(name)() // the second of two creates of name finds the first's store
	dir := d.path(name)
	opt := d.repoOptions(name)
	opt.ReadOnly, opt.Adopt = false, false
	if author != (gitmem.Signature{}) {
		// The store is its creator's from its first commit: memory: init
		// is authored as memory: store create is (it was the server's git
		// identity, from the ~/.gitconfig of whoever runs it). A create
		// that names no one is the operator's, as gitmem init's is.
		opt.Operator = author
	}
	m.Archived, m.Created, m.Metadata = time.Time{}, d.now(), cloneMap(m.Metadata)
	var info Info
	fill := func(r *gitmem.Repo) error {
		d.note("create: initialised")
		if _, found, _, err := readMeta(r, "", nil); err != nil {
			return err
		} else if found {
			return ErrExists
		}
		c, _, err := writeMeta(r, "create", author, func(string) (Meta, error) { return m, nil })
		if err != nil {
			return err
		}
		r.MarkWhenClean()
		info = Info{Name: name, Meta: metaOf(c)}
		return nil
	}
	// An empty folder is removed (os.Remove removes no other), to be
	// replaced.
	if fi, err := os.Lstat(dir); err == nil && !fi.IsDir() {
		return Info{}, ErrInTheWay
	} else if err == nil && os.Remove(dir) != nil {
		// Made a store in place: what an earlier gitmem's interrupted
		// create left, or a memory an operator put here.
		r, _, err := gitmem.Init(context.Background(), dir, opt)
		if errors.Is(err, gitmem.ErrForeign) || errors.Is(err, gitmem.ErrNotRepository) {
			return Info{}, ErrExists
		}
		if err != nil {
			return Info{}, fmt.Errorf("store %s: %w", name, err)
		}
		defer r.Close()
		err = fill(r)
		return info, err
	}
	err := gitmem.Create(context.Background(), dir, opt, fill)
	if errors.Is(err, gitmem.ErrExist) {
		return Info{}, ErrExists
	}
	if err != nil {
		return Info{}, fmt.Errorf("store %s: %w", name, err)
	}
	return info, nil
}

// nameLock is the lock of one name being created, and how many creates
// hold or wait for it.
type nameLock struct {
	mu    sync.Mutex
	users int // guarded by Dir.mu
}

// lockName takes the lock of name for a create, a delete or an open, and
// returns its unlock.
func (d *Dir) lockName(name string) func() {
	d.mu.Lock()
	l := d.creating[name]
	if l == nil {
		l = &nameLock{}
		d.creating[name] = l
	}
	l.users++
	d.mu.Unlock()
	if !l.mu.TryLock() {
		d.note("waits for the name")
		l.mu.Lock()
	}
	return func() {
		l.mu.Unlock()
		d.mu.Lock()
		if l.users--; l.users == 0 {
			delete(d.creating, name)
		}
		d.mu.Unlock()
	}
}

func (d *Dir) now() time.Time {
	if d.opt.Repo.Now != nil {
		return d.opt.Repo.Now()
	}
	return time.Now()
}

// Get returns a store's metadata.
func (d *Dir) Get(name string) (Info, error) {
	s, err := d.Acquire(context.Background(), name)
	if err != nil {
		return Info{}, err
	}
	defer s.Release()
	var info Info
	err = s.Use(func(_ *gitmem.Repo, m Meta) error {
		info = Info{Name: name, Meta: m}
		return nil
	})
	return info, err
}

// Change is an update of a store's metadata; nil fields stay as they are.
type Change struct {
	DisplayName *string
	Description *string
	Metadata    map[string]*string // a nil value deletes the key
	Screening   *policy.ScreenMode // "" : the server's default
}

// Update changes a store's description, metadata or screening mode. An
// archived store is ErrArchived.
func (d *Dir) Update(name string, ch Change, author gitmem.Signature) (Info, error) {
	return d.changeMeta(name, "update", author, func(m *Meta) error {
		if m.IsArchived() {
			return ErrArchived
		}
		if ch.DisplayName != nil {
			if *ch.DisplayName == "" {
				return policy.CheckStoreDisplayName("")
			}
			m.DisplayName = *ch.DisplayName
		}
		if ch.Description != nil {
			m.Description = *ch.Description
		}
		for k, v := range ch.Metadata {
			if v == nil {
				delete(m.Metadata, k)
			} else {
				m.Metadata[k] = *v
			}
		}
		if ch.Screening != nil {
			m.Screening = *ch.Screening
		}
		return nil
	})
}

// Archive makes a store read-only (archived true) or writable again.
// Archiving an archived store changes nothing.
func (d *Dir) Archive(name string, archived bool, author gitmem.Signature) (Info, error) {
	action := map[bool]string{true: "archive", false: "unarchive"}[archived]
	return d.changeMeta(name, action, author, func(m *Meta) error {
		if m.IsArchived() == archived {
			return errUnchanged
		}
		m.Archived = time.Time{}
		if archived {
			m.Archived = d.now()
		}
		return nil
	})
}

var errUnchanged = errors.New("unchanged")

func (d *Dir) changeMeta(name, action string, author gitmem.Signature, fn func(m *Meta) error) (Info, error) {
	s, err := d.Acquire(context.Background(), name)
	if err != nil {
		return Info{}, err
	}
	defer s.Release()
	if author == (gitmem.Signature{}) {
		author = s.e.repo.Operator()
	}
	m, err := s.change(action, author, fn)
	if errors.Is(err, errUnchanged) {
		return d.Get(name)
	}
	return Info{Name: name, Meta: m}, err
}

const tombstonePrefix = ".deleted-"

// Delete removes a store and its whole history for good. Calls using it
// finish first; calls that come meanwhile wait for the delete and get
// what it leaves: no store (a second delete too). The store stays in the
// pool, marked, until its folder is gone, so that no call opens it
// meanwhile; and it holds the name's lock, so that a create or an open
// of the name waits for it.
func (d *Dir) Delete(name string) error {
	s, err := d.Acquire(context.Background(), name)
	if err != nil {
		return err
	}
	unlock := d.lockName(name)
	e := s.e
	d.mu.Lock()
	// Another delete that took it first has ended: it held the name's lock.
	taken := e.deleting != nil
	if !taken {
		e.deleting = make(chan struct{})
	}
	d.mu.Unlock()
	if !taken {
		d.note("delete: marked")
	}
	if taken {
		unlock()
		s.Release()
		return d.Delete(name) // what it left: no store, or the store if it failed
	}
	defer s.Release() // held: not closed as idle meanwhile
	defer unlock()
	defer func() {
		d.mu.Lock()
		d.remove(e) // the next call opens it afresh, and finds what is left
		close(e.deleting)
		d.mu.Unlock()
	}()
	e.gate.Lock()
	defer e.gate.Unlock()
	if e.gone {
		return ErrNotFound
	}
	e.gone = true
	if err := e.repo.Close(); err != nil {
		d.logf("gitmem: store %s: close: %v", name, err)
	}
	d.note("delete: closed")
	// Renamed first, so that a delete cut short never leaves half a store.
	tomb := filepath.Join(d.root, tombstonePrefix+name+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.Rename(d.path(name), tomb); err != nil {
		return fmt.Errorf("delete store %s: %w", name, err)
	}
	d.note("delete: renamed")
	return os.RemoveAll(tomb)
}

// Page is a page of a listing; Next is the cursor of the next page ("" at
// the end).
type Page[T any] struct {
	Items []T
	Next  string
}

// ListOptions select the stores of a listing.
type ListOptions struct {
	After           string // a name: the cursor of the page ("" from the start)
	Limit           int    // most stores in the page
	IncludeArchived bool
	Allow           func(name string) bool // only names it accepts (nil: all)
	Where           func(Info) bool        // only stores whose metadata it accepts (nil: all)
}

// List returns the stores in name order that opt selects, a page of them.
func (d *Dir) List(opt ListOptions) (Page[Info], error) {
	after, limit, includeArchived, allow := opt.After, opt.Limit, opt.IncludeArchived, opt.Allow
	entries, err := os.ReadDir(d.root)
	if err != nil {
		return Page[Info]{}, fmt.Errorf("read the stores folder: %w", err)
	}
	var p Page[Info]
	for _, de := range entries { // ReadDir sorts by name
		name := de.Name()
		if strings.HasPrefix(name, tombstonePrefix) { // an interrupted delete
			go os.RemoveAll(filepath.Join(d.root, name))
			continue
		}
		if !de.IsDir() || name <= after || policy.CheckStoreName(name) != nil || (allow != nil && !allow(name)) {
			continue
		}
		m, err := d.peek(name)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if m.IsArchived() && !includeArchived {
			continue
		}
		info := Info{Name: name, Meta: m, Err: err}
		if opt.Where != nil && err == nil && !opt.Where(info) {
			continue
		}
		if len(p.Items) == limit { // there is a next page
			p.Next = p.Items[len(p.Items)-1].Name
			break
		}
		p.Items = append(p.Items, info)
	}
	return p, nil
}

// peek reads a store's metadata: from the pool when it is open, else by
// opening its repository read-only (which writes nothing) for a moment. A
// store being deleted is ErrNotFound.
func (d *Dir) peek(name string) (Meta, error) {
	d.mu.Lock()
	e := d.open[name]
	deleting := e != nil && e.deleting != nil
	d.mu.Unlock()
	if deleting { // left out at once: the delete waits for the calls using it, a listing does not
		return Meta{}, ErrNotFound
	}
	if e != nil {
		info, err := d.Get(name)
		return info.Meta, err
	}
	opt := d.repoOptions(name)
	opt.ReadOnly, opt.Adopt = true, false
	r, err := gitmem.Open(context.Background(), d.path(name), opt)
	if err != nil {
		return Meta{}, d.openErr(name, err)
	}
	defer r.Close()
	m, found, _, err := readMeta(r, "", nil)
	if err == nil && !found {
		err = ErrNotFound
	}
	if err == nil {
		// The write-ahead log, which a writer's open reads and a reader's
		// does not: one it cannot read fails every call on the store.
		if _, uerr := r.Unrecovered(); uerr != nil {
			return Meta{}, d.openErr(name, uerr)
		}
	}
	return m, err
}
