package gitdir

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"

	"github.com/go-git/go-git/v5/plumbing"
)

// Reading a whole pack, each object once. A fetch checks every object it
// brought (gitmem's transfer.fsckObjects); read one by one in the order
// of their hashes (ReadObject), each entry cost a system call and each
// object stored as a delta rebuilt its chain of bases, for most of a
// pull's time. WalkPack reads the pack mapped, in the order its entries
// are stored, and keeps each delta base only until its last delta is
// rebuilt; what the caller does not want whole (a blob, whose type its
// entry header says, or its delta chain's first entry) is never
// inflated.

// WalkPack calls fn with every object of the pack named pack (one of
// s's, listed), in the order they are stored: its hash, its type, and
// its content when whole says so of its type (nil otherwise). A delta is
// rebuilt from its base: read earlier in the walk, or later (a REF_DELTA
// may name an entry after it), or outside the pack. A malformed entry is
// an error, as ReadObject's.
func (s *Store) WalkPack(pack plumbing.Hash, whole func(plumbing.ObjectType) bool, fn func(h plumbing.Hash, t plumbing.ObjectType, data []byte) error) (err error) {
	var p *packIdx
	for _, q := range s.packs.list() {
		if q.hash == pack {
			p = q
		}
	}
	if p == nil {
		return fmt.Errorf("no pack %s", pack)
	}
	if err := s.packs.reverse(p); err != nil {
		return err
	}
	data, unmap, err := mapFile(p.path)
	if err != nil {
		return err
	}
	defer unmap()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if ferr := faultError(recover()); ferr != nil {
			err = ferr
		}
	}()
	if int64(len(data)) < p.packEnd {
		return fmt.Errorf("the pack %s is shorter than its index says", pack)
	}
	w := &packWalk{s: s, p: p, data: data, whole: whole}
	if err := w.headers(); err != nil {
		return fmt.Errorf("the pack %s: %w", pack, err)
	}
	for k := range w.es {
		t, err := w.typeOf(k, 0)
		if err != nil {
			return fmt.Errorf("the pack %s: %w", pack, err)
		}
		var obj []byte
		if whole(t) {
			if obj, err = w.content(k, 0); err != nil {
				pos, _ := p.ranked(k)
				return fmt.Errorf("object %s in the pack %s: %w", p.name(pos), pack, err)
			}
		}
		w.es[k].done = true
		if w.es[k].children == 0 {
			w.es[k].data = nil
		}
		pos, _ := p.ranked(k)
		if err := fn(p.name(pos), t, obj); err != nil {
			return err
		}
	}
	return nil
}

// packWalk is one WalkPack: the pack's entries by rank, the order of
// their offsets.
type packWalk struct {
	s     *Store
	p     *packIdx
	data  []byte
	whole func(plumbing.ObjectType) bool
	es    []walkEntry
}

// walkEntry is one entry of the walk.
type walkEntry struct {
	kind     plumbing.ObjectType // as stored: a delta's is OFS_DELTA or REF_DELTA
	t        plumbing.ObjectType // the object's, once known
	body     []byte              // the zlib stream
	size     int64               // the header's
	base     int                 // a delta's base, by rank; -1: outside the pack
	ext      plumbing.Hash       // a REF_DELTA's base, when outside the pack (or, indexing, not found yet)
	extData  []byte              // that base's content, once read
	children int                 // deltas of it not rebuilt yet
	data     []byte              // its content, kept while children > 0
	done     bool                // fn has had it
}

