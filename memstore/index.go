package memstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
)

// Trailers this package writes, beside gitmem's Memory-Command,
// Memory-Path, Memory-New-Path and Session.
const (
	TrailerMemoryID       = "Memory-Id"
	TrailerVersion        = "Memory-Version"
	TrailerRedacted       = "Memory-Redacted"
	TrailerAPIKey         = "Api-Key-Id"
	TrailerIdempotencyKey = "Idempotency-Key"
	// Only on versions imported from another Memory Store (Replay): a
	// service account made it, or nobody was recorded.
	TrailerServiceAccount = "Service-Account-Id"
	TrailerNoActor        = "Actor-Unrecorded"
)

// Memory-Command values of this package's commits. create and delete are
// also the memory tool's commands: a Memory-Version trailer tells this
// package's commits apart.
const (
	CommandCreate = "create"
	CommandUpdate = "update"
	CommandDelete = "delete"
	CommandRedact = "redact"
)

// Operations of a version, as the API names them.
const (
	Created  = "created"
	Modified = "modified"
	Deleted  = "deleted"
)

// Actor types, as the API names them.
const (
	APIActor            = "api_actor"
	SessionActor        = "session_actor"
	UserActor           = "user_actor"
	ServiceAccountActor = "service_account_actor" // only on imported versions
)

// Actor is who made a change: an API key (a token's name), a session, or
// a user (an operator's commit, named by its author); on a version
// imported from another Memory Store, also a service account. The zero
// Actor is "not recorded".
type Actor struct{ Type, ID string }

// version is one memory changed by one commit.
type version struct {
	id, memID  string
	op         string
	seq        int // place in state.versions
	commit     string
	time       time.Time
	path       string // relative to memories/
	blob       string // "" for a deletion
	by         Actor
	session    string
	redactedAt time.Time
	redactedBy Actor
}

// memory is a memory, live or deleted.
type memory struct {
	id      string
	path    string // its path now, or when it was deleted
	live    bool
	created time.Time
	cur     *version // its newest version
}

// state is what the first-parent history up to tip says: the memories and
// their versions.
type state struct {
	tip      string
	depth    int // tip's place on the first-parent chain (the root's is 0)
	live     map[string]*memory
	mems     map[string]*memory
	versions []*version
	verByID  map[string]*version
	idem     map[string]string // idemKey -> the version id of the create
}

func newState() *state {
	return &state{depth: -1, live: map[string]*memory{}, mems: map[string]*memory{}, verByID: map[string]*version{},
		idem: map[string]string{}}
}

func idemKey(apiKey, key string) string { return apiKey + "\x00" + key }

