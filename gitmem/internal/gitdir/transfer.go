package gitdir

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/klauspost/compress/zlib"
)

// What arrives from a remote is a pack stream; it is kept as a pack
// (its file and index fsynced: two fsyncs, where loose objects would cost
// two per object), and CombinePacks later folds the small packs that
// frequent syncs leave into one. Every object is durable before Receive
// returns, so a commit that names them can move the branch.

// TooLargeError says a received pack passed the size limit.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the remote sent more than the limit of %d bytes", e.Limit)
}

// limited is an io.Reader that fails once more than n bytes were read.
type limited struct {
	r     io.Reader
	n     int64
	limit int64
}

func (l *limited) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.n > l.limit {
		return n, &TooLargeError{Limit: l.limit}
	}
	return n, err
}

// HasObject reports whether the store holds the object h, as far as the
// packs last listed tell: a miss does not re-read the pack list (reading
// does, once), since the walks that ask expect misses; whoever adds packs
// calls Reindex.
func (s *Store) HasObject(h plumbing.Hash) bool {
	if _, ok := s.fromOverlay(h); ok {
		return true
	}
	return s.OnDisk(h)
}

// OnDisk reports whether git's own files hold the object h, in a pack
// last listed or loose (the packs first: no system call), whatever
// memory holds.
func (s *Store) OnDisk(h plumbing.Hash) bool {
	if _, _, ok := s.packs.lookup(h); ok {
		return true
	}
	hex := h.String()
	_, err := os.Stat(filepath.Join(s.Dir, "objects", hex[:2], hex[2:]))
	return err == nil
}

// Missing returns the objects of objs that no pack and no loose file
// holds now. OnDisk answers from the packs last listed; here the list is
// read again first, and each pack found holding one is looked for again
// after the lookups: another program may delete one meanwhile, and then
// the list is read once more (after three tries, what such a pack holds
// counts as missing).
func (s *Store) Missing(objs []Object) []Object {
	for try := 1; ; try++ {
		s.Reindex()
		var missing []Object
		in := map[*packIdx][]Object{}
		for _, o := range objs {
			if p, _, ok := s.packs.lookup(o.Hash); ok {
				in[p] = append(in[p], o)
			} else if !s.OnDisk(o.Hash) { // loose
				missing = append(missing, o)
			}
		}
		gone := 0
		for p, held := range in {
			if _, err := os.Stat(p.path); err != nil {
				missing = append(missing, held...)
				gone++
			}
		}
		if gone == 0 || try == 3 {
			return missing
		}
	}
}

