package gitmem

import (
	"cmp"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// repairs is what the worktree mirror knows of worktree files that are
// not (yet) as the branch has them, and of the versions they held: the
// paths gitmem has still to write (in flight: commits not materialised
// yet; pend: paths a pass could not write), which are never taken for hand
// edits; the hand edits kept from acknowledged changes and the version
// each was made on, for the next adopt's merge; and the versions of each
// file that gitmem wrote or git checked out, to tell a hand edit from a
// version written back. It is part of the worktree mirror: its methods
// take its lock, and nothing else touches its fields.
type repairs struct {
	// mu guards the fields below. A leaf of the
	// lock order: it may be taken with any other lock held (the writer turn in
	// adoptDrift, the disk lock in materializeSome, the log's lock and the committer's queue lock in dropQueued), and
	// no lock is taken while it is held.
	mu       sync.Mutex
	pend     []string            // repository paths the worktree could not follow yet (also in the journal)
	inflight flight              // worktree paths of commits not yet materialised
	handBase map[string]handBase // files edited by hand before the worktree caught up: the version the edit started from
	seen     map[string][]shown  // each memory file's versions (by path under memories/) of its last commits, oldest first (mergeHandEdit)
	past     pastVersions        // the memory files' versions of the last checkoutDepth commits materialised (gitCheckedOut)

	gitSeen atomic.Int64 // unix nanos: when a git command was last seen holding .git/index.lock (gitBusy)
}

func newRepairs() *repairs {
	return &repairs{
		inflight: flight{paths: map[string]int{}, below: map[string]int{}},
		handBase: map[string]handBase{},
		seen:     map[string][]shown{},
	}
}

// inFlight notes that p, not yet materialised, changes its paths: no
// hand edit is looked for there until it is (committer's pathsInFlight).
// An adopt's commit is noted as taken (adopted) here, as it is queued:
// its group may be published, and the worktree follow it, at once.
func (rp *repairs) inFlight(p *prepared) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	for _, q := range p.paths {
		rp.inflight.add(q)
	}
	if p.adopt != nil {
		rp.adopted(p.adopt)
	}
}

// adoptNote is what an adopt commit read and took, for the worktree's
// follow (read) and the mirror's notes (repairs.adopted).
type adoptNote struct {
	read  map[string][]byte // the worktree files it read (repository paths), before any merge
	taken []string          // the hand edits it takes (repository paths)
	shows map[string]shown  // by path under memories/: what a later edit of each file it read is made on
	moved [][2]string       // the hand edits it merged where a rename had taken their file: from, to (repository paths)
}

// droppedPaths notes that ps were dropped: they never reach the
// worktree, and their paths leave the flight.
func (rp *repairs) droppedPaths(ps []*prepared) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	for _, p := range ps {
		for _, q := range p.paths {
			rp.inflight.done(q)
		}
	}
}

// followed notes that the worktree followed items, materialised on the
// tree prev, at at: their paths left the flight, the versions they wrote
// are noted (show), and failed (the paths the worktree could not follow)
// become the paths to repair.
func (rp *repairs) followed(items []*prepared, prev *node, failed []string, at time.Time) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	// The versions a hand edit may have been made on, or that git may
	// check out: the worktree was given only each file's last one here.
	last := map[string]int{}
	for j, p := range items {
		for _, rel := range p.rec.paths {
			last[rel] = j
		}
	}
	for j, p := range items {
		for i, rel := range p.rec.paths {
			rp.show(rel, prev, p.rec.blobs[i], at, j < last[rel])
		}
	}
	rp.pend = failed
	for _, p := range items {
		for _, q := range p.paths {
			rp.inflight.done(q)
		}
	}
	rp.moveKept(items)
}

// moveKept moves the hand edits noted (handBase.to) where the renames
// among items, which the worktree just followed, took their files: an
// edit of a file a rename moved away before the worktree caught up is
// kept at the old path, and merged into the file at the new one. (Each
// follow moves the edits noted by its end once: those it noted were made
// on a version from before its commits.) Called with mu held.
func (rp *repairs) moveKept(items []*prepared) {
	if len(rp.handBase) == 0 {
		return
	}
	for _, p := range items {
		for _, mv := range p.moves() {
			for q, b := range rp.handBase {
				at := cmp.Or(b.to, q)
				if to := movePath(at, mv[0], mv[1]); to != at {
					b.to = to
					if to == q {
						b.to = ""
					}
					rp.handBase[q] = b
				}
			}
		}
	}
}

