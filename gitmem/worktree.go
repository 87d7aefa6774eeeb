package gitmem

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// worktree changes the files under the repository folder through an
// os.Root, so no path can leave it, and it never follows a symlink: a
// symlink or file where a folder must be is removed first (the tree is the
// truth, and a symlink in the worktree counts as not existing). Files are
// written to a temporary file under .git/gitmem/tmp, given mode 0600 and
// renamed into place; folders are created 0700. Nothing is fsynced here:
// what was written is listed (written) for the caller's SyncFS, which makes
// it durable before the record of the change is dropped.
type worktree struct {
	root   *os.Root
	base   *os.File        // the folder, opened for the one-step lookups of lstat and openFile (nil: none)
	baseRC syscall.RawConn // base's, for them
	tmpAbs string
	tmpRel string
	dir    string  // the repository folder
	env    *gd.Env // the test suite's (nil: none)
	// writtenMu guards written and placed. A leaf: no lock is taken
	// while it is held.
	writtenMu sync.Mutex
	written   map[string]bool // repository paths written since the last SyncFS
	// placed is the stat data of each file syncChecked put, taken as it
	// was written: one that is still that file, with that size and
	// modification time, holds what gitmem put there (asPlaced).
	placed map[string]fs.FileInfo

	// sparesMu guards spares. A leaf: no lock is taken while it is held.
	sparesMu sync.Mutex
	spares   []spare // files taken aside that the next writes reuse (see recycle)

	reads     atomic.Int64 // files opened for reading (tests count what a start reads)
	readBytes atomic.Int64 // bytes read from them (tests: what was read whole)
	lookups   atomic.Int64 // paths resolved beneath the folder (openat2; tests count them)
	looks     atomic.Int64 // files a check for hand edits compared with the tree (tests count them)
}

// newWorktree is the worktree of the repository folder dir, opened as
// root, whose git folder is gitDir.
func newWorktree(root *os.Root, dir, gitDir string, env *gd.Env) *worktree {
	base, rc := openBase(root, dir)
	return &worktree{root: root, base: base, baseRC: rc, tmpAbs: filepath.Join(gitDir, "gitmem", "tmp"), tmpRel: ".git/gitmem/tmp", dir: dir, env: env}
}

// close removes the spare files and closes the root.
func (w *worktree) close() {
	w.dropSpares()
	if w.base != nil {
		w.base.Close() // a lookup under way keeps it open until it is done
	}
	w.root.Close()
}

// lstat, openFile and readFile are the root's Lstat, OpenFile and
// ReadFile (the same results), in fewer system calls where the kernel
// can resolve a path beneath the folder in one (worktree_linux.go). One
// difference: readFile reads only a regular file (readRegular), where
// os.Root's would wait on a named pipe or a device.
func (w *worktree) lstat(p string) (fs.FileInfo, error) {
	fi, err, _ := w.lstatFolders(p)
	return fi, err
}

// lstatFolders is lstat, also saying whether p's folder and every one
// above it were found real folders (no link, no file, nothing missing):
// known when the kernel resolved them in one step, which refuses a link on
// the way. false says nothing.
func (w *worktree) lstatFolders(p string) (fi fs.FileInfo, err error, folders bool) {
	return w.lstatIn(p, nil)
}

// lstatIn is lstatFolders for one of many paths looked at in turn (a
// check for hand edits): the folder of the last is held open in last,
// so that the files of one folder, looked at one after the other, cost
// an fstatat each, not an openat2, an fstatat and a close. The caller
// closes last (done) after the last path.
func (w *worktree) lstatIn(p string, last *folderFD) (fi fs.FileInfo, err error, folders bool) {
	if fi, err, ok := w.fastLstat(p, last); ok {
		return fi, err, true
	}
	fi, err = w.root.Lstat(p)
	return fi, err, false
}

// fileAbove is the first folder of the path p, from p's own up to the
// memories folder, that is a regular file on disk ("": none).
func (w *worktree) fileAbove(p string) string {
	for a := path.Dir(p); a != memDir && a != "." && a != "/"; a = path.Dir(a) {
		if fi, err := w.root.Lstat(a); err == nil && fi.Mode().IsRegular() {
			return a
		}
	}
	return ""
}

