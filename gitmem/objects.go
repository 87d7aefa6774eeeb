package gitmem

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// objects reads git objects through go-git (loose and packed) and writes
// loose objects itself, durably: go-git writes objects without fsync.
type objects struct {
	gitDir string
	st     *filesystem.Storage
	holds  int // operations that keep pack files open (see Repo.unlockObj)
}

func openObjects(gitDir string) *objects {
	// Pack files stay open between reads (go-git reopens them for every
	// object otherwise); Repo.Close closes them.
	st := filesystem.NewStorageWithOptions(osfs.New(gitDir), cache.NewObjectLRU(32<<20), filesystem.Options{KeepDescriptors: true})
	return &objects{gitDir: gitDir, st: st}
}

// unlockObj releases omu. Unless an operation holds them (holds > 0), the
// pack files go-git opened are closed first: no gitmem process keeps a
// pack open between operations, so a pack that gc or redact deletes is
// gone from the disk at once, not kept alive by an idle server.
func (r *Repo) unlockObj() {
	if r.obj.holds == 0 {
		r.obj.st.ObjectStorage.Close()
	}
	r.omu.Unlock()
}

// holdPacks keeps pack files open until dropPacks, for an operation that
// reads many objects (blame, a log with patches).
func (r *Repo) holdPacks() {
	r.omu.Lock()
	r.obj.holds++
	r.omu.Unlock()
}

func (r *Repo) dropPacks() {
	r.omu.Lock()
	r.obj.holds--
	r.unlockObj()
}

// encoded returns an object. go-git caches the list of packs; when another
// process has repacked (gitmem gc, git gc) a missing object is looked up
// once more after re-reading the pack list.
func (o *objects) encoded(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	obj, err := o.st.EncodedObject(t, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		o.st.ObjectStorage.Reindex()
		obj, err = o.st.EncodedObject(t, h)
	}
	return obj, err
}

func (o *objects) blob(h plumbing.Hash) ([]byte, error) {
	obj, err := o.encoded(plumbing.BlobObject, h)
	if err != nil {
		return nil, err
	}
	r, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// size returns an object's size. A loose object's header is read here:
// go-git's EncodedObjectSize leaves the loose file open (until a
// finalizer runs), which kept deleted objects on disk.
func (o *objects) size(h plumbing.Hash) (int64, error) {
	hex := h.String()
	f, err := os.Open(filepath.Join(o.gitDir, "objects", hex[:2], hex[2:]))
	if err == nil {
		defer f.Close()
		_, n, err := looseHeader(f)
		return n, err
	}
	n, err := o.st.EncodedObjectSize(h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		o.st.ObjectStorage.Reindex()
		n, err = o.st.EncodedObjectSize(h)
	}
	return n, err
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

func (o *objects) commit(h plumbing.Hash) (*object.Commit, error) {
	obj, err := o.encoded(plumbing.CommitObject, h)
	if err != nil {
		return nil, err
	}
	return object.DecodeCommit(o.st, obj)
}

func (o *objects) tree(h plumbing.Hash) (*object.Tree, error) {
	obj, err := o.encoded(plumbing.TreeObject, h)
	if err != nil {
		return nil, err
	}
	return object.DecodeTree(o.st, obj)
}

// tmpObjPrefix names gitmem's temporary object files, so that the ones a
// crash leaves behind can be told from git's own and removed at start.
const tmpObjPrefix = "gitmem_obj_"

// objectWriter writes loose objects for one commit: each to a temporary
// file that is fsynced and renamed into place; sync then fsyncs the folders
// so that the objects are durable before the ref that names them moves.
type objectWriter struct {
	dir      string // .git/objects
	dirty    map[string]bool
	noSync   bool
	unsynced []plumbing.Hash
}

func newObjectWriter(gitDir string) *objectWriter {
	return &objectWriter{dir: filepath.Join(gitDir, "objects"), dirty: map[string]bool{}}
}

func (w *objectWriter) write(t plumbing.ObjectType, content []byte) (plumbing.Hash, error) {
	h := plumbing.ComputeHash(t, content)
	hex := h.String()
	sub := filepath.Join(w.dir, hex[:2])
	final := filepath.Join(sub, hex[2:])
	if _, err := os.Lstat(final); err == nil && looseIntact(final, h) {
		return h, nil // already there, and intact: never point at a damaged copy
	}
	if err := injected(stepObject, ".git/objects/"+hex[:2]+"/"+hex[2:]); err != nil {
		return h, err
	}
	if _, err := os.Lstat(sub); err != nil {
		if err := os.Mkdir(sub, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return h, err
		}
		w.dirty[w.dir] = true
	}
	var buf bytes.Buffer
	zw := zlibWriters.Get().(*zlib.Writer)
	defer zlibWriters.Put(zw)
	zw.Reset(&buf)
	zw.Write([]byte(t.String() + " " + strconv.Itoa(len(content)) + "\x00"))
	zw.Write(content)
	if err := zw.Close(); err != nil {
		return h, err
	}
	if err := writeFile(sub, tmpObjPrefix, final, buf.Bytes(), 0o444, !w.noSync); err != nil {
		return h, err
	}
	w.dirty[sub] = true
	return h, nil
}

// looseIntact reports whether the loose object file at path holds the
// object h: it inflates and hashes it.
func looseIntact(path string, h plumbing.Hash) bool {
	f, err := os.Open(path)
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

// maxObjectBytes bounds what looseIntact inflates: gitmem's own objects
// are far smaller (a memory file is at most a few MiB).
const maxObjectBytes = 1 << 30

// writeNoSync writes a loose object without fsync, for bulk rewrites
// that sync everything once at the end (syncAll).
func (w *objectWriter) writeNoSync(t plumbing.ObjectType, content []byte) (plumbing.Hash, error) {
	w.noSync = true
	defer func() { w.noSync = false }()
	h, err := w.write(t, content)
	if err == nil {
		w.unsynced = append(w.unsynced, h)
	}
	return h, err
}

// syncAll fsyncs the objects written by writeNoSync, then the folders.
func (w *objectWriter) syncAll() error {
	for _, h := range w.unsynced {
		hex := h.String()
		f, err := os.Open(filepath.Join(w.dir, hex[:2], hex[2:]))
		if err != nil {
			return err
		}
		err = fsync(f)
		f.Close()
		if err != nil {
			return err
		}
	}
	w.unsynced = nil
	return w.sync()
}

// zlibWriters reuses compressors: a new one allocates about a megabyte.
var zlibWriters = sync.Pool{New: func() any {
	zw, _ := zlib.NewWriterLevel(nil, zlib.BestSpeed)
	return zw
}}

// sync makes the renames of the written objects durable.
func (w *objectWriter) sync() error {
	for d := range w.dirty {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	clear(w.dirty)
	return nil
}

// writeFileSync writes data to a new temporary file in tmpDir, fsyncs it,
// sets its mode and renames it to final. The folder is not synced.
func writeFileSync(tmpDir, pattern, final string, data []byte, mode os.FileMode) error {
	return writeFile(tmpDir, pattern, final, data, mode, true)
}

// writeFile is writeFileSync with the fsync optional.
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
		err = fsync(f)
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

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return fsync(d)
}

// fsync flushes a file or folder to stable storage. It is a variable only
// so that benchmarks can build large histories quickly; gitmem never
// replaces it.
var fsync = (*os.File).Sync
