package gitdir

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/klauspost/compress/zlib"
)

// Reading objects without go-git's object storage. go-git loads a pack's
// whole index into its heap and, at the first object read, builds a map
// from offset to hash of every object in the pack (≈150 ms and tens of
// MiB for a 400,000-object pack); a server that reads one commit at start
// pays all of it. Here an index is mapped into memory and searched in
// place, an object is read at its offset with pread (or, while a repack
// reads, from the pack mapped: see mapPacks), deltas (OFS and REF) are
// resolved with a small cache of bases, and loose objects are read
// directly. Pack files are opened on demand and closed by Release, like
// go-git's kept descriptors (a deleted pack is never held open).

// packIdx is one pack: its index mapped (or read) into memory, its pack
// file opened on demand.
type packIdx struct {
	hash      plumbing.Hash
	path      string // the .pack file
	data      []byte // the .idx file
	unmap     func()
	n         int
	pf        *os.File
	pack      []byte // the .pack file mapped, when the packSet maps packs
	unmapPack func()
	byOffset  []uint64 // the entries in the order of their offsets, each offset<<posBits | position (see reverse), once built
	posBits   uint     // the bits of a position in byOffset
	packEnd   int64    // where the last entry ends (see reverse)
	id        uint32   // this opening's number, unique in the process (the base cache's keys)
}

// packIDs numbers the packs opened (packIdx.id).
var packIDs atomic.Uint32

func (p *packIdx) names() []byte { return p.data[8+256*4 : 8+256*4+20*p.n] }

// find returns the offset of object h in the pack.
func (p *packIdx) find(h plumbing.Hash) (int64, bool) {
	if i, ok := p.position(h); ok {
		return p.offset(i), true
	}
	return 0, false
}

