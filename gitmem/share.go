package gitmem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/gitmem/internal/lock"
	"github.com/gitmem-dev/gitmem/gitmem/internal/remote"
	"github.com/gitmem-dev/gitmem/policy"
)

// Sharing a memory through git remotes: several agents, on several
// machines, each with its own clone, sync through one remote (any git
// server, a bare repository by path, ssh, http or git://).
//
// A pull fetches without the writer lock (a slow remote never holds up a
// tool call), storing the objects durably, then merges as one Update,
// computed without the lock (see mergetree.go). A push computes the
// objects the remote lacks from what changed, sends them as one pack and
// moves the remote's branch only if it still holds what was seen
// (compare-and-swap); a remote that moved is never overwritten (never a
// force-push): sync fetches, merges and pushes again.

// Remote is a git remote of the repository.
type Remote struct {
	Name string
	URL  string
}

// RemoteAuth holds credentials for remotes. They come from flags or the
// environment and are never written into the repository.
type RemoteAuth struct {
	User             string // HTTP user, or ssh user when the URL has none
	Password         string
	Token            string // HTTP: the password of basic auth (user default x-access-token)
	SSHKey           string // a private key file; else the ssh agent
	SSHKeyPassphrase string
}

// SyncOptions tune push, pull, sync and clone.
type SyncOptions struct {
	Auth RemoteAuth
	// Limits are what a file from the remote may be and what the merged
	// memory may hold (zero: policy.DefaultLimits).
	Limits policy.Limits
	// MaxFetchBytes bounds what one fetch may bring (default 1 GiB).
	MaxFetchBytes int64
	// Retries is how often sync fetches and merges again when the remote
	// moved while it pushed (default 5).
	Retries int
	// Author of merge commits (default: the operator).
	Author Signature
	// AllowUnrelatedHistories merges a remote branch that shares no commit
	// with the memory (git's --allow-unrelated-histories); without it such
	// a pull is refused (*UnrelatedHistoriesError), unless the memory holds
	// nothing but its own empty first commit.
	AllowUnrelatedHistories bool
}

func (o *SyncOptions) defaults() {
	d := policy.DefaultLimits
	if o.Limits.MaxFileBytes == 0 {
		o.Limits.MaxFileBytes = d.MaxFileBytes
	}
	if o.Limits.MaxTotalBytes == 0 {
		o.Limits.MaxTotalBytes = d.MaxTotalBytes
	}
	if o.Limits.MaxFiles == 0 {
		o.Limits.MaxFiles = d.MaxFiles
	}
	if o.MaxFetchBytes == 0 {
		o.MaxFetchBytes = 1 << 30
	}
	if o.Retries == 0 {
		o.Retries = 5
	}
}

// SyncResult says what a push, pull or sync did.
type SyncResult struct {
	Fetched     int    // objects received
	FastForward string // the commit the branch moved to, when a pull fast-forwarded
	Merge       string // the merge commit a pull made (the last, when sync merged again)
	Merges      int    // merge commits made (more than one when sync merged again)
	Merged      int    // commits the pull brought (in all its merges)
	Conflicts   []MergeConflict
	Ignored     []IgnoredEntry
	Pushed      int // commits sent
	Retries     int // times sync fetched and merged again because the remote moved
	Redactions  int // redactions of other clones applied here
	UpToDate    bool
}

// Errors of sharing.
var (
	ErrNoRemote     = errors.New("gitmem: no such remote")
	ErrRemoteExists = errors.New("gitmem: a remote of that name exists")
	// ErrNonFastForward: the remote has commits this memory lacks; a push
	// would lose them. Pull (or sync) first.
	ErrNonFastForward = errors.New("gitmem: the remote has changes this memory does not have yet; pull (or sync) first")
	// ErrNotEmpty: clone into a folder that holds something.
	ErrNotEmpty = errors.New("gitmem: the folder exists and is not empty")
)

// UnrelatedHistoriesError refuses to merge a remote branch that shares no
// commit with the memory: another memory, most likely (a wrong URL), as
// git refuses it. Nothing was merged.
type UnrelatedHistoriesError struct {
	Remote string // the remote's branch: origin/main
	Commit string // its commit
}

func (e *UnrelatedHistoriesError) Error() string {
	return fmt.Sprintf("gitmem: %s (%s) shares no commit with this memory: unrelated histories are not merged without being asked; nothing was merged", e.Remote, e.Commit[:7])
}

// RemoteMovedError: sync gave up because each time it had merged what the
// remote held and pushed, another agent had pushed first. The merges stay
// in the memory; nothing was pushed.
type RemoteMovedError struct {
	Remote   string
	Attempts int
}

func (e *RemoteMovedError) Error() string {
	return fmt.Sprintf("gitmem: %s moved again before each of %d pushes (other agents pushed first each time); what was merged stays here, nothing was pushed", e.Remote, e.Attempts)
}

func (e *RemoteMovedError) Unwrap() error { return ErrNonFastForward }

// BadRemoteError refuses a remote name or URL: one gitmem cannot use,
// or a URL that holds a password (credentials are never stored).
type BadRemoteError struct{ Reason string }

func (e *BadRemoteError) Error() string { return "gitmem: " + e.Reason }

