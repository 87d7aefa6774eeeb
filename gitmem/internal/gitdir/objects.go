package gitdir

import (
	"bufio"
	"bytes"
	"container/list"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/klauspost/compress/zlib"
)

// Store is a .git directory. It reads objects itself (loose, and packed
// through mapped indexes: packread.go), and writes loose objects, packs
// and refs itself, durably: go-git writes without fsync. go-git's storage
// stays for go-git's own algorithms (revision parsing, object walks).
type Store struct {
	Dir   string // the .git folder
	Env   *Env   // the test suite's (nil: none); set before the Store is used
	st    *filesystem.Storage
	packs *packSet
	cache objCache // trees and commits recently read
	holds int      // operations that keep pack files open (Hold)

	ovmu    sync.RWMutex // guards overlay (which Put and Drop change while reads go on)
	overlay map[plumbing.Hash]*held
	shared  *Store // View's: whose overlay this Store reads too

	recvmu   sync.Mutex
	received []plumbing.Hash // packs a transfer wrote, kept (Received)

	decoded atomic.Int64 // objects read from a pack or a loose file (Decoded)
}

// Decoded is how many objects the Store has read from a pack or a loose
// file (not from memory): the work a read did, for tests to count.
func (s *Store) Decoded() int64 { return s.decoded.Load() }

type held struct {
	Object
	n int // Puts not yet Dropped
}

// Put makes objects readable before they are written to disk: objects of
// commits that are durable in the write-ahead log, not yet in git's files.
func (s *Store) Put(objs []Object) {
	s.ovmu.Lock()
	defer s.ovmu.Unlock()
	if s.overlay == nil {
		s.overlay = map[plumbing.Hash]*held{}
	}
	for _, o := range objs {
		if h := s.overlay[o.Hash]; h != nil {
			h.n++
		} else {
			s.overlay[o.Hash] = &held{o, 1}
		}
	}
}

// Drop undoes a Put (the objects are on disk now, or were abandoned); an
// object Put twice stays until it is Dropped twice.
func (s *Store) Drop(objs []Object) {
	s.ovmu.Lock()
	defer s.ovmu.Unlock()
	for _, o := range objs {
		if h := s.overlay[o.Hash]; h != nil {
			if h.n--; h.n <= 0 {
				delete(s.overlay, o.Hash)
			}
		}
	}
}

func (s *Store) fromOverlay(h plumbing.Hash) (Object, bool) {
	if s.shared != nil {
		if o, ok := s.shared.fromOverlay(h); ok {
			return o, true
		}
	}
	s.ovmu.RLock()
	defer s.ovmu.RUnlock()
	o, ok := s.overlay[h]
	if !ok {
		return Object{}, false
	}
	return o.Object, true
}

// Open returns the Store of the .git folder gitDir.
func Open(gitDir string) *Store {
	// Pack files stay open while an operation holds them (go-git reopens
	// them for every object otherwise); Release closes them.
	st := filesystem.NewStorageWithOptions(osfs.New(gitDir), cache.NewObjectLRU(8<<20), filesystem.Options{KeepDescriptors: true})
	s := &Store{Dir: gitDir, st: st, packs: &packSet{dir: filepath.Join(gitDir, "objects", "pack")}}
	s.packs.env = &s.Env
	return s
}

// View returns another Store of the same repository, for long work in
// another goroutine (a sync's walks, packs to send): its own pack files
// and caches, so that neither waits for the other, and the objects held
// in memory (Put: commits durable in the log, not yet in git's files)
// read through from s. Close it when done.
func (s *Store) View() *Store {
	v := Open(s.Dir)
	v.Env = s.Env
	v.shared = s
	return v
}

// Storage is go-git's storage, for go-git's own algorithms (revision
// parsing, object walks, the pack encoder).
func (s *Store) Storage() *filesystem.Storage { return s.st }

// Close releases everything the Store holds open.
func (s *Store) Close() error {
	s.packs.closeAll()
	return s.st.Close()
}

