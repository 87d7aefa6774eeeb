package stores

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
)

// A store's metadata lives in its own history: every change to it is an
// empty commit ("memory: store create", "... update", "... archive",
// "... unarchive") whose trailers hold the whole metadata as it is from
// then on. So it travels with every clone and push, each change is
// attributed and dated like any other, the model never sees it (it is not
// under memories/), and the current metadata is the newest such commit.
const (
	CommandStore       = "store" // the Memory-Command of metadata commits
	TrailerAction      = "Store-Action"
	TrailerCreated     = "Store-Created"
	TrailerName        = "Store-Name"        // a JSON string, as the description
	TrailerDescription = "Store-Description" // a JSON string: it may hold newlines
	TrailerMetadata    = "Store-Metadata"    // key=value, one per pair, sorted by key
	TrailerArchived    = "Store-Archived"    // when it was archived
	TrailerScreening   = "Store-Secret-Screening"
)

// Meta is a store's metadata.
type Meta struct {
	// DisplayName is the store's name for people (the Memory Stores API's
	// "name": free text, not unique); "": the folder name (Info.Title).
	DisplayName string
	Description string            // written for the model: what the store holds
	Metadata    map[string]string // the operator's key/value pairs (the end user, ...)
	Screening   policy.ScreenMode // secret screening for this store; "": the server's
	Created     time.Time
	Updated     time.Time // the last change to the metadata
	Archived    time.Time // zero: not archived
}

// IsArchived reports whether the store is archived (read-only).
func (m Meta) IsArchived() bool { return !m.Archived.IsZero() }

// check applies the policy's limits.
func (m Meta) check() error {
	if m.DisplayName != "" {
		if err := policy.CheckStoreDisplayName(m.DisplayName); err != nil {
			return err
		}
	}
	if err := policy.CheckStoreDescription(m.Description); err != nil {
		return err
	}
	if err := policy.CheckStoreMetadata(m.Metadata); err != nil {
		return err
	}
	if m.Screening != "" {
		if _, err := policy.ParseScreenMode(string(m.Screening)); err != nil {
			return err
		}
	}
	return nil
}

// trailers are the trailers of the commit of the metadata as it is after
// action.
func (m Meta) trailers(action string) []gitmem.Trailer {
	desc, _ := json.Marshal(m.Description)
	ts := []gitmem.Trailer{
		{Key: gitmem.TrailerCommand, Value: CommandStore},
		{Key: TrailerAction, Value: action},
		{Key: TrailerCreated, Value: m.Created.UTC().Format(time.RFC3339)},
		{Key: TrailerDescription, Value: string(desc)},
	}
	if m.DisplayName != "" {
		name, _ := json.Marshal(m.DisplayName)
		ts = append(ts, gitmem.Trailer{Key: TrailerName, Value: string(name)})
	}
	for _, k := range slices.Sorted(maps.Keys(m.Metadata)) {
		ts = append(ts, gitmem.Trailer{Key: TrailerMetadata, Value: k + "=" + m.Metadata[k]})
	}
	if m.IsArchived() {
		ts = append(ts, gitmem.Trailer{Key: TrailerArchived, Value: m.Archived.UTC().Format(time.RFC3339)})
	}
	if m.Screening != "" {
		ts = append(ts, gitmem.Trailer{Key: TrailerScreening, Value: string(m.Screening)})
	}
	return ts
}

// metaOf reads the metadata a store commit holds.
func metaOf(c gitmem.Commit) Meta {
	m := Meta{Metadata: map[string]string{}, Updated: c.Time}
	for _, t := range c.Trailers {
		switch t.Key {
		case TrailerCreated:
			m.Created, _ = time.Parse(time.RFC3339, t.Value)
		case TrailerDescription:
			json.Unmarshal([]byte(t.Value), &m.Description)
		case TrailerName:
			json.Unmarshal([]byte(t.Value), &m.DisplayName)
		case TrailerMetadata:
			if k, v, ok := strings.Cut(t.Value, "="); ok {
				m.Metadata[k] = v
			}
		case TrailerArchived:
			m.Archived, _ = time.Parse(time.RFC3339, t.Value)
		case TrailerScreening:
			m.Screening = policy.ScreenMode(t.Value)
		}
	}
	if m.Created.IsZero() {
		m.Created = c.Time
	}
	return m
}

var errStop = errors.New("stop")

