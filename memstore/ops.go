package memstore

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
)

// Errors of this package's operations; nothing was changed. Callers test
// them with errors.Is and errors.As.
var (
	ErrNotFound     = errors.New("not found")
	ErrPrecondition = errors.New("the memory's content_sha256 is not the expected one")
	// ErrNotUTF8 refuses an update of a memory's content on the condition
	// of its content_sha256 when the memory is not valid UTF-8: what any
	// client read of it (U+FFFD in place of the bytes that are not) is not
	// what it holds, and writing that back would rewrite bytes nobody saw.
	ErrNotUTF8 = errors.New("the memory is not valid UTF-8")
)

// PathConflictError is a create or rename onto a path that a memory holds,
// or that is above or below a memory's path (a file cannot also be a
// folder). MemoryID is that memory's id ("" when it cannot be told).
type PathConflictError struct{ Path, MemoryID string }

func (e *PathConflictError) Error() string {
	return "the path conflicts with the memory at " + apiPath(e.Path)
}

// ConflictError is a request that the store's state refuses, other than
// by a path or a precondition (the content to redact is a memory's
// current content; an idempotency key used for another request).
type ConflictError struct{ Msg string }

func (e *ConflictError) Error() string { return e.Msg }

// Memory is a memory as the API shows it. Path is the API's ("/a/b.md").
type Memory struct {
	ID        string
	Path      string
	Content   []byte // only when asked for
	SHA256    string
	Size      int64
	VersionID string
	Created   time.Time
	Updated   time.Time
}

// Version is a version as the API shows it. A redacted version has no
// Path, content, SHA256 or size; a deletion no content, SHA256 or size.
type Version struct {
	ID, MemoryID, Operation string
	Created                 time.Time
	Path                    string // "" when redacted
	Content                 []byte // only when asked for
	SHA256                  string // "" for a deletion or a redacted version
	Size                    int64
	By                      Actor
	RedactedAt              time.Time
	RedactedBy              Actor

	blob string
}

// Caller is who makes a request: an API key (a token's name), the session
// it names (optional), and the commit author it stands for.
type Caller struct {
	APIKey  string
	Session string
	Author  gitmem.Signature
}

func (c Caller) meta(subject, command string, trailers ...gitmem.Trailer) gitmem.Meta {
	ts := []gitmem.Trailer{{Key: gitmem.TrailerCommand, Value: command}}
	ts = append(ts, trailers...)
	ts = append(ts, gitmem.Trailer{Key: TrailerAPIKey, Value: policy.CommitText(c.APIKey, policy.MaxCallerBytes)},
		gitmem.Trailer{Key: gitmem.TrailerSession, Value: policy.CommitText(c.Session, policy.MaxCallerBytes)})
	return gitmem.Meta{Subject: subject, Author: c.Author, Trailers: ts}
}

// maxPending is how many answered writes the index keeps pending (each
// write looks through them) before one write reads them back from the
// history.
const maxPending = 1024

// maxAttempts bounds how often a write runs again because the store
// changed beside it (a tool call, another process): then ErrBusy.
const maxAttempts = 50

// check runs a request's Check, if any, on the commit tx builds on.
func check(c func(tip string) error, tx *gitmem.Tx) error {
	if c == nil {
		return nil
	}
	return c(tx.Head())
}