func (w *worktree) openFile(p string, flag int) (*os.File, error) {
	if f, ok := w.fastOpen(p, flag); ok {
		return f, nil
	}
	return w.root.OpenFile(p, flag, 0)
}

// readBlob reads the file at p when it holds n's blob (its type and
// size, then its hash, checked): whether the worktree is up to date there
// (sync, syncChecked), and a small file read where the blob from git's
// objects is a pack's delta chain resolved (View.ReadFile). Whatever else
// is at p (a hand edit, a version not yet written, a folder, a link out
// of the folder) is not read as the blob: ok is false. A link inside the
// folder is followed (os.Root's): callers for whom a link is no file
// lstat first.
func (w *worktree) readBlob(p string, n *node) ([]byte, bool) {
	if !n.isFile() {
		return nil, false
	}
	data, _, err := w.readRegular(p, n.size, false)
	if err != nil || plumbing.ComputeHash(plumbing.BlobObject, data) != n.hash {
		return nil, false
	}
	return data, true
}

func (w *worktree) readFile(p string) ([]byte, error) {
	data, _, err := w.readRegular(p, -1, false)
	return data, err
}

// readRegular reads the regular file at p whole; anything else there (a
// folder, a named pipe, a socket, a device) is errNotRegular, and with
// size not negative a file of another size is errOtherSize, neither read.
// With stat, st is the stat data of the file read (its descriptor's)
// before and after the read, for the stat cache: equal when nothing
// changed the file meanwhile.
func (w *worktree) readRegular(p string, size int64, stat bool) (data []byte, st [2]fs.FileInfo, err error) {
	f, done, err := w.openRegular(p)
	if err != nil {
		return nil, st, err
	}
	defer done()
	data, st, err = readOpened(f, p, size, stat)
	w.readBytes.Add(int64(len(data)))
	return data, st, err
}

// readUnlessRacy is readRegular with stat, for a file that is read only
// when its lstat data may vouch for what it holds: one changed within
// the racy window of now when opened is not read (errRacy).
func (w *worktree) readUnlessRacy(p string, size int64, now time.Time) (data []byte, st [2]fs.FileInfo, err error) {
	f, done, err := w.openRegular(p)
	if err != nil {
		return nil, st, err
	}
	defer done()
	if fi, err := f.Stat(); err != nil || gd.StatOf(fi).Racy(now) {
		return nil, st, errRacy
	}
	data, st, err = readOpened(f, p, size, true)
	w.readBytes.Add(int64(len(data)))
	return data, st, err
}

// errRacy is readUnlessRacy's answer for a file changed too recently.
var errRacy = errors.New("changed within the racy window")

// readSettled reads the regular file at p whole when no program holds it
// open for writing, and keeps one that opens it for writing waiting while
// it reads (holdRead): what it reads is a whole state of the file, never
// one truncated by a write still under way (open with O_TRUNC, then
// write). busy says a program held it open for writing: nothing was read.
// Where that cannot be told (no leases), it is readFile. A file over max
// bytes (max > 0) when opened is not read: the error is a *tooBigError.
func (w *worktree) readSettled(p string, max int64) (data []byte, busy bool, err error) {
	f, done, err := w.openRegular(p)
	if leased(err) {
		return nil, true, nil // another program's lease: it is busy with it
	}
	if err != nil {
		return nil, false, err
	}
	defer done()
	release, busy := holdRead(f)
	if busy {
		return nil, true, nil
	}
	defer release()
	if fi, err := f.Stat(); err == nil && max > 0 && fi.Size() > max {
		return nil, false, &tooBigError{fi.Size()}
	}
	data, _, err = readOpened(f, p, -1, false)
	w.readBytes.Add(int64(len(data)))
	return data, false, err
}

// openRegular opens p for readOpened.
func (w *worktree) openRegular(p string) (statReader, func(), error) {
	f, done, err := w.openRead(p)
	if errors.Is(err, syscall.ENXIO) { // a socket, or a device without its driver: no file to open
		err = &fs.PathError{Op: "read", Path: p, Err: errNotRegular}
	}
	return f, done, err
}

