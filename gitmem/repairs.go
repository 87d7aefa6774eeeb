package gitmem

import (
	"path"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// pendingFor is the worktree paths that are gitmem's own unfinished work
// (not yet materialised, or waiting for a repair), as far as a check of
// the given repository paths can ask: those at, above or beneath one of
// them. They are never taken for hand edits. It is a copy taken at one
// instant, so that a check sees one state while materialisation goes on;
// under load thousands of paths wait, and copying or scanning them all
// for each call cost more than the rest of the check.
func (r *Repo) pendingFor(paths []string) pathSet {
	s := pathSet{}
	r.pmu.Lock()
	defer r.pmu.Unlock()
	for _, q := range r.pend {
		for _, p := range paths {
			if within(q, p) || within(p, q) {
				s[q] = true
			}
		}
	}
	for _, p := range paths {
		r.inflight.collect(p, s)
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
type shown struct {
	handBase
	at time.Time
}

// seenMax bounds the versions kept per file in r.seen (those replaced
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
// Called with pmu held.
func (r *Repo) show(rel string, prev *node, h plumbing.Hash, at time.Time) {
	if h.IsZero() {
		delete(r.seen, rel)
		return
	}
	v := r.seen[rel]
	if len(v) == 0 {
		if old := lookup(prev, full(rel)); old.isFile() {
			v = append(v, shown{handBase: handBase{hash: old.hash}})
			r.past.add(pastVersion{rel, old.hash})
		}
	}
	r.past.add(pastVersion{rel, h})
	if len(v) > 0 && v[len(v)-1].hash == h && v[len(v)-1].text == nil {
		return
	}
	drop := 0 // replaced long ago, or past the bound
	for drop < len(v)-1 && at.Sub(v[drop+1].at) > staleWindow {
		drop++
	}
	drop = max(drop, len(v)+1-seenMax)
	v = append(v[:0], v[drop:]...)
	r.seen[rel] = append(v, shown{handBase: handBase{hash: h}, at: at})
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
}