// write commits what fn does in a transaction, checked against the state
// under the writer lock (validate) and recorded as pending. fn runs with
// ix.mu held.
func (ix *Index) write(ctx context.Context, repo *gitmem.Repo, meta gitmem.Meta, vid string, fn func(tx *gitmem.Tx) (*pending, error)) (gitmem.Commit, error) {
	for attempt := 0; ; attempt++ {
		ix.mu.Lock()
		fresh := ix.s != nil
		ix.mu.Unlock()
		if !fresh || attempt > 0 {
			if attempt > 1 {
				time.Sleep(time.Duration(min(attempt, 20)) * time.Millisecond)
			}
			if err := ix.catchUp(ctx, repo); err != nil {
				return gitmem.Commit{}, err
			}
		}
		var made []*pending // fn runs again when Update adopts a hand edit
		c, err := repo.Update(ctx, meta, func(tx *gitmem.Tx) error {
			ix.mu.Lock()
			defer ix.mu.Unlock()
			ix.forget(vid)
			if err := ix.validate(tx); err != nil {
				return err
			}
			e, err := fn(tx)
			if err != nil {
				return err
			}
			e.vid, e.parent, e.done = vid, tx.Head(), make(chan struct{})
			ix.overlay = append(ix.overlay, e)
			made = append(made, e)
			return nil
		})
		c.Time = c.Time.Truncate(time.Second) // as git keeps it, and Log gives it
		ix.mu.Lock()
		if err != nil {
			ix.forget(vid)
		} else {
			for _, e := range ix.overlay {
				if e.vid == vid {
					e.hash, e.time = c.Hash, c.Time
				}
			}
		}
		long := len(ix.overlay) > maxPending
		ix.mu.Unlock()
		for _, e := range made {
			close(e.done) // what waits for it (writerIdem) may read it now
		}
		if errors.Is(err, errStale) {
			if attempt+1 < maxAttempts && ctx.Err() == nil {
				continue
			}
			return c, ErrBusy
		}
		// Answered writes are read back from the history now and then, by
		// one write at a time (a catch-up waits for git's files to follow).
		if long && ix.catching.TryLock() {
			ix.catchUp(ctx, repo)
			ix.catching.Unlock()
		}
		return c, err
	}
}

// put writes content at p unless a memory holds p or overlaps it: then
// it returns that memory's path and writes nothing. Only p itself is
// looked at (a folder looked at is checked for hand edits beneath it, at
// every write): the folders above are, when WriteFile says one is a file.
func put(tx *gitmem.Tx, p string, content []byte) (string, error) {
	info, err := tx.Stat(p)
	switch {
	case err == nil && !info.Dir:
		return p, nil
	case err == nil:
		for dir := p; ; { // the first memory below
			kids, err := tx.List(dir)
			if err != nil || len(kids) == 0 {
				return dir, err
			}
			dir += "/" + kids[0].Name
			if !kids[0].Dir {
				return dir, nil
			}
		}
	case !errors.Is(err, gitmem.ErrNotExist):
		return "", err
	}
	err = tx.WriteFile(p, content)
	if !errors.Is(err, gitmem.ErrNotDir) {
		return "", err
	}
	segs := strings.Split(p, "/")
	for i := 1; i < len(segs); i++ { // the memory above
		above := strings.Join(segs[:i], "/")
		if info, err := tx.Stat(above); err == nil && !info.Dir {
			return above, nil
		}
	}
	return "", err
}

// CreateRequest is a memory to create. Path is relative to memories/
// (ParsePath); Limits are the store's (MaxFiles: the most memories).
type CreateRequest struct {
	Path           string
	Content        []byte
	By             Caller
	IdempotencyKey string
	Limits         policy.Limits
	// Check, when set, is called under the writer lock with the commit
	// the write builds on: its error refuses the write, nothing
	// committed (a store archived since the request began).
	Check func(tip string) error
}

// ReplayError is a create whose idempotency key made memory MemoryID
// already; nothing new was written.
type ReplayError struct{ MemoryID string }

func (e *ReplayError) Error() string { return "the idempotency key already created " + e.MemoryID }

// Create makes a memory: one commit (Memory-Command: create). A path held
// or overlapped is *PathConflictError; a key already used,
// *ReplayError (Get the memory it made). A key that a create still being
// written uses waits for it: then the key made that create's memory, or,
// when it failed, nothing (this create makes the memory).
func (ix *Index) Create(ctx context.Context, repo *gitmem.Repo, req CreateRequest) (Memory, error) {
	for {
		m, wait, err := ix.create(ctx, repo, req)
		if wait == nil {
			return m, err
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return Memory{}, ctx.Err()
		}
	}
}