// position returns where object h is in the index's sorted names.
func (p *packIdx) position(h plumbing.Hash) (int, bool) {
	fan := p.data[8:]
	lo := 0
	if h[0] > 0 {
		lo = int(binary.BigEndian.Uint32(fan[4*(int(h[0])-1):]))
	}
	hi := int(binary.BigEndian.Uint32(fan[4*int(h[0]):]))
	names := p.names()
	for lo < hi { // binary search over the sorted names in [lo, hi)
		m := int(uint(lo+hi) >> 1)
		c := bytes.Compare(names[20*m:20*m+20], h[:])
		switch {
		case c == 0:
			return m, true
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return 0, false
}

func (p *packIdx) offset(i int) int64 {
	off4 := 8 + 256*4 + 20*p.n + 4*p.n
	o := binary.BigEndian.Uint32(p.data[off4+4*i:])
	if o&0x80000000 == 0 {
		return int64(o)
	}
	off8 := off4 + 4*p.n
	return int64(binary.BigEndian.Uint64(p.data[off8+8*int(o&0x7fffffff):]))
}

func openPackIdx(idxPath string) (*packIdx, error) {
	data, unmap, err := mapFile(idxPath)
	if err != nil {
		return nil, err
	}
	bad := func() (*packIdx, error) {
		unmap()
		return nil, fmt.Errorf("%s is not a version 2 pack index", filepath.Base(idxPath))
	}
	if len(data) < 8+256*4+40 || !bytes.Equal(data[:4], []byte{0xff, 't', 'O', 'c'}) || binary.BigEndian.Uint32(data[4:]) != 2 {
		return bad()
	}
	n := int(binary.BigEndian.Uint32(data[8+255*4:]))
	if len(data) < 8+256*4+n*(20+4+4)+40 {
		return bad()
	}
	p := &packIdx{path: strings.TrimSuffix(idxPath, ".idx") + ".pack", data: data, unmap: unmap, n: n, id: packIDs.Add(1)}
	copy(p.hash[:], data[len(data)-40:len(data)-20])
	return p, nil
}

// packSet is the packs of a repository, read by gitmem itself.
type packSet struct {
	dir    string // .git/objects/pack
	env    **Env  // the Store's Env field (set after Open), where the listings are counted
	mapped bool   // read pack files mapped into memory (see mapPacks)
	mu     sync.Mutex
	loaded bool
	packs  []*packIdx
	bases  baseCache
	reads  atomic.Int64 // objects read whole from the packs (see PackReads)
	preads atomic.Int64 // entries read from a pack file with pread, not mapped (see PackFileReads)
	listed uint64       // times the folder was listed: a Located of an older listing is looked up again
}

// list returns the packs, reading the folder the first time (and after
// reset).
func (ps *packSet) list() []*packIdx {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.loaded {
		return ps.packs
	}
	ps.loaded = true
	ps.listed++
	(*ps.env).count(func(e *Env) *atomic.Int64 { return &e.packListings })
	// One listing (listNames: no *os.File) gives the indexes and whether
	// each one's pack is there.
	names := listNames(ps.dir)
	slices.Sort(names)
	old := map[string]*packIdx{}
	for _, p := range ps.packs {
		old[p.path] = p
	}
	ps.packs = nil
	for _, name := range names {
		base, ok := strings.CutSuffix(name, ".idx")
		if !ok || !strings.HasPrefix(base, "pack-") {
			continue
		}
		pack := filepath.Join(ps.dir, base+".pack")
		if p := old[pack]; p != nil {
			ps.packs = append(ps.packs, p)
			delete(old, pack)
			continue
		}
		if _, found := slices.BinarySearch(names, base+".pack"); !found {
			continue // an index whose pack is not there (yet, or any more)
		}
		if p, err := openPackIdx(filepath.Join(ps.dir, name)); err == nil {
			ps.packs = append(ps.packs, p)
		}
	}
	for _, p := range old { // packs that are gone
		p.close()
		p.unmap()
	}
	return ps.packs
}

// add makes a pack this process wrote known without listing the folder
// again (until then a list would have found it); if the folder has not
// been listed yet, the first list will.
func (ps *packSet) add(idxPath string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if !ps.loaded {
		return
	}
	pack := strings.TrimSuffix(idxPath, ".idx") + ".pack"
	for _, p := range ps.packs {
		if p.path == pack {
			return
		}
	}
	p, err := openPackIdx(idxPath)
	if err != nil {
		ps.loaded = false // the next list says what is there
		return
	}
	ps.packs = append(ps.packs, p)
}

// drop forgets the packs at these paths (.pack), closed and unmapped:
// this process deleted them (see Store.DropPacks).
func (ps *packSet) drop(paths map[string]bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.packs = slices.DeleteFunc(ps.packs, func(p *packIdx) bool {
		if paths[p.path] {
			p.close()
			p.unmap()
		}
		return paths[p.path]
	})
	ps.bases.clear()
}

// reset makes the next list read the folder again (another process
// repacked).
func (ps *packSet) reset() {
	ps.mu.Lock()
	ps.loaded = false
	ps.mu.Unlock()
}

// release closes the pack files (not the mapped indexes).
func (ps *packSet) release() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.packs {
		p.close()
	}
	ps.bases.clear()
}

// closeAll closes and unmaps everything.
func (ps *packSet) closeAll() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.packs {
		p.close()
		p.unmap()
	}
	ps.packs, ps.loaded = nil, false
	ps.bases.clear()
}

func (p *packIdx) close() {
	if p.pf != nil {
		p.pf.Close()
		p.pf = nil
	}
	p.unmapPackFile()
}

// unmapPackFile releases the pack's mapping, if any.
func (p *packIdx) unmapPackFile() {
	if p.pack != nil {
		p.unmapPack()
		p.pack, p.unmapPack = nil, nil
	}
}

// lookup finds the pack and offset of an object.
func (ps *packSet) lookup(h plumbing.Hash) (*packIdx, int64, bool) {
	for _, p := range ps.list() {
		if off, ok := p.find(h); ok {
			return p, off, true
		}
	}
	return nil, 0, false
}

