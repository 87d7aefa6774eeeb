package gitdir

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/go-git/go-git/v5/plumbing"
)

// TmpPackPrefix names the temporary files of the packs gitmem writes,
// so that the ones a crash leaves are told from git's own and removed.
const TmpPackPrefix = "tmp_gitmem_"

// WriteObjectsPack writes objects (held in full) as one pack with its
// index (version 2), without deltas, and returns the pack's hash. Two
// files, however many objects: a group of commits costs two file
// creations, not one per object. With durable false nothing is fsynced
// (the caller syncs later). The index is renamed into place before the
// pack: go-git lists packs by their .pack file and fails a pack without
// an index, and an index without a pack is ignored (and later removed).
func (s *Store) WriteObjectsPack(objs []Object, durable bool) (plumbing.Hash, error) {
	if err := Injected(StepPack, ".git/objects/pack"); err != nil {
		return plumbing.ZeroHash, err
	}
	seen := map[plumbing.Hash]bool{}
	var uniq []Object
	for _, o := range objs {
		if !seen[o.Hash] {
			seen[o.Hash] = true
			uniq = append(uniq, o)
		}
	}
	dir := filepath.Join(s.Dir, "objects", "pack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return plumbing.ZeroHash, err
	}
	pf, err := os.CreateTemp(dir, TmpPackPrefix+"pack_")
	if err != nil {
		return plumbing.ZeroHash, err
	}
	tmpPack := pf.Name()
	fail := func(err error, files ...*os.File) (plumbing.Hash, error) {
		for _, f := range files {
			f.Close()
			os.Remove(f.Name())
		}
		return plumbing.ZeroHash, err
	}
	type entry struct {
		hash plumbing.Hash
		off  int64
		crc  uint32
	}
	entries := make([]entry, 0, len(uniq))
	sum := sha1.New()
	w := bufio.NewWriterSize(io.MultiWriter(pf, sum), 64<<10)
	var off int64
	hdr := make([]byte, 12)
	copy(hdr, "PACK")
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(uniq)))
	w.Write(hdr)
	off = 12
	zw := zlibWriters.Get().(*zlib.Writer)
	defer zlibWriters.Put(zw)
	var buf bytes.Buffer
	for _, o := range uniq {
		buf.Reset()
		buf.Write(objHeader(o.Type, int64(len(o.Data))))
		zw.Reset(&buf)
		zw.Write(o.Data)
		if err := zw.Close(); err != nil {
			return fail(err, pf)
		}
		entries = append(entries, entry{o.Hash, off, crc32.ChecksumIEEE(buf.Bytes())})
		w.Write(buf.Bytes())
		off += int64(buf.Len())
	}
	if err := w.Flush(); err != nil {
		return fail(err, pf)
	}
	packSum := plumbing.Hash(sum.Sum(nil))
	if _, err := pf.Write(packSum[:]); err != nil {
		return fail(err, pf)
	}
	// The index.
	slices.SortFunc(entries, func(a, b entry) int { return bytes.Compare(a.hash[:], b.hash[:]) })
	xf, err := os.CreateTemp(dir, TmpPackPrefix+"idx_")
	if err != nil {
		return fail(err, pf)
	}
	isum := sha1.New()
	iw := bufio.NewWriterSize(io.MultiWriter(xf, isum), 64<<10)
	put := func(w io.Writer, v any) { binary.Write(w, binary.BigEndian, v) }
	iw.Write([]byte{0xff, 't', 'O', 'c'})
	put(iw, uint32(2))
	var fan [256]uint32
	for _, e := range entries {
		fan[e.hash[0]]++
	}
	for i := 1; i < 256; i++ {
		fan[i] += fan[i-1]
	}
	put(iw, fan)
	for _, e := range entries {
		iw.Write(e.hash[:])
	}
	for _, e := range entries {
		put(iw, e.crc)
	}
	var large []int64
	for _, e := range entries {
		if e.off < 1<<31 {
			put(iw, uint32(e.off))
		} else {
			put(iw, uint32(1<<31|len(large)))
			large = append(large, e.off)
		}
	}
	for _, o := range large {
		put(iw, uint64(o))
	}
	iw.Write(packSum[:])
	if err := iw.Flush(); err != nil {
		return fail(err, pf, xf)
	}
	if _, err := xf.Write(isum.Sum(nil)); err != nil {
		return fail(err, pf, xf)
	}
	for _, f := range []*os.File{pf, xf} {
		if err := f.Chmod(0o444); err != nil {
			return fail(err, pf, xf)
		}
		if durable {
			if err := Fsync(f); err != nil {
				return fail(err, pf, xf)
			}
		}
	}
	pf.Close()
	xf.Close()
	base := filepath.Join(dir, "pack-"+packSum.String())
	if err := os.Rename(xf.Name(), base+".idx"); err != nil {
		os.Remove(xf.Name())
		os.Remove(tmpPack)
		return plumbing.ZeroHash, err
	}
	if err := os.Rename(tmpPack, base+".pack"); err != nil {
		os.Remove(base + ".idx")
		os.Remove(tmpPack)
		return plumbing.ZeroHash, err
	}
	if durable {
		if err := SyncDir(dir); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	s.Reindex()
	return packSum, nil
}

// objHeader is a pack entry's type and size header.
func objHeader(t plumbing.ObjectType, size int64) []byte {
	b := []byte{byte(t)<<4 | byte(size&0x0f)}
	size >>= 4
	for size > 0 {
		b[len(b)-1] |= 0x80
		b = append(b, byte(size&0x7f))
		size >>= 7
	}
	return b
}