// create is one attempt of Create: wait is the create in flight with the
// same key, if any (then nothing was written).
func (ix *Index) create(ctx context.Context, repo *gitmem.Repo, req CreateRequest) (Memory, <-chan struct{}, error) {
	if len(req.Content) > MaxContentBytes {
		return Memory{}, nil, invalid("content is %s bytes; the limit is %s", policy.Thousands(int64(len(req.Content))), policy.Thousands(int64(MaxContentBytes)))
	}
	now := time.Now()
	mid, vid := NewID(PrefixMemory, now), NewID(PrefixVersion, now)
	display := policy.Display(req.Path)
	trailers := []gitmem.Trailer{{Key: gitmem.TrailerPath, Value: display}, {Key: TrailerMemoryID, Value: mid}, {Key: TrailerVersion, Value: vid}}
	var idem string
	if req.IdempotencyKey != "" {
		idem = idemKey(req.By.APIKey, req.IdempotencyKey)
		trailers = append(trailers, gitmem.Trailer{Key: TrailerIdempotencyKey, Value: req.IdempotencyKey})
	}
	var replay string
	var wait <-chan struct{}
	c, err := ix.write(ctx, repo, req.By.meta("memory: create "+display, CommandCreate, trailers...), vid, func(tx *gitmem.Tx) (*pending, error) {
		if err := check(req.Check, tx); err != nil {
			return nil, err
		}
		if idem != "" {
			if replay, wait = ix.writerIdem(idem); replay != "" || wait != nil {
				return nil, errReplay
			}
		}
		u := tx.Usage()
		if err := req.Limits.Check(apiPath(req.Path), policy.Usage{Files: u.Files, Bytes: u.Bytes}, -1, int64(len(req.Content))); err != nil {
			return nil, err
		}
		conflict, err := put(tx, req.Path, req.Content)
		if err != nil {
			return nil, err
		}
		if conflict != "" {
			return nil, &PathConflictError{Path: conflict, MemoryID: ix.writerIDAt(conflict)}
		}
		return &pending{mid: mid, op: CommandCreate, to: req.Path, idem: idem}, nil
	})
	switch {
	case errors.Is(err, errReplay) && wait != nil:
		return Memory{}, wait, nil
	case errors.Is(err, errReplay):
		m, err := ix.replay(ctx, repo, replay, req.Path)
		return m, nil, err
	case err != nil:
		return Memory{}, nil, err
	}
	return Memory{ID: mid, Path: apiPath(req.Path), Content: req.Content, SHA256: SHA256(req.Content), Size: int64(len(req.Content)),
		VersionID: vid, Created: c.Time, Updated: c.Time}, nil, nil
}

var errReplay = errors.New("replay")

// replay answers a create whose idempotency key made version vid: the
// memory it made, as it is now.
func (ix *Index) replay(ctx context.Context, repo *gitmem.Repo, vid, path string) (Memory, error) {
	v, err := ix.Version(ctx, repo, vid, false)
	if err != nil {
		return Memory{}, err
	}
	if v.Path != "" && v.Path != apiPath(path) {
		return Memory{}, &ConflictError{Msg: "this Idempotency-Key was used to create " + v.MemoryID + " at " + v.Path + ", not at " + apiPath(path)}
	}
	m, err := ix.Get(ctx, repo, v.MemoryID, false)
	if errors.Is(err, ErrNotFound) {
		return Memory{}, &ConflictError{Msg: "this Idempotency-Key created " + v.MemoryID + ", which was deleted since"}
	}
	if err == nil {
		err = &ReplayError{MemoryID: v.MemoryID}
	}
	return m, err
}

// UpdateRequest changes a memory: its content (when SetContent), its path
// (when Path is not ""), on condition that its content has the SHA-256
// Expect (when not "").
type UpdateRequest struct {
	Content    []byte
	SetContent bool
	Path       string
	Expect     string
	By         Caller
	Limits     policy.Limits
	Check      func(tip string) error // as CreateRequest's
}