// Refused reports whether err refuses what the remote holds, or the
// remote itself, so that trying again changes nothing until the remote
// (or the configuration) does: objects git fsck refuses, a history that
// shares no commit with the memory's, a history a redaction made here
// removed, a merge past the memory's limits, a remote name or URL gitmem
// cannot use. Any other failure (the network, a timeout, a remote that
// kept moving) may pass by itself.
func Refused(err error) bool {
	var oe *ObjectsRefusedError
	var ue *UnrelatedHistoriesError
	var rr *RedactedRemoteError
	var le *LimitError
	var be *BadRemoteError
	return errors.As(err, &oe) || errors.As(err, &ue) || errors.As(err, &rr) || errors.As(err, &le) || errors.As(err, &be)
}

// RemoteError is a failure to talk to a remote, or a refusal by it.
type RemoteError struct {
	Remote string
	Op     string // "fetch from", "push to"
	Err    error

	local string // the memory's folder: its files are worded from .git/ on
}

func (e *RemoteError) Error() string {
	text := e.Err.Error()
	if e.local != "" {
		text = strings.ReplaceAll(text, filepath.Clean(e.local)+string(filepath.Separator), "")
	}
	return fmt.Sprintf("gitmem: %s %s: %s", e.Op, e.Remote, text)
}
func (e *RemoteError) Unwrap() error { return e.Err }

// Remotes lists the repository's remotes.
func (r *Repo) Remotes() ([]Remote, error) { return remotes(r.gitDir) }

// remotes lists the remotes in gitDir's config.
func remotes(gitDir string) ([]Remote, error) {
	rs, err := gd.Remotes(gitDir)
	if err != nil {
		return nil, wrap("read .git/config", err)
	}
	out := make([]Remote, len(rs))
	for i, x := range rs {
		out[i] = Remote{Name: x.Name, URL: x.URL}
	}
	return out, nil
}

// AddRemote adds a git remote. A URL that carries a password is refused:
// credentials are given at push and pull time, never stored.
func (r *Repo) AddRemote(name, url string) error {
	if r.opt.ReadOnly {
		return ErrReadOnly
	}
	if !gd.ValidRemoteName(name) {
		return &BadRemoteError{fmt.Sprintf("%s is not a remote name (letters, digits, '.', '_', '-', beginning with a letter or digit, at most 64 characters)", policy.QuoteName(name))}
	}
	if err := remote.CheckURL(url); err != nil {
		return &BadRemoteError{err.Error()}
	}
	err := gd.AddRemote(r.gitDir, name, url)
	if errors.Is(err, gd.ErrRemoteExists) {
		return ErrRemoteExists
	}
	return wrap("write .git/config", err)
}

// RemoveRemote removes a remote and its remote-tracking refs.
func (r *Repo) RemoveRemote(name string) error {
	if r.opt.ReadOnly {
		return ErrReadOnly
	}
	err := gd.RemoveRemote(r.gitDir, name)
	if errors.Is(err, gd.ErrNoRemote) {
		return ErrNoRemote
	}
	if err == nil {
		os.RemoveAll(filepath.Join(r.gitDir, "refs", "gitmem", "remotes", name))
	}
	return wrap("write .git/config", err)
}

// remoteURL is the URL of the remote name in gitDir's config.
func remoteURL(gitDir, name string) (string, error) {
	rs, err := remotes(gitDir)
	if err != nil {
		return "", err
	}
	for _, x := range rs {
		if x.Name == name {
			if x.URL == "" {
				return "", fmt.Errorf("gitmem: the remote %s has no url in .git/config", name)
			}
			return x.URL, nil
		}
	}
	return "", ErrNoRemote
}

// trackingRef is the remote-tracking ref of branch for a remote, as git
// names it (refs/remotes/origin/main).
func trackingRef(branch plumbing.ReferenceName, name string) plumbing.ReferenceName {
	return plumbing.NewRemoteReferenceName(name, branch.Short())
}

// readTracking is where the remote's branch was when last seen (zero:
// never).
func readTracking(gitDir string, branch plumbing.ReferenceName, name string) plumbing.Hash {
	h, _ := gd.ReadRef(gitDir, trackingRef(branch, name))
	return h
}

func (o SyncOptions) auth() remote.Auth {
	a := o.Auth
	return remote.Auth{User: a.User, Password: a.Password, Token: a.Token, SSHKey: a.SSHKey, SSHKeyPassphrase: a.SSHKeyPassphrase}
}

// sharer is the share engine's own state. Sessions with remotes (push,
// pull, sync, a redaction pushed) run one at a time, and what the
// repository's known redactions removed is kept between them for the
// check before every push.
type sharer struct {
	// mu is held for a whole session; it guards redactions and the
	// writes of .git/gitmem/sync (the sync state). It is first in the
	// lock order: under it a session applies redactions (the collector's
	// lock, then the writer turn), merges (the writer turn) and moves
	// refs (the object store's lock). A wait for it gives up with the
	// caller's context.
	mu         lock.Mutex
	redactions redactionCache
}