// Release closes the pack files go-git opened, unless an operation holds
// them: no gitmem process keeps a pack open between operations, so a pack
// that gc or redact deletes is gone from the disk at once.
func (s *Store) Release() {
	if s.holds == 0 {
		s.st.ObjectStorage.Close()
		s.packs.release()
	}
}

// Hold keeps pack files open until the matching Unhold, for an operation
// that reads many objects.
func (s *Store) Hold() { s.holds++ }

// Mapped runs fn with the packs read mapped into memory, as git reads
// them: no system call per object (a diff across 50,000 commits made a
// pread for each entry of each delta chain, 95,000 of them). Called with
// the Store's lock held for fn's whole run (objects.mu): only fn's reads
// use the mappings, so only they can meet a pack another program cut
// short under them (a fault, here fn's error; see faultError). The
// mappings stay until the packs are released: for an operation that
// holds them (Hold).
func (s *Store) Mapped(fn func() error) (err error) {
	s.packs.mapped = canMapPacks
	defer func() { s.packs.mapped = false }()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if ferr := faultError(recover()); ferr != nil {
			err = ferr
		}
	}()
	return fn()
}

// PackFileReads is how many pack entries s read with a system call
// rather than from a mapping (for tests).
func (s *Store) PackFileReads() int64 { return s.packs.preads.Load() }

// Unhold undoes Hold; the caller then Releases.
func (s *Store) Unhold() { s.holds-- }

// Reindex re-reads the list of packs (another process repacked).
func (s *Store) Reindex() {
	s.st.ObjectStorage.Reindex()
	s.packs.reset()
}

// DropPacks forgets packs this process wrote and deleted with
// RemovePacks (a fold of small packs, whose objects another pack holds):
// the next read finds the others without reading the pack folder again.
func (s *Store) DropPacks(packs []plumbing.Hash) {
	s.st.ObjectStorage.Reindex()
	paths := map[string]bool{}
	for _, h := range packs {
		paths[filepath.Join(s.Dir, "objects", "pack", "pack-"+h.String()+".pack")] = true
	}
	s.packs.drop(paths)
}

// Relisted runs read, a read through go-git's storage (Storage), and
// once more after the packs are listed again (Reindex) when it fails:
// go-git lists the packs once, and another process (or a fetch) may have
// written one since, or have been between putting a pack in place and its
// index (git and gitmem rename them in that order), which go-git, listing
// the .pack files, read as a pack whose index is missing.
func (s *Store) Relisted(read func() error) error {
	err := read()
	if err != nil {
		s.Env.relisting()
		s.Reindex()
		err = read()
	}
	return err
}

// Encoded returns an object. go-git caches the list of packs; when another
// process has repacked (gitmem gc, git gc) a missing object is looked up
// once more after re-reading the pack list.
func (s *Store) Encoded(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	ot, data, err := s.read(h)
	if err != nil {
		return nil, err
	}
	if t != plumbing.AnyObject && t != ot {
		return nil, plumbing.ErrObjectNotFound
	}
	m := &knownObject{h: h}
	m.SetType(ot)
	m.Write(data)
	return m, nil
}

// knownObject is an object whose hash is known: go-git's MemoryObject
// hashes its content again when asked (a fifth of the time to decode the
// trees of a long history).
type knownObject struct {
	plumbing.MemoryObject
	h plumbing.Hash
}

func (o *knownObject) Hash() plumbing.Hash { return o.h }

// read returns an object's type and content: from memory (Put), a loose
// file, or a pack; plumbing.ErrObjectNotFound if none has it.
func (s *Store) read(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	if o, ok := s.fromOverlay(h); ok {
		return o.Type, o.Data, nil
	}
	if t, data, ok := s.cache.get(h); ok {
		return t, data, nil
	}
	t, data, err := s.readUncached(h)
	if err == nil && (t == plumbing.TreeObject || t == plumbing.CommitObject) {
		s.cache.put(h, t, data)
	}
	return t, data, err
}

func (s *Store) readUncached(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	s.decoded.Add(1)
	o, err := find(s, h, func() (Object, bool, error) {
		t, data, found, err := s.packs.read(h)
		return Object{Type: t, Data: data}, found, err
	}, func(path string) (Object, error) {
		t, data, err := readLoose(path)
		return Object{Type: t, Data: data}, err
	})
	return o.Type, o.Data, err
}