// headers reads every entry's header, the bases of deltas among them.
func (w *packWalk) headers() error {
	p := w.p
	w.es = make([]walkEntry, p.n)
	offs := make([]int64, p.n)
	for k := range p.byOffset {
		_, offs[k] = p.ranked(k)
	}
	rank := func(off int64) (int, bool) { return slices.BinarySearch(offs, off) }
	for k := range w.es {
		end := p.packEnd
		if k+1 < len(offs) {
			end = offs[k+1]
		}
		if offs[k] < 12 || end <= offs[k] || end > int64(len(w.data)) {
			return fmt.Errorf("an entry at %d beyond the pack's end", offs[k])
		}
		r := bytes.NewReader(w.data[offs[k]:end])
		t, size, back, bh, err := entryStart(r)
		if err != nil {
			return fmt.Errorf("the entry at %d: %w", offs[k], err)
		}
		e := &w.es[k]
		e.kind, e.size, e.base = t, size, -1
		switch t {
		case plumbing.OFSDeltaObject:
			b, ok := rank(offs[k] - back)
			if !ok || b >= k {
				return fmt.Errorf("the delta at %d has no base at %d", offs[k], offs[k]-back)
			}
			e.base = b
		case plumbing.REFDeltaObject:
			if i, ok := p.position(bh); ok {
				e.base, _ = rank(p.offset(i))
			} else {
				e.ext = bh
			}
		default:
			e.t = t
		}
		if e.base >= 0 {
			w.es[e.base].children++
		}
		e.body = w.data[offs[k]+int64(r.Size())-int64(r.Len()) : end]
	}
	return nil
}

// entryStart reads the start of a pack entry: its type and size, and an
// OFS_DELTA's distance back to its base or a REF_DELTA's base.
func entryStart(r *bytes.Reader) (t plumbing.ObjectType, size, back int64, base plumbing.Hash, err error) {
	if t, size, err = entryHeader(r); err != nil {
		return
	}
	switch t {
	case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
	case plumbing.OFSDeltaObject:
		back, err = ofsOffset(r)
	case plumbing.REFDeltaObject:
		_, err = io.ReadFull(r, base[:])
	default:
		err = fmt.Errorf("unknown pack entry type %d", t)
	}
	return
}

// typeOf returns the type of the object at rank k: a delta's is its
// base's.
func (w *packWalk) typeOf(k, depth int) (plumbing.ObjectType, error) {
	e := &w.es[k]
	switch {
	case e.t != 0:
		return e.t, nil
	case depth > maxDeltaDepth:
		return 0, errors.New("delta chain too long")
	case e.base >= 0:
		t, err := w.typeOf(e.base, depth+1)
		e.t = t
		return t, err
	}
	t, data, err := w.s.read(e.ext) // a base outside the pack
	if err != nil {
		return 0, fmt.Errorf("the delta base %s: %w", e.ext, err)
	}
	e.t, e.extData = t, data
	return t, nil
}

// grounded reports whether the delta chain of the entry at rank k ends
// at a whole entry of the pack (every base found).
func (w *packWalk) grounded(k int) bool {
	for depth := 0; depth <= maxDeltaDepth; depth++ {
		e := &w.es[k]
		switch {
		case !e.kind.IsDelta():
			return true
		case e.base < 0:
			return false
		}
		k = e.base
	}
	return false
}

// content returns the content of the object at rank k, rebuilding a
// delta from its base, and keeps it while deltas of it are left.
func (w *packWalk) content(k, depth int) ([]byte, error) {
	e := &w.es[k]
	if e.data != nil {
		return e.data, nil
	}
	if depth > maxDeltaDepth {
		return nil, errors.New("delta chain too long")
	}
	if w.s != nil {
		w.s.decoded.Add(1)
	}
	obj, err := inflate(bytes.NewReader(e.body), e.size)
	if err != nil {
		return nil, err
	}
	if e.kind.IsDelta() {
		var base []byte
		switch {
		case e.base >= 0:
			if base, err = w.content(e.base, depth+1); err != nil {
				return nil, err
			}
			b := &w.es[e.base]
			if b.children--; b.children == 0 && b.done {
				b.data = nil
			}
		default:
			if _, err := w.typeOf(k, depth); err != nil {
				return nil, err
			}
			base = e.extData
		}
		if obj, err = applyDelta(base, obj); err != nil {
			return nil, err
		}
	}
	if e.children > 0 {
		e.data = obj
	}
	return obj, nil
}
