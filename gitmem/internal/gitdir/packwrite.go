package gitdir

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"hash"
	"hash/adler32"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/klauspost/compress/zlib"
)

// TmpPackPrefix names the temporary files of the packs gitmem writes,
// so that the ones a crash leaves are told from git's own and removed.
// Not "tmp_": git prune deletes every file of the pack folder so named
// (with --expire=now, however new), and a pack being written beside it
// failed.
const TmpPackPrefix = "gitmem_tmp_"

// WriteObjectsPack writes objects (held in full) as one pack with its
// index (version 2), trees as deltas of their Base where it is in the
// pack, and returns the pack's hash. Two files, however many objects: a
// group of commits costs two file creations, not one per object. With
// durable false nothing is fsynced (the caller syncs later).
func (s *Store) WriteObjectsPack(objs []Object, durable bool) (plumbing.Hash, error) {
	h, err := s.WritePackFiles(objs, durable, Own)
	if err == nil {
		s.AddPack(h)
	}
	return h, err
}

// StoredPackMax is the most objects WritePackFiles stores without
// compression; a larger pack (a recovery, an adopt of many files) is
// compressed at the fastest level. (gc takes a pack it did not write as a
// burst to pack again only below a limit of its own, which must stay
// above this one.)
const StoredPackMax = 10_000

// WritePackFiles is WriteObjectsPack without telling the Store: it writes
// the two files and changes nothing the Store holds, so it needs none of
// the caller's locks (what the pack holds must be readable meanwhile, as
// objects in memory). AddPack then makes the Store read from it. keep is
// the .keep it gets (see Keep).
func (s *Store) WritePackFiles(objs []Object, durable bool, keep Keep) (plumbing.Hash, error) {
	seen := map[plumbing.Hash]bool{}
	n := 0
	for _, o := range objs {
		if !seen[o.Hash] {
			seen[o.Hash] = true
			n++
		}
	}
	// Stored, not compressed: this is the pack of a burst of changes, on
	// the way of every call under load, and gc packs it again with deltas
	// and compression. Compressing at the fastest level cost 12% of a
	// loaded server's CPU, for packs about 1.5x smaller (a mix of 100-entry
	// trees, commits and small files: a tree's hashes do not compress).
	level := zlib.NoCompression
	if n > StoredPackMax {
		level = zlib.BestSpeed
	}
	pw, err := newPackWriter(s.Env, s.Dir, n, level)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	pw.keep = keep
	// A tree whose base (the folder's previous version) is in the pack is
	// stored as a delta of it: a commit's trees differ from their parents'
	// by an entry or two, and were nine tenths of a burst's bytes (two
	// 100-entry trees, 8 KB, against a few hundred bytes for the file and
	// the commit), all of which the next checkpoint's syncfs wrote out.
	data := make(map[plumbing.Hash][]byte, len(objs))
	for _, o := range objs {
		var baseData []byte
		if !o.Base.IsZero() {
			baseData = data[o.Base]
		}
		if err := pw.add(o.Type, o.Hash, o.Data, o.Base, baseData); err != nil {
			pw.abort()
			return plumbing.ZeroHash, err
		}
		if o.Type == plumbing.TreeObject {
			data[o.Hash] = o.Data
		}
	}
	return pw.finish(durable)
}

// PackBuilder writes a pack object by object, InFlight until Settle (see
// Keep), for a writer that makes many objects before a ref names them (a
// redaction's rewritten history): one pack, where loose objects would be
// a file each, and which neither git's gc nor gitmem's takes before the
// refs move.
type PackBuilder struct {
	pw *packWriter
}

// NewPack starts a PackBuilder.
func (s *Store) NewPack() (*PackBuilder, error) {
	pw, err := newPackWriter(s.Env, s.Dir, -1, zlib.BestSpeed)
	if err != nil {
		return nil, err
	}
	pw.keep = InFlight
	return &PackBuilder{pw: pw}, nil
}

// Add writes an object (once, however often it is added) and returns its
// hash.
func (b *PackBuilder) Add(t plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
	h := plumbing.ComputeHash(t, data)
	return h, b.pw.add(t, h, data, plumbing.ZeroHash, nil)
}

// Finish completes the pack, durably, and returns its hash (zero, and no
// pack, when nothing was added); the caller adds it to the Store
// (AddPack) and, once a ref names its objects, settles it (Settle).
func (b *PackBuilder) Finish() (plumbing.Hash, error) {
	if len(b.pw.entries) == 0 {
		b.Abort()
		return plumbing.ZeroHash, nil
	}
	return b.pw.finish(true)
}

