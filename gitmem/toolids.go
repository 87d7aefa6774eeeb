package gitmem

import (
	"maps"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
)

// toolUseIDs answers "did this tool_use id already make a commit?" for
// update: the ids of the history (read from the history index file, or
// from the commits it lacks: syncIDs) and this process's own commits,
// durable or still being written. How they are read is the Repo's
// (history.go); this part holds them.
type toolUseIDs struct {
	// mu guards every field below. Taken after the published state's
	// lock (published.mu) when both are held (enqueue, publish, dropQueued); no
	// other lock is taken with it held. publish moves an id from
	// inFlight to done in one step under it, so that a lookup never
	// sees the id in neither.
	mu       sync.RWMutex
	done     map[string]plumbing.Hash // Tool-Use-Id -> commit: the history index file's (read up to fileOff, whose last record is fileHead) and this process's durable commits
	inFlight map[string]*prepared     // Tool-Use-Id -> a commit prepared, not yet durable
	fileOff  int64                    // how far the history index file was read
	fileHead plumbing.Hash            // the record that ends there
	stale    bool                     // the branch moved by other means since the ids were read
	since    map[string]plumbing.Hash // ids made durable since syncIDs read HEAD (beginSync): kept when the ids read up to it replace done
}

func newToolUseIDs() *toolUseIDs {
	return &toolUseIDs{done: map[string]plumbing.Hash{}, inFlight: map[string]*prepared{}}
}

// lookup is the commit id made (done), or the prepared commit that is
// making it (inFlight).
func (x *toolUseIDs) lookup(id string) (h plumbing.Hash, done bool, p *prepared, inFlight bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	h, done = x.done[id]
	p, inFlight = x.inFlight[id]
	return h, done, p, inFlight
}

// expect notes p's ids in flight: its own, and those of the commits a
// merge brings that are not known yet (enqueue).
func (x *toolUseIDs) expect(p *prepared) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if p.id != "" {
		x.inFlight[p.id] = p
	}
	for id := range p.merged {
		if _, done := x.done[id]; !done {
			x.inFlight[id] = p
		}
	}
}

// durable moves the ids of commits now durable from in flight to done
// (publish; and the commits a crash left in the log, replayed).
func (x *toolUseIDs) durable(items []*prepared) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range items {
		if p.id != "" {
			x.done[p.id] = p.hash
			delete(x.inFlight, p.id)
			x.noteSince(p.id, p.hash)
		}
		for id, h := range p.merged {
			if _, done := x.done[id]; !done {
				x.done[id] = h
				x.noteSince(id, h)
			}
			if x.inFlight[id] == p {
				delete(x.inFlight, id)
			}
		}
	}
}

// noteSince keeps an id made durable while syncIDs reads. Called with
// mu held.
func (x *toolUseIDs) noteSince(id string, h plumbing.Hash) {
	if x.since != nil {
		x.since[id] = h
	}
}

// beginSync notes the ids made durable from now on (syncIDs, before it
// reads HEAD): the ids read up to that HEAD lack them.
func (x *toolUseIDs) beginSync() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.since = map[string]plumbing.Hash{}
}

// dropped forgets the ids in flight of commits that will never be
// durable (dropQueued).
func (x *toolUseIDs) dropped(ps []*prepared) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range ps {
		for id, w := range x.inFlight {
			if w == p {
				delete(x.inFlight, id)
			}
		}
	}
}

// markStale notes that the branch moved by other means: the ids are read
// again when one is next looked up (syncIDs).
func (x *toolUseIDs) markStale() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.stale = true
}

// isStale reports whether the ids are to be read again (syncIDs).
func (x *toolUseIDs) isStale() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.stale
}

// synced notes that the ids are the branch's again.
func (x *toolUseIDs) synced() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.stale, x.since = false, nil
}

// forgetFile makes the next read of the history index file start from
// its beginning (into a new map): the file was rewritten or damaged.
// With stale, the ids are read again at the next lookup.
func (x *toolUseIDs) forgetFile(stale bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.fileOff, x.fileHead = 0, plumbing.ZeroHash
	x.stale = x.stale || stale
}

// forget drops every id done and the place the file was read to: a
// redaction rewrote the history, and the old hashes are gone.
func (x *toolUseIDs) forget() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.done, x.fileOff, x.fileHead = map[string]plumbing.Hash{}, 0, plumbing.ZeroHash
}

// fileMark is where the last read of the history index file stopped:
// the offset, and the record that ends there.
func (x *toolUseIDs) fileMark() (int64, plumbing.Hash) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.fileOff, x.fileHead
}

// readFromFile adds the ids read from the history index file, up to off
// whose last record is head; fresh: the file was read from its start,
// and the ids replace those known.
func (x *toolUseIDs) readFromFile(ids map[string]plumbing.Hash, fresh bool, off int64, head plumbing.Hash) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if fresh {
		x.done = maps.Clone(x.since)
		if x.done == nil {
			x.done = map[string]plumbing.Hash{}
		}
	}
	for id, h := range ids {
		x.done[id] = h
	}
	x.fileOff, x.fileHead = off, head
}

// replace makes ids the ids done (walkIDs: those of every commit the
// branch reaches), with those made durable since (beginSync).
func (x *toolUseIDs) replace(ids map[string]plumbing.Hash) {
	x.mu.Lock()
	defer x.mu.Unlock()
	maps.Copy(ids, x.since)
	x.done = ids
}