// Update changes a memory: one commit (Memory-Command: update), or none
// when it already has the requested content and path (changed false: a
// retried update makes no second version, whatever its precondition).
func (ix *Index) Update(ctx context.Context, repo *gitmem.Repo, id string, req UpdateRequest) (m Memory, changed bool, err error) {
	if len(req.Content) > MaxContentBytes {
		return Memory{}, false, invalid("content is %s bytes; the limit is %s", policy.Thousands(int64(len(req.Content))), policy.Thousands(int64(MaxContentBytes)))
	}
	if !idLike(id, PrefixMemory) {
		return Memory{}, false, ErrNotFound
	}
	vid := NewID(PrefixVersion, time.Now())
	meta := req.By.meta("memory: update", CommandUpdate, gitmem.Trailer{Key: TrailerMemoryID, Value: id}, gitmem.Trailer{Key: TrailerVersion, Value: vid})
	var cur Memory
	var content []byte
	c, err := ix.write(ctx, repo, meta, vid, func(tx *gitmem.Tx) (*pending, error) {
		if err := check(req.Check, tx); err != nil {
			return nil, err
		}
		var live bool
		if cur, live = ix.writerMemory(id); !live {
			return nil, ErrNotFound
		}
		old, err := tx.ReadFile(cur.Path)
		if errors.Is(err, gitmem.ErrNotExist) || errors.Is(err, gitmem.ErrIsDir) {
			return nil, errStale // the state disagrees with the tree: read again
		}
		if err != nil {
			return nil, err
		}
		content = old
		if req.SetContent {
			content = req.Content
		}
		to := cur.Path
		if req.Path != "" {
			to = req.Path
		}
		if to == cur.Path && bytes.Equal(content, old) {
			return nil, errNoChange
		}
		if req.Expect != "" && !strings.EqualFold(SHA256(old), req.Expect) {
			return nil, ErrPrecondition
		}
		if req.Expect != "" && req.SetContent && !utf8.Valid(old) {
			return nil, ErrNotUTF8
		}
		u := tx.Usage()
		if err := req.Limits.Check(apiPath(to), policy.Usage{Files: u.Files, Bytes: u.Bytes}, int64(len(old)), int64(len(content))); err != nil {
			return nil, err
		}
		subject := "memory: update " + policy.Display(cur.Path)
		tx.SetTrailer(gitmem.TrailerPath, policy.Display(cur.Path))
		if to == cur.Path {
			if err := tx.WriteFile(to, content); err != nil {
				return nil, err
			}
		} else {
			if err := tx.Remove(cur.Path); err != nil {
				return nil, err
			}
			conflict, err := put(tx, to, content)
			if err != nil {
				return nil, err
			}
			if conflict != "" {
				return nil, &PathConflictError{Path: conflict, MemoryID: ix.writerIDAt(conflict)}
			}
			subject += " -> " + policy.Display(to)
			tx.SetTrailer(gitmem.TrailerNewPath, policy.Display(to))
		}
		tx.SetSubject(subject)
		return &pending{mid: id, op: CommandUpdate, from: cur.Path, to: to}, nil
	})
	if errors.Is(err, errNoChange) {
		sum := SHA256(content)
		return Memory{ID: id, Path: apiPath(cur.Path), Content: content, SHA256: sum, Size: int64(len(content)),
			VersionID: cur.VersionID, Created: cur.Created, Updated: cur.Updated}, false, nil
	}
	if err != nil {
		return Memory{}, false, err
	}
	to := cur.Path
	if req.Path != "" {
		to = req.Path
	}
	return Memory{ID: id, Path: apiPath(to), Content: content, SHA256: SHA256(content), Size: int64(len(content)),
		VersionID: vid, Created: cur.Created, Updated: c.Time}, true, nil
}

var errNoChange = errors.New("no change")