// Abort removes what was written.
func (b *PackBuilder) Abort() { b.pw.abort() }

// AddPack makes a pack WritePackFiles wrote one the Store reads from.
func (s *Store) AddPack(h plumbing.Hash) {
	// The new pack joins the known ones: no listing of the folder again
	// (go-git's own list is read again only when go-git is used).
	s.st.ObjectStorage.Reindex()
	s.packs.add(filepath.Join(s.Dir, "objects", "pack", "pack-"+h.String()+".idx"))
}

// packWriter writes a pack (version 2) and its index (version 2) object
// by object, with OFS_DELTA entries where a base is given and the delta
// pays. When the number of objects is not known at the start, the header
// is patched at the end and the pack hashed again.
type packWriter struct {
	env     *Env
	dir     string // .git/objects/pack
	f       *os.File
	w       *bufio.Writer
	sum     hash.Hash // of what was written; nil when the count is patched
	count   int       // the count in the header (-1: unknown)
	off     int64
	entries []packEntry
	index   map[plumbing.Hash]int32 // object -> its entry
	zw      *zlib.Writer
	level   int
	buf     bytes.Buffer
	deltas  int
	keep    Keep // the .keep file that comes before the pack
}

type packEntry struct {
	hash  plumbing.Hash
	off   int64
	crc   uint32
	depth uint8 // length of its delta chain (0: stored whole)
}

// maxDepth bounds delta chains, as git's pack.depth does; objects smaller
// than minDelta are stored whole (git refuses deltas of under 4 bytes, and
// a delta of a tiny object saves nothing).
const (
	maxDepth = 50
	minDelta = 32
)

// newPackWriter starts a pack of count objects (-1: not known yet)
// compressed at level.
func newPackWriter(env *Env, gitDir string, count, level int) (*packWriter, error) {
	dir := filepath.Join(gitDir, "objects", "pack")
	if err := env.Injected(StepPack, ".git/objects/pack"); err != nil {
		return nil, err
	}
	if err := mkdirIn(gitDir, dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, TmpPackPrefix+"pack_")
	if err != nil {
		return nil, err
	}
	var zw *zlib.Writer
	if pool := zlibWriters[level]; pool != nil {
		zw = pool.Get().(*zlib.Writer)
	} else {
		zw, _ = zlib.NewWriterLevel(nil, level)
	}
	pw := &packWriter{env: env, dir: dir, f: f, count: count, index: map[plumbing.Hash]int32{}, zw: zw, level: level}
	var out io.Writer = f
	if count >= 0 {
		pw.sum = sha1.New()
		out = io.MultiWriter(f, pw.sum)
	}
	pw.w = packBuf(out)
	hdr := make([]byte, 12)
	copy(hdr, "PACK")
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], uint32(max(count, 0)))
	pw.w.Write(hdr)
	pw.off = 12
	return pw, nil
}

// has reports whether the pack holds h already.
func (pw *packWriter) has(h plumbing.Hash) bool {
	_, ok := pw.index[h]
	return ok
}

// add writes an object, unless the pack holds it already: as a delta
// against base when base is in the pack, its chain is short enough and
// the delta is at most half the object's size; else whole.
func (pw *packWriter) add(t plumbing.ObjectType, h plumbing.Hash, data []byte, base plumbing.Hash, baseData []byte) error {
	if pw.has(h) {
		return nil
	}
	var delta []byte
	depth := uint8(0)
	if i, ok := pw.index[base]; ok && baseData != nil && pw.entries[i].depth < maxDepth && len(data) >= minDelta {
		if delta = Delta(baseData, data, len(data)/2); delta != nil {
			depth = pw.entries[i].depth + 1
		}
	}
	pw.buf.Reset()
	if delta != nil {
		pw.buf.Write(putEntryHeader(plumbing.OFSDeltaObject, int64(len(delta))))
		pw.buf.Write(putOfsOffset(pw.off - pw.entries[pw.index[base]].off))
		data = delta
		pw.deltas++
	} else {
		pw.buf.Write(putEntryHeader(t, int64(len(data))))
	}
	if len(data) < storedBelow {
		putStored(&pw.buf, data)
	} else {
		pw.zw.Reset(&pw.buf)
		pw.zw.Write(data)
		if err := pw.zw.Close(); err != nil {
			return err
		}
	}
	return pw.put(h, depth)
}