// readOpened is readRegular's read of the file f opened at p.
func readOpened(f statReader, p string, size int64, stat bool) (data []byte, st [2]fs.FileInfo, err error) {
	if st[0], err = f.Stat(); err != nil {
		return nil, st, err
	}
	switch {
	case !st[0].Mode().IsRegular():
		// readFlags opened it at once; reading could wait.
		return nil, st, &fs.PathError{Op: "read", Path: p, Err: errNotRegular}
	case size >= 0 && st[0].Size() != size:
		return nil, st, &fs.PathError{Op: "read", Path: p, Err: errOtherSize}
	}
	if size >= 0 {
		data = make([]byte, size)
		_, err = io.ReadFull(f, data)
	} else {
		data, err = readAll(f, st[0].Size())
	}
	if err != nil {
		return nil, st, err
	}
	if stat {
		if st[1], err = f.Stat(); err != nil {
			return nil, st, err
		}
	}
	return data, st, nil
}

// readAll is io.ReadAll with a first buffer of the size the file had (up
// to readAllFirst): one read and the one that finds its end, for a file
// that did not grow. The bound keeps a file that says it is huge (a
// sparse one made by hand) from taking that much memory before a byte is
// read.
func readAll(r io.Reader, size int64) ([]byte, error) {
	b := make([]byte, 0, min(size, readAllFirst)+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// openRead opens the file at p for readRegular; done closes it.
func (w *worktree) openRead(p string) (f statReader, done func(), err error) {
	w.reads.Add(1)
	if f, done, ok := w.fastOpenRead(p); ok {
		return f, done, nil
	}
	of, err := w.openBeneathMemories(p)
	if err != nil {
		return nil, nil, err
	}
	return of, func() { of.Close() }, nil
}

// openBeneathMemories opens a memory file (p in memories/) for reading
// within memories/: a symbolic link there may lead to another memory file
// (what the fast open, which follows none, leaves to this one), never
// into .git or elsewhere in the repository — a link to ../.git had
// .git/config, a remote's credentials in its URL, read as a hand edit
// and shown to the model. Any other path is opened beneath the
// repository.
func (w *worktree) openBeneathMemories(p string) (*os.File, error) {
	rel, ok := strings.CutPrefix(path.Clean(p), memDir+"/")
	if !ok {
		return w.root.OpenFile(p, readFlags, 0)
	}
	mem, err := w.root.OpenRoot(memDir)
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	return mem.OpenFile(rel, readFlags, 0)
}

// statReader is what readRegular reads through: an *os.File, or on Linux
// a bare descriptor (worktree_linux.go).
type statReader interface {
	io.Reader
	Stat() (fs.FileInfo, error)
}

// readAllFirst bounds readAll's first buffer: above the default largest
// memory file (policy.DefaultLimits), so a memory file is read in one go.
const readAllFirst = 4 << 20

// tooBigError is readSettled's refusal of a file over the size it was
// given.
type tooBigError struct{ size int64 }

func (e *tooBigError) Error() string { return fmt.Sprintf("%d bytes, too big to read", e.size) }

var (
	errNotRegular = errors.New("not a regular file")
	errOtherSize  = errors.New("not of the size expected")
)

// dropSpares closes and removes the spare files (serve gives the writer
// lock up when idle: an idle repository holds no descriptor for them).
func (w *worktree) dropSpares() {
	w.sparesMu.Lock()
	defer w.sparesMu.Unlock()
	for _, s := range w.spares {
		s.f.Close()
		w.root.Remove(s.name)
	}
	w.spares = nil
}

// touch notes that p (and its folder) changed.
func (w *worktree) touch(p string) {
	w.touchDir(p)
	w.touchDir(path.Dir(p))
}

func (w *worktree) touchDir(d string) {
	w.writtenMu.Lock()
	defer w.writtenMu.Unlock()
	if w.written == nil {
		w.written = map[string]bool{}
	}
	w.written[d] = true
}

// flushList is what touch noted, as host paths, and forgets it.
func (w *worktree) flushList() []string {
	w.writtenMu.Lock()
	defer w.writtenMu.Unlock()
	var out []string
	for p := range w.written {
		out = append(out, filepath.Join(w.dir, filepath.FromSlash(p)))
	}
	clear(w.written)
	return out
}

const (
	fileMode = 0o600
	dirMode  = 0o700
)

// ensureDir makes every component of the folder p (repository-relative) a
// real folder.
func (w *worktree) ensureDir(p string) error {
	if p == "." || p == "" {
		return nil
	}
	fi, err, folders := w.lstatFolders(p) // one lookup, not one per level
	if !folders {
		if err := w.ensureDir(path.Dir(p)); err != nil {
			return err
		}
		fi, err = w.lstat(p)
	}
	if err == nil && fi.IsDir() {
		return nil
	}
	if err == nil {
		if err := w.root.RemoveAll(p); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := w.root.Mkdir(p, dirMode); err != nil {
		return err
	}
	return w.root.Chmod(p, dirMode)
}

// write puts data at p. A folder there goes with all it holds; with
// keep, only an empty one goes (see syncKeeping).
func (w *worktree) write(p string, data []byte, keep bool) error {
	if err := w.env.Injected(gd.StepWorktree, p); err != nil {
		return err
	}
	if err := w.ensureDir(path.Dir(p)); err != nil {
		return err
	}
	if fi, err := w.lstat(p); err == nil && fi.IsDir() {
		if err := w.removeAt(p, keep); err != nil {
			return err
		}
	}
	tmp, _, err := w.writeTemp(data)
	if err != nil {
		return err
	}
	// A file is never renamed over a folder (EISDIR): one made since
	// the look above stays.
	if err := w.root.Rename(tmp, p); err != nil {
		w.root.Remove(tmp)
		if keep && w.folderWithin(p) {
			return errFolderThere
		}
		return err
	}
	w.touch(p)
	return nil
}

// remove removes p, and the folders it leaves empty. A folder goes with
// all it holds; with keep, only an empty one goes (see syncKeeping).
func (w *worktree) remove(p string, keep bool) error {
	if err := w.env.Injected(gd.StepWorktree, p); err != nil {
		return err
	}
	if err := w.removeAt(p, keep); err != nil {
		return err
	}
	w.touchDir(w.prune(path.Dir(p)))
	return nil
}

// removeAt removes p, with all it holds or, with keep, only when it is no
// folder with anything in it (errFolderThere).
func (w *worktree) removeAt(p string, keep bool) error {
	if !keep {
		return w.root.RemoveAll(p)
	}
	err := w.root.Remove(p)
	if err != nil && w.folderWithin(p) {
		return errFolderThere
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// folderWithin reports whether p is a folder with anything in it.
func (w *worktree) folderWithin(p string) bool {
	f, err := w.root.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.IsDir() {
		return false
	}
	names, _ := f.Readdirnames(1)
	return len(names) > 0
}

// prune removes the empty folders from dir up to (not including) the
// memories folder, as git keeps no empty folders, and returns the first
// folder that remains.
func (w *worktree) prune(dir string) string {
	for dir != memDir && dir != "." && dir != "" {
		if err := w.root.Remove(dir); err != nil {
			break
		}
		dir = path.Dir(dir)
	}
	return dir
}

// sync makes the worktree at p match the tree node n (nil: absent),
// reading blob contents with blob. It is the repair step after a crash:
// idempotent, and it rewrites only what differs. A folder in the way goes
// with all it holds (the whole worktree brought back to HEAD); a repair
// of one path uses syncKeeping.
func (w *worktree) sync(p string, n *node, blob func(plumbing.Hash) ([]byte, error)) error {
	return w.syncAt(p, n, blob, false)
}

// syncKeeping is sync for a path whose folder, if the disk holds one, may
// hold files made by hand (a repair of a path gitmem could not write,
// where an operator may have made a folder, or files in n's folder,
// meanwhile). Where n (nil: absent) has a file or nothing, such a folder
// goes only if empty; one with anything in it is left as it is
// (errFolderThere), its files the caller's to check, never removed with
// it unchecked. Where n has a folder, a regular file n does not hold
// stays (syncFolder): gitmem's own there, one it could not remove, waits
// for repair at its own path. (The memory folder itself is brought to n
// whole: the journal names it when it cannot say which paths.)
func (w *worktree) syncKeeping(p string, n *node, blob func(plumbing.Hash) ([]byte, error)) error {
	return w.syncAt(p, n, blob, true)
}

func (w *worktree) syncAt(p string, n *node, blob func(plumbing.Hash) ([]byte, error), keep bool) error {
	if n == nil && p == memDir {
		n = &node{mode: filemode.Dir} // the memory folder stays, empty
	}
	switch {
	case n == nil:
		if _, err := w.lstat(p); err != nil {
			return nil
		}
		return w.remove(p, keep)
	case n.isFile():
		if fi, err := w.lstat(p); err == nil && fi.Mode().IsRegular() { // a link there is no file
			if _, ok := w.readBlob(p, n); ok {
				return nil
			}
		}
		data, err := blob(n.hash)
		if err != nil {
			return err
		}
		return w.write(p, data, keep)
	case n.isDir():
		if fi, err := w.lstat(p); keep && p != memDir && err == nil && fi.IsDir() {
			return w.syncFolder(p, n, blob) // a file n does not hold stays
		}
		if err := w.ensureDir(p); err != nil {
			return err
		}
		ents, err := fs.ReadDir(w.root.FS(), p)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if n.kid(e.Name()) == nil {
				if err := w.remove(p+"/"+e.Name(), false); err != nil {
					return err
				}
			}
		}
		for _, k := range n.kids {
			if err := w.sync(p+"/"+k.name, k.n, blob); err != nil {
				return err
			}
		}
	}
	return nil
}

// filesIn is the regular files beneath the memory path p when the
// worktree holds a folder there (none otherwise), for followWorktree to
// check each as a file before the folder goes (syncFolder).
func (w *worktree) filesIn(p string) []string {
	if fi, err := w.lstat(p); err != nil || !fi.IsDir() {
		return nil
	}
	var out []string
	fs.WalkDir(w.root.FS(), p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			out = append(out, q)
		}
		return nil // what cannot be read is left to sync
	})
	return out
}

// syncFolder is sync for the folder p whose regular files were each
// checked (syncChecked) just before: a regular file beneath p that n
// (nil: absent) does not hold is a hand edit kept there, or made since,
// and stays, for the next adopt; everything else n does not hold goes,
// and folders left empty with it. A file n puts at p is written once the
// folder is gone: while a kept file holds it, the adopt decides. A
// folder n puts where none is, is made first: a file made in it by hand
// before it is read stays too.
func (w *worktree) syncFolder(p string, n *node, blob func(plumbing.Hash) ([]byte, error)) error {
	if fi, err := w.lstat(p); err != nil || !fi.IsDir() || p == memDir {
		if !n.isDir() || !errors.Is(err, fs.ErrNotExist) || p == memDir {
			return w.syncKeepingFolder(p, n, blob)
		}
		if err := w.ensureDir(p); err != nil {
			return err
		}
	}
	if n.isFile() {
		if err := w.syncFolder(p, nil, blob); err != nil {
			return err
		}
		if _, err := w.lstat(p); err == nil {
			return nil
		}
		return w.syncKeepingFolder(p, n, blob)
	}
	if err := w.env.Injected(gd.StepWorktree, p); err != nil {
		return err
	}
	ents, err := fs.ReadDir(w.root.FS(), p)
	if err != nil {
		return err
	}
	for _, e := range ents {
		c, k := p+"/"+e.Name(), n.kid(e.Name())
		switch {
		case k != nil || e.Type().IsRegular():
			// n's: synced below; a file n does not hold: kept
		case e.IsDir():
			if err := w.syncFolder(c, nil, blob); err != nil {
				return err
			}
		default:
			if err := w.remove(c, false); err != nil {
				return err
			}
		}
	}
	if n == nil {
		w.touchDir(w.prune(p))
		return nil
	}
	for _, k := range n.kids {
		// A file's too: a folder there holds files kept, or made since.
		if err := w.syncFolder(p+"/"+k.name, k.n, blob); err != nil {
			return err
		}
	}
	return nil
}

// syncKeepingFolder is syncKeeping for syncFolder: a folder made where
// it writes n's file, or removes one, in the moment since it looked (by
// hand: gitmem's own went before) is synced as one whose files were
// checked, its regular files kept.
func (w *worktree) syncKeepingFolder(p string, n *node, blob func(plumbing.Hash) ([]byte, error)) error {
	if err := w.syncKeeping(p, n, blob); !errors.Is(err, errFolderThere) {
		return err
	}
	return w.syncFolder(p, n, blob)
}

// scan hashes every regular file under the memories folder, skipping
// symlinks and whatever skip rejects (paths relative to memories/).
func (w *worktree) scan(skip func(rel string, dir bool) bool) (map[string]plumbing.Hash, error) {
	out := map[string]plumbing.Hash{}
	err := fs.WalkDir(w.root.FS(), memDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == memDir && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if p == memDir {
			return nil
		}
		rel := p[len(memDir)+1:]
		if skip(rel, d.IsDir()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := w.readFile(p)
		if err != nil {
			return err
		}
		out[rel] = plumbing.ComputeHash(plumbing.BlobObject, data)
		return nil
	})
	return out, err
}

// Replacing a file the operator may be editing. put moves a new version
// into place and hands back the file it replaced, moved aside in the
// same step (Linux: renameat2 RENAME_EXCHANGE; elsewhere a rename aside,
// then a link that fails if a file appeared meanwhile), so that an edit
// made at any moment before the swap is in the file handed back, never
// overwritten: the caller compares it with what gitmem expected there
// and keeps a difference (syncChecked). A write through a descriptor
// opened before the swap lands in the file handed back: on Linux
// takeAside waits for such a writer (leases tell it is there), and the
// caller puts the file back if it takes longer; elsewhere, a write made
// after the caller read the file handed back is not seen.

// asideSeq makes the names of files moved aside unique.
var asideSeq atomic.Uint64

func (w *worktree) asideName() string {
	return fmt.Sprintf("%s/aside-%s-%d", w.tmpRel, gd.ProcTag, asideSeq.Add(1))
}

// clearTemp removes what other processes left in .git/gitmem/tmp once it
// is older than gd.StaleTemp (the next start removes all of it), and
// returns how many files went. With all (a redaction's gc: a spare or a
// file taken aside may hold the redacted text) it removes every file, the
// spares first; nothing else of the process's is there then (the
// redaction holds the writer lock, and every change is settled).
func (w *worktree) clearTemp(all bool) int {
	// The process's own files (gd.ProcTag in their names) are the
	// worktree's while it runs: spares kept open, files between their
	// writing and their rename, files taken aside and not read yet. None
	// goes, whatever its mtime (a spare has the mtime of the memory file
	// it was).
	if all {
		w.dropSpares()
	}
	entries, _ := os.ReadDir(w.tmpAbs)
	n := 0
	for _, e := range entries {
		if !all && strings.Contains(e.Name(), "-"+gd.ProcTag+"-") {
			continue
		}
		p := filepath.Join(w.tmpAbs, e.Name())
		if fi, err := os.Lstat(p); err == nil && (all || time.Since(fi.ModTime()) > gd.StaleTemp) && os.RemoveAll(p) == nil {
			n++
		}
	}
	return n
}

// writeTemp writes data to a temporary file, mode 0600, and returns its
// repository path and its stat data once written (nil when not known): a
// spare file when there is one, else a new file.
func (w *worktree) writeTemp(data []byte) (string, fs.FileInfo, error) {
	if name, fi, ok := w.reuse(data); ok {
		return name, fi, nil
	}
	f, err := os.CreateTemp(w.tmpAbs, "w-"+gd.ProcTag+"-")
	if err != nil {
		return "", nil, err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(fileMode)
	}
	fi, _ := f.Stat()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", nil, err
	}
	return w.tmpRel + "/" + filepath.Base(f.Name()), fi, nil
}

// Spare files. Every write puts a new file in place and takes the old one
// aside (put): a file created and a file deleted per write. On ext4
// without a journal, creating a file costs more the more files were
// deleted in the last minute (find_inode_bit skips each recently deleted
// inode, looking its deletion time up): under load, a quarter of serve's
// CPU. So a file taken aside is kept, open, as the next write's temporary
// file (overwritten, then truncated), when nothing else can reach it: it
// has no other link, it is the process's own, and nobody else holds it
// open (Linux: a write lease is granted only then; elsewhere files are
// not reused). A descriptor some program kept open on the replaced file
// would otherwise write into another memory file. At most spareMax are
// kept, the rest removed as before, and none once the writer lock is
// given up (idle): a server of many stores holds them for its busy ones.
const spareMax = 16

type spare struct {
	name string // repository path, under tmpRel
	f    *os.File
	mode fs.FileMode
}

// recycle keeps the file f, open read-write, named name under tmpRel and
// already read, as a spare when it can be (reusable: alone says nobody
// else held it open while it was read); else it closes and removes it.
func (w *worktree) recycle(name string, f *os.File, fi fs.FileInfo, alone bool) {
	if reusable(fi, alone) {
		w.sparesMu.Lock()
		if len(w.spares) < spareMax {
			w.spares = append(w.spares, spare{name: name, f: f, mode: fi.Mode().Perm()})
			w.sparesMu.Unlock()
			return
		}
		w.sparesMu.Unlock()
	}
	f.Close()
	w.root.Remove(name)
}

// reuse writes data to a spare file, if there is one, and returns its
// repository path and its stat data once written.
func (w *worktree) reuse(data []byte) (string, fs.FileInfo, bool) {
	w.sparesMu.Lock()
	n := len(w.spares)
	if n == 0 {
		w.sparesMu.Unlock()
		return "", nil, false
	}
	s := w.spares[n-1]
	w.spares = w.spares[:n-1]
	w.sparesMu.Unlock()
	_, err := s.f.WriteAt(data, 0)
	if err == nil {
		err = s.f.Truncate(int64(len(data)))
	}
	if err == nil && s.mode != fileMode {
		err = s.f.Chmod(fileMode)
	}
	fi, _ := s.f.Stat()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		w.root.Remove(s.name)
		return "", nil, false
	}
	return s.name, fi, true
}