// inPacks calls at with each pack that holds h and h's offset there,
// until one answers without error: found reports whether one held it.
// A pack whose file is gone (another process repacked) is passed over;
// the caller lists the packs again. A damaged entry is passed over too,
// for another pack's copy, as git does; when no copy is sound, the
// first entry's error is returned.
func inPacks[T any](ps *packSet, h plumbing.Hash, at func(p *packIdx, off int64) (T, error)) (v T, found bool, err error) {
	var damaged error
	for _, p := range ps.list() {
		off, ok := p.find(h)
		if !ok {
			continue
		}
		v, err := at(p, off)
		switch {
		case err == nil:
			return v, true, nil
		case errors.Is(err, fs.ErrNotExist):
		case damaged == nil:
			damaged = fmt.Errorf("object %s in %s: %w", h, filepath.Base(p.path), err)
		}
	}
	return v, damaged != nil, damaged
}

// read returns an object from the packs, resolving deltas.
func (ps *packSet) read(h plumbing.Hash) (plumbing.ObjectType, []byte, bool, error) {
	ps.reads.Add(1)
	o, found, err := inPacks(ps, h, func(p *packIdx, off int64) (Object, error) {
		t, data, err := ps.readAt(p, off, 0)
		return Object{Type: t, Data: data}, err
	})
	return o.Type, o.Data, found, err
}

const maxDeltaDepth = 10000

// readAt reads the object at off in p. What a delta is made from is
// kept (bases) once read: the next delta of its chain starts there, as
// git's delta base cache does. A base found there is not put again (a
// map lookup per link of every chain).
func (ps *packSet) readAt(p *packIdx, off int64, depth int) (plumbing.ObjectType, []byte, error) {
	if depth > maxDeltaDepth {
		return 0, nil, errors.New("delta chain too long")
	}
	if t, data, ok := ps.bases.get(p, off); ok {
		return t, data, nil
	}
	t, data, err := ps.readEntry(p, off, depth)
	if err == nil && depth > 0 {
		ps.bases.put(p, off, t, data)
	}
	return t, data, err
}

// readEntry reads the entry at off in p, resolving its delta chain. A
// delta's own data is inflated, once its base is read, into a buffer
// reused for the next (it is not kept: reading a diff's blobs made two
// allocations per link of every chain).
func (ps *packSet) readEntry(p *packIdx, off int64, depth int) (plumbing.ObjectType, []byte, error) {
	r, done, err := ps.entry(p, off)
	if err != nil {
		return 0, nil, err
	}
	defer done()
	t, size, err := entryHeader(r)
	if err != nil {
		return 0, nil, err
	}
	var bp *packIdx
	var boff int64
	switch t {
	case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
		data, err := inflate(r, size)
		return t, data, err
	case plumbing.OFSDeltaObject:
		neg, err := ofsOffset(r)
		if err != nil {
			return 0, nil, err
		}
		bp, boff = p, off-neg
	case plumbing.REFDeltaObject:
		var bh plumbing.Hash
		if _, err := io.ReadFull(r, bh[:]); err != nil {
			return 0, nil, err
		}
		var ok bool
		if bp, boff, ok = ps.lookup(bh); !ok {
			return 0, nil, fmt.Errorf("delta base %s is missing", bh)
		}
	default:
		return 0, nil, fmt.Errorf("unknown pack entry type %d", t)
	}
	bt, base, err := ps.readAt(bp, boff, depth+1)
	if err != nil {
		return 0, nil, err
	}
	if size > maxObjectBytes {
		return 0, nil, errors.New("object too large")
	}
	buf := deltaBufs.Get().(*[]byte)
	if int64(cap(*buf)) < size {
		*buf = make([]byte, size)
	}
	if size <= maxDeltaBuf {
		defer deltaBufs.Put(buf)
	}
	delta := (*buf)[:size]
	if err := inflateTo(r, delta); err != nil {
		return 0, nil, err
	}
	data, err := applyDelta(base, delta)
	return bt, data, err
}

// deltaBufs hold a delta's data while it is applied (readEntry); one
// longer than maxDeltaBuf is not kept for the next.
var deltaBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxDeltaBuf = 1 << 20

// Located is where an object is in the packs, for reading many in the
// order SortForReading gives them.
type Located struct {
	Hash   plumbing.Hash
	p      *packIdx // nil: in no pack
	off    int64
	listed uint64
}

