package gitdir

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"
)

// The write-ahead log (.git/gitmem/wal) is what makes a commit durable:
// the objects of a group of commits, their new branch tip and the
// worktree paths they change are appended to it and fdatasynced once, and
// only then are the calls acknowledged. The loose objects, the branch and
// the worktree follow without an fsync each; a checkpoint fsyncs what they
// wrote and empties the log (Reset). After a crash, Open returns the
// records written since the last checkpoint, and replaying them writes the
// very same objects again (the log holds them raw), so every acknowledged
// commit comes back with its hash.
//
// Layout: a 4 KiB header (magic, generation, CRC), then records. Each
// record carries the generation and a CRC32-C; reading stops at the first
// record that does not match, so a torn write or the leftovers of an
// older generation are never replayed. Reset bumps the generation instead
// of erasing anything. The file is written with zeros ahead of use, so an
// append changes no metadata and fdatasync flushes only the data.

const (
	walHeaderSize = 4096
	walMagic      = "gitmem-wal-1\n"
	walRecMagic   = uint32(0x474d5231) // "GMR1"
	walGrow       = 64 << 10
)

// castagnoli is made at the first use: the standard library's first
// MakeTable(Castagnoli) builds its SSE 4.2 tables (0.1-0.2 ms), which only
// a command that reads or writes a record needs (castagnoliBuilt says it
// was: a test checks that reading a log's header does not build it).
var castagnoli = sync.OnceValue(func() *crc32.Table {
	castagnoliBuilt = true
	return crc32.MakeTable(crc32.Castagnoli)
})

var castagnoliBuilt bool

// headerCRC is the CRC-32C of the header's 4 bytes of generation, bit by
// bit: it needs no table (castagnoli), which a command that reads no
// record would build for them alone.
func headerCRC(b []byte) uint32 {
	crc := ^uint32(0)
	for _, c := range b {
		crc ^= uint32(c)
		for range 8 {
			crc = crc>>1 ^ 0x82f63b78&-(crc&1) // Castagnoli's polynomial, reversed
		}
	}
	return ^crc
}

// Object is a git object held in full.
type Object struct {
	Type plumbing.ObjectType
	Hash plumbing.Hash
	Data []byte
	// Base is an object Data likely differs little from (a folder's tree
	// in the parent commit), which a pack holding both stores it as a
	// delta of. Not kept in the log.
	Base plumbing.Hash
}

// WALRecord is one commit: its objects, its branch tip and first parent,
// and the repository paths it changes in the worktree.
type WALRecord struct {
	Head, Parent plumbing.Hash
	Paths        []string
	Objects      []Object
}

// WAL is an open write-ahead log. It is not safe for concurrent use.
type WAL struct {
	path string
	env  *Env
	f    *os.File
	gen  uint32
	seq  uint64
	off  int64 // where the next record goes
	size int64 // bytes written with zeros ahead
	buf  []byte
}

// OpenWAL opens (creating it when missing) the write-ahead log file
// .git/gitmem/NAME and returns the records of its current generation, to
// be replayed.
func OpenWAL(env *Env, gitDir, name string) (*WAL, []WALRecord, error) {
	path := filepath.Join(gitDir, "gitmem", name)
	f, err := OpenFile(path, os.O_RDWR, 0o600) // a FIFO, a socket, a device there: ErrNotRegular, not waited on
	if errors.Is(err, fs.ErrNotExist) {
		w, err := createWAL(env, path)
		return w, nil, err
	}
	if err != nil {
		return nil, nil, err
	}
	w := &WAL{path: path, env: env, f: f}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	w.size = fi.Size()
	if err := w.readHeader(); err != nil {
		f.Close()
		return nil, nil, err
	}
	recs, err := w.scan()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return w, recs, nil
}

