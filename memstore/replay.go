package memstore

import (
	"bytes"
	"context"
	"errors"
	"strconv"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
)

// Replay writes a version that another Memory Store recorded as one
// commit, as it was there (package transfer's import): with its memory
// and version ids, its operation, its path and content, made by v.By. The
// commit's time is the repository's clock's: the importer opens the store
// with a clock that gives each version's time. Versions are replayed
// oldest first, each memory's from its creation.
//
// A redacted version (RedactedAt set) has no content there any more: it
// holds the placeholder a redaction leaves, at v.Path (which the other
// store does not give either: the importer says where). ReplayRedaction
// then records its redaction. A deletion deletes the memory where it is.
func (ix *Index) Replay(ctx context.Context, repo *gitmem.Repo, v Version) error {
	rel, content, command, err := replayed(v)
	if err != nil {
		return err
	}
	trailers := []gitmem.Trailer{{Key: TrailerMemoryID, Value: v.MemoryID}, {Key: TrailerVersion, Value: v.ID}}
	_, err = ix.write(ctx, repo, v.By.meta(repo, "memory: "+command, command, trailers...), v.ID, func(tx *gitmem.Tx) (*pending, error) {
		if ix.writerVersion(v.ID) {
			return nil, invalid("version %s is here already", v.ID)
		}
		cur, live := ix.writerMemory(v.MemoryID)
		switch {
		case v.Operation == Created && cur.ID != "":
			return nil, invalid("version %s creates memory %s, which was created before", v.ID, v.MemoryID)
		case v.Operation != Created && !live:
			return nil, invalid("version %s changes memory %s, which is not here (not created, or deleted)", v.ID, v.MemoryID)
		}
		switch v.Operation {
		case Created:
			return ix.replayCreate(tx, v, rel, content)
		case Deleted:
			return replayDelete(tx, v, cur)
		}
		return ix.replayUpdate(tx, v, cur, rel, content)
	})
	return err
}

// replayed checks v and returns what Replay writes: the path in the
// worktree (rel; "" for a deletion), the content (a redacted version's
// placeholder) and the commit's Memory-Command.
func replayed(v Version) (rel string, content []byte, command string, err error) {
	if !idLike(v.ID, PrefixVersion) || !idLike(v.MemoryID, PrefixMemory) {
		return "", nil, "", invalid("version %s of memory %s: not ids this store can keep", quote(v.ID), quote(v.MemoryID))
	}
	if v.Operation != Deleted {
		if rel, err = ParseToolPath(v.Path); err != nil {
			return "", nil, "", err
		}
	}
	content = v.Content
	if !v.RedactedAt.IsZero() {
		content = placeholder(v.ID)
	}
	if len(content) > MaxContentBytes {
		return "", nil, "", invalid("version %s: content is over %d bytes", v.ID, MaxContentBytes)
	}
	switch v.Operation {
	case Created:
		command = CommandCreate
	case Modified:
		command = CommandUpdate
	case Deleted:
		command = CommandDelete
	default:
		return "", nil, "", invalid("version %s: operation %s is not created, modified or deleted", v.ID, quote(v.Operation))
	}
	return rel, content, command, nil
}

// replayCreate writes version v, the creation of its memory, at rel.
func (ix *Index) replayCreate(tx *gitmem.Tx, v Version, rel string, content []byte) (*pending, error) {
	display := policy.Display(rel)
	conflict, err := put(tx, rel, content)
	if err != nil {
		return nil, err
	}
	if conflict != "" {
		return nil, &PathConflictError{Path: conflict, MemoryID: ix.writerIDAt(conflict)}
	}
	tx.SetTrailer(gitmem.TrailerPath, display)
	tx.SetSubject("memory: create " + display)
	return &pending{mid: v.MemoryID, op: CommandCreate, to: rel}, nil
}