// find looks an object up in the packs first, as git does (a search of
// mapped indexes, where a loose object is an open(2) that fails for
// nearly every object once materialisation writes packs: 15% of a
// collection's CPU), then as a loose file; when neither holds it, it lists
// the packs again and looks once more (another process may have packed
// it and removed the loose file). A copy damaged in every pack yields to
// a sound loose one.
func find[T any](s *Store, h plumbing.Hash, inPacks func() (T, bool, error), loose func(path string) (T, error)) (T, error) {
	for retry := 0; retry < 2; retry++ {
		v, found, err := inPacks()
		if found && err == nil {
			return v, nil
		}
		// The loose file's name only now: made for every object read, it
		// was 3 of the 7 allocations of reading a small blob, and a
		// twentieth of the CPU of the trees a push reads.
		hex := h.String()
		lv, lerr := loose(filepath.Join(s.Dir, "objects", hex[:2], hex[2:]))
		switch {
		case lerr == nil:
			return lv, nil
		case found:
			return v, err // damaged in the packs, and no sound loose copy
		case !errors.Is(lerr, fs.ErrNotExist):
			return lv, fmt.Errorf("loose object %s: %w", h, lerr)
		}
		s.Reindex()
	}
	var none T
	return none, plumbing.ErrObjectNotFound
}

// SortForReading returns where each of hs is, in the order to read them
// all in: pack by pack, each from its end back, so that the delta chains
// read first leave in the cache the bases the next ones share (see
// packSet.sortForReading); objects in no pack last. BlobAt reads them.
func (s *Store) SortForReading(hs []plumbing.Hash) []Located { return s.packs.sortForReading(hs) }

// BlobAt is Blob of l.Hash, read where SortForReading found it (no
// second search of the pack indexes) while the packs are the ones listed
// then; else, or when that entry cannot be read, as Blob reads it.
func (s *Store) BlobAt(l Located) ([]byte, error) {
	if o, ok := s.fromOverlay(l.Hash); ok {
		if o.Type != plumbing.BlobObject {
			return nil, plumbing.ErrObjectNotFound
		}
		return o.Data, nil
	}
	if t, data, ok := s.packs.readLocated(l); ok && t == plumbing.BlobObject {
		s.decoded.Add(1)
		return data, nil
	}
	return s.Blob(l.Hash)
}

func (s *Store) Blob(h plumbing.Hash) ([]byte, error) {
	t, data, err := s.read(h)
	if err == nil && t != plumbing.BlobObject {
		err = plumbing.ErrObjectNotFound
	}
	return data, err
}

// Size returns an object's size. A loose object's header is read here:
// go-git's EncodedObjectSize leaves the loose file open (until a
// finalizer runs), which kept deleted objects on disk.
func (s *Store) Size(h plumbing.Hash) (int64, error) {
	if o, ok := s.fromOverlay(h); ok {
		return int64(len(o.Data)), nil
	}
	return find(s, h, func() (int64, bool, error) { return s.packs.size(h) }, func(path string) (int64, error) {
		f, err := OpenRead(path)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		_, n, err := looseHeader(f)
		return n, err
	})
}

// looseHeader reads the type and size from a loose object's header.
func looseHeader(f io.Reader) (plumbing.ObjectType, int64, error) {
	zr, err := zlib.NewReader(bufio.NewReaderSize(f, 512))
	if err != nil {
		return 0, 0, err
	}
	defer zr.Close()
	hdr := make([]byte, 0, 32)
	var b [1]byte
	for {
		if _, err := io.ReadFull(zr, b[:]); err != nil {
			return 0, 0, err
		}
		if b[0] == 0 {
			break
		}
		if hdr = append(hdr, b[0]); len(hdr) == cap(hdr) {
			return 0, 0, errors.New("bad object header")
		}
	}
	kind, size, ok := bytes.Cut(hdr, []byte(" "))
	t, err := plumbing.ParseObjectType(string(kind))
	n, serr := strconv.ParseInt(string(size), 10, 64)
	if !ok || err != nil || serr != nil || n < 0 {
		return 0, 0, errors.New("bad object header")
	}
	return t, n, nil
}