// addStored writes an object as it is stored in another pack (see
// sender), unless the pack holds it already: a delta refers to its base
// by offset when the base is in the pack already, else by hash.
func (pw *packWriter) addStored(h plumbing.Hash, e storedEntry) error {
	if pw.has(h) {
		return nil
	}
	pw.buf.Reset()
	depth := uint8(0)
	if i, ok := pw.index[e.base]; ok && !e.base.IsZero() {
		pw.buf.Write(putEntryHeader(plumbing.OFSDeltaObject, e.size))
		pw.buf.Write(putOfsOffset(pw.off - pw.entries[i].off))
		depth = maxDepth // its chain's length is not known here
	} else {
		pw.buf.Write(e.header())
	}
	pw.buf.Write(e.z)
	return pw.put(h, depth)
}

// put writes the entry of h in pw.buf.
func (pw *packWriter) put(h plumbing.Hash, depth uint8) error {
	if _, err := pw.w.Write(pw.buf.Bytes()); err != nil {
		return err
	}
	pw.index[h] = int32(len(pw.entries))
	pw.entries = append(pw.entries, packEntry{hash: h, off: pw.off, crc: crc32.ChecksumIEEE(pw.buf.Bytes()), depth: depth})
	pw.off += int64(pw.buf.Len())
	return nil
}

// storedBelow: an object (or delta) this small is stored, not compressed.
// Most of a collection's objects are deltas of a few dozen bytes, mostly
// the hash a tree's entry changes to: deflate gains nothing on them, and
// building its Huffman table for each cost a fifth of a collection's CPU.
const storedBelow = 128

// putStored appends data as a zlib stream of one stored deflate block
// (RFC 1950, RFC 1951 3.2.4): what zlib's level 0 writes, without its
// state.
func putStored(buf *bytes.Buffer, data []byte) {
	n := uint16(len(data))
	buf.Write([]byte{0x78, 0x01, 0x01, byte(n), byte(n >> 8), ^byte(n), ^byte(n >> 8)})
	buf.Write(data)
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], adler32.Checksum(data))
	buf.Write(sum[:])
}

// abort removes what was written.
func (pw *packWriter) abort() {
	pw.f.Close()
	os.Remove(pw.f.Name())
	pw.release()
	if pw.w != nil {
		putPackBuf(pw.w)
		pw.w = nil
	}
}

// packBufs reuses the 256 KiB buffers packs and their indexes are written
// through: a pack per burst under load made them a third of all the
// bytes serve allocated.
var packBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 256<<10) }}

func packBuf(w io.Writer) *bufio.Writer {
	b := packBufs.Get().(*bufio.Writer)
	b.Reset(w)
	return b
}

func putPackBuf(b *bufio.Writer) {
	b.Reset(nil)
	packBufs.Put(b)
}

// release gives the compressor back.
func (pw *packWriter) release() {
	if pool := zlibWriters[pw.level]; pw.zw != nil && pool != nil {
		pool.Put(pw.zw)
	}
	pw.zw = nil
}

// finish completes the pack and writes its index, then puts both in
// place (placePack). With durable, both files and the folder are
// fsynced.
func (pw *packWriter) finish(durable bool) (plumbing.Hash, error) {
	pw.release()
	fail := func(err error, files ...*os.File) (plumbing.Hash, error) {
		for _, f := range append(files, pw.f) {
			f.Close()
			os.Remove(f.Name())
		}
		return plumbing.ZeroHash, err
	}
	err := pw.w.Flush()
	putPackBuf(pw.w)
	pw.w = nil
	if err != nil {
		return fail(err)
	}
	var packSum plumbing.Hash
	if pw.count == len(pw.entries) {
		packSum = plumbing.Hash(pw.sum.Sum(nil))
	} else {
		// The header's count was a guess: patch it and hash the pack again.
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(pw.entries)))
		if _, err := pw.f.WriteAt(n[:], 8); err != nil {
			return fail(err)
		}
		sum := sha1.New()
		if _, err := io.Copy(sum, io.NewSectionReader(pw.f, 0, pw.off)); err != nil {
			return fail(err)
		}
		packSum = plumbing.Hash(sum.Sum(nil))
	}
	if _, err := pw.f.WriteAt(packSum[:], pw.off); err != nil {
		return fail(err)
	}
	xf, err := os.CreateTemp(pw.dir, TmpPackPrefix+"idx_")
	if err != nil {
		return fail(err)
	}
	if err := writeIndex(xf, pw.entries, packSum); err != nil {
		return fail(err, xf)
	}
	for _, f := range []*os.File{pw.f, xf} {
		if err := f.Chmod(0o444); err != nil {
			return fail(err, xf)
		}
		if durable {
			if err := syncFile(f); err != nil {
				return fail(err, xf)
			}
		}
	}
	pw.f.Close()
	xf.Close()
	if err := placePack(pw.env, filepath.Join(pw.dir, "pack-"+packSum.String()), pw.f.Name(), xf.Name(), pw.keep); err != nil {
		return fail(err, xf)
	}
	if durable {
		if err := SyncDir(pw.dir); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	return packSum, nil
}