// Receive stores the objects of a pack stream (from a remote) durably, as
// a pack, and returns how many there were. More than limit bytes is an
// error (*TooLargeError) and stores nothing. The stream is written to a
// temporary file, then indexed (indexPack: every object hashed, every
// delta rebuilt from a base in the pack, the checksum checked).
func (s *Store) Receive(r io.Reader, limit int64) (int, error) {
	lr := &limited{r: r, limit: limit}
	var head [12]byte
	n, err := io.ReadFull(lr, head[:])
	switch {
	case n == 0 && (err == io.EOF || err == nil):
		return 0, nil // nothing was sent: nothing was needed
	case err != nil && !errors.Is(err, io.ErrUnexpectedEOF):
		return 0, err
	case n < 12 || string(head[:4]) != "PACK":
		return 0, errors.New("the remote sent something that is not a pack")
	}
	count := int(binary.BigEndian.Uint32(head[8:12]))
	if count == 0 {
		return 0, nil
	}
	pw, err := newPackWriter(s.Env, s.Dir, count, zlib.BestSpeed)
	if err != nil {
		return 0, err
	}
	pw.release()
	f := pw.f
	fail := func(err error, more ...*os.File) (int, error) {
		for _, x := range append(more, f) {
			x.Close()
			os.Remove(x.Name())
		}
		return 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil { // over the header newPackWriter began
		return fail(err)
	}
	if _, err := io.Copy(f, io.MultiReader(bytes.NewReader(head[:]), lr)); err != nil {
		return fail(err)
	}
	sum, entries, err := indexPack(f)
	if err != nil {
		return fail(err)
	}
	xf, err := os.CreateTemp(pw.dir, TmpPackPrefix+"idx_")
	if err != nil {
		return fail(err)
	}
	if err := writeIndex(xf, entries, sum); err != nil {
		return fail(err, xf)
	}
	for _, x := range []*os.File{f, xf} {
		if err := x.Chmod(0o444); err != nil {
			return fail(err, xf)
		}
		if err := syncFile(x); err != nil {
			return fail(err, xf)
		}
	}
	f.Close()
	xf.Close()
	// InFlight: no ref names what came yet.
	if err := placePack(s.Env, filepath.Join(pw.dir, "pack-"+sum.String()), f.Name(), xf.Name(), InFlight); err != nil {
		return fail(err, xf)
	}
	s.noteReceived(sum)
	if err := SyncDir(pw.dir); err != nil {
		return 0, err
	}
	s.Reindex()
	return count, nil
}

// noteReceived records a pack Receive or WritePackFrom wrote (Received).
func (s *Store) noteReceived(h plumbing.Hash) {
	s.recvmu.Lock()
	s.received = append(s.received, h)
	s.recvmu.Unlock()
}

// Received returns the packs Receive and WritePackFrom wrote into s since
// the last call. Each is InFlight (see Keep): the caller settles it (in a
// repository gitmem owns) or unkeeps it (in a remote) once a ref names
// what it holds, or removes it.
func (s *Store) Received() []plumbing.Hash {
	s.recvmu.Lock()
	defer s.recvmu.Unlock()
	out := s.received
	s.received = nil
	return out
}

// WritePackFrom writes the objects, read from src (another repository on
// this machine: a push to it, a fetch from it), as one pack into s
// (as they are stored, where they can be: see sender), durably, kept from git's gc (see Received).
func (s *Store) WritePackFrom(src *Store, hashes []plumbing.Hash) (plumbing.Hash, error) {
	x := src.newSender(hashes)
	pw, err := newPackWriter(s.Env, s.Dir, len(x.send), zlib.BestSpeed)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	pw.keep = InFlight
	err = x.each(hashes, func(h plumbing.Hash, e storedEntry, ok bool) error {
		if ok {
			return pw.addStored(h, e)
		}
		t, data, err := src.ReadObject(h)
		if err == nil {
			err = pw.add(t, h, data, plumbing.ZeroHash, nil)
		}
		if err != nil {
			return fmt.Errorf("read the object %s: %w", h, err)
		}
		return nil
	})
	if err != nil {
		pw.abort()
		return plumbing.ZeroHash, err
	}
	sum, err := pw.finish(true)
	if err == nil {
		s.noteReceived(sum)
		s.Reindex()
	}
	return sum, err
}

// EncodePack writes a pack of the objects to w, as they are stored where
// they can be (see sender): what a push sends. With ofs (the receiver
// advertised ofs-delta, as git's receive-pack does) a delta refers to its
// base by where the base's entry starts (OFS_DELTA, a few bytes), as git
// sends it; without, by the base's hash (REF_DELTA, 20 bytes): at 10,000
// commits through git daemon, 6.08 MB sent where git push sent 5.40.
func (s *Store) EncodePack(w io.Writer, hashes []plumbing.Hash, ofs bool) error {
	sum := sha1.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, sum), 256<<10)
	x := s.newSender(hashes)
	hdr := make([]byte, 12)
	copy(hdr, "PACK")
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(x.send)))
	bw.Write(hdr)
	zw := zlibWriters[zlib.BestSpeed].Get().(*zlib.Writer)
	defer zlibWriters[zlib.BestSpeed].Put(zw)
	cw := &countingWriter{w: bw, n: 12}
	var at map[plumbing.Hash]int64 // where each entry written starts
	if ofs {
		at = make(map[plumbing.Hash]int64, len(x.send))
	}
	err := x.each(hashes, func(h plumbing.Hash, e storedEntry, ok bool) error {
		if at != nil {
			at[h] = cw.n
		}
		if ok {
			if b, found := at[e.base]; found && !e.base.IsZero() {
				cw.Write(putEntryHeader(plumbing.OFSDeltaObject, e.size))
				cw.Write(putOfsOffset(at[h] - b))
			} else {
				cw.Write(e.header())
			}
			cw.Write(e.z)
			return nil
		}
		t, data, err := s.ReadObject(h)
		if err != nil {
			return fmt.Errorf("read the object %s: %w", h, err)
		}
		cw.Write(putEntryHeader(t, int64(len(data))))
		zw.Reset(cw)
		zw.Write(data)
		return zw.Close()
	})
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err = w.Write(sum.Sum(nil))
	return err
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// indexPack reads the pack in f (all a remote sent) and returns its
// checksum and entries, checking it as git index-pack does: the pack's
// checksum, each entry's zlib stream ending where the next entry begins
// (the last where the checksum does), each object's size, every delta's
// base in the pack (no thin pack: a REF_DELTA's base found by its hash,
// an OFS_DELTA's at an entry's start before it). Each object is inflated
// as it is read, a whole one into its hash; then each delta is rebuilt,
// in the order they are stored, from a base kept only until its last
// delta is (packWalk), and hashed. go-git's parser, used before, read and
// inflated each whole object twice and rebuilt each delta twice, for 28%
// of the CPU of a pull of 10,000 commits through git daemon.
func indexPack(f *os.File) (_ plumbing.Hash, _ []packEntry, err error) {
	data, unmap, err := mapFile(f.Name())
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	defer unmap()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if ferr := faultError(recover()); ferr != nil {
			err = ferr
		}
	}()
	bad := func(format string, a ...any) (plumbing.Hash, []packEntry, error) {
		return plumbing.ZeroHash, nil, fmt.Errorf("the remote sent a malformed pack: "+format, a...)
	}
	if len(data) < 12+20 || string(data[:4]) != "PACK" {
		return bad("no pack header")
	}
	if v := binary.BigEndian.Uint32(data[4:]); v != 2 && v != 3 {
		return bad("version %d", v)
	}
	end := int64(len(data)) - 20
	n := int64(binary.BigEndian.Uint32(data[8:]))
	if n > (end-12)/8 { // an entry is at least a byte of header and a 7-byte zlib stream
		return bad("%d objects in %d bytes", n, end)
	}
	var sum plumbing.Hash
	if sum = plumbing.Hash(sha1.Sum(data[:end])); !bytes.Equal(sum[:], data[end:]) {
		return bad("its checksum does not match")
	}
	w := &packWalk{data: data, es: make([]walkEntry, n)}
	out := make([]packEntry, n)
	rank := make(map[int64]int, n)
	buf := make([]byte, 32<<10)
	off := int64(12)
	for k := range w.es {
		if off >= end {
			return bad("it ends before its %d objects", n)
		}
		r := bytes.NewReader(data[off:end])
		t, size, back, bh, err := entryStart(r)
		if err != nil {
			return bad("the entry at %d: %v", off, err)
		}
		e := &w.es[k]
		e.kind, e.size, e.base = t, size, -1
		switch t {
		case plumbing.OFSDeltaObject:
			b, ok := rank[off-back]
			if !ok {
				return bad("the delta at %d has no base", off)
			}
			e.base = b
			w.es[b].children++
		case plumbing.REFDeltaObject:
			e.ext = bh
		default:
			e.t = t
		}
		if size > maxObjectBytes {
			return bad("an object of %d bytes", size)
		}
		at := end - int64(r.Len())
		zr, err := inflater(r)
		if err != nil {
			return bad("the entry at %d: %v", off, err)
		}
		var h plumbing.Hasher
		var into io.Writer = io.Discard
		if e.t != 0 {
			h = plumbing.NewHasher(t, size)
			into = h
		}
		m, err := io.CopyBuffer(into, io.LimitReader(zr, size), buf)
		if err == nil && m != size {
			err = io.ErrUnexpectedEOF
		}
		if err == nil {
			err = atEnd(zr)
		}
		inflaters.Put(zr)
		if err != nil {
			return bad("the entry at %d: %v", off, err)
		}
		next := end - int64(r.Len())
		e.body = data[at:next]
		out[k] = packEntry{off: off, crc: crc32.ChecksumIEEE(data[off:next])}
		if e.t != 0 {
			out[k].hash = h.Sum()
			e.done = true
		}
		rank[off] = k
		off = next
	}
	if off != end {
		return bad("%d bytes after its last object", end-off)
	}
	// The deltas, in the order they are stored; a REF_DELTA's base may be
	// a delta, whose hash is known once it is rebuilt (then the ones
	// stored before it take another round).
	byHash := make(map[plumbing.Hash]int, n)
	waiting := map[plumbing.Hash][]int{}
	var deltas []int
	for k := range w.es {
		if w.es[k].t != 0 {
			byHash[out[k].hash] = k
		} else {
			deltas = append(deltas, k)
		}
	}
	link := func(k, base int) {
		w.es[k].base = base
		w.es[base].children++
	}
	for _, k := range deltas {
		if e := &w.es[k]; e.kind == plumbing.REFDeltaObject {
			if b, ok := byHash[e.ext]; ok {
				link(k, b)
			} else {
				waiting[e.ext] = append(waiting[e.ext], k)
			}
		}
	}
	for len(deltas) > 0 {
		var left []int
		for _, k := range deltas {
			if !w.grounded(k) {
				left = append(left, k)
				continue
			}
			t, err := w.typeOf(k, 0)
			if err != nil {
				return bad("the delta at %d: %v", out[k].off, err)
			}
			obj, err := w.content(k, 0)
			if err != nil {
				return bad("the delta at %d: %v", out[k].off, err)
			}
			h := plumbing.ComputeHash(t, obj)
			out[k].hash = h
			if _, ok := byHash[h]; !ok {
				byHash[h] = k
				for _, j := range waiting[h] {
					link(j, k)
				}
				delete(waiting, h)
			}
			e := &w.es[k]
			if e.done = true; e.children == 0 {
				e.data = nil
			} else if e.data == nil {
				e.data = obj // for deltas of it linked just now
			}
		}
		if len(left) == len(deltas) {
			return bad("the base of the delta at %d is not in it", out[left[0]].off)
		}
		deltas = left
	}
	return sum, out, nil
}