// readMeta finds the newest store commit of r's history, looking back no
// further than the commit stop (whose metadata the caller knows: found is
// then false). It returns the head it read up to. seen (nil: none) holds
// commits read before.
func readMeta(r *gitmem.Repo, stop string, seen *commitsSeen) (m Meta, found bool, head string, err error) {
	snap, err := r.Snapshot(context.Background())
	if err != nil {
		return m, false, "", err
	}
	head = snap.Head()
	if head == stop {
		return m, false, head, nil
	}
	// The commits since stop, when few and without a merge, are read from
	// the objects: a Log would first wait for git's files to follow the
	// writes of this process (the materialiser's work), and every call
	// reads the metadata.
	for h, n := head, 0; stop != "" && n < 64; n++ {
		parents, c, store, err := seen.read(r, h)
		if err != nil || len(parents) != 1 {
			break
		}
		if store {
			return metaOf(c), true, head, nil
		}
		if h = parents[0]; h == stop {
			return m, false, head, nil
		}
	}
	// Without a known commit to stop at, a filter lets a fresh process
	// skip the index lines that cannot be store commits unparsed.
	opt := gitmem.LogOptions{}
	if stop == "" {
		opt.Command = CommandStore
	}
	err = r.Log(context.Background(), opt, nil, func(c gitmem.Commit) error {
		if c.Hash == stop {
			return errStop
		}
		if c.Trailer(gitmem.TrailerCommand) == CommandStore {
			m, found = metaOf(c), true
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return m, found, head, err
}

// commitsSeen holds the parents of the commits lately read for a store's
// metadata that are no store commits. Every call reads the commits made
// since the last one (current), and every change the commits since the
// last change (metaAt, under the writer turn): mostly the same commits,
// which were decoded twice so, 7% of the bytes a call allocated under the
// many-stores row's load and 3.5% of its CPU (issue 25). A commit's hash
// names its content: nothing held here goes stale. A store commit is
// read again each time (its metadata is wanted then, and it is rare).
type commitsSeen struct {
	mu      sync.Mutex
	parents map[string][]string
	decoded atomic.Int64 // commits read from the objects (tests count them)
}

// commitsSeenMax bounds what commitsSeen holds: a walk reads the commits
// of the last few seconds, and one that finds it full starts it afresh.
const commitsSeenMax = 256

// read returns the parents of the commit h and whether it is a store
// commit, and then the commit itself (c is zero otherwise when seen
// before). A nil s reads every commit.
func (s *commitsSeen) read(r *gitmem.Repo, h string) (parents []string, c gitmem.Commit, store bool, err error) {
	if s != nil {
		s.mu.Lock()
		parents, ok := s.parents[h]
		s.mu.Unlock()
		if ok {
			return parents, gitmem.Commit{}, false, nil
		}
		s.decoded.Add(1)
	}
	if c, err = r.CommitObject(h); err != nil {
		return nil, c, false, err
	}
	if c.Trailer(gitmem.TrailerCommand) == CommandStore {
		return c.Parents, c, true, nil
	}
	if s != nil {
		s.mu.Lock()
		if len(s.parents) >= commitsSeenMax || s.parents == nil {
			s.parents = make(map[string][]string, commitsSeenMax)
		}
		s.parents[h] = c.Parents
		s.mu.Unlock()
	}
	return c.Parents, c, false, nil
}

// known is a commit whose metadata is known.
type known struct {
	head string
	meta Meta
}

// metaAt reads the metadata at tip, a commit this process holds the
// writer turn at (a transaction's head), from the commits since the one
// of since: from the objects, commit by commit (under the writer turn a
// Log would wait for git's files to follow, work that may itself wait
// for the turn). Both sides of a merge are followed; each path stops at
// its newest store commit or at since's commit, and the newest metadata
// reached is the tip's (a history rewritten meanwhile, by a redaction,
// is walked back to its newest store commit). found is false when no
// path reaches any. seen (nil: none) holds commits read before.
func metaAt(r *gitmem.Repo, tip string, since known, seen *commitsSeen) (m Meta, found bool, err error) {
	walked := map[string]bool{}
	for todo := []string{tip}; len(todo) > 0; {
		h := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if h == "" || walked[h] {
			continue
		}
		walked[h] = true
		var at Meta
		if h == since.head {
			at = since.meta
		} else {
			parents, c, store, err := seen.read(r, h)
			if err != nil {
				return Meta{}, false, err
			}
			if !store {
				for j := len(parents) - 1; j >= 0; j-- { // the first parent first
					todo = append(todo, parents[j])
				}
				continue
			}
			at = metaOf(c)
		}
		if !found || at.Updated.After(m.Updated) {
			m, found = at, true
		}
	}
	return m, found, nil
}

// writeMeta commits the metadata as it is after action. next makes it,
// under the writer turn, from the commit the new one builds on (tip): a
// change another process committed since the caller last read is in it,
// as every store commit carries the whole metadata. It returns the
// metadata committed.
func writeMeta(r *gitmem.Repo, action string, author gitmem.Signature, next func(tip string) (Meta, error)) (gitmem.Commit, Meta, error) {
	if author == (gitmem.Signature{}) {
		author = r.Operator()
	}
	var m Meta
	c, err := r.Update(context.Background(), gitmem.Meta{Subject: "memory: store " + action, Author: author}, func(tx *gitmem.Tx) error {
		var err error
		if m, err = next(tx.Head()); err != nil {
			return err
		}
		if err := m.check(); err != nil {
			return err
		}
		for _, t := range m.trailers(action) {
			tx.AddTrailer(t.Key, t.Value)
		}
		return nil
	})
	m.Updated = c.Time
	return c, m, err
}