// moveAside moves the file at p out of the worktree and returns where it
// went ("" if there was none).
func (w *worktree) moveAside(p string) (string, error) {
	aside := w.asideName()
	err := w.root.Rename(p, aside)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return aside, nil
}

// put moves the temporary file tmp to p, whose folder exists. The file
// that was at p, if any, is moved aside in the same step (aside names it).
// placed is false when a file appeared at p after it was moved aside
// (tmp is still there): the caller takes that one aside too, and tries
// again. there says whether a file is likely at p: which way is tried
// first. asideInfo is the lstat data of the file moved aside, when known
// (for takeAside).
func (w *worktree) put(tmp, p string, there bool) (aside string, asideInfo fs.FileInfo, placed bool, err error) {
	if aside, asideInfo, placed, ok, err := w.exchange(tmp, p, there); ok {
		return aside, asideInfo, placed, err
	}
	if aside, err = w.moveAside(p); err != nil {
		return "", nil, false, err
	}
	switch err := w.root.Link(tmp, p); {
	case err == nil:
		w.root.Remove(tmp)
	case errors.Is(err, fs.ErrExist):
		return aside, nil, false, nil
	default: // no hard links here: a file made at p just now is replaced
		if err := w.root.Rename(tmp, p); err != nil {
			// tmp cannot be placed: what was at p goes back, the put
			// changes nothing (else the memory file stayed aside).
			if aside != "" && w.root.Rename(aside, p) == nil {
				aside = ""
			}
			return aside, nil, false, err
		}
	}
	w.touch(p)
	return aside, nil, true, nil
}

