package gitdir

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math/bits"
	"path/filepath"
	"slices"

	"github.com/go-git/go-git/v5/plumbing"
)

// Sending objects as they are stored. A push, and a copy between two
// repositories on this machine, sends what the other side lacks as one
// pack. Reading each object whole (inflating it, resolving its delta
// chain) to compress it again was most of the CPU of a push of many
// commits. git copies packed data as it is stored (pack.reuseObject),
// once the entry's bytes match the CRC its pack index records; so does
// gitmem: an entry stored whole goes as it is, one stored as a delta
// goes as that delta when its base is sent too (never a delta of what
// the other side may lack). Anything else — a loose object, one held in
// memory, a delta of a base not sent, an entry whose CRC does not match,
// a pack too big for the few objects taken from it to be worth finding
// where its entries end — is read whole and compressed again.

// storedEntry is an object's pack entry as stored.
type storedEntry struct {
	t    plumbing.ObjectType // a whole object's type; zero for a delta
	size int64               // the object's size, or for a delta the delta's
	base plumbing.Hash       // a delta's base
	z    []byte              // the zlib stream
}

// reuseShare: the entries of a pack are sent as stored when at least one
// in reuseShare of them is sent. Finding where an entry ends sorts the
// pack's offsets (git's reverse index), which costs about what reading
// that share of its objects whole would.
const reuseShare = 128

// crc returns the CRC-32 of the entry at position i, as the index has it.
func (p *packIdx) crc(i int) uint32 {
	return binary.BigEndian.Uint32(p.data[8+256*4+20*p.n+4*i:])
}

// name returns the hash at position i.
func (p *packIdx) name(i int) (h plumbing.Hash) {
	copy(h[:], p.names()[20*i:])
	return h
}

// reverse builds, once, p's entries in the order of their offsets (git's
// reverse index), and notes where its last entry ends. Each is one
// integer, its offset above its position, sorted as such (radixSort):
// sorting the positions by their offsets, read from the index at each
// comparison, took 80 ms of a push of 10,000 commits (500,000 objects
// in the pack), 8% of its CPU. An entry beyond 2^(64-posBits) bytes
// into the pack (terabytes, at millions of objects) is refused.
func (ps *packSet) reverse(p *packIdx) error {
	f, err := ps.file(p)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p.byOffset != nil {
		return nil
	}
	nb := uint(max(1, bits.Len(uint(p.n))))
	keys := make([]uint64, p.n)
	for i := range keys {
		off := uint64(p.offset(i))
		if off>>(64-nb) != 0 {
			return fmt.Errorf("the pack %s is too large to order its entries by offset", filepath.Base(p.path))
		}
		keys[i] = off<<nb | uint64(i)
	}
	p.byOffset, p.posBits, p.packEnd = radixSort(keys), nb, fi.Size()-20
	return nil
}