// run runs fn as the repository's one session with a remote. fn is given
// the redaction cache, which only a session reads and fills. The wait
// for another session gives up when ctx is done (ctx.Err()) or closing
// is closed (lock.ErrClosing).
func (sh *sharer) run(ctx context.Context, closing <-chan struct{}, fn func(known *redactionCache) error) error {
	if err := sh.mu.Lock(ctx, closing); err != nil {
		return err
	}
	defer sh.mu.Unlock()
	return fn(&sh.redactions)
}

// shareStore is what fetching from and pushing to a remote need of the
// repository besides its files (found by path): HEAD, and the object
// store. An open Repo is one; so is a clone before it is first opened
// (cloneStore).
type shareStore interface {
	headHash() (plumbing.Hash, error)
	// objectView is a view of the object store of the caller's own,
	// closed by the caller (see gd.Store.View).
	objectView() *gd.Store
	// withObjects runs fn on the object store that the repository's
	// other users read, holding the lock they take, and closes the
	// packs it opened after.
	withObjects(fn func(st *gd.Store) error) error
}

// cloneStore is a clone's repository before its first open: the objects
// and refs the first fetch brings, used by that fetch alone (no writer,
// no worktree, nothing published yet).
type cloneStore struct {
	gitDir string
	branch plumbing.ReferenceName
	obj    *gd.Store
}

func (c *cloneStore) headHash() (plumbing.Hash, error) {
	h, err := gd.ReadRef(c.gitDir, c.branch)
	if errors.Is(err, gd.ErrNoRef) {
		return plumbing.ZeroHash, nil
	}
	return h, wrap("read the branch", err)
}

func (c *cloneStore) objectView() *gd.Store { return c.obj.View() }

func (c *cloneStore) withObjects(fn func(st *gd.Store) error) error {
	defer c.obj.Release()
	return fn(c.obj)
}

// link is one remote of a repository as a push, pull or sync talks to
// it: fetches and pushes through its own view of the object store (walks
// and packs never wait for, nor hold up, the tool calls' reads), closed
// at the end so that no pack stays open.
type link struct {
	store  shareStore
	dir    string
	gitDir string
	branch plumbing.ReferenceName
	name   string
	url    string
	opt    SyncOptions
	st     *gd.Store
	g      *gd.Graph
	res    SyncResult

	prevTip      plumbing.Hash          // the remote's branch as last seen before this session fetched
	takeRedacted bool                   // RedactShared: the remote's history is redacted here, then there
	localOnly    map[plumbing.Hash]bool // RedactShared: commits only this memory had before it redacted

	redactedRead bool // redacted, redactedBy hold .git/gitmem/redacted (redactedHere)
	redacted     []localRedaction
	redactedBy   map[plumbing.Hash]int
}

func newLink(store shareStore, dir, gitDir string, branch plumbing.ReferenceName, name, url string, opt SyncOptions) *link {
	opt.defaults()
	st := store.objectView()
	return &link{store: store, dir: dir, gitDir: gitDir, branch: branch, name: name, url: url, opt: opt, st: st, g: gd.NewGraph(st)}
}

// session is one push, pull or sync of an open memory: a link that
// merges what it fetched into the memory, and applies and makes
// redactions. It runs under the sharer's lock (known is the sharer's
// cache).
type session struct {
	*link
	mem    shareMemory
	memOpt Options // the memory's: its log, clock, identities and test hooks
	known  *redactionCache
	report RedactReport // RedactShared's
}

// shareMemory is what a session does to the open memory it shares,
// besides fetching and pushing: merge what it fetched (mergeStore),
// commit hand edits first, redact. A Repo is one.
type shareMemory interface {
	mergeStore
	Adopt(ctx context.Context) (Commit, error)
	redact(ctx context.Context, red Redaction, dry bool, progress Progress, note bool) (RedactReport, error)
}

// newSession is a session of the open memory mem, whose options are
// memOpt, over the link l, under the sharer's lock (known).
func newSession(l *link, mem shareMemory, memOpt Options, known *redactionCache) *session {
	return &session{link: l, mem: mem, memOpt: memOpt, known: known}
}

func (r *Repo) objectView() *gd.Store { return r.objects.st.View() }

func (s *link) close() { s.st.Close() }

func (s *link) tracking() plumbing.ReferenceName { return trackingRef(s.branch, s.name) }

func (s *link) readTracking() plumbing.Hash { return readTracking(s.gitDir, s.branch, s.name) }

func (s *link) readRedactionsRef(name string) plumbing.Hash {
	return readRedactionsRef(s.gitDir, name)
}

// setRef moves a ref of ours (a remote-tracking ref, the redaction
// record) to h. Another process's sync may move it at the same moment:
// the ref is read again and the move tried again (the last one wins; a
// tracking ref only says what a remote held when last seen).
func (s *link) setRef(name plumbing.ReferenceName, h plumbing.Hash) error {
	var err error
	for range 3 {
		var old plumbing.Hash
		old, err = gd.ReadRef(s.gitDir, name)
		if err != nil && !errors.Is(err, gd.ErrNoRef) {
			return err
		}
		if old == h {
			return nil
		}
		err = s.store.withObjects(func(st *gd.Store) error { return st.UpdateRef(context.Background(), name, old, h, true) })
		if err == nil {
			return nil
		}
	}
	return err
}