// sortForReading returns where each of hs is, pack by pack, each from
// its end back, objects in no pack last. git writes a file's newer
// versions first and the older as deltas after them, so the deepest of
// the chains come first and leave in the cache (bases) the links the
// others share: a diff across 50,000 commits inflated 75,500 entries so,
// 95,300 in the order of its paths.
func (ps *packSet) sortForReading(hs []plumbing.Hash) []Located {
	packs := ps.list()
	ps.mu.Lock()
	listed := ps.listed
	ps.mu.Unlock()
	at := make([]Located, len(hs))
	rank := make([]int, len(hs))
	for k, h := range hs {
		at[k], rank[k] = Located{Hash: h}, len(packs)
		for i, p := range packs {
			if off, ok := p.find(h); ok {
				at[k], rank[k] = Located{h, p, off, listed}, i
				break
			}
		}
	}
	order := make([]int, len(hs))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(x, y int) int {
		if c := cmp.Compare(rank[x], rank[y]); c != 0 {
			return c
		}
		return cmp.Compare(at[y].off, at[x].off)
	})
	out := make([]Located, len(hs))
	for k, i := range order {
		out[k] = at[i]
	}
	return out
}

// readLocated reads the object at l, if the packs were not listed again
// since (another process repacked): ok false when they were, or l is in
// no pack, or its entry could not be read (the caller looks it up anew).
func (ps *packSet) readLocated(l Located) (plumbing.ObjectType, []byte, bool) {
	if l.p == nil {
		return 0, nil, false
	}
	ps.mu.Lock()
	same := ps.loaded && ps.listed == l.listed
	ps.mu.Unlock()
	if !same {
		return 0, nil, false
	}
	ps.reads.Add(1)
	t, data, err := ps.readAt(l.p, l.off, 0)
	return t, data, err == nil
}

// size returns an object's size: the header's, or for a delta the
// result size its delta data starts with.
func (ps *packSet) size(h plumbing.Hash) (int64, bool, error) {
	return inPacks(ps, h, ps.sizeAt)
}

func (ps *packSet) sizeAt(p *packIdx, off int64) (int64, error) {
	r, done, err := ps.entry(p, off)
	if err != nil {
		return 0, err
	}
	defer done()
	t, size, err := entryHeader(r)
	if err != nil {
		return 0, err
	}
	switch t {
	case plumbing.OFSDeltaObject:
		if _, err := ofsOffset(r); err != nil {
			return 0, err
		}
	case plumbing.REFDeltaObject:
		var base plumbing.Hash
		if _, err := io.ReadFull(r, base[:]); err != nil {
			return 0, err
		}
	default:
		return size, nil
	}
	zr, err := inflater(r)
	if err != nil {
		return 0, err
	}
	defer inflaters.Put(zr)
	br := bufio.NewReaderSize(zr, 32)
	if _, err := binary.ReadUvarint(br); err != nil { // the base's size
		return 0, err
	}
	n, err := binary.ReadUvarint(br)
	return int64(n), err
}

// entryReader reads a pack entry: its header, then its zlib stream.
type entryReader interface {
	io.Reader
	io.ByteReader
}

// entry returns a reader of p from off on, and what to call when done
// with it: the mapped pack (see mapPacks), or the file read with pread.
func (ps *packSet) entry(p *packIdx, off int64) (entryReader, func(), error) {
	if ps.mapped {
		data, err := ps.mapPack(p)
		if err != nil {
			return nil, nil, err
		}
		if off < 0 || off >= int64(len(data)) {
			return nil, nil, fmt.Errorf("offset %d is beyond the pack's end", off)
		}
		return bytes.NewReader(data[off:]), func() {}, nil
	}
	f, err := ps.file(p)
	if err != nil {
		return nil, nil, err
	}
	ps.preads.Add(1)
	r := getReader(io.NewSectionReader(f, off, 1<<62))
	return r, func() { readers.Put(r) }, nil
}

