package gitdir

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
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

// OnDisk reports whether git's own files hold the object h, loose or in
// a pack last listed, whatever memory holds.
func (s *Store) OnDisk(h plumbing.Hash) bool {
	hex := h.String()
	if _, err := os.Stat(filepath.Join(s.Dir, "objects", hex[:2], hex[2:])); err == nil {
		return true
	}
	_, _, ok := s.packs.lookup(h)
	return ok
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
// temporary file, then indexed by go-git's parser (which checks every
// object, resolves deltas within the pack, and checks the checksum).
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
		if err := Fsync(x); err != nil {
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
	pw, err := newPackWriter(s.Env, s.Dir, len(hashes), zlib.BestSpeed)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	pw.keep = InFlight
	x := src.newSender(hashes)
	for _, h := range hashes {
		if e, ok := x.stored(h); ok {
			if err := pw.addStored(h, e); err != nil {
				pw.abort()
				return plumbing.ZeroHash, err
			}
			continue
		}
		t, data, err := src.ReadObject(h)
		if err == nil {
			err = pw.add(t, h, data, plumbing.ZeroHash, nil)
		}
		if err != nil {
			pw.abort()
			return plumbing.ZeroHash, fmt.Errorf("read the object %s: %w", h, err)
		}
	}
	sum, err := pw.finish(true)
	if err == nil {
		s.noteReceived(sum)
		s.Reindex()
	}
	return sum, err
}

// EncodePack writes a pack of the objects to w, as they are stored where
// they can be (see sender): what a push sends.
func (s *Store) EncodePack(w io.Writer, hashes []plumbing.Hash) error {
	sum := sha1.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, sum), 256<<10)
	hdr := make([]byte, 12)
	copy(hdr, "PACK")
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(hashes)))
	bw.Write(hdr)
	zw := zlibWriters[zlib.BestSpeed].Get().(*zlib.Writer)
	defer zlibWriters[zlib.BestSpeed].Put(zw)
	x := s.newSender(hashes)
	for _, h := range hashes {
		if e, ok := x.stored(h); ok {
			bw.Write(e.header())
			bw.Write(e.z)
			continue
		}
		t, data, err := s.ReadObject(h)
		if err != nil {
			return fmt.Errorf("read the object %s: %w", h, err)
		}
		bw.Write(putEntryHeader(t, int64(len(data))))
		zw.Reset(bw)
		zw.Write(data)
		if err := zw.Close(); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(sum.Sum(nil))
	return err
}

// indexPack reads the pack in f and returns its checksum and entries.
func indexPack(f *os.File) (plumbing.Hash, []packEntry, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return plumbing.ZeroHash, nil, err
	}
	w := &idxfile.Writer{}
	p, err := packfile.NewParser(packfile.NewScanner(f), w)
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	sum, err := p.Parse()
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	idx, err := w.Index()
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	iter, err := idx.Entries()
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	defer iter.Close()
	var out []packEntry
	for {
		e, err := iter.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return plumbing.ZeroHash, nil, err
		}
		out = append(out, packEntry{hash: e.Hash, off: int64(e.Offset), crc: e.CRC32})
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