// pending is the paths the worktree could not follow yet.
func (rp *repairs) pending() []string {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return slices.Clone(rp.pend)
}

// setPending makes paths the ones the worktree could not follow yet.
func (rp *repairs) setPending(paths []string) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.pend = paths
}

// reset forgets the paths to repair and the hand edits' bases: a
// redaction rewrote the history they name, and writes every file anew.
func (rp *repairs) reset() {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.pend = nil
	clear(rp.handBase)
}

// pendingFor is the worktree paths that are gitmem's own unfinished work
// (not yet materialised, or waiting for a repair), as far as a check of
// the given repository paths can ask: those at, above or beneath one of
// them. They are never taken for hand edits. It is a copy taken at one
// instant, so that a check sees one state while materialisation goes on;
// under load thousands of paths wait, and copying or scanning them all
// for each call cost more than the rest of the check.
func (rp *repairs) pendingFor(paths []string) pathSet {
	s := pathSet{}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	for _, q := range rp.pend {
		for _, p := range paths {
			if within(q, p) || within(p, q) {
				s[q] = true
			}
		}
	}
	for _, p := range paths {
		rp.inflight.collect(p, s)
	}
	return s
}

// flight counts the worktree paths of the commits not yet materialised
// and, for each folder, how many of them lie beneath it: what is in
// flight at, above or beneath a path is then a few lookups.
type flight struct {
	paths map[string]int // path -> commits in flight that change it
	below map[string]int // folder -> the sum of paths' counts beneath it
}

func (f *flight) add(q string) {
	f.paths[q]++
	for d := q; strings.Contains(d, "/"); {
		d = path.Dir(d)
		f.below[d]++
	}
}

func (f *flight) done(q string) {
	if f.paths[q] <= 0 {
		return
	}
	if f.paths[q]--; f.paths[q] == 0 {
		delete(f.paths, q)
	}
	for d := q; strings.Contains(d, "/"); {
		d = path.Dir(d)
		if f.below[d]--; f.below[d] <= 0 {
			delete(f.below, d)
		}
	}
}

// collect adds to s the paths in flight at, above or beneath p.
func (f *flight) collect(p string, s pathSet) {
	for a := p; ; a = path.Dir(a) {
		if f.paths[a] > 0 {
			s[a] = true
		}
		if !strings.Contains(a, "/") {
			break
		}
	}
	if f.below[p] > 0 {
		for q := range f.paths {
			if within(q, p) {
				s[q] = true
			}
		}
	}
}

// shown is a version of a memory file (a blob, or a text an adopt read
// and merged, which is none) and when gitmem committed it (or read it).
// A version the worktree followed past in one pass (a later commit of
// the same pass changed the file again) was never written there: no hand
// edit is made on it, though git may check it out.
type shown struct {
	handBase
	at     time.Time
	passed bool
	// created: the worktree had no file there before this version (gitmem
	// created the file, or made it again after deleting it), but for
	// versions passed over (repairs.createdSince).
	created bool
}

// seenMax bounds the versions kept per file in repairs.seen (those replaced
// more than staleWindow ago are dropped too); baseCandidates bounds the
// versions a hand edit is compared with, line by line, to find its base.
const (
	seenMax        = 64
	baseCandidates = 8
)