// mapPacks makes the packSet read pack files mapped into memory, where
// the platform can, until done is called: no system call per object,
// which was an eighth of a collection's CPU. Only while one goroutine
// uses the Store, which nothing else lists again or releases meanwhile
// (Repack): a mapping released under a reader would fault where a closed
// file only fails.
func (ps *packSet) mapPacks() (done func()) {
	ps.mapped = canMapPacks
	return func() {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		ps.mapped = false
		for _, p := range ps.packs {
			p.unmapPackFile()
		}
	}
}

// faultError is what a goroutine reading packs mapped, with
// debug.SetPanicOnFault on, makes of what it recovered: a pack file
// another program cut short under its mapping makes a read fault
// (SIGBUS), which would end the process; it is an error, as a short read
// of the file would be. Anything else panics on; nil is nil.
func faultError(e any) error {
	if e == nil {
		return nil
	}
	if _, fault := e.(interface{ Addr() uintptr }); !fault {
		panic(e)
	}
	return fmt.Errorf("a pack file changed while it was read: %v", e)
}

func (ps *packSet) mapPack(p *packIdx) ([]byte, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p.pack == nil {
		data, unmap, err := mapFile(p.path)
		if err != nil {
			return nil, err
		}
		p.pack, p.unmapPack = data, unmap
	}
	return p.pack, nil
}

func (ps *packSet) file(p *packIdx) (*os.File, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p.pf == nil {
		f, err := OpenRead(p.path)
		if err != nil {
			return nil, err
		}
		p.pf = f
	}
	return p.pf, nil
}

// entryHeader reads a pack entry's type and size.
func entryHeader(r io.ByteReader) (plumbing.ObjectType, int64, error) {
	b, err := r.ReadByte()
	if err != nil {
		return 0, 0, err
	}
	t := plumbing.ObjectType((b >> 4) & 7)
	size := int64(b & 0x0f)
	for shift := uint(4); b&0x80 != 0; shift += 7 {
		if b, err = r.ReadByte(); err != nil {
			return 0, 0, err
		}
		size |= int64(b&0x7f) << shift
	}
	return t, size, nil
}

// ofsOffset reads an OFS_DELTA's distance back to its base.
func ofsOffset(r io.ByteReader) (int64, error) {
	b, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	off := int64(b & 0x7f)
	for b&0x80 != 0 {
		if b, err = r.ReadByte(); err != nil {
			return 0, err
		}
		off = ((off + 1) << 7) | int64(b&0x7f)
	}
	return off, nil
}

func inflate(r io.Reader, size int64) ([]byte, error) {
	if size > maxObjectBytes {
		return nil, errors.New("object too large")
	}
	data := make([]byte, size)
	return data, inflateTo(r, data)
}

// inflateTo inflates the zlib stream r into data, which it must fill
// exactly.
func inflateTo(r io.Reader, data []byte) error {
	zr, err := inflater(r)
	if err != nil {
		return err
	}
	defer inflaters.Put(zr)
	if _, err := io.ReadFull(zr, data); err != nil {
		return err
	}
	return atEnd(zr)
}

// atEnd checks that a zlib stream ends where the object's header says it
// does: reading on to its end is what checks its checksum, which a
// stored (uncompressed) entry has no other guard than.
func atEnd(zr io.Reader) error {
	var one [1]byte
	for range 4 { // a reader may return nothing, and no error, now and then
		switch n, err := zr.Read(one[:]); {
		case n > 0:
			return errors.New("the object is longer than its header says")
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
	}
	return errors.New("the object's stream does not end")
}

// inflations counts the zlib streams the process began to inflate, and
// inflatersMade the zlib readers it made for them, the pool being empty
// (for tests).
var inflations, inflatersMade atomic.Int64

// Inflations is how many zlib streams the process began to inflate (for
// tests: of every Store of the process).
func Inflations() int64 { return inflations.Load() }

// inflaters and readers are reused: a zlib reader allocates tens of KiB,
// and reading a long history reads hundreds of thousands of objects.
var (
	inflaters sync.Pool
	readers   = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}
)