// radixSort sorts keys, 16 bits at a time from the lowest (as many
// passes as the largest key has 16-bit digits: 3 for a pack of 50 MB and
// 500,000 objects, a third of the time of a comparison sort), and
// returns them: in keys or in a slice of its own. Fewer than radixMin
// keys (the packs of a call or a sync, a few objects each) are sorted by
// comparison: each pass clears and sums a count table of 65,536 entries
// (512 KiB), which cost more than the sort of a small pack, and under the
// race detector, every access to the table checked, was a third of the
// CPU of gitmem's TestBlameAgreesWithGitAfterMerges (three repositories
// pulling from one another and syncing with a remote, 240 steps).
func radixSort(keys []uint64) []uint64 {
	if len(keys) < radixMin {
		slices.Sort(keys)
		return keys
	}
	var all uint64
	for _, k := range keys {
		all |= k
	}
	tmp := make([]uint64, len(keys))
	var count [1 << 16]int
	for shift := uint(0); shift < 64 && all>>shift != 0; shift += 16 {
		clear(count[:])
		for _, k := range keys {
			count[k>>shift&0xffff]++
		}
		at := 0
		for d, c := range count[:] { // not a copy of the array
			count[d], at = at, at+c
		}
		for _, k := range keys {
			d := k >> shift & 0xffff
			tmp[count[d]] = k
			count[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys
}

// radixMin is the fewest keys radixSort sorts by their digits.
const radixMin = 1 << 12

// ranked returns the position and offset of the entry of rank k, the
// order of their offsets (see reverse).
func (p *packIdx) ranked(k int) (pos int, off int64) {
	key := p.byOffset[k]
	return int(key & (1<<p.posBits - 1)), int64(key >> p.posBits)
}

// at returns the position of the entry at off, and where it ends.
func (p *packIdx) at(off int64) (pos int, end int64, ok bool) {
	k, _ := slices.BinarySearch(p.byOffset, uint64(off)<<p.posBits)
	if k == len(p.byOffset) {
		return 0, 0, false
	}
	pos, o := p.ranked(k)
	if o != off {
		return 0, 0, false
	}
	end = p.packEnd
	if k+1 < len(p.byOffset) {
		_, end = p.ranked(k + 1)
	}
	return pos, end, true
}

// sender sends objects as they are stored where it can.
type sender struct {
	s     *Store
	send  map[plumbing.Hash]packedAt // every object sent, and where it is packed
	packs map[*packIdx]bool          // the packs whose entries are sent as stored
	buf   []byte
}

// packedAt is where an object is packed (p nil: in no pack).
type packedAt struct {
	p   *packIdx
	off int64
}

// newSender is a sender of hashes, all of them sent. Each is looked up
// in the packs once, here (stored looked each up again: 3% of a push).
func (s *Store) newSender(hashes []plumbing.Hash) *sender {
	x := &sender{s: s, send: make(map[plumbing.Hash]packedAt, len(hashes)), packs: map[*packIdx]bool{}}
	in := map[*packIdx]int{}
	for _, h := range hashes {
		p, off, ok := s.packs.lookup(h)
		x.send[h] = packedAt{p, off}
		if ok {
			in[p]++
		}
	}
	for p, k := range in {
		if k*reuseShare >= p.n && s.packs.reverse(p) == nil {
			x.packs[p] = true
		}
	}
	return x
}

// stored returns h's pack entry as it is stored, when it can be sent so
// (see above). The entry is valid until the next call.
func (x *sender) stored(h plumbing.Hash) (storedEntry, bool) {
	var e storedEntry
	if _, held := x.s.fromOverlay(h); held {
		return e, false
	}
	at := x.send[h]
	p, off := at.p, at.off
	if p == nil || !x.packs[p] {
		return e, false
	}
	pos, end, ok := p.at(off)
	if !ok || end <= off || end-off > maxObjectBytes {
		return e, false
	}
	x.buf = slices.Grow(x.buf[:0], int(end-off))[:end-off]
	if err := x.s.packs.readRaw(p, off, x.buf); err != nil || crc32.ChecksumIEEE(x.buf) != p.crc(pos) {
		return e, false
	}
	r := bytes.NewReader(x.buf)
	t, size, err := entryHeader(r)
	if err != nil {
		return e, false
	}
	switch t {
	case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
		e.t = t
	case plumbing.OFSDeltaObject:
		neg, err := ofsOffset(r)
		if err != nil {
			return e, false
		}
		bpos, _, ok := p.at(off - neg)
		if !ok {
			return e, false
		}
		e.base = p.name(bpos)
	case plumbing.REFDeltaObject:
		if _, err := io.ReadFull(r, e.base[:]); err != nil {
			return e, false
		}
	default:
		return e, false
	}
	if _, sent := x.send[e.base]; !e.base.IsZero() && !sent {
		return e, false
	}
	e.size, e.z = size, x.buf[len(x.buf)-r.Len():]
	return e, true
}

// each calls fn once for each object of hashes (the first time it is
// named), in their order, except that a delta sent as stored comes after
// its base, as the pack format wants of an OFS_DELTA and git writes every
// delta: fn gets the entry and true for an object sent as stored, false
// for one to read whole. (A base named after its delta was sent before
// it; a delta whose chain leads back to itself, which no valid pack
// holds, goes whole.)
func (x *sender) each(hashes []plumbing.Hash, fn func(h plumbing.Hash, e storedEntry, ok bool) error) error {
	const visiting, sent = 1, 2
	state := make(map[plumbing.Hash]uint8, len(x.send))
	var visit func(h plumbing.Hash) error
	visit = func(h plumbing.Hash) error {
		if state[h] != 0 {
			return nil
		}
		state[h] = visiting
		e, ok := x.stored(h)
		if ok && !e.base.IsZero() && state[e.base] != sent {
			if state[e.base] == visiting {
				ok = false
			} else {
				if err := visit(e.base); err != nil {
					return err
				}
				e, ok = x.stored(h) // the entry read again: visit reused the buffer
			}
		}
		state[h] = sent
		return fn(h, e, ok)
	}
	for _, h := range hashes {
		if err := visit(h); err != nil {
			return err
		}
	}
	return nil
}

// readRaw reads len(buf) bytes of p from off.
func (ps *packSet) readRaw(p *packIdx, off int64, buf []byte) error {
	if ps.mapped {
		data, err := ps.mapPack(p)
		if err != nil {
			return err
		}
		if off+int64(len(buf)) > int64(len(data)) {
			return io.ErrUnexpectedEOF
		}
		copy(buf, data[off:])
		return nil
	}
	f, err := ps.file(p)
	if err != nil {
		return err
	}
	ps.preads.Add(1)
	_, err = f.ReadAt(buf, off)
	return err
}

// header returns the entry's header as sent in a pack of its own: a
// delta refers to its base by hash (REF_DELTA).
func (e storedEntry) header() []byte {
	if e.base.IsZero() {
		return putEntryHeader(e.t, e.size)
	}
	return append(putEntryHeader(plumbing.REFDeltaObject, e.size), e.base[:]...)
}

// PackReads is how many objects s read whole from its packs (for tests).
func (s *Store) PackReads() int64 { return s.packs.reads.Load() }