// Delete deletes a memory, on condition that its content has the SHA-256
// expect (when not ""): one commit (Memory-Command: delete).
func (ix *Index) Delete(ctx context.Context, repo *gitmem.Repo, id, expect string, by Caller) error {
	if !idLike(id, PrefixMemory) {
		return ErrNotFound
	}
	vid := NewID(PrefixVersion, time.Now())
	meta := by.meta("memory: delete", CommandDelete, gitmem.Trailer{Key: TrailerMemoryID, Value: id}, gitmem.Trailer{Key: TrailerVersion, Value: vid})
	_, err := ix.write(ctx, repo, meta, vid, func(tx *gitmem.Tx) (*pending, error) {
		cur, live := ix.writerMemory(id)
		if !live {
			return nil, ErrNotFound
		}
		old, err := tx.ReadFile(cur.Path)
		if errors.Is(err, gitmem.ErrNotExist) || errors.Is(err, gitmem.ErrIsDir) {
			return nil, errStale
		}
		if err != nil {
			return nil, err
		}
		if expect != "" && !strings.EqualFold(SHA256(old), expect) {
			return nil, ErrPrecondition
		}
		tx.SetSubject("memory: delete " + policy.Display(cur.Path))
		tx.SetTrailer(gitmem.TrailerPath, policy.Display(cur.Path))
		if err := tx.Remove(cur.Path); err != nil {
			return nil, err
		}
		return &pending{mid: id, op: CommandDelete, from: cur.Path}, nil
	})
	return err
}

// Get returns a memory, with its content when withContent.
func (ix *Index) Get(ctx context.Context, repo *gitmem.Repo, id string, withContent bool) (Memory, error) {
	var m Memory
	var blob string
	var snap *gitmem.View
	err := ix.view(ctx, repo, func(s *state, v *gitmem.View) error {
		mm := s.mems[id]
		if mm == nil || !mm.live {
			return ErrNotFound
		}
		m = Memory{ID: mm.id, Path: mm.path, VersionID: mm.cur.id, Created: mm.created, Updated: mm.cur.time}
		blob, snap = mm.cur.blob, v
		return nil
	})
	if err != nil {
		return Memory{}, err
	}
	return ix.fill(repo, snap, m, blob, withContent)
}

// fill sets a memory's SHA-256 and size (and content when withContent)
// from blob, its content in snap at m.Path (relative), and makes Path the
// API's.
func (ix *Index) fill(repo *gitmem.Repo, snap *gitmem.View, m Memory, blob string, withContent bool) (Memory, error) {
	var data []byte
	if withContent {
		var err error
		if data, err = snap.ReadFile(m.Path); err != nil {
			return Memory{}, err
		}
		m.Content = data
	}
	cs, err := ix.sum(repo, blob, data)
	if err != nil {
		return Memory{}, err
	}
	m.SHA256, m.Size, m.Path = cs.sha, cs.size, apiPath(m.Path)
	return m, nil
}

// Item is one entry of a listing: a memory, or (Prefix set) a roll-up of
// the memories below a path deeper than the listing goes.
type Item struct {
	Memory
	Prefix string // "/notes/deep/": a memory_prefix
}

// ListOptions select a page of memories.
type ListOptions struct {
	Prefix      string // relative, "" or ending in "/" (ParsePrefix)
	Depth       int    // 0: every memory below Prefix; d: d segments deep, the rest rolled up
	After       string // where the page starts: after this value of a page's next ("" the first; Cursor)
	Limit       int
	WithContent bool
}