func (s *Store) Commit(h plumbing.Hash) (*object.Commit, error) {
	obj, err := s.Encoded(plumbing.CommitObject, h)
	if err != nil {
		return nil, err
	}
	return object.DecodeCommit(s.st, obj)
}

// DiffTreeEntries calls fn with each entry that differs between the
// trees a and b (zero: an empty tree), in git's order of names: x is a's
// entry and y is b's, the other a zero TreeEntry where only one side has
// the name. The trees are compared as they are stored: their common
// prefix and suffix are skipped unparsed, so a folder of thousands of
// files that changed by one entry costs a comparison of bytes and one
// entry, not thousands (the history index's catch-up diffed every commit
// of a flat 9,000-file folder entry by entry: 20 s for 2,000 commits).
func (s *Store) DiffTreeEntries(a, b plumbing.Hash, fn func(x, y object.TreeEntry) error) error {
	ad, err := s.treeData(a)
	if err != nil {
		return err
	}
	bd, err := s.treeData(b)
	if err != nil {
		return err
	}
	// Entries wholly inside the common prefix are the same on both sides.
	i := 0
	for pre := commonPrefix(ad, bd); ; {
		nul := bytes.IndexByte(ad[i:], 0)
		if nul < 0 || i+nul+21 > pre {
			break
		}
		i += nul + 21
	}
	suf := commonSuffix(ad[i:], bd[i:])
	ai, bi := i, i
	for {
		if len(ad)-ai == len(bd)-bi && len(ad)-ai <= suf {
			return nil // both rests are the same bytes: the same entries
		}
		var x, y treeEntry
		nx, ny := ai, bi
		if ai < len(ad) {
			if x, nx, err = treeEntryAt(ad, ai); err != nil {
				return fmt.Errorf("tree %s: %w", a, err)
			}
		}
		if bi < len(bd) {
			if y, ny, err = treeEntryAt(bd, bi); err != nil {
				return fmt.Errorf("tree %s: %w", b, err)
			}
		}
		var ex, ey *treeEntry
		switch c := compareEntries(x, y); {
		case bi == len(bd) || ai < len(ad) && c < 0:
			ex, ai = &x, nx
		case ai == len(ad) || c > 0:
			ey, bi = &y, ny
		default:
			ai, bi = nx, ny
			if x.hash == y.hash && bytes.Equal(x.mode, y.mode) {
				continue
			}
			ex, ey = &x, &y
		}
		var ox, oy object.TreeEntry
		if ox, err = ex.object(a); err == nil {
			oy, err = ey.object(b)
		}
		if err == nil {
			err = fn(ox, oy)
		}
		if err != nil {
			return err
		}
	}
}

// object is the entry as go-git gives it (zero for nil), of tree t.
func (e *treeEntry) object(t plumbing.Hash) (object.TreeEntry, error) {
	if e == nil {
		return object.TreeEntry{}, nil
	}
	mode, err := filemode.New(string(e.mode))
	if err != nil {
		return object.TreeEntry{}, fmt.Errorf("tree %s: %w", t, err)
	}
	return object.TreeEntry{Name: string(e.name), Mode: mode, Hash: e.hash}, nil
}

// treeData is the content of the tree h (nil for the zero hash).
func (s *Store) treeData(h plumbing.Hash) ([]byte, error) {
	if h.IsZero() {
		return nil, nil
	}
	t, data, err := s.read(h)
	if err == nil && t != plumbing.TreeObject {
		err = plumbing.ErrObjectNotFound
	}
	return data, err
}

func (s *Store) Tree(h plumbing.Hash) (*object.Tree, error) {
	obj, err := s.Encoded(plumbing.TreeObject, h)
	if err != nil {
		return nil, err
	}
	return object.DecodeTree(s.st, obj)
}