// show notes that a commit gave the memory file rel (relative to
// memories/) the blob h (zero: removed it) at, after the version the tree
// prev gives it when none is noted: a hand edit found later may have been
// made on either (the worktree held it, or a git command checked it out).
// passed says the worktree was not given h (a later commit of the same
// pass changed the file again). Called with mu held.
func (rp *repairs) show(rel string, prev *node, h plumbing.Hash, at time.Time, passed bool) {
	if h.IsZero() {
		delete(rp.seen, rel)
		return
	}
	v := rp.seen[rel]
	created := len(v) == 0 // nothing noted since the worktree's file was deleted, or since the start
	if len(v) == 0 {
		if old := lookup(prev, full(rel)); old.isFile() {
			v = append(v, shown{handBase: handBase{hash: old.hash}})
			rp.past.add(pastVersion{rel, old.hash})
			created = false
		}
	}
	rp.past.add(pastVersion{rel, h})
	if n := len(v); n > 0 && v[n-1].passed && v[n-1].created {
		created = true // the version created was passed over: the worktree had no file before h either
	}
	if len(v) > 0 && v[len(v)-1].hash == h && v[len(v)-1].text == nil {
		v[len(v)-1].passed = v[len(v)-1].passed && passed
		return
	}
	drop := 0 // replaced long ago, or past the bound
	for drop < len(v)-1 && at.Sub(v[drop+1].at) > staleWindow {
		drop++
	}
	drop = max(drop, len(v)+1-seenMax)
	v = append(v[:0], v[drop:]...)
	rp.seen[rel] = append(v, shown{handBase: handBase{hash: h}, at: at, passed: passed, created: created})
}

// pastVersions holds the memory files' versions (path and blob) of the
// last checkoutDepth commits materialised here, oldest first in a ring:
// about one per commit, however many files there are.
type pastVersions struct {
	ring []pastVersion
	next int
	in   map[pastVersion]int
}

type pastVersion struct {
	rel  string
	blob plumbing.Hash
}

func (v *pastVersions) add(k pastVersion) {
	if v.in == nil {
		v.in = map[pastVersion]int{}
	}
	if len(v.ring) < checkoutDepth {
		v.ring = append(v.ring, k)
	} else {
		old := v.ring[v.next]
		if v.in[old]--; v.in[old] <= 0 {
			delete(v.in, old)
		}
		v.ring[v.next] = k
		v.next = (v.next + 1) % checkoutDepth
	}
	v.in[k]++
}

// handBase is the version a hand edit started from: a blob (zero: none),
// or the text an adopt read, which need not be one.
type handBase struct {
	hash plumbing.Hash
	text []byte // nil: the blob's
	// to is where acknowledged renames took the file since the edit was
	// made on it (a repository path; "": where it is): a noted edit's,
	// moved by the commits the worktree follows (repairs.moveKept). The
	// adopt merges the edit into the file there (mergeHandEdit).
	to string
	// seen is a noted edit's: the file's versions noted (repairs.seen)
	// when it was kept, oldest first, up to the base, and noted is when.
	// The edit was made on the base or on one of the versions before it
	// (mergeHandEdit). The versions noted since never reached the
	// worktree, which holds the edit, yet they pushed those out of
	// repairs.seen (seenMax) while the model changed the file many times
	// before the adopt; merged from the base alone, an edit made on the
	// version before it (the adopt's read, say: the worktree held the
	// adopt's merge for an instant) conflicted with every line the model
	// changed since.
	seen  []shown
	noted time.Time
}

// noteBase notes that the worktree file at repository path q holds a hand
// edit made on b, unless an older base is noted already (the edit was
// kept before: it is made on that one). It reports whether it noted it.
func (rp *repairs) noteBase(q string, b handBase) (noted bool) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if _, ok := rp.handBase[q]; ok {
		return false
	}
	if strings.HasPrefix(q, memDir+"/") {
		v := rp.seen[q[len(memDir)+1:]]
		for i := len(v) - 1; i >= 0; i-- {
			if v[i].hash == b.hash {
				b.seen, b.noted = slices.Clone(v[:i+1]), time.Now()
				break
			}
		}
	}
	rp.handBase[q] = b
	return true
}

// dropBases forgets the hand edits noted at paths: gitmem writes them
// again, or an adopt took them.
func (rp *repairs) dropBases(paths ...string) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	for _, q := range paths {
		delete(rp.handBase, q)
	}
}

// keptAbove reports whether a hand edit is noted at a folder above the
// repository path q: the edited file is where acknowledged changes put a
// folder, and holds q's way until the adopt takes it.
func (rp *repairs) keptAbove(q string) bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if len(rp.handBase) == 0 {
		return false
	}
	for a := path.Dir(q); a != memDir && a != "."; a = path.Dir(a) {
		if _, ok := rp.handBase[a]; ok {
			return true
		}
	}
	return false
}