// notePlaced records that the file written with stat data fi (writeTemp's;
// nil: not known) was just put at p.
func (w *worktree) notePlaced(p string, fi fs.FileInfo) {
	w.writtenMu.Lock()
	defer w.writtenMu.Unlock()
	if fi == nil {
		delete(w.placed, p)
		return
	}
	if w.placed == nil {
		w.placed = map[string]fs.FileInfo{}
	}
	w.placed[p] = fi
}

// asPlaced reports whether the file at p, with lstat data fi, is the one
// gitmem put there last, unchanged as far as its size and modification
// time tell (an edit within the clock's granularity that keeps the size
// may not show: what relies on this looks again after). Its change time
// is not compared: a rename changes it.
func (w *worktree) asPlaced(p string, fi fs.FileInfo) bool {
	w.writtenMu.Lock()
	defer w.writtenMu.Unlock()
	was, ok := w.placed[p]
	return ok && sameFile(was, fi) && was.Size() == fi.Size() && was.ModTime().Equal(fi.ModTime())
}

// forgetPlaced forgets the file put at p (it was removed).
func (w *worktree) forgetPlaced(p string) {
	w.writtenMu.Lock()
	defer w.writtenMu.Unlock()
	delete(w.placed, p)
}

// takeAside reads a file moved aside (with lstat data fi, nil when not
// known) and removes it (or keeps it as a spare: recycle). file is false
// when it was not a regular file (a symlink or folder: no memory file).
// A program that still holds it open for writing (it opened the file
// before it was moved aside: a write of a whole file is an open with
// O_TRUNC, then writes) is waited for, up to writerWait, so that what is
// read is its whole write; past that the file is left where it is and
// the error is errWriting. On a read error it stays where it is too.
func (w *worktree) takeAside(aside string, fi fs.FileInfo) (data []byte, file bool, err error) {
	if fi == nil {
		if fi, err = w.lstat(aside); err != nil {
			return nil, false, err
		}
	}
	if !fi.Mode().IsRegular() {
		return nil, false, w.root.RemoveAll(aside)
	}
	f, err := w.openFile(aside, asideFlags)
	if leased(err) {
		return nil, false, errWriting // another program's lease: left where it is, that program's
	}
	if err != nil { // not writable (a mode set by hand): read, not reused
		if data, err = w.readWritten(aside); err != nil {
			return nil, false, err
		}
		w.root.Remove(aside)
		return data, true, nil
	}
	ofi, err := f.Stat()
	if err == nil && !sameFile(fi, ofi) {
		err = fmt.Errorf("%s changed while it was read", aside)
	}
	if err != nil {
		f.Close()
		return nil, false, err
	}
	// Nobody else holds it open (the common case): read it so held.
	release, alone := holdAlone(f)
	if !alone {
		f.Close() // its own write access would make it a writer too
		if data, err = w.readWritten(aside); err != nil {
			return nil, false, err
		}
		w.root.Remove(aside)
		return data, true, nil
	}
	data, err = io.ReadAll(f)
	release()
	if err != nil {
		f.Close()
		return nil, false, err
	}
	w.recycle(aside, f, ofi, true)
	return data, true, nil
}