// stableKey is what a redaction leaves of a commit: its place on the
// first-parent chain, author, time, subject and trailers.
func stableKey(c gitmem.Commit, depth int) string {
	h := sha256.New()
	for _, s := range []string{strconv.Itoa(depth), c.Author.Name, c.Author.Email, strconv.FormatInt(c.Time.Unix(), 10), c.Subject} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	for _, t := range c.Trailers {
		h.Write([]byte(t.Key + ": " + t.Value))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// actorOf is who made a commit: the API key of this package's commits,
// else the session of a tool call, else the author of a tool call (the
// multi-store server's token), else the author as a user (an operator).
// An imported version's commit may also name a service account, or
// nobody.
func actorOf(c gitmem.Commit) Actor {
	switch {
	case c.Trailer(TrailerNoActor) != "":
		return Actor{}
	case c.Trailer(TrailerAPIKey) != "":
		return Actor{APIActor, c.Trailer(TrailerAPIKey)}
	case c.Trailer(TrailerServiceAccount) != "":
		return Actor{ServiceAccountActor, c.Trailer(TrailerServiceAccount)}
	case c.Trailer(gitmem.TrailerSession) != "":
		return Actor{SessionActor, c.Trailer(gitmem.TrailerSession)}
	case c.Author.Name == "":
		return Actor{}
	case c.Trailer(gitmem.TrailerToolUseID) != "":
		return Actor{APIActor, c.Author.Name}
	}
	return Actor{UserActor, c.Author.Name}
}

// relOf is a Memory-Path value relative to memories/.
func relOf(display string) string {
	return strings.TrimPrefix(strings.TrimPrefix(display, policy.Root), "/")
}

// apply adds the next commit of the first-parent chain.
func (s *state) apply(c gitmem.Commit) {
	s.tip = c.Hash
	s.depth++
	if c.Trailer(gitmem.TrailerCommand) == CommandRedact {
		by := actorOf(c)
		for _, t := range c.Trailers {
			if v := s.verByID[t.Value]; t.Key == TrailerRedacted && v != nil && v.redactedAt.IsZero() {
				v.redactedAt, v.redactedBy = c.Time, by
			}
		}
		return
	}
	if len(c.Paths) == 0 {
		return // store metadata, a redaction record, a commit of nothing
	}
	blobs := make(map[string]string, len(c.Paths))
	for i, p := range c.Paths {
		if i < len(c.Blobs) {
			blobs[p] = c.Blobs[i]
		}
	}
	key := stableKey(c, s.depth)
	handled := map[string]bool{}
	vid, mid := c.Trailer(TrailerVersion), c.Trailer(TrailerMemoryID)
	switch cmd := c.Trailer(gitmem.TrailerCommand); {
	case vid != "" && mid != "":
		s.applyOwn(c, cmd, vid, mid, blobs, handled)
	case cmd == "rename" && len(c.Parents) <= 1:
		s.applyRename(c, key, blobs, handled)
	}
	for _, p := range c.Paths {
		if handled[p] {
			continue
		}
		b, m := blobs[p], s.live[p]
		switch {
		case b == "" && m != nil:
			s.end(m, c, derivedID(PrefixVersion, key, m.id))
		case b == "":
		case m != nil:
			s.add(m, Modified, c, derivedID(PrefixVersion, key, m.id), p, b)
		default:
			m := &memory{id: derivedID(PrefixMemory, key, p), created: c.Time}
			s.place(m, p)
			s.add(m, Created, c, derivedID(PrefixVersion, key, m.id), p, b)
		}
	}
}

// applyOwn applies a commit of this package: its trailers name the memory
// and the version, and where the memory was and went.
func (s *state) applyOwn(c gitmem.Commit, cmd, vid, mid string, blobs map[string]string, handled map[string]bool) {
	from := relOf(c.Trailer(gitmem.TrailerPath))
	to := from
	if np := c.Trailer(gitmem.TrailerNewPath); np != "" {
		to = relOf(np)
	}
	m := s.mems[mid]
	if cmd == CommandDelete {
		if m != nil && m.live {
			handled[m.path] = true
			s.end(m, c, vid)
		}
		return
	}
	b, ok := blobs[to]
	if !ok && m != nil && m.cur != nil {
		b = m.cur.blob // renamed onto itself: nothing else to go by
	}
	op := Modified
	if m == nil || !m.live {
		op = Created
		m = &memory{id: mid, created: c.Time}
		if k := c.Trailer(TrailerIdempotencyKey); k != "" {
			s.idem[idemKey(c.Trailer(TrailerAPIKey), k)] = vid
		}
	}
	if m.live && s.live[m.path] == m {
		delete(s.live, m.path)
		handled[m.path] = true
	}
	s.place(m, to)
	handled[to] = true
	s.add(m, op, c, vid, to, b)
}

// applyRename applies the memory tool's rename: every memory at or below
// the old path moves, keeping its id.
func (s *state) applyRename(c gitmem.Commit, key string, blobs map[string]string, handled map[string]bool) {
	from, to := relOf(c.Trailer(gitmem.TrailerPath)), relOf(c.Trailer(gitmem.TrailerNewPath))
	if from == "" || to == "" {
		return
	}
	var moved []*memory
	for p, m := range s.live {
		if p == from || strings.HasPrefix(p, from+"/") {
			if _, ok := blobs[to+strings.TrimPrefix(p, from)]; ok {
				moved = append(moved, m)
			}
		}
	}
	slices.SortFunc(moved, func(a, b *memory) int { return strings.Compare(a.path, b.path) })
	for _, m := range moved {
		delete(s.live, m.path)
		handled[m.path] = true
	}
	for _, m := range moved {
		np := to + strings.TrimPrefix(m.path, from)
		s.place(m, np)
		handled[np] = true
		s.add(m, Modified, c, derivedID(PrefixVersion, key, m.id), np, blobs[np])
	}
}

// place makes m the live memory at p (a memory there before ends without a
// version: only an inconsistent history has one).
func (s *state) place(m *memory, p string) {
	if old := s.live[p]; old != nil && old != m {
		old.live = false
	}
	m.path, m.live = p, true
	s.live[p] = m
	s.mems[m.id] = m
}

func (s *state) add(m *memory, op string, c gitmem.Commit, vid, p, blob string) {
	v := &version{id: vid, memID: m.id, op: op, seq: len(s.versions), commit: c.Hash, time: c.Time, path: p, blob: blob,
		by: actorOf(c), session: c.Trailer(gitmem.TrailerSession)}
	if s.verByID[vid] != nil { // a trailer copied by hand: the first keeps the id
		v.id = derivedID(PrefixVersion, vid, c.Hash, p)
	}
	s.versions = append(s.versions, v)
	s.verByID[v.id] = v
	m.cur = v
}

// end deletes m.
func (s *state) end(m *memory, c gitmem.Commit, vid string) {
	s.add(m, Deleted, c, vid, m.path, "")
	delete(s.live, m.path)
	m.live = false
}

// pending is a write of this package that the state does not hold yet: in
// flight, or answered but not yet read back from the history.
type pending struct {
	vid, mid string
	op       string // CommandCreate, CommandUpdate, CommandDelete
	from, to string // relative paths: from "" for a create, to "" for a delete
	parent   string // the commit it was built on
	hash     string // its commit, once known
	time     time.Time
	idem     string
	done     chan struct{} // closed once its write returned (answered, or failed and forgotten)
}

// Index is the Memory Stores view of one store's history: the memories
// and versions of its first-parent chain, kept in memory and caught up as
// the history grows (see the package documentation). Safe for concurrent
// use; every method takes the store's repository, which it does not keep.
type Index struct {
	mu      sync.Mutex
	s       *state     // nil until first caught up
	overlay []*pending // oldest first: each built on the one before, the first on s.tip

	shaMu sync.Mutex
	shas  map[string]contentSum // by blob hash: a blob's content never changes

	catching sync.Mutex // held by the write that catches up for the others
}

type contentSum struct {
	sha  string
	size int64
}

// NewIndex returns an empty index; it reads the history at its first use.
func NewIndex() *Index { return &Index{shas: map[string]contentSum{}} }

var (
	errStop  = errors.New("stop")
	errStale = errors.New("memstore: the store changed beside this write")
)

// ErrBusy is a request that could not see one consistent state of a store
// that kept changing under it (it may be retried); nothing was changed.
var ErrBusy = errors.New("the memory store kept changing during the request; retry it")

// catchUp brings the state up to the store's head.
func (ix *Index) catchUp(ctx context.Context, repo *gitmem.Repo) error {
	snap, err := repo.Snapshot(ctx)
	if err != nil {
		return err
	}
	ix.mu.Lock()
	tip, have := "", ix.s != nil
	if have {
		tip = ix.s.tip
	}
	ix.mu.Unlock()
	if have && snap.Head() == tip {
		return nil
	}
	chain, err := firstParents(ctx, repo, tip)
	if err != nil {
		return err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	switch {
	case chain.fromRoot:
		s := newState()
		for _, c := range chain.commits {
			s.apply(c)
		}
		ix.s, ix.overlay = s, nil
	case ix.s != nil && ix.s.tip == tip:
		for _, c := range chain.commits {
			ix.s.apply(c)
			ix.settled(c.Trailer(TrailerVersion))
		}
	} // else another caller caught up meanwhile
	return nil
}

// settled drops the pending writes up to the one with version id vid,
// which the state now holds (those before it failed).
func (ix *Index) settled(vid string) {
	if vid == "" {
		return
	}
	for i, e := range ix.overlay {
		if e.vid == vid {
			ix.overlay = ix.overlay[i+1:]
			return
		}
	}
}

type chain struct {
	commits  []gitmem.Commit // oldest first
	fromRoot bool            // from the first commit: a new state
}

// firstParents reads the first-parent chain from the head back to tip
// (exclusive), or from the root when tip is "" or no longer in the
// history (rewritten).
func firstParents(ctx context.Context, repo *gitmem.Repo, tip string) (chain, error) {
	for {
		byHash := map[string]gitmem.Commit{}
		var head string
		found := false
		err := repo.Log(ctx, gitmem.LogOptions{}, nil, func(c gitmem.Commit) error {
			if head == "" {
				head = c.Hash
			}
			if tip != "" && c.Hash == tip {
				found = true
				return errStop
			}
			byHash[c.Hash] = c
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			return chain{}, err
		}
		if tip != "" && head == tip {
			return chain{}, nil
		}
		var out []gitmem.Commit
		for h := head; h != "" && h != tip; {
			c, ok := byHash[h]
			if !ok {
				break
			}
			out = append(out, c)
			h = ""
			if len(c.Parents) > 0 {
				h = c.Parents[0]
			}
			if h == "" && tip != "" {
				out = nil // the root, not tip: tip is not on the chain
			}
		}
		slices.Reverse(out)
		switch {
		case tip == "":
			return chain{commits: out, fromRoot: true}, nil
		case found && len(out) > 0 && len(out[0].Parents) > 0 && out[0].Parents[0] == tip:
			return chain{commits: out}, nil
		}
		tip = "" // rewritten, or tip is off the first-parent chain: from the root
	}
}

// view runs fn on the state and a snapshot of the same commit, under the
// index's lock: fn copies what it needs and calls nothing that waits.
func (ix *Index) view(ctx context.Context, repo *gitmem.Repo, fn func(s *state, snap *gitmem.View) error) error {
	for range 100 {
		if err := ix.catchUp(ctx, repo); err != nil {
			return err
		}
		snap, err := repo.Snapshot(ctx)
		if err != nil {
			return err
		}
		ix.mu.Lock()
		if ix.s.tip == snap.Head() {
			err = fn(ix.s, snap)
			ix.mu.Unlock()
			return err
		}
		ix.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return ErrBusy
}

// validate checks, in a transaction under the writer lock, that the
// state and the pending writes describe the commit tx builds on, learning
// that commit's hash when it is the newest pending write's. Called with
// ix.mu held.
func (ix *Index) validate(tx *gitmem.Tx) error {
	head := tx.Head()
	if head == ix.s.tip {
		ix.overlay = nil // what was pending failed, or is in the state
		return nil
	}
	for i := len(ix.overlay) - 1; i >= 0; i-- {
		if ix.overlay[i].hash == head {
			ix.overlay = ix.overlay[:i+1] // those after it failed
			return nil
		}
	}
	if n := len(ix.overlay); n > 0 && ix.overlay[n-1].hash == "" {
		last := ix.overlay[n-1]
		c, err := tx.HeadCommit()
		if err == nil && c.Trailer(TrailerVersion) == last.vid && len(c.Parents) > 0 && c.Parents[0] == last.parent {
			last.hash, last.time = head, c.Time
			return nil
		}
	}
	return errStale
}

// forget drops the pending write vid (its commit failed, or its
// transaction runs again). Called with ix.mu held.
func (ix *Index) forget(vid string) {
	ix.overlay = slices.DeleteFunc(ix.overlay, func(e *pending) bool { return e.vid == vid })
}

// writerMemory is memory mid as the writer sees it: the state and the
// pending writes. Called with ix.mu held.
func (ix *Index) writerMemory(mid string) (Memory, bool) {
	var mem Memory
	live := false
	if m := ix.s.mems[mid]; m != nil {
		mem = Memory{ID: m.id, Path: m.path, VersionID: m.cur.id, Created: m.created, Updated: m.cur.time}
		live = m.live
	}
	for _, e := range ix.overlay {
		if e.mid != mid {
			continue
		}
		switch e.op {
		case CommandCreate:
			mem, live = Memory{ID: mid, Path: e.to, VersionID: e.vid, Created: e.time, Updated: e.time}, true
		case CommandUpdate:
			mem.Path, mem.VersionID, mem.Updated = e.to, e.vid, e.time
		case CommandDelete:
			live = false
		}
	}
	return mem, live
}

// writerIDAt is the id of the memory at path p as the writer sees it ("":
// none known). Called with ix.mu held.
func (ix *Index) writerIDAt(p string) string {
	id := ""
	if m := ix.s.live[p]; m != nil {
		id = m.id
	}
	for _, e := range ix.overlay {
		switch {
		case e.to == p:
			id = e.mid
		case e.from == p:
			id = ""
		}
	}
	return id
}

// writerIdem is the version id of the create an idempotency key made ("":
// none), or, while that create is still being written (its commit not
// yet durable nor readable), a channel closed once it returned. Called
// with ix.mu held.
func (ix *Index) writerIdem(k string) (string, <-chan struct{}) {
	for i := len(ix.overlay) - 1; i >= 0; i-- {
		if e := ix.overlay[i]; e.idem == k {
			select {
			case <-e.done:
				return e.vid, nil
			default:
				return "", e.done
			}
		}
	}
	return ix.s.idem[k], nil
}

// sum is the SHA-256 and size of a blob's content (data, when the caller
// has it; else read).
func (ix *Index) sum(repo *gitmem.Repo, blob string, data []byte) (contentSum, error) {
	ix.shaMu.Lock()
	cs, ok := ix.shas[blob]
	ix.shaMu.Unlock()
	if ok {
		return cs, nil
	}
	if data == nil {
		var err error
		if data, err = repo.Blob(blob); err != nil {
			return contentSum{}, err
		}
	}
	cs = contentSum{SHA256(data), int64(len(data))}
	ix.shaMu.Lock()
	ix.shas[blob] = cs
	ix.shaMu.Unlock()
	return cs, nil
}

// SHA256 is the lowercase hex SHA-256 of content, as the API reports it.
func SHA256(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}