// bases is a copy of the hand edits noted: path -> the version each was
// made on.
func (rp *repairs) bases() map[string]handBase {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return maps.Clone(rp.handBase)
}

// handKept reports whether a hand edit is noted.
func (rp *repairs) handKept() bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return len(rp.handBase) > 0
}

// baseOf is what a merge of a hand edit of the memory file at repository
// path p starts from: the base noted for it (kept: one is), and a copy of
// the file's versions of its last commits, oldest first.
func (rp *repairs) baseOf(p string) (base handBase, kept bool, seen []shown) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	base, kept = rp.handBase[p]
	return base, kept, slices.Clone(rp.seen[p[len(memDir)+1:]])
}

// movedTo is where renames took the file of the hand edit noted at
// repository path p since its base ("": none, or where it is).
func (rp *repairs) movedTo(p string) string {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.handBase[p].to
}

// boundAt is a hand edit noted whose file renames took (handBase.to) to
// the repository path p, beneath it, or to a file in its way: its path,
// and where it goes ("", "": none; the first path of several).
func (rp *repairs) boundAt(p string) (from, to string) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	for q, b := range rp.handBase {
		if b.to != "" && (within(b.to, p) || within(p, b.to)) && (from == "" || q < from) {
			from, to = q, b.to
		}
	}
	return from, to
}

// adopted notes an adopt commit: the hand edits it took are history now
// (their bases are dropped), and what it read is the version a later
// edit of each file is made on. Called with mu held.
func (rp *repairs) adopted(a *adoptNote) {
	for _, q := range a.taken {
		delete(rp.handBase, q)
	}
	for rel, v := range a.shows {
		rp.seen[rel] = []shown{v}
	}
}

// heldBefore reports whether the worktree file rel (relative to
// memories/) held the blob h, a version gitmem gave it (not one it passed
// over), from before made until at most staleWindow before it or later:
// a git command run at made may have read it there. made is a commit's
// date, in whole seconds: a second later counts.
func (rp *repairs) heldBefore(rel string, h plumbing.Hash, made time.Time) bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	seen := rp.seen[rel]
	for i := len(seen) - 1; i >= 0; i-- {
		if i < len(seen)-1 && made.Sub(seen[i+1].at) > staleWindow {
			return false // replaced long before
		}
		if v := seen[i]; v.hash == h && v.text == nil && !v.passed && !v.at.After(made.Add(time.Second)) {
			return true
		}
	}
	return false
}

// createdSince reports whether the worktree had no file rel (relative to
// memories/) until gitmem wrote the blob h there, creating it, at most
// staleWindow before made or later: a git commit -a run at made, from an
// index that still listed the file, may have found no file there and
// committed its deletion. made is a commit's date, in whole seconds. A
// file the worktree held longer (a git rm of it is the operator's), or
// that was there before h, is not one.
func (rp *repairs) createdSince(rel string, h plumbing.Hash, made time.Time) bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	for _, v := range rp.seen[rel] {
		if v.hash == h && v.text == nil && v.created && !v.passed && !v.at.Before(made.Add(-staleWindow)) {
			return true
		}
	}
	return false
}

// sawGit notes that a git command holds .git/index.lock now.
func (rp *repairs) sawGit() { rp.gitSeen.Store(time.Now().UnixNano()) }

// gitCheckedOut reports whether a hand edit of the memory file rel,
// holding blob h and written at mtime, is git's checkout: a git command
// held .git/index.lock within staleWindow of mtime (gitBusy saw it), and
// h is one of the file's versions in the last checkoutDepth commits.
// (git reset --hard that fails half-way, "File exists", writes such files
// and neither .git/index nor the branch: nothing else tells.) A version
// put back by hand with no git command running is a hand edit.
func (rp *repairs) gitCheckedOut(rel string, h plumbing.Hash, mtime time.Time) bool {
	seen := rp.gitSeen.Load()
	if seen == 0 || mtime.Sub(time.Unix(0, seen)).Abs() > staleWindow {
		return false
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.past.in[pastVersion{rel, h}] > 0
}