// readWritten reads the file at p (one taken aside, or one about to be
// replaced) that another program may hold open: once no program holds
// it open for writing (readSettled), waiting up to writerWait; errWriting
// past that.
func (w *worktree) readWritten(p string) (data []byte, err error) {
	if w.writerStays(p, func() (busy bool) {
		data, busy, err = w.readSettled(p, 0)
		return busy
	}) {
		return nil, errWriting
	}
	return data, err
}

// writerStays reports whether a program holds the file at p open for
// writing still after writerWait: busy looks, every writerPoll, until it
// finds none. Each look comes once every child this process is forking
// has exec'd (forksDone).
func (w *worktree) writerStays(p string, busy func() bool) bool {
	deadline := time.Now().Add(writerWait)
	for forksDone(); busy(); forksDone() {
		if time.Now().After(deadline) {
			return true
		}
		w.env.Injected(gd.StepWriterWait, p)
		time.Sleep(writerPoll)
	}
	return false
}

// forksDone waits until every child process this one is forking has
// exec'd. Until its exec a child holds a copy of each of this process's
// descriptors, which a lease takes for another program's: one this
// process closed (a file it wrote, a spare) would look held by a writer,
// for as long as the child waits to run, more than writerWait on a busy
// machine. Go forks holding syscall.ForkLock for writing, on Linux until
// the child's exec (vfork), so a read lock comes after those execs.
func forksDone() {
	syscall.ForkLock.RLock()
	syscall.ForkLock.RUnlock()
}

// writerWait bounds how long a write to a file taken aside is waited for:
// a program writing a whole file takes microseconds; one that holds it
// open longer (an editor, `exec 3>>a.md`) gets its file back (the caller
// puts it back in place).
var (
	writerWait = 100 * time.Millisecond
	writerPoll = time.Millisecond
)

// errWriting says a file taken aside is still open for writing.
var errWriting = errors.New("another program is writing it")