// Packs of at most smallPackObjects objects, not written by Repack, are
// the ones pushes leave in a repository on this machine that no gitmem
// collects (a shared bare repository); CombinePacks folds them once there
// are more than maxSmallPacks.
const (
	smallPackObjects = 1000
	maxSmallPacks    = 16
)

// CombinePacks folds the small packs written before before into one pack,
// once there are more than maxSmallPacks of them, and returns how many it
// folded. A reader that listed a folded pack finds its objects in the new
// one (reads look again after re-reading the pack list).
func (s *Store) CombinePacks(before time.Time) (int, error) {
	packs, err := ListPacks(s.Dir)
	if err != nil {
		return 0, err
	}
	var small []plumbing.Hash
	for _, p := range packs {
		fi, err := os.Stat(filepath.Join(s.Dir, "objects", "pack", "pack-"+p.Hash.String()+".pack"))
		if err == nil && p.Objects <= smallPackObjects && !p.Repacked && !p.Kept && fi.ModTime().Before(before) {
			small = append(small, p.Hash)
		}
	}
	if len(small) <= maxSmallPacks {
		return 0, nil
	}
	var objects []plumbing.Hash
	for _, p := range small {
		hs, err := PackHashes(PackIndexPath(s.Dir, p))
		if err != nil {
			return 0, err
		}
		objects = append(objects, hs...)
	}
	slices.SortFunc(objects, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })
	pack, err := s.PackObjects(slices.Compact(objects), NoKeep)
	if err != nil {
		return 0, err
	}
	RemovePacks(s.Dir, slices.DeleteFunc(small, func(p plumbing.Hash) bool { return p == pack }))
	s.Reindex()
	return len(small), nil
}