// placePack renames a pack and its index, written and closed under
// temporary names, into place as base.pack and base.idx, in git's order:
// the .keep k says first (see Keep), then the pack, then its index. git
// finds a pack by its index, so it reads the pack once both are there;
// and an index without its pack is garbage that git gc deletes when it
// ends, with the .keep beside it: had the index come first, a git gc
// that looked in between deleted them both once the pack was there,
// leaving a pack that no git command reads and the next git repack -a -d
// deletes (TestPlainGitGCBetweenAPackAndItsIndex). A pack without its
// index is left alone by git gc, and by every reader; a crash between the
// two leaves one, which the next start removes (SettleStaleKeeps). On a
// failure nothing stays in place but a .keep that was there before.
func placePack(env *Env, base, packTmp, idxTmp string, k Keep) error {
	kept, err := writeKeep(base, k)
	if err != nil {
		return err
	}
	if err := os.Rename(packTmp, base+".pack"); err != nil {
		dropKeep(base, kept)
		return err
	}
	err = env.Injected(StepPackIndex, ".git/objects/pack/"+filepath.Base(base)+".idx")
	if err == nil {
		err = os.Rename(idxTmp, base+".idx")
	}
	if err != nil {
		os.Remove(base + ".pack")
		dropKeep(base, kept)
		return err
	}
	return nil
}

// writeIndex writes a pack index (version 2) of entries.
func writeIndex(xf *os.File, entries []packEntry, packSum plumbing.Hash) error {
	order := make([]int32, len(entries))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return bytes.Compare(entries[a].hash[:], entries[b].hash[:]) })
	isum := sha1.New()
	iw := packBuf(io.MultiWriter(xf, isum))
	defer putPackBuf(iw)
	put := func(v any) { binary.Write(iw, binary.BigEndian, v) }
	iw.Write([]byte{0xff, 't', 'O', 'c'})
	put(uint32(2))
	var fan [256]uint32
	for _, e := range entries {
		fan[e.hash[0]]++
	}
	for i := 1; i < 256; i++ {
		fan[i] += fan[i-1]
	}
	put(fan)
	for _, i := range order {
		iw.Write(entries[i].hash[:])
	}
	for _, i := range order {
		put(entries[i].crc)
	}
	var large []int64
	for _, i := range order {
		if off := entries[i].off; off < 1<<31 {
			put(uint32(off))
		} else {
			put(uint32(1<<31 | len(large)))
			large = append(large, off)
		}
	}
	for _, o := range large {
		put(uint64(o))
	}
	iw.Write(packSum[:])
	if err := iw.Flush(); err != nil {
		return err
	}
	_, err := xf.Write(isum.Sum(nil))
	return err
}

// putEntryHeader is a pack entry's type and size header.
func putEntryHeader(t plumbing.ObjectType, size int64) []byte {
	b := []byte{byte(t)<<4 | byte(size&0x0f)}
	size >>= 4
	for size > 0 {
		b[len(b)-1] |= 0x80
		b = append(b, byte(size&0x7f))
		size >>= 7
	}
	return b
}

// putOfsOffset encodes how far back an OFS_DELTA entry's base starts, in
// git's variable-length form (each continuation adds one).
func putOfsOffset(d int64) []byte {
	var b [10]byte
	i := len(b) - 1
	b[i] = byte(d & 0x7f)
	for d >>= 7; d > 0; d >>= 7 {
		d--
		i--
		b[i] = 0x80 | byte(d&0x7f)
	}
	return b[i:]
}

// PackHashes lists the objects a pack index (version 2) names.
func PackHashes(idxPath string) ([]plumbing.Hash, error) {
	f, err := OpenRead(idxPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	hdr := make([]byte, 8+256*4)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return nil, err
	}
	if !bytes.Equal(hdr[:8], []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}) {
		return nil, errors.New("not a version 2 pack index")
	}
	n := binary.BigEndian.Uint32(hdr[len(hdr)-4:])
	raw := make([]byte, int(n)*20)
	if _, err := io.ReadFull(f, raw); err != nil {
		return nil, err
	}
	out := make([]plumbing.Hash, n)
	for i := range out {
		copy(out[i][:], raw[i*20:])
	}
	return out, nil
}