// inflater is a zlib reader of r, the pool's when it has one: give it
// back with inflaters.Put.
func inflater(r io.Reader) (io.ReadCloser, error) {
	inflations.Add(1)
	if zr, ok := inflaters.Get().(io.ReadCloser); ok {
		return zr, zr.(zlib.Resetter).Reset(r, nil)
	}
	inflatersMade.Add(1)
	return zlib.NewReader(r)
}

func getReader(r io.Reader) *bufio.Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

var errMalformedDelta = errors.New("malformed delta")

// applyDelta builds an object from its base and a git delta.
func applyDelta(base, delta []byte) ([]byte, error) {
	bad := errMalformedDelta
	src, n := binary.Uvarint(delta)
	if n <= 0 || src != uint64(len(base)) {
		return nil, bad
	}
	delta = delta[n:]
	dst, n := binary.Uvarint(delta)
	if n <= 0 || dst > maxObjectBytes {
		return nil, bad
	}
	delta = delta[n:]
	out := make([]byte, 0, dst)
	for len(delta) > 0 {
		op := delta[0]
		delta = delta[1:]
		switch {
		case op&0x80 != 0: // copy from the base
			var off, size uint64
			for i := range 4 {
				if op&(1<<i) != 0 {
					if len(delta) == 0 {
						return nil, bad
					}
					off |= uint64(delta[0]) << (8 * i)
					delta = delta[1:]
				}
			}
			for i := range 3 {
				if op&(0x10<<i) != 0 {
					if len(delta) == 0 {
						return nil, bad
					}
					size |= uint64(delta[0]) << (8 * i)
					delta = delta[1:]
				}
			}
			if size == 0 {
				size = 0x10000
			}
			if off+size > uint64(len(base)) {
				return nil, bad
			}
			out = append(out, base[off:off+size]...)
		case op != 0: // insert op bytes
			if int(op) > len(delta) {
				return nil, bad
			}
			out = append(out, delta[:op]...)
			delta = delta[op:]
		default:
			return nil, bad
		}
	}
	if uint64(len(out)) != dst {
		return nil, bad
	}
	return out, nil
}

// baseCache keeps recently resolved delta bases, bounded in bytes, the
// oldest put evicted first. Its index maps a key holding no pointer (the
// pack's number and the offset) to a slot of a ring of the bases: no
// pointer in the map for the collector to scan, and no slice growing at
// one end while it is cut at the other (a diff across 50,000 commits
// put about 90,000 bases; the map and that slice were 15% of what it
// allocated, and a tenth of its time).
type baseCache struct {
	mu      sync.Mutex
	at      map[uint64]int32 // key → slot in ring
	ring    []cachedBase     // the bases in the order put: slots head, head+1, ... (mod len), n of them
	head, n int
	bytes   int
	limit   int // the bound in bytes: baseCacheBytes, or a test's
}

type cachedBase struct {
	key  uint64
	t    plumbing.ObjectType
	data []byte
}

const baseCacheBytes = 16 << 20

// baseKey is the cache's key of an offset in p; ok is false for one too
// far into a pack to have one (over 1 TiB: not cached).
func baseKey(p *packIdx, off int64) (k uint64, ok bool) {
	if off < 0 || off >= 1<<40 {
		return 0, false
	}
	return uint64(p.id)<<40 | uint64(off), true
}