// List returns a page of the memories under a prefix in byte order of
// their paths, a roll-up at the place of its first memory; next is
// where the next page starts (its ListOptions.After; "" at the end).
func (ix *Index) List(ctx context.Context, repo *gitmem.Repo, opt ListOptions) (items []Item, next string, err error) {
	after := opt.After
	type found struct {
		m    Memory
		blob string
	}
	var page []found
	var prefixes []string // parallel to page: "" for a memory
	var snap *gitmem.View
	err = ix.view(ctx, repo, func(s *state, v *gitmem.View) error {
		snap = v
		var paths []string
		for p := range s.live {
			if strings.HasPrefix(p, opt.Prefix) {
				paths = append(paths, p)
			}
		}
		slices.Sort(paths)
		for _, p := range paths {
			name, rolled := p, false
			if opt.Depth > 0 {
				rest := strings.Split(p[len(opt.Prefix):], "/")
				if len(rest) > opt.Depth {
					name, rolled = opt.Prefix+strings.Join(rest[:opt.Depth], "/")+"/", true
				}
			}
			switch {
			case after == "":
			case strings.HasSuffix(after, "/") && strings.HasPrefix(name, after):
				continue // in a roll-up a page before showed
			case name <= after:
				continue
			}
			if len(prefixes) > 0 && rolled && prefixes[len(prefixes)-1] == name {
				continue // rolled up already
			}
			if len(page) == opt.Limit {
				next = page[len(page)-1].m.Path
				if pre := prefixes[len(prefixes)-1]; pre != "" {
					next = pre
				}
				break
			}
			if rolled {
				page, prefixes = append(page, found{}), append(prefixes, name)
				continue
			}
			m := s.live[p]
			page = append(page, found{Memory{ID: m.id, Path: p, VersionID: m.cur.id, Created: m.created, Updated: m.cur.time}, m.cur.blob})
			prefixes = append(prefixes, "")
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	for i, f := range page {
		if prefixes[i] != "" {
			items = append(items, Item{Prefix: apiPath(prefixes[i])})
			continue
		}
		m, err := ix.fill(repo, snap, f.m, f.blob, opt.WithContent)
		if err != nil {
			return nil, "", err
		}
		items = append(items, Item{Memory: m})
	}
	return items, next, nil
}

// VersionFilter selects versions; zero fields do not filter.
type VersionFilter struct {
	MemoryID, Operation, SessionID, APIKeyID, ServiceAccountID string
	Since, Until                                               time.Time // inclusive
}

func (f VersionFilter) match(v *version) bool {
	switch {
	case f.MemoryID != "" && v.memID != f.MemoryID,
		f.Operation != "" && v.op != f.Operation,
		f.SessionID != "" && v.session != f.SessionID,
		f.APIKeyID != "" && (v.by.Type != APIActor || v.by.ID != f.APIKeyID),
		f.ServiceAccountID != "" && (v.by.Type != ServiceAccountActor || v.by.ID != f.ServiceAccountID),
		!f.Since.IsZero() && v.time.Before(f.Since),
		!f.Until.IsZero() && v.time.After(f.Until):
		return false
	}
	return true
}

// Versions returns a page of the versions that match, newest first,
// after the version with id after ("" from the newest); next is where the
// next page starts (its after; "" at the end).
func (ix *Index) Versions(ctx context.Context, repo *gitmem.Repo, f VersionFilter, after string, limit int, withContent bool) (out []Version, next string, err error) {
	var vs []Version
	err = ix.view(ctx, repo, func(s *state, _ *gitmem.View) error {
		start := len(s.versions) - 1
		if after != "" {
			v := s.verByID[after]
			if v == nil {
				return invalid("page: the version it starts after (%s) is not in this store; list from the first page", quote(after))
			}
			start = v.seq - 1
		}
		for i := start; i >= 0; i-- {
			v := s.versions[i]
			if !f.match(v) {
				continue
			}
			if len(vs) == limit {
				next = vs[len(vs)-1].ID
				break
			}
			vs = append(vs, v.public())
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	for i := range vs {
		if err := ix.fillVersion(repo, &vs[i], withContent); err != nil {
			return nil, "", err
		}
	}
	return vs, next, nil
}

func (v *version) public() Version {
	return Version{ID: v.id, MemoryID: v.memID, Operation: v.op, Created: v.time, Path: v.path, By: v.by,
		RedactedAt: v.redactedAt, RedactedBy: v.redactedBy, blob: v.blob}
}

// fillVersion sets what a version shows of its content: nothing once
// redacted (and no path) or for a deletion.
func (ix *Index) fillVersion(repo *gitmem.Repo, v *Version, withContent bool) error {
	switch {
	case !v.RedactedAt.IsZero():
		v.Path, v.blob = "", ""
		return nil
	case v.Operation == Deleted || v.blob == "":
		v.Path = apiPath(v.Path)
		return nil
	}
	v.Path = apiPath(v.Path)
	var data []byte
	if withContent {
		var err error
		if data, err = repo.Blob(v.blob); err != nil {
			return err
		}
		v.Content = data
	}
	cs, err := ix.sum(repo, v.blob, data)
	if err != nil {
		return err
	}
	v.SHA256, v.Size = cs.sha, cs.size
	return nil
}

// Version returns a version, with its content when withContent.
func (ix *Index) Version(ctx context.Context, repo *gitmem.Repo, id string, withContent bool) (Version, error) {
	var out Version
	err := ix.view(ctx, repo, func(s *state, _ *gitmem.View) error {
		v := s.verByID[id]
		if v == nil {
			return ErrNotFound
		}
		out = v.public()
		return nil
	})
	if err != nil {
		return Version{}, err
	}
	return out, ix.fillVersion(repo, &out, withContent)
}

// placeholder is what stands in the history where a redacted version's
// content was.
func placeholder(vid string) []byte { return []byte(placeholderStart + vid + "]\n") }

const placeholderStart = "[REDACTED: memory version "

// Redact removes a version's content from every commit and object of the
// store (gitmem's Redact, with a placeholder that keeps every commit's
// changed paths), then records the versions it redacted, by whom, in a
// commit (Memory-Command: redact): every version that held the same
// content, which git stores once. A version already redacted is returned
// as it is; content a memory holds now is a *ConflictError.
func (ix *Index) Redact(ctx context.Context, repo *gitmem.Repo, id string, by Caller) (Version, error) {
	var v Version
	var holder *Memory
	err := ix.view(ctx, repo, func(s *state, _ *gitmem.View) error {
		sv := s.verByID[id]
		if sv == nil {
			return ErrNotFound
		}
		v = sv.public()
		for _, m := range s.live {
			if v.blob != "" && m.cur.blob == v.blob {
				holder = &Memory{ID: m.id, Path: m.path}
				break
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return Version{}, err
	case !v.RedactedAt.IsZero():
		return v, ix.fillVersion(repo, &v, false)
	case holder != nil:
		return Version{}, currentContent(*holder)
	}
	redacted := []string{id}
	if v.blob != "" {
		data, err := repo.Blob(v.blob)
		if err != nil {
			return Version{}, err
		}
		ph := v.blob // the placeholder already: a redaction cut short before its record
		if !bytes.HasPrefix(data, []byte(placeholderStart)) {
			_, err = repo.Redact(ctx, gitmem.Redaction{Blob: v.blob, Placeholder: placeholder(id)}, false, nil)
			var inUse *gitmem.InUseError
			if errors.As(err, &inUse) {
				return Version{}, currentContent(Memory{Path: inUse.Paths[0]})
			}
			if err != nil {
				return Version{}, err
			}
			ph = gitBlobHash(placeholder(id))
		}
		// Every version that held the same content holds the placeholder now.
		if err := ix.catchUp(ctx, repo); err != nil {
			return Version{}, err
		}
		ix.mu.Lock()
		for _, sv := range ix.s.versions {
			if sv.blob == ph && sv.id != id && sv.redactedAt.IsZero() {
				redacted = append(redacted, sv.id)
			}
		}
		ix.mu.Unlock()
	}
	if _, err := repo.Update(ctx, by.meta("memory: redact "+id, CommandRedact, redactedTrailers(redacted)...), func(*gitmem.Tx) error { return nil }); err != nil {
		return Version{}, err
	}
	return ix.Version(ctx, repo, id, false)
}

// redactedTrailers name the versions a redaction commit records.
func redactedTrailers(ids []string) []gitmem.Trailer {
	var ts []gitmem.Trailer
	for _, id := range ids {
		ts = append(ts, gitmem.Trailer{Key: TrailerRedacted, Value: id})
	}
	return ts
}

func currentContent(m Memory) error {
	msg := "the version's content is what " + apiPath(m.Path) + " holds now"
	if m.ID != "" {
		msg = "the version's content is the current content of memory " + m.ID + " (" + apiPath(m.Path) + ")"
	}
	return &ConflictError{Msg: msg + "; update or delete that memory first, then redact the version"}
}