// TmpObjPrefix names gitmem's temporary object files, so that the ones a
// crash leaves behind can be told from git's own and removed at start.
const TmpObjPrefix = "gitmem_obj_"

// ObjectWriter writes loose objects: each to a temporary file that is
// fsynced and renamed into place; sync then fsyncs the folders. gitmem
// writes none into its repository (every object it writes is in a kept
// pack: see Keep); tests make loose objects with it, as git does.
type ObjectWriter struct {
	dir   string // .git/objects
	env   *Env
	dirty map[string]bool
}

func NewObjectWriter(env *Env, gitDir string) *ObjectWriter {
	return &ObjectWriter{dir: filepath.Join(gitDir, "objects"), env: env, dirty: map[string]bool{}}
}

func (w *ObjectWriter) Write(t plumbing.ObjectType, content []byte) (plumbing.Hash, error) {
	h := plumbing.ComputeHash(t, content)
	hex := h.String()
	sub := filepath.Join(w.dir, hex[:2])
	final := filepath.Join(sub, hex[2:])
	if _, err := os.Lstat(final); err == nil && LooseIntact(final, h) {
		return h, nil // already there, and intact: never point at a damaged copy
	}
	if err := w.env.Injected(StepObject, ".git/objects/"+hex[:2]+"/"+hex[2:]); err != nil {
		return h, err
	}
	var buf bytes.Buffer
	zw := zlibWriters[zlib.BestSpeed].Get().(*zlib.Writer)
	defer zlibWriters[zlib.BestSpeed].Put(zw)
	zw.Reset(&buf)
	zw.Write([]byte(t.String() + " " + strconv.Itoa(len(content)) + "\x00"))
	zw.Write(content)
	if err := zw.Close(); err != nil {
		return h, err
	}
	for try := 1; ; try++ {
		if _, err := os.Lstat(sub); err != nil {
			if err := os.Mkdir(sub, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return h, err
			}
			w.dirty[w.dir] = true
		}
		if w.env != nil && w.env.beforeObjectTemp != nil {
			w.env.beforeObjectTemp(sub)
		}
		err := writeFile(sub, TmpObjPrefix, final, buf.Bytes(), 0o444, true)
		if errors.Is(err, fs.ErrNotExist) && try < 3 {
			continue // git prune-packed removed the empty folder in between: make it again, as git does
		}
		if err != nil {
			return h, err
		}
		w.dirty[sub] = true
		return h, nil
	}
}

// LooseIntact reports whether the loose object file at path holds the
// object h: it inflates and hashes it.
func LooseIntact(path string, h plumbing.Hash) bool {
	f, err := OpenRead(path)
	if err != nil {
		return false
	}
	defer f.Close()
	zr, err := zlib.NewReader(bufio.NewReader(f))
	if err != nil {
		return false
	}
	defer zr.Close()
	data, err := io.ReadAll(io.LimitReader(zr, maxObjectBytes))
	if err != nil {
		return false
	}
	hdr, content, ok := bytes.Cut(data, []byte{0})
	if !ok {
		return false
	}
	kind, size, ok := bytes.Cut(hdr, []byte(" "))
	t, err := plumbing.ParseObjectType(string(kind))
	if !ok || err != nil || string(size) != strconv.Itoa(len(content)) {
		return false
	}
	return plumbing.ComputeHash(t, content) == h
}

// maxObjectBytes bounds what LooseIntact inflates: gitmem's own objects
// are far smaller (a memory file is at most a few MiB).
const maxObjectBytes = 1 << 30

// zlibWriters reuses compressors, by level: a new one allocates about a
// megabyte.
var zlibWriters = map[int]*sync.Pool{
	zlib.BestSpeed:     zlibPool(zlib.BestSpeed),
	zlib.NoCompression: zlibPool(zlib.NoCompression),
}

func zlibPool(level int) *sync.Pool {
	return &sync.Pool{New: func() any {
		zw, _ := zlib.NewWriterLevel(nil, level)
		return zw
	}}
}

// sync makes the renames of the written objects durable.
func (w *ObjectWriter) Sync() error {
	for d := range w.dirty {
		if err := SyncDir(d); err != nil {
			return err
		}
	}
	clear(w.dirty)
	return nil
}