// writeNamed writes objects as one pack, durably, in flight (see
// gd.Keep: neither git's gc nor gitmem's takes it) until set has moved a
// ref onto them, then gitmem's own.
func (s *link) writeNamed(objs []gd.Object, set func() error) error {
	h, err := s.st.WritePackFiles(objs, true, gd.InFlight)
	if err != nil {
		return err
	}
	s.store.withObjects(func(st *gd.Store) error {
		st.AddPack(h)
		return nil
	})
	err = set()
	// Whatever set did (a full gc drops what no ref reaches); one left in
	// flight, on a full disk, is kept all the same and settled at the
	// next start.
	gd.Settle(s.gitDir, h)
	return err
}

func (s *link) remoteErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var se *StorageError
	var de *DamagedError
	var le *LimitError
	if errors.Is(err, ErrNonFastForward) || errors.As(err, &se) || errors.As(err, &de) || errors.As(err, &le) || errors.Is(err, ErrClosed) {
		return err
	}
	return &RemoteError{Remote: s.name, Op: op, Err: err, local: s.dir}
}

// Pull fetches the remote's branch and merges it into the memory (a
// fast-forward when the memory has nothing the remote lacks). It takes
// the writer lock only to commit the merge.
func (r *Repo) Pull(ctx context.Context, name string, opt SyncOptions) (SyncResult, error) {
	return r.share(ctx, name, opt, func(s *session) error { return s.pull(ctx) })
}

// Push sends the memory's new commits to the remote and moves its branch,
// only if the remote has nothing the memory lacks (ErrNonFastForward).
func (r *Repo) Push(ctx context.Context, name string, opt SyncOptions) (SyncResult, error) {
	return r.share(ctx, name, opt, func(s *session) error { return s.push(ctx) })
}

// Sync pulls, merges and pushes; when the remote moved in between (another
// agent pushed), it pulls and merges again, up to opt.Retries times.
func (r *Repo) Sync(ctx context.Context, name string, opt SyncOptions) (SyncResult, error) {
	return r.share(ctx, name, opt, func(s *session) error { return s.sync(ctx) })
}

// share runs one push, pull or sync with the remote name, and records how
// it went.
func (r *Repo) share(ctx context.Context, name string, opt SyncOptions, fn func(*session) error) (res SyncResult, err error) {
	if err := r.awaitStartCheck(ctx); err != nil { // what is pushed or merged holds the hand edits
		return SyncResult{}, err
	}
	err = r.sharer.run(ctx, r.life.Done(), func(known *redactionCache) error {
		if r.opt.ReadOnly {
			return ErrReadOnly
		}
		url, err := remoteURL(r.gitDir, name)
		if err != nil {
			return err
		}
		l := newLink(r, r.dir, r.gitDir, r.branch, name, url, opt)
		defer l.close()
		r.opt.hooks.atLink(l.st)
		s := newSession(l, r, r.opt, known)
		err = fn(s)
		s.noteSync(err)
		res = l.res
		return err
	})
	return res, r.gaveUp(err)
}

func (s *session) sync(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		if err := s.pull(ctx); err != nil {
			return err
		}
		err := s.push(ctx)
		if !errors.Is(err, ErrNonFastForward) {
			return err
		}
		if attempt >= s.opt.Retries {
			return &RemoteMovedError{Remote: s.name, Attempts: attempt + 1}
		}
		s.res.Retries++
		// Another agent pushed first. Wait a little, at random and longer
		// each time (up to a quarter second), so that agents racing for
		// the branch spread out.
		d := time.Duration(rand.IntN(min(20<<attempt, 250))+5) * time.Millisecond
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}

// fetch brings the remote's branch (and its redaction record) into the
// object store and moves the remote-tracking refs. It returns the
// remote's branch commit (zero: the remote has no such branch).
func (s *link) fetch(ctx context.Context) (plumbing.Hash, error) {
	conn, err := remote.Dial(ctx, s.url, s.dir, s.opt.auth(), false)
	if err != nil {
		return plumbing.ZeroHash, s.remoteErr("fetch from", err)
	}
	defer conn.Close()
	// What comes is in flight (see gd.Keep) until the remote-tracking
	// refs name it (or it is refused, and removed), then gitmem's own;
	// meanwhile no writer's start sweeps the pack folder (taken before
	// the packs' settling below is deferred: let go after it).
	defer gd.HoldFetch(s.gitDir)()
	var packs []plumbing.Hash
	defer func() {
		for _, h := range packs {
			gd.Settle(s.gitDir, h)
		}
	}()
	refs := conn.Refs()
	tip, rec := refs[s.branch], refs[redactionsRef]
	if err := s.checkRedactedHere(tip); err != nil {
		return plumbing.ZeroHash, err // before a single object of it comes
	}
	var wants []plumbing.Hash
	for _, h := range []plumbing.Hash{tip, rec} {
		if !h.IsZero() && !s.g.Has(h) {
			wants = append(wants, h)
		}
	}
	if len(wants) > 0 {
		haves, err := s.haves()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		n, err := conn.Fetch(ctx, s.st, wants, haves, s.opt.MaxFetchBytes)
		packs = s.st.Received()
		if err == nil {
			s.st.Reindex()
			err = s.checkReceived(packs, tip)
		}
		if err != nil {
			gd.RemovePacks(s.gitDir, packs)
			packs = nil
			s.st.Reindex()
			return plumbing.ZeroHash, s.remoteErr("fetch from", err)
		}
		s.res.Fetched += n
		s.store.withObjects(func(st *gd.Store) error {
			st.Reindex() // the new pack, for this process's reads
			return nil
		})
		for _, h := range wants {
			if !s.g.Has(h) {
				return plumbing.ZeroHash, s.remoteErr("fetch from", fmt.Errorf("the remote did not send the commit %s", h))
			}
		}
	}
	if err := s.checkNewHistory(tip); err != nil {
		return plumbing.ZeroHash, err // no ref reaches what came
	}
	if !tip.IsZero() {
		if s.prevTip.IsZero() {
			s.prevTip = s.readTracking()
		}
		if err := s.setRef(s.tracking(), tip); err != nil {
			return tip, wrap("update "+s.tracking().String(), err)
		}
	}
	if !rec.IsZero() {
		if err := s.setRef(remoteRedactionsRef(s.name), rec); err != nil {
			return tip, wrap("update the redaction record", err)
		}
	}
	return tip, nil
}