// ReadWAL returns the records of the current generation of the log file
// .git/gitmem/NAME, and the generation, without writing anything (a
// missing file holds none): what a crashed holder of the writer lock
// left, for a reader that may not replay it. The file must not be written
// meanwhile (no one holds the writer lock).
func ReadWAL(gitDir, name string) (gen uint32, recs []WALRecord, err error) {
	path := filepath.Join(gitDir, "gitmem", name)
	f, err := OpenRead(path) // a FIFO, a socket, a device there: ErrNotRegular, not waited on
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	w := &WAL{path: path, f: f}
	fi, err := f.Stat()
	if err != nil {
		return 0, nil, err
	}
	if fi.IsDir() { // as OpenWAL's open for writing fails
		return 0, nil, &fs.PathError{Op: "open", Path: path, Err: syscall.EISDIR}
	}
	w.size = fi.Size()
	if err := w.readHeader(); err != nil {
		return 0, nil, err
	}
	recs, err = w.scan()
	return w.gen, recs, err
}

// readHeader reads and checks the header, setting the generation.
func (w *WAL) readHeader() error {
	hdr := make([]byte, walHeaderSize)
	if _, err := io.ReadFull(w.f, hdr); err != nil || !bytes.HasPrefix(hdr, []byte(walMagic)) {
		return fmt.Errorf("%s is not a gitmem write-ahead log", filepath.Base(w.path))
	}
	g := hdr[len(walMagic):]
	w.gen = binary.BigEndian.Uint32(g)
	if headerCRC(g[:4]) != binary.BigEndian.Uint32(g[4:]) {
		return errors.New("the write-ahead log's header is damaged")
	}
	return nil
}

func createWAL(env *Env, path string) (*WAL, error) {
	tmp := path + ".new"
	f, err := OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	w := &WAL{path: path, env: env, f: f, gen: 1}
	err = w.writeHeader()
	if err == nil {
		err = w.grow(walHeaderSize + walGrow)
	}
	if err == nil {
		err = syncFile(f)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = SyncDir(filepath.Dir(path))
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	w.off = walHeaderSize
	return w, nil
}

func (w *WAL) writeHeader() error {
	hdr := make([]byte, walHeaderSize)
	copy(hdr, walMagic)
	g := hdr[len(walMagic):]
	binary.BigEndian.PutUint32(g, w.gen)
	binary.BigEndian.PutUint32(g[4:], headerCRC(g[:4]))
	_, err := w.f.WriteAt(hdr, 0)
	return err
}

// grow writes zeros up to size, so that later appends allocate nothing.
func (w *WAL) grow(size int64) error {
	if size <= w.size {
		return nil
	}
	zeros := make([]byte, 64<<10)
	for off := max(w.size, walHeaderSize); off < size; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), size-off)
		if _, err := w.f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
	}
	w.size = size
	return nil
}

// scan reads the records of the current generation from the start.
func (w *WAL) scan() ([]WALRecord, error) {
	w.off = walHeaderSize
	var recs []WALRecord
	hdr := make([]byte, 24)
	for {
		if _, err := w.f.ReadAt(hdr, w.off); err != nil {
			return recs, nil // the end of the file
		}
		if binary.BigEndian.Uint32(hdr) != walRecMagic || binary.BigEndian.Uint32(hdr[4:]) != w.gen {
			return recs, nil
		}
		seq := binary.BigEndian.Uint64(hdr[8:])
		n := binary.BigEndian.Uint32(hdr[16:])
		if seq != w.seq || int64(n) > w.size-w.off {
			return recs, nil
		}
		body := make([]byte, 12+int(n))
		copy(body, hdr[4:16])
		if _, err := w.f.ReadAt(body[12:], w.off+24); err != nil {
			return recs, nil
		}
		if crc32.Checksum(body, castagnoli()) != binary.BigEndian.Uint32(hdr[20:]) {
			return recs, nil // torn: never acknowledged
		}
		rec, err := decodeRecord(body[12:])
		if err != nil {
			return nil, fmt.Errorf("a write-ahead log record passed its checksum but does not decode: %w", err)
		}
		recs = append(recs, rec)
		w.seq++
		w.off += 24 + int64(n)
	}
}