// Prune packs every object a ref reaches into one pack and deletes the
// loose objects and packs older than before that it replaces: what no ref
// reaches (a redaction's old objects) is gone. Newer files are kept
// (another writer's, whose ref update may be on its way).
func (s *Store) Prune(before time.Time) error {
	s.Reindex()
	tips, err := s.RefTips()
	if err != nil {
		return err
	}
	res, err := s.Repack(RepackOptions{Tips: tips}) // NoKeep: git's gc has the remote's packs
	if err != nil {
		return err
	}
	old := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && fi.ModTime().Before(before)
	}
	loose, err := s.LooseHashes()
	if err != nil {
		return err
	}
	for _, h := range loose {
		hex := h.String()
		if p := filepath.Join(s.Dir, "objects", hex[:2], hex[2:]); old(p) {
			os.Remove(p)
		}
	}
	packs, err := ListPacks(s.Dir)
	if err != nil {
		return err
	}
	var gone []plumbing.Hash
	for _, p := range packs {
		if p.Hash != res.Pack && old(filepath.Join(s.Dir, "objects", "pack", "pack-"+p.Hash.String()+".pack")) {
			gone = append(gone, p.Hash)
		}
	}
	RemovePacks(s.Dir, gone)
	s.Reindex()
	return nil
}