func (c *baseCache) get(p *packIdx, off int64) (plumbing.ObjectType, []byte, bool) {
	k, ok := baseKey(p, off)
	if !ok {
		return 0, nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.at[k]
	if !ok {
		return 0, nil, false
	}
	return c.ring[i].t, c.ring[i].data, true
}

func (c *baseCache) put(p *packIdx, off int64, t plumbing.ObjectType, data []byte) {
	k, ok := baseKey(p, off)
	limit := cmp.Or(c.limit, baseCacheBytes)
	if !ok || len(data) > limit/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.at[k]; ok {
		return
	}
	if c.n == len(c.ring) { // full: twice as many slots, in order from 0
		ring := make([]cachedBase, max(1024, 2*len(c.ring)))
		at := make(map[uint64]int32, len(ring))
		for j := range c.n {
			b := c.ring[(c.head+j)%len(c.ring)]
			ring[j] = b
			at[b.key] = int32(j)
		}
		c.ring, c.at, c.head = ring, at, 0
	}
	i := (c.head + c.n) % len(c.ring)
	c.ring[i] = cachedBase{k, t, data}
	c.at[k] = int32(i)
	c.n++
	c.bytes += len(data)
	for c.bytes > limit && c.n > 0 {
		old := &c.ring[c.head]
		delete(c.at, old.key)
		c.bytes -= len(old.data)
		*old = cachedBase{}
		c.head = (c.head + 1) % len(c.ring)
		c.n--
	}
}

func (c *baseCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.ring, c.head, c.n, c.bytes = nil, nil, 0, 0, 0
}

// readLoose reads a loose object: its type and content.
func readLoose(path string) (plumbing.ObjectType, []byte, error) {
	f, err := OpenRead(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	zr, err := zlib.NewReader(bufio.NewReaderSize(f, 32<<10))
	if err != nil {
		return 0, nil, err
	}
	defer zr.Close()
	br := bufio.NewReaderSize(zr, 512)
	hdr, err := br.ReadBytes(0)
	if err != nil {
		return 0, nil, err
	}
	kind, size, ok := bytes.Cut(hdr[:len(hdr)-1], []byte(" "))
	t, terr := plumbing.ParseObjectType(string(kind))
	n, nerr := parseSize(size)
	if !ok || terr != nil || nerr != nil || n > maxObjectBytes {
		return 0, nil, errors.New("bad object header")
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(br, data); err != nil {
		return 0, nil, err
	}
	return t, data, atEnd(br)
}

func parseSize(b []byte) (int64, error) {
	var n int64
	if len(b) == 0 {
		return 0, errors.New("empty size")
	}
	for _, c := range b {
		if c < '0' || c > '9' || n > maxObjectBytes {
			return 0, errors.New("bad size")
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}

// Expand returns the one object whose hash begins with the hex digits of
// prefix (at least 4), looking in the objects held in memory, the packs'
// indexes and the loose objects; ok is false when none or more than one
// does (the caller says which, as git does).
func (s *Store) Expand(prefix string) (h plumbing.Hash, ok bool) {
	if len(prefix) < 4 || len(prefix) >= 40 || strings.Trim(prefix, "0123456789abcdef") != "" {
		return plumbing.ZeroHash, false
	}
	var low plumbing.Hash // the smallest hash with the prefix
	hex.Decode(low[:], []byte(prefix[:len(prefix)&^1]))
	if len(prefix)%2 == 1 {
		d, _ := strconv.ParseUint(prefix[len(prefix)-1:], 16, 8)
		low[len(prefix)/2] = byte(d) << 4
	}
	has := func(c plumbing.Hash) bool { return strings.HasPrefix(c.String(), prefix) }
	found := map[plumbing.Hash]bool{}
	s.ovmu.RLock()
	for c := range s.overlay {
		if has(c) {
			found[c] = true
		}
	}
	s.ovmu.RUnlock()
	for _, p := range s.packs.list() {
		names := p.names()
		i := sort.Search(p.n, func(i int) bool { return bytes.Compare(names[20*i:20*i+20], low[:]) >= 0 })
		for ; i < p.n && len(found) < 2; i++ {
			var c plumbing.Hash
			copy(c[:], names[20*i:20*i+20])
			if !has(c) {
				break
			}
			found[c] = true
		}
	}
	if entries, err := os.ReadDir(filepath.Join(s.Dir, "objects", prefix[:2])); err == nil {
		for _, e := range entries {
			if name := prefix[:2] + e.Name(); len(name) == 40 && strings.HasPrefix(name, prefix) && plumbing.IsHash(name) {
				found[plumbing.NewHash(name)] = true
			}
		}
	}
	if len(found) != 1 {
		return plumbing.ZeroHash, false
	}
	for c := range found {
		h = c
	}
	return h, true
}
