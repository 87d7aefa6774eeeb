package gitdir

import (
	"encoding/binary"
	"math/bits"
)

// Deltas in git's pack format (applyDelta, in packread.go, applies them) (the format of OFS_DELTA and REF_DELTA
// entries): the base's size and the result's size as little-endian
// base-128 varints, then instructions. A copy (high bit set) takes up to
// four offset bytes and three size bytes, the low seven bits saying which
// are present; an insert (1..127) is followed by that many literal bytes.
//
// The encoder works as git's diff-delta.c does, plus a shortcut for what
// gitmem's objects mostly are: a version of a tree or a file that differs
// from its base in one place. The common prefix and suffix are copied at
// once; the rest is matched against an index of the 16-byte blocks of the
// base's rest, each candidate extended as far as it matches (forwards,
// and backwards over bytes not yet emitted), the longest taken, greedily.

const (
	deltaBlock = 16      // bytes per indexed block of the base, and the shortest copy
	maxCopy    = 0x10000 // git writes copies of at most 64 KiB
	maxInsert  = 0x7f
	maxTries   = 64 // candidate blocks tried per position
	hashMul    = 0x01000193
)

// Delta returns the delta that turns base into target, or nil when it
// would be limit bytes or longer (limit <= 0: no limit).
func Delta(base, target []byte, limit int) []byte {
	if limit <= 0 {
		limit = int(^uint(0) >> 1)
	}
	e := deltaEncoder{out: make([]byte, 0, 64), limit: limit}
	e.out = appendSize(e.out, len(base))
	e.out = appendSize(e.out, len(target))
	pre := commonPrefix(base, target)
	suf := commonSuffix(base[pre:], target[pre:])
	e.copy(0, pre)
	mid := target[pre : len(target)-suf]
	if len(mid) >= 2*deltaBlock && len(base)-suf-pre >= deltaBlock {
		// What the middle copies is in the base's middle: only that is
		// indexed.
		e.match(newDeltaIndex(base, pre, len(base)-suf), base, mid)
	} else {
		e.insert(mid)
	}
	e.copy(len(base)-suf, suf)
	if len(e.out) >= e.limit {
		return nil
	}
	return e.out
}

type deltaEncoder struct {
	out   []byte
	limit int
}

func (e *deltaEncoder) full() bool { return len(e.out) >= e.limit }

// copy appends copies of base[off:off+n], at most maxCopy bytes each.
func (e *deltaEncoder) copy(off, n int) {
	for n > 0 && !e.full() {
		c := min(n, maxCopy)
		at := len(e.out)
		e.out = append(e.out, 0x80)
		for i := range 4 {
			if b := byte(off >> (8 * i)); b != 0 {
				e.out[at] |= 1 << i
				e.out = append(e.out, b)
			}
		}
		for i := range 3 {
			if b := byte(c >> (8 * i)); b != 0 {
				e.out[at] |= 0x10 << i
				e.out = append(e.out, b)
			}
		}
		off += c
		n -= c
	}
}

// insert appends literal bytes, at most maxInsert per instruction.
func (e *deltaEncoder) insert(lit []byte) {
	for len(lit) > 0 && !e.full() {
		n := min(len(lit), maxInsert)
		e.out = append(e.out, byte(n))
		e.out = append(e.out, lit[:n]...)
		lit = lit[n:]
	}
}

// deltaIndex finds the blocks of a part of a base with a given hash.
type deltaIndex struct {
	from  int // where the first block starts
	shift uint
	head  []int32  // bucket -> 1 + the last block in it (0: none)
	next  []int32  // block -> 1 + the previous block in its bucket
	hash  []uint32 // block -> its hash
}

func blockHash(b []byte) uint32 {
	var h uint32
	for _, c := range b[:deltaBlock] {
		h = h*hashMul + uint32(c)
	}
	return h
}

// outFactor removes the byte leaving a rolling window: hashMul^deltaBlock.
var outFactor = func() uint32 {
	f := uint32(1)
	for range deltaBlock {
		f *= hashMul
	}
	return f
}()

// newDeltaIndex indexes the blocks of base[from:to].
func newDeltaIndex(base []byte, from, to int) *deltaIndex {
	n := (to - from) / deltaBlock
	bucketBits := max(4, bits.Len(uint(n)))
	x := &deltaIndex{from: from, shift: uint(32 - bucketBits), head: make([]int32, 1<<bucketBits), next: make([]int32, n), hash: make([]uint32, n)}
	for i := range n {
		h := blockHash(base[from+i*deltaBlock:])
		b := x.bucket(h)
		x.hash[i], x.next[i], x.head[b] = h, x.head[b], int32(i+1)
	}
	return x
}

func (x *deltaIndex) bucket(h uint32) uint32 { return (h * 0x9e3779b1) >> x.shift }

// match encodes mid (the part of the target between the common prefix and
// suffix) as copies from base where they are found, inserts elsewhere.
func (e *deltaEncoder) match(x *deltaIndex, base, mid []byte) {
	lit := 0 // mid[lit:i] is waiting to be inserted
	i := 0
	h := blockHash(mid)
	for i+deltaBlock <= len(mid) && !e.full() {
		bestOff, bestLen := 0, 0
		tries := 0
		for c := x.head[x.bucket(h)]; c != 0 && tries < maxTries; c = x.next[c-1] {
			tries++
			if x.hash[c-1] != h {
				continue
			}
			off := x.from + int(c-1)*deltaBlock
			if n := commonPrefix(base[off:], mid[i:]); n > bestLen {
				bestOff, bestLen = off, n
				if i+n == len(mid) {
					break
				}
			}
		}
		if bestLen < deltaBlock {
			// No match here: the byte waits to be inserted; roll on.
			if i+deltaBlock < len(mid) {
				h = (h*hashMul + uint32(mid[i+deltaBlock])) - outFactor*uint32(mid[i])
			}
			i++
			continue
		}
		// Extend backwards over the bytes waiting to be inserted.
		for i > lit && bestOff > 0 && base[bestOff-1] == mid[i-1] {
			i--
			bestOff--
			bestLen++
		}
		e.insert(mid[lit:i])
		e.copy(bestOff, bestLen)
		i += bestLen
		lit = i
		if i+deltaBlock <= len(mid) {
			h = blockHash(mid[i:])
		}
	}
	e.insert(mid[lit:])
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+8 <= n && binary.LittleEndian.Uint64(a[i:]) == binary.LittleEndian.Uint64(b[i:]) {
		i += 8
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// commonSuffix is the length of the longest common suffix of a and b.
func commonSuffix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+8 <= n && binary.LittleEndian.Uint64(a[len(a)-i-8:]) == binary.LittleEndian.Uint64(b[len(b)-i-8:]) {
		i += 8
	}
	for i < n && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	return i
}

func appendSize(b []byte, n int) []byte {
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}