// replayDelete deletes memory cur, as version v.
func replayDelete(tx *gitmem.Tx, v Version, cur Memory) (*pending, error) {
	tx.SetTrailer(gitmem.TrailerPath, policy.Display(cur.Path))
	tx.SetSubject("memory: delete " + policy.Display(cur.Path))
	if err := tx.Remove(cur.Path); err != nil {
		return nil, err
	}
	return &pending{mid: v.MemoryID, op: CommandDelete, from: cur.Path}, nil
}

// replayUpdate writes version v of memory cur: content at rel (a move
// when rel is not where cur is).
func (ix *Index) replayUpdate(tx *gitmem.Tx, v Version, cur Memory, rel string, content []byte) (*pending, error) {
	old, err := tx.ReadFile(cur.Path)
	if errors.Is(err, gitmem.ErrNotExist) || errors.Is(err, gitmem.ErrIsDir) {
		return nil, errStale // the state disagrees with the tree: read again
	}
	if err != nil {
		return nil, err
	}
	if rel == cur.Path && bytes.Equal(old, content) {
		return nil, invalid("version %s changes nothing of memory %s", v.ID, v.MemoryID)
	}
	subject := "memory: update " + policy.Display(cur.Path)
	tx.SetTrailer(gitmem.TrailerPath, policy.Display(cur.Path))
	if rel == cur.Path {
		if err := tx.WriteFile(rel, content); err != nil {
			return nil, err
		}
	} else {
		if err := tx.Remove(cur.Path); err != nil {
			return nil, err
		}
		conflict, err := put(tx, rel, content)
		if err != nil {
			return nil, err
		}
		if conflict != "" {
			return nil, &PathConflictError{Path: conflict, MemoryID: ix.writerIDAt(conflict)}
		}
		subject += " -> " + policy.Display(rel)
		tx.SetTrailer(gitmem.TrailerNewPath, policy.Display(rel))
	}
	tx.SetSubject(subject)
	return &pending{mid: v.MemoryID, op: CommandUpdate, from: cur.Path, to: rel}, nil
}

// ReplayRedaction records that another Memory Store's versions ids were
// redacted by by (their content was never written here: Replay wrote
// placeholders): one commit (Memory-Command: redact), at the repository
// clock's time.
func (ix *Index) ReplayRedaction(ctx context.Context, repo *gitmem.Repo, ids []string, by Actor) error {
	if len(ids) == 0 {
		return nil
	}
	err := ix.view(ctx, repo, func(s *state, _ *gitmem.View) error {
		for _, id := range ids {
			if s.verByID[id] == nil {
				return invalid("redacted version %s is not here", quote(id))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	subject := "memory: redact " + ids[0]
	if len(ids) > 1 {
		subject += " and " + strconv.Itoa(len(ids)-1) + " more"
	}
	_, err = repo.Update(ctx, by.meta(repo, subject, CommandRedact, redactedTrailers(ids)...), func(*gitmem.Tx) error { return nil })
	return err
}

// meta is the commit of a change that an imported version says a made: its
// trailers name the API key, session or service account (or say that
// nobody was recorded), and it is authored by a's id (the repository's
// operator when none).
func (a Actor) meta(repo *gitmem.Repo, subject, command string, trailers ...gitmem.Trailer) gitmem.Meta {
	c := Caller{Author: gitmem.SignatureOf(a.ID)}
	switch a.Type {
	case APIActor:
		c.APIKey = a.ID
	case SessionActor:
		c.Session = a.ID
	case ServiceAccountActor:
		trailers = append(trailers, gitmem.Trailer{Key: TrailerServiceAccount, Value: a.ID})
	case UserActor:
	default:
		trailers = append(trailers, gitmem.Trailer{Key: TrailerNoActor, Value: "true"})
		c.Author = repo.Operator()
	}
	return c.meta(subject, command, trailers...)
}

// writerVersion reports whether version vid is in the state or pending.
// Called with ix.mu held.
func (ix *Index) writerVersion(vid string) bool {
	if ix.s.verByID[vid] != nil {
		return true
	}
	for _, e := range ix.overlay {
		if e.vid == vid {
			return true
		}
	}
	return false
}