// haves are the commits a fetch tells the remote the memory holds, with
// all they reach: HEAD, this remote's tracking ref, the redaction
// records, and every other remote's tracking refs (each set only once
// what it names was fetched whole and checked), as git's negotiation
// offers its refs' tips. A remote holds HEAD seldom (a merge of the
// memory's own is on none); without the other remotes' refs, a pull from
// a remote that holds what another one brought fetched it all again.
func (s *link) haves() ([]plumbing.Hash, error) {
	head, err := s.store.headHash()
	if err != nil {
		return nil, err
	}
	cands := []plumbing.Hash{head, s.readTracking(), s.readRedactionsRef(s.name), s.readRedactionsRef("")}
	if others, err := gd.ListRefsUnder(s.gitDir, "refs/remotes/"); err == nil { // none listed: only what is above
		names := slices.Sorted(maps.Keys(others))
		for _, n := range names {
			cands = append(cands, others[n])
		}
	}
	var haves []plumbing.Hash
	for _, h := range cands {
		if !h.IsZero() && !slices.Contains(haves, h) && s.g.Has(h) {
			haves = append(haves, h)
		}
	}
	return haves, nil
}

func (s *session) pull(ctx context.Context) error {
	tip, err := s.fetch(ctx)
	if err != nil {
		return err
	}
	if err := s.applyRedactions(ctx, tip); err != nil {
		return err
	}
	if tip.IsZero() {
		s.res.UpToDate = true
		return nil
	}
	return s.integrate(ctx, tip)
}

// integrate merges the fetched commit tip into the memory as one Update
// (merger.commit).
func (s *session) integrate(ctx context.Context, tip plumbing.Hash) error {
	m := &merger{store: s.mem, hooks: s.memOpt.hooks, logf: s.memOpt.Logf, g: s.g, st: s.st, label: s.name + "/" + s.branch.Short(), theirs: tip, limits: s.opt.Limits,
		unrelated: s.opt.AllowUnrelatedHistories || readSyncState(s.gitDir)[s.name].ClonedEmpty}
	meta := Meta{Subject: "memory: merge " + m.label, Author: authorOr(s.opt.Author, s.memOpt.operator()),
		Trailers: []Trailer{{TrailerCommand, "merge"}}}
	c, err := m.commit(ctx, meta)
	switch {
	case errors.Is(err, errUpToDate):
		s.res.UpToDate = true
		return nil
	case err != nil:
		return err
	}
	s.res.Merged += m.commits
	s.res.Conflicts = append(s.res.Conflicts, m.conflicts...)
	s.res.Ignored = append(s.res.Ignored, m.ignored...)
	if m.ff {
		s.res.FastForward = c.Hash
	} else {
		s.res.Merge = c.Hash
		s.res.Merges++
	}
	for _, ig := range m.ignored {
		s.memOpt.Logf("gitmem: the merge of %s did not take %s (%s)", m.label, ig.Path, ig.Reason)
	}
	return nil
}