// Append writes the records and fdatasyncs them once: when it returns nil
// they survive a crash of the process and of the machine.
func (w *WAL) Append(recs []WALRecord) error {
	w.buf = w.buf[:0]
	for i := range recs {
		start := len(w.buf)
		w.buf = append(w.buf, make([]byte, 24)...)
		w.buf = encodeRecord(w.buf, &recs[i])
		n := len(w.buf) - start - 24
		h := w.buf[start:]
		binary.BigEndian.PutUint32(h, walRecMagic)
		binary.BigEndian.PutUint32(h[4:], w.gen)
		binary.BigEndian.PutUint64(h[8:], w.seq+uint64(i))
		binary.BigEndian.PutUint32(h[16:], uint32(n))
		crc := crc32.Checksum(h[4:16], castagnoli())
		crc = crc32.Update(crc, castagnoli(), h[24:])
		binary.BigEndian.PutUint32(h[20:], crc)
	}
	if err := w.env.Injected(StepWAL, ".git/gitmem/wal"); err != nil {
		return err
	}
	grown := false
	if end := w.off + int64(len(w.buf)); end > w.size {
		if err := w.grow(max(end, 2*w.size)); err != nil {
			return err
		}
		grown = true
	}
	if _, err := w.f.WriteAt(w.buf, w.off); err != nil {
		w.void()
		return err
	}
	err := w.env.Injected(StepWALSync, ".git/gitmem/wal")
	if err == nil && grown {
		err = syncFile(w.f) // the size changed: metadata too
	} else if err == nil {
		err = syncData(w.env, w.f)
	}
	if err != nil {
		// The records may reach the disk anyway, later: they must never
		// be replayed, since their callers are told they failed.
		w.void()
		return err
	}
	w.off += int64(len(w.buf))
	w.seq += uint64(len(recs))
	return nil
}

// void makes the records written at the end unreadable (their first
// header is zeroed, so reading stops before them), best effort.
func (w *WAL) void() {
	if _, err := w.f.WriteAt(make([]byte, 24), w.off); err == nil {
		syncData(w.env, w.f)
	}
}

// Cap is how many bytes of records the file takes before it must grow.
func (w *WAL) Cap() int64 { return w.size - walHeaderSize }

// GrowTo makes the file take n bytes of records without growing: it is
// written with zeros that far and fsynced, so that the appends to come
// change no metadata. The zeros go to the device a mebibyte at a time,
// each step written out before the next, so that another file's
// fdatasyncs meanwhile wait behind a step, not behind all of it at the
// fsync. The log must not be appended to meanwhile.
func (w *WAL) GrowTo(n int64) error {
	if n <= w.Cap() {
		return nil
	}
	if err := w.env.Injected(StepWALGrow, ".git/gitmem/wal"); err != nil {
		return err
	}
	for target := walHeaderSize + n; w.size < target; {
		from := w.size
		if err := w.grow(min(target, from+1<<20)); err != nil {
			return err
		}
		writeOut(w.f, from, w.size-from)
	}
	return syncFile(w.f)
}

// Records is how many records the log holds.
func (w *WAL) Records() int { return int(w.seq) }

// Len is how many bytes of records the log holds.
func (w *WAL) Len() int64 { return w.off - walHeaderSize }

// Gen is the log's generation: records written now carry it.
func (w *WAL) Gen() uint32 { return w.gen }

// Reset empties the log once everything it holds is durable elsewhere
// (a checkpoint), giving it generation gen, which must be higher than
// any generation either log file had: no old record is read again, and
// the generations order the files' records.
func (w *WAL) Reset(gen uint32) error { return w.reset(gen, true) }

// Renew gives a log that holds no record generation gen, for appends to
// go to from now on (a checkpoint switches to it), without a sync: it
// holds no record whichever header a crash leaves on the disk (what
// follows the header is of older generations either way), and the first
// record appended is synced with the header. A checkpoint's sync of git's
// files (one syncfs) flushes it too, on Linux.
func (w *WAL) Renew(gen uint32) error {
	if w.Len() != 0 {
		return errors.New("the write-ahead log file holds records")
	}
	return w.reset(gen, false)
}