// WriteFileSync writes data to a new temporary file in tmpDir, fsyncs it,
// sets its mode and renames it to final. The folder is not synced.
func WriteFileSync(tmpDir, pattern, final string, data []byte, mode os.FileMode) error {
	return writeFile(tmpDir, pattern, final, data, mode, true)
}

// writeFile is WriteFileSync with the Fsync optional.
func writeFile(tmpDir, pattern, final string, data []byte, mode os.FileMode, doSync bool) error {
	f, err := os.CreateTemp(tmpDir, pattern)
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil && doSync {
		err = syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// mkdirIn makes the folder dir in the git folder gitDir, with the
// folders between, as os.MkdirAll does, but never gitDir itself: a
// repository deleted while a process has it open (gitmem store delete in
// another process) is not made again by what that process still writes
// (its branch, its objects), as a .git git takes for a damaged
// repository, holding the memory's content.
func mkdirIn(gitDir, dir string, perm os.FileMode) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	rel, err := filepath.Rel(gitDir, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%s is not in %s", dir, gitDir)
	}
	p := gitDir
	if _, err := os.Stat(p); err != nil {
		return err
	}
	for _, name := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, name)
		if err := os.Mkdir(p, perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

// SyncDir makes a folder's entries durable (a file created or renamed in
// it), but nothing in a folder built aside.
func SyncDir(dir string) error {
	if isAside(dir) {
		return nil
	}
	d, err := OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return fsyncDir(d)
}

// Fsync flushes a file or folder to stable storage (Go's Sync: on macOS
// fcntl(F_FULLFSYNC), on Windows FlushFileBuffers). It is a variable only
// so that benchmarks can build large histories quickly; gitmem never
// replaces it.
var Fsync = (*os.File).Sync

// Fdatasync flushes a file's data, and only the metadata needed to read
// it back: for an append into space written ahead it is one device flush.
var Fdatasync = fdatasync

// verify reads an object in full and checks its type and hash.
func (s *Store) Verify(t plumbing.ObjectType, h plumbing.Hash) error {
	obj, err := s.Encoded(plumbing.AnyObject, h)
	if err != nil {
		return err
	}
	if obj.Type() != t {
		return fmt.Errorf("it is a %s, not a %s", obj.Type(), t)
	}
	rd, err := obj.Reader()
	if err != nil {
		return err
	}
	defer rd.Close()
	hw := plumbing.NewHasher(obj.Type(), obj.Size())
	if _, err := io.Copy(hw, rd); err != nil {
		return err
	}
	if got := hw.Sum(); got != h {
		return fmt.Errorf("its content hashes to %s", got)
	}
	return nil
}

// objCache keeps recently read small objects (trees, commits), bounded in
// bytes: walking a history reads each commit's trees next to its
// parent's, which the previous step read already.
type objCache struct {
	mu    sync.Mutex
	m     map[plumbing.Hash]*list.Element
	lru   list.List
	bytes int
}

type cachedObj struct {
	h    plumbing.Hash
	t    plumbing.ObjectType
	data []byte
}

const objCacheBytes = 16 << 20

func (c *objCache) get(h plumbing.Hash) (plumbing.ObjectType, []byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[h]
	if !ok {
		return 0, nil, false
	}
	c.lru.MoveToFront(e)
	o := e.Value.(*cachedObj)
	return o.t, o.data, true
}

func (c *objCache) put(h plumbing.Hash, t plumbing.ObjectType, data []byte) {
	if len(data) > objCacheBytes/16 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[plumbing.Hash]*list.Element{}
	}
	if _, ok := c.m[h]; ok {
		return
	}
	c.m[h] = c.lru.PushFront(&cachedObj{h, t, data})
	c.bytes += len(data)
	for c.bytes > objCacheBytes {
		e := c.lru.Back()
		o := e.Value.(*cachedObj)
		c.lru.Remove(e)
		delete(c.m, o.h)
		c.bytes -= len(o.data)
	}
}