// push sends HEAD to the remote's branch when that is a fast-forward.
func (s *session) push(ctx context.Context) error {
	conn, err := remote.Dial(ctx, s.url, s.dir, s.opt.auth(), true)
	if err != nil {
		return s.remoteErr("push to", err)
	}
	defer conn.Close()
	refs := conn.Refs()
	theirs := refs[s.branch]
	head, err := s.store.headHash()
	if err != nil {
		return err
	}
	updates := []remote.Update{{Name: s.branch, Old: theirs, New: head}}
	if theirs == head {
		updates = nil
	} else if !theirs.IsZero() {
		if !s.g.Has(theirs) {
			return ErrNonFastForward
		}
		// The link's own View, which nothing else reads meanwhile, is
		// read mapped here and below, as git reads its packs: no pread
		// per entry of each delta chain (114,000 for a push of 10,000
		// commits).
		var in bool
		if err := s.st.Mapped(func() (err error) { in, err = s.g.IsAncestor(theirs, head); return err }); err != nil {
			return wrap("read the history", err)
		} else if !in {
			return ErrNonFastForward
		}
	}
	tips := []plumbing.Hash{head}
	if u, ok := s.redactionUpdate(refs); ok {
		updates = append(updates, u)
		tips = append(tips, u.New)
	}
	if len(updates) == 0 {
		return wrap("update "+s.tracking().String(), s.setRef(s.tracking(), head))
	}
	var haves []plumbing.Hash
	for _, h := range refs {
		if s.g.Has(h) {
			haves = append(haves, h)
		}
	}
	var objects []plumbing.Hash
	var commits []*object.Commit
	err = s.st.Mapped(func() (err error) {
		if objects, commits, err = s.g.Missing(tips, haves); err != nil {
			return wrap("find what the remote lacks", err)
		}
		return s.known.check(s.st, s.readRedactionsRef(""), objects)
	})
	if err != nil {
		return err
	}
	if err := conn.Push(ctx, s.st, objects, updates); err != nil {
		var rej *remote.RejectedError
		if errors.As(err, &rej) && rej.Ref == s.branch.String() && !declined(rej.Reason) {
			return fmt.Errorf("%w (%s)", ErrNonFastForward, rej.Reason)
		}
		return s.remoteErr("push to", err)
	}
	s.res.Pushed += countCommits(commits, head)
	if err := s.setRef(s.tracking(), head); err != nil {
		return wrap("update "+s.tracking().String(), err)
	}
	return nil
}

// declined reports whether the remote's reason for refusing a push says
// it refuses it as such (a hook, a protected branch, a permission), not
// that the branch moved: pulling and pushing again would not help.
func declined(reason string) bool {
	reason = strings.ToLower(reason)
	for _, w := range []string{"declined", "denied", "deny", "protected", "refus", "not allowed", "permission", "checked out", "funny refname"} {
		if strings.Contains(reason, w) {
			return true
		}
	}
	return false
}

// countCommits counts the memory's commits among those sent (not the
// redaction record's).
func countCommits(commits []*object.Commit, _ plumbing.Hash) int {
	n := 0
	for _, c := range commits {
		if _, _, t := parseMessage(c.Message); trailerValue(t, TrailerCommand) != redactionRecordCommand {
			n++
		}
	}
	return n
}

// SyncStatus is where the memory stands against a remote, as last seen.
type SyncStatus struct {
	Remote      string
	URL         string
	Tracking    string    // the remote's branch commit when last fetched or pushed ("" never)
	Ahead       int       // commits of HEAD the remote (as last seen) lacks: not yet pushed
	Behind      int       // commits of the remote (as last seen) not yet merged
	LastSync    time.Time // the last successful push, pull or sync
	LastAttempt time.Time
	LastError   string // of the last attempt, "" if it succeeded
	Refused     bool   // the last attempt's error was a refusal (see Refused)
	// RedactedHere is when a redaction made here without --push rewrote
	// the remote's history as last seen, after the last sync, and no
	// fetch has moved it since: the remote still holds what it removed,
	// and syncs with it are refused until the same redaction is pushed
	// (zero: none).
	RedactedHere time.Time
}

// Status reports where the memory stands against a remote, from what was
// last fetched (no network).
func (r *Repo) Status(ctx context.Context, name string) (SyncStatus, error) {
	// git's files brought up to date here, where ctx ends the wait for
	// the disk lock; the store's headHash (no ctx) then has at most what
	// was published meanwhile to materialise.
	if err := r.gitUpToDate(ctx); err != nil {
		return SyncStatus{}, err
	}
	return syncStatus(r, r.gitDir, r.branch, name)
}

// syncStatus is Status of the remote name of the repository at gitDir,
// whose branch is branch and whose HEAD and objects store holds.
func syncStatus(store shareStore, gitDir string, branch plumbing.ReferenceName, name string) (SyncStatus, error) {
	url, err := remoteURL(gitDir, name)
	if err != nil {
		return SyncStatus{}, err
	}
	st := SyncStatus{Remote: name, URL: url}
	rec := readSyncState(gitDir)[name]
	st.LastSync, st.LastAttempt, st.LastError, st.Refused = rec.LastSync, rec.LastAttempt, rec.LastError, rec.Refused
	track := readTracking(gitDir, branch, name)
	for _, lr := range localRedactions(gitDir) {
		if lr.Time.After(st.LastSync) && !track.IsZero() && lr.Refs[trackingRef(branch, name).String()] == track.String() {
			st.RedactedHere = lr.Time
			break
		}
	}
	head, err := store.headHash()
	if err != nil {
		return st, err
	}
	view := store.objectView()
	defer view.Close()
	g := gd.NewGraph(view)
	if track.IsZero() {
		st.Ahead, err = countExclusive(g, head, plumbing.ZeroHash)
		return st, err
	}
	st.Tracking = track.String()
	if st.Ahead, err = countExclusive(g, head, track); err != nil {
		return st, err
	}
	st.Behind, err = countExclusive(g, track, head)
	return st, err
}

// countExclusive counts the commits of g reachable from a and not from b.
func countExclusive(g *gd.Graph, a, b plumbing.Hash) (int, error) {
	if a.IsZero() {
		return 0, nil
	}
	cs, err := g.Exclusive([]plumbing.Hash{a}, parentList(b))
	return len(cs), wrap("read the history", err)
}