func (w *WAL) reset(gen uint32, sync bool) error {
	if err := w.env.Injected(StepWAL, ".git/gitmem/wal"); err != nil {
		return err
	}
	old := w.gen
	w.gen = gen
	if err := w.writeHeader(); err != nil {
		w.gen = old
		return err
	}
	if sync {
		if err := syncData(w.env, w.f); err != nil {
			return err
		}
	}
	w.off, w.seq = walHeaderSize, 0
	return nil
}

// Gone says the log's file is no longer at its path (the repository was
// deleted or moved): what it holds is in no file a start would read.
func (w *WAL) Gone() bool {
	fi, err := os.Stat(w.path)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	own, err := w.f.Stat()
	return err == nil && !os.SameFile(fi, own)
}

// Close closes the log. The file stays: the next holder of the writer
// lock opens it again (a new file would cost two fsyncs, of it and of its
// folder).
func (w *WAL) Close() error { return w.f.Close() }

// Shrink gives an empty log (Reset, nothing appended since) back the
// size a new one has: what it grew to under load, written with zeros
// ahead of need, is not kept on disk after the process exits. Nothing to
// sync: it holds no record, and a file left longer by a crash holds none
// either (its leftovers are of older generations).
func (w *WAL) Shrink() error {
	if w.off != walHeaderSize || w.size <= walHeaderSize+walGrow {
		return nil
	}
	if err := w.f.Truncate(walHeaderSize + walGrow); err != nil {
		return err
	}
	w.size = walHeaderSize + walGrow
	return nil
}

func encodeRecord(b []byte, r *WALRecord) []byte {
	b = append(b, r.Head[:]...)
	b = append(b, r.Parent[:]...)
	b = binary.AppendUvarint(b, uint64(len(r.Paths)))
	for _, p := range r.Paths {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	b = binary.AppendUvarint(b, uint64(len(r.Objects)))
	for _, o := range r.Objects {
		b = append(b, byte(o.Type))
		b = binary.AppendUvarint(b, uint64(len(o.Data)))
		b = append(b, o.Data...)
	}
	return b
}

func decodeRecord(b []byte) (WALRecord, error) {
	var r WALRecord
	bad := errors.New("short record")
	if len(b) < 40 {
		return r, bad
	}
	copy(r.Head[:], b)
	copy(r.Parent[:], b[20:])
	b = b[40:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	np, ok := next()
	if !ok || np > uint64(len(b)) {
		return r, bad
	}
	for range np {
		l, ok := next()
		if !ok || l > uint64(len(b)) {
			return r, bad
		}
		r.Paths = append(r.Paths, string(b[:l]))
		b = b[l:]
	}
	no, ok := next()
	if !ok || no > uint64(len(b)) {
		return r, bad
	}
	for range no {
		if len(b) < 1 {
			return r, bad
		}
		t := plumbing.ObjectType(b[0])
		b = b[1:]
		l, ok := next()
		if !ok || l > uint64(len(b)) {
			return r, bad
		}
		data := b[:l:l]
		r.Objects = append(r.Objects, Object{Type: t, Hash: plumbing.ComputeHash(t, data), Data: data})
		b = b[l:]
	}
	if len(b) != 0 {
		return r, bad
	}
	return r, nil
}

// Scrub overwrites everything after the header with zeros and fsyncs:
// the log holds old records physically until they are overwritten, and a
// redaction must leave no copy of what it removed. Only an empty log (no
// record of its generation) may be scrubbed.
func (w *WAL) Scrub() error {
	w.size = walHeaderSize
	if err := w.grow(w.sizeOnDisk()); err != nil {
		return err
	}
	return syncFile(w.f)
}

func (w *WAL) sizeOnDisk() int64 {
	fi, err := w.f.Stat()
	if err != nil {
		return walHeaderSize
	}
	return fi.Size()
}

// ScrubWAL scrubs the log file .git/gitmem/NAME if it exists (see Scrub).
func ScrubWAL(env *Env, gitDir, name string) error {
	if _, err := os.Stat(filepath.Join(gitDir, "gitmem", name)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	w, recs, err := OpenWAL(env, gitDir, name)
	if err != nil {
		return err
	}
	defer w.Close()
	if len(recs) > 0 {
		return errors.New("the write-ahead log holds changes not yet checkpointed")
	}
	return w.Scrub()
}