// syncState is what .git/gitmem/sync keeps per remote: when sharing last
// worked, and the last error.
type syncState struct {
	LastSync    time.Time `json:"last_sync,omitzero"`
	LastAttempt time.Time `json:"last_attempt,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	Refused     bool      `json:"refused,omitempty"`
	// ClonedEmpty: the memory was cloned from this remote while it had no
	// branch, so the first history the remote then holds (another agent's
	// first push) is merged even though it shares no commit with the
	// memory's own first one; cleared once a sync saw the branch.
	ClonedEmpty bool `json:"cloned_empty,omitempty"`
}

func syncStatePath(gitDir string) string { return filepath.Join(gitDir, "gitmem", "sync") }

// maxSyncStateBytes bounds the sync state read: a record per remote of a
// few times and an error's text; a larger file (made so by hand) is
// read as none, as one that does not parse is, and written anew at the
// next push, pull or sync.
const maxSyncStateBytes = 8 << 20

// readSyncState reads .git/gitmem/sync: a regular file only (a named
// pipe put there is not waited on: read as none).
func readSyncState(gitDir string) map[string]syncState {
	out := map[string]syncState{}
	if data, err := gd.ReadFileMax(syncStatePath(gitDir), maxSyncStateBytes); err == nil {
		json.Unmarshal(data, &out)
	}
	return out
}

// noteSync records the outcome of a push, pull or sync (best effort: it
// is a report, not a state gitmem depends on).
func (s *session) noteSync(err error) {
	s.changeSyncState(func(st *syncState) {
		st.LastAttempt = s.memOpt.Now()
		st.LastError, st.Refused = "", Refused(err)
		if err != nil {
			st.LastError = err.Error()
		} else {
			st.LastSync = st.LastAttempt
			st.ClonedEmpty = st.ClonedEmpty && s.readTracking().IsZero()
		}
	})
}

// changeSyncState changes what .git/gitmem/sync keeps for the session's
// remote. Only sessions write the file: under the sharer's lock.
func (s *session) changeSyncState(fn func(*syncState)) {
	all := readSyncState(s.gitDir)
	st := all[s.name]
	fn(&st)
	all[s.name] = st
	data, _ := json.Marshal(all)
	if werr := gd.WriteFileSync(filepath.Join(s.gitDir, "gitmem", "tmp"), "sync-", syncStatePath(s.gitDir), data, 0o600); werr != nil {
		s.memOpt.Logf("gitmem: could not record the sync state: %v", scrubPaths(werr))
	}
}

// prepareFastForward prepares moving the branch to the fetched commit
// tx.ff, whose tree tx holds: a commit of the pipeline with no objects of
// its own (the fetch made them durable before), so that the log, the
// worktree and the published state follow it as they follow any commit.
// Called by prepare, with the turn held.
func (r *Repo) prepareFastForward(tx *Tx) (*prepared, error) {
	r.objects.lock()
	var c *object.Commit
	var rec histRec
	err := r.objects.st.Mapped(func() (err error) {
		if c, err = r.objects.st.Commit(tx.ff); err == nil {
			rec, err = r.hist().recordOf(c)
		}
		return err
	})
	r.objects.unlock()
	if err != nil {
		return nil, wrap("read the fetched commit", err)
	}
	p := &prepared{hash: tx.ff, parent: tx.head, tree: tx.root, merged: tx.mergedIDs, rec: rec, commit: commitOf(c), pulled: tx.pulled}
	if tx.mirror {
		p.paths = tx.touched()
	}
	return r.committer.enqueue(p, tx.head)
}

// Clone makes a new memory in dir from the remote at url (which becomes
// the remote "origin"): the remote's branch is checked like any pull —
// when its tree is one gitmem would have made, the memory starts at the
// remote's commit; otherwise a new memory merges it, leaving out what it
// cannot hold. An empty remote gives an empty memory, whose first push
// creates the remote's branch, and whose first sync merges what another
// agent pushed there first (their first commits differ: see
// syncState.ClonedEmpty). dir must not exist or be empty.
func Clone(ctx context.Context, url, dir string, opt Options, sopt SyncOptions) (*Repo, SyncResult, error) {
	if err := remote.CheckURL(url); err != nil {
		return nil, SyncResult{}, &BadRemoteError{err.Error()}
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return nil, SyncResult{}, ErrNotEmpty
	}
	_, existed := os.Stat(dir)
	fail := func(err error) (*Repo, SyncResult, error) {
		if existed != nil {
			os.RemoveAll(dir)
		} else {
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
		return nil, SyncResult{}, err
	}
	if _, err := initGitDir(dir, opt.hooks.gdEnv()); err != nil {
		return fail(err)
	}
	gitDir := filepath.Join(dir, ".git")
	if err := os.MkdirAll(filepath.Join(gitDir, "gitmem", "tmp"), dirMode); err != nil {
		return fail(wrap("prepare the repository", err))
	}
	if err := gd.AddRemote(gitDir, "origin", url); err != nil {
		return fail(wrap("write .git/config", err))
	}
	opt.defaults(dir)
	sopt.defaults()
	tip, empty, res, err := cloneFetch(ctx, dir, url, opt, sopt)
	if err != nil {
		return fail(err)
	}
	r, err := Open(ctx, dir, opt)
	if err != nil {
		return fail(err)
	}
	err = r.sharer.run(ctx, r.life.Done(), func(known *redactionCache) error {
		l := newLink(r, dir, r.gitDir, r.branch, "origin", url, sopt)
		defer l.close()
		l.res = res
		s := newSession(l, r, r.opt, known)
		if !tip.IsZero() { // a tree gitmem would not have made: merge what it can hold
			err := s.integrate(ctx, tip)
			res = l.res
			if err != nil {
				return err
			}
		}
		s.noteSync(nil)
		if empty { // the first history another agent pushes there is this memory's to merge
			s.changeSyncState(func(st *syncState) { st.ClonedEmpty = true })
		}
		return nil
	})
	if err != nil {
		r.Close()
		return fail(err)
	}
	return r, res, nil
}

// cloneFetch fetches the remote's branch into the new repository at dir
// before it is first opened, into a repository with no branch yet. When
// its tree is one gitmem would have made, the branch is set to it and the
// first open checks it out; otherwise the memory gets an empty first
// commit, and tip is the commit to merge once it is open. empty says the
// remote has no branch.
func cloneFetch(ctx context.Context, dir, url string, opt Options, sopt SyncOptions) (tip plumbing.Hash, empty bool, res SyncResult, err error) {
	gitDir := filepath.Join(dir, ".git")
	cs := &cloneStore{gitDir: gitDir, branch: plumbing.NewBranchReferenceName("main"), obj: opt.hooks.open(gitDir)}
	defer cs.obj.Close()
	s := newLink(cs, dir, gitDir, cs.branch, "origin", url, sopt)
	defer s.close()
	tip, err = s.fetch(ctx)
	empty = err == nil && tip.IsZero()
	if rec := s.readRedactionsRef("origin"); err == nil && !rec.IsZero() {
		// The history fetched is the remote's, redactions applied: its
		// record is this clone's too, once it checks.
		if _, err = readRecord(s.st, rec); err != nil {
			err = s.remoteErr("fetch from", err)
		} else {
			err = s.setRef(redactionsRef, rec)
		}
	}
	if err == nil && !tip.IsZero() {
		var clean bool
		if clean, err = s.clean(tip); err == nil && clean {
			if err = cs.obj.UpdateRef(context.Background(), cs.branch, plumbing.ZeroHash, tip, true); err == nil {
				// Opening brings the worktree to the branch, as after a
				// crash, but quietly: a first checkout, nothing to recover.
				err = writeJournal(cs.obj.Env, gitDir, journal{Paths: []string{memDir}, Checkout: true})
			}
			tip = plumbing.ZeroHash
		} else if err == nil {
			// A tree gitmem would not have made: the memory starts empty
			// and merges what it can hold once it is open (Clone).
			err = s.initCommit(opt)
		}
	}
	return tip, empty, s.res, err
}

// initCommit makes a new repository's first commit, an empty memory, as
// Open would (it refuses to start one where commits exist: these are the
// remote's, fetched).
func (s *link) initCommit(opt Options) error {
	tree := objectOf(plumbing.TreeObject, nil)
	msg := Meta{Subject: "memory: init", Trailers: []Trailer{{TrailerCommand, "init"}}}.message()
	raw, err := encodeCommit(tree.Hash, nil, opt.operator(), opt.Committer, opt.Now(), msg)
	if err != nil {
		return wrap("write the first commit", err)
	}
	c := objectOf(plumbing.CommitObject, raw)
	return wrap("write the first commit", s.writeNamed([]gd.Object{tree, c}, func() error {
		return s.store.withObjects(func(st *gd.Store) error {
			return st.UpdateRef(context.Background(), s.branch, plumbing.ZeroHash, c.Hash, true)
		})
	}))
}

// clean reports whether the tree of commit h is one gitmem would have
// made: nothing but memories/, every file valid and within the limits.
func (s *link) clean(h plumbing.Hash) (bool, error) {
	m := &merger{g: s.g, st: s.st, limits: s.opt.Limits} // no store: clean reads the remote's commit alone
	c, err := s.g.Commit(h)
	if err != nil {
		return false, wrap("read the remote's commit", err)
	}
	m.checkOutside(plumbing.ZeroHash, c.TreeHash)
	d := map[string]fchange{}
	if err := m.diff(plumbing.ZeroHash, m.memTree(c.TreeHash), "", d); err != nil {
		return false, wrap("read the remote's tree", err)
	}
	files, size := 0, int64(0)
	for _, ch := range d {
		files++
		if n, err := s.st.Size(ch.new.hash); err == nil {
			size += n
		}
	}
	sanitized := m.sanitize(d)
	l := s.opt.Limits
	return len(m.ignored) == 0 && !sanitized && files <= l.MaxFiles && size <= l.MaxTotalBytes, nil
}

// reopen starts the session's view of the objects afresh (packs were
// replaced or deleted).
func (s *link) reopen() {
	s.st.Close()
	s.st = s.store.objectView()
	s.g = gd.NewGraph(s.st)
}
