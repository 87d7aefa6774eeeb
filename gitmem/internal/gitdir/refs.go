package gitdir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// ReadHEAD returns the branch HEAD points to (refs/heads/main for a
// gitmem repository; an adopted repository may use another name). A
// detached or unreadable HEAD is a *Damaged.
func ReadHEAD(gitDir string) (plumbing.ReferenceName, error) {
	data, err := ReadFileMax(filepath.Join(gitDir, "HEAD"), RefMax)
	if errors.Is(err, ErrTooBig) {
		return "", &Damaged{Problem: fmt.Sprintf("HEAD is damaged (.git/HEAD is over %d bytes, more than a ref can be)", RefMax),
			Repair: "point it at the memory's branch: git symbolic-ref HEAD refs/heads/main, or run gitmem fsck --repair"}
	}
	if err != nil {
		return "", err
	}
	target, ok := strings.CutPrefix(strings.TrimRight(string(data), "\n"), "ref: ")
	if !ok && plumbing.IsHash(target) {
		// Open takes a HEAD detached at a commit of the branch's history
		// (git checkout COMMIT while gitmem was stopped) itself: one
		// that reaches here is at a commit no branch holds.
		return "", &Damaged{Problem: "HEAD is detached (git checkout of a commit) at " + target[:7] + ", a commit the memory's branch does not hold",
			Repair: "put HEAD and the files back on the memory's branch: git checkout main (gitmem fsck --repair points HEAD alone at main, and the files git checked out are then taken as hand edits)"}
	}
	name := plumbing.ReferenceName(target)
	if !ok || !name.IsBranch() || !ValidRefName(target) {
		return "", &Damaged{Problem: "HEAD does not name a branch (it is detached or damaged)",
			Repair: "point it at the memory's branch: git symbolic-ref HEAD refs/heads/main, or run gitmem fsck --repair"}
	}
	return name, nil
}

// ValidRefName accepts the ref names gitmem reads from files it does not
// own: slash-separated, no "..", no control characters, nothing git's
// check-ref-format forbids that could leave .git.
func ValidRefName(name string) bool {
	if name == "" || strings.Contains(name, "..") || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") ||
		strings.HasSuffix(name, ".lock") || strings.ContainsAny(name, " ~^:?*[\\") {
		return false
	}
	for _, c := range name {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// RefMax is the most a ref's file may hold: a hash, or "ref: " and a
// ref's name, which git keeps within a path's length (4096). A larger
// file is damage, not read.
const RefMax = 4096

// ErrNoRef says a ref exists neither as a file nor in packed-refs.
var ErrNoRef = errors.New("no such ref")

// ReadRef returns the commit a ref names: its file under .git, else its
// line in packed-refs; ErrNoRef if neither has it. A ref file that exists
// but does not hold a hash (empty, cut short, garbage) is an error, never
// "no ref": go-git reads such a file as missing, and gitmem would then
// start a new history over the old one.
func ReadRef(gitDir string, name plumbing.ReferenceName) (plumbing.Hash, error) {
	data, err := ReadFileMax(filepath.Join(gitDir, filepath.FromSlash(string(name))), RefMax)
	switch {
	case errors.Is(err, ErrTooBig):
		return plumbing.ZeroHash, &Damaged{Problem: fmt.Sprintf("the branch %s is damaged (its file is over %d bytes, more than a ref can be)", name, RefMax),
			Repair: "run gitmem fsck --repair to point it at the newest commit, or git update-ref " + string(name) + " <commit>"}
	case err == nil:
		s := strings.TrimRight(string(data), "\n")
		if !plumbing.IsHash(s) || strings.ContainsAny(s, "\n") {
			return plumbing.ZeroHash, &Damaged{Problem: fmt.Sprintf("the branch %s is damaged (its file holds %d bytes that are not a commit hash)", name, len(data)),
				Repair: "run gitmem fsck --repair to point it at the newest commit, or git update-ref " + string(name) + " <commit>"}
		}
		return plumbing.NewHash(s), nil
	case errors.Is(err, ErrNotRegular) || errors.Is(err, syscall.EISDIR):
		return plumbing.ZeroHash, &Damaged{Problem: fmt.Sprintf("the branch %s is damaged (.git/%s is not a file)", name, name),
			Repair: "move .git/" + string(name) + " aside, then run gitmem fsck --repair to point the branch at the newest commit"}
	case !errors.Is(err, fs.ErrNotExist):
		return plumbing.ZeroHash, err
	}
	return packedRef(gitDir, name)
}

// readPackedRefs reads .git/packed-refs, a regular file: anything else (a
// FIFO would hold every open for ever, a folder) is damage.
func readPackedRefs(gitDir string) ([]byte, error) {
	data, err := ReadFile(filepath.Join(gitDir, "packed-refs"))
	if errors.Is(err, ErrNotRegular) || errors.Is(err, syscall.EISDIR) {
		return nil, &Damaged{Problem: "the repository is damaged (.git/packed-refs is not a file)",
			Repair: "move .git/packed-refs aside, then run gitmem fsck --repair to point the branch at the newest commit"}
	}
	return data, err
}

// CheckPackedRefs returns the damage a read of .git/packed-refs meets
// (it is not a regular file: a FIFO, a folder); nil when it is one, or
// there is none, or it cannot be read now.
func CheckPackedRefs(gitDir string) *Damaged {
	_, err := readPackedRefs(gitDir)
	var d *Damaged
	if errors.As(err, &d) {
		return d
	}
	return nil
}

// packedRef finds a ref in .git/packed-refs.
func packedRef(gitDir string, name plumbing.ReferenceName) (plumbing.Hash, error) {
	data, err := readPackedRefs(gitDir)
	if errors.Is(err, fs.ErrNotExist) {
		return plumbing.ZeroHash, ErrNoRef
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if h, n, ok := strings.Cut(line, " "); ok && n == string(name) && plumbing.IsHash(h) {
			return plumbing.NewHash(h), nil
		}
	}
	return plumbing.ZeroHash, ErrNoRef
}

// UpdateRef moves branch from old to new the way git does: create
// "<ref>.lock" exclusively, write and Fsync it, check that the ref still
// holds old, rename the lock over the ref and Fsync the folder. go-git's own
// reference update truncates the ref in place, which a crash can leave
// empty. Readers see the old or the new value, never a partial one.
//
// With durable false nothing is fsynced: the caller makes the ref durable
// later (SyncFS), having made the commit durable by other means.
//
// The wait for a lock file another program holds (LockWait) gives up
// when ctx is done; once it is, the lock is tried once (see linkLock).
func (s *Store) UpdateRef(ctx context.Context, branch plumbing.ReferenceName, old, new plumbing.Hash, durable bool) error {
	tx, err := s.LockRefs(ctx, map[plumbing.ReferenceName][2]plumbing.Hash{branch: {old, new}}, durable)
	if err != nil {
		return err
	}
	return tx.Commit()
}

// RefTx is refs about to move together, as a git ref transaction moves
// them: the lock file of every one is taken, written and checked before
// the first moves, so that a lock another program holds stops them all,
// not half of them.
type RefTx struct {
	durable bool
	refs    []string // the refs' files, each with its "<file>.lock" taken and written
	owns    []string // each lock's second name (writeLock)
	moved   map[plumbing.ReferenceName]plumbing.Hash
}

// Moved is the refs the transaction moves, and where to.
func (tx *RefTx) Moved() map[plumbing.ReferenceName]plumbing.Hash { return tx.moved }

// LockRefs takes the lock file of each ref in moves (name -> old, new),
// in name order as git does, writes the new hash into it (fsynced when
// durable), and checks that the ref still holds old (zero: no ref). On
// any failure it removes the locks it took, and no ref moves: a lock
// another program holds past LockWait, or when ctx is done, is an
// ErrLocked naming it (linkLock).
func (s *Store) LockRefs(ctx context.Context, moves map[plumbing.ReferenceName][2]plumbing.Hash, durable bool) (*RefTx, error) {
	tx := &RefTx{durable: durable, moved: map[plumbing.ReferenceName]plumbing.Hash{}}
	for name, m := range moves {
		tx.moved[name] = m[1]
	}
	for _, name := range slices.Sorted(maps.Keys(moves)) {
		m := moves[name]
		if err := s.Env.Injected(StepRef, string(name)); err != nil {
			tx.Abort()
			return nil, err
		}
		path := filepath.Join(s.Dir, filepath.FromSlash(string(name)))
		if err := mkdirIn(s.Dir, filepath.Dir(path), 0o755); err != nil {
			tx.Abort()
			return nil, err
		}
		own, err := writeLock(ctx, path, []byte(m[1].String()+"\n"), durable, GitFileMode)
		if err != nil {
			tx.Abort()
			return nil, err
		}
		tx.refs, tx.owns = append(tx.refs, path), append(tx.owns, own)
		cur, err := ReadRef(s.Dir, name)
		if errors.Is(err, ErrNoRef) {
			cur, err = plumbing.ZeroHash, nil
		}
		if err == nil && cur != m[0] {
			err = fmt.Errorf("%s moved from %s to %s during the update", name, m[0], cur)
		}
		if err != nil {
			tx.Abort()
			return nil, err
		}
	}
	return tx, nil
}

// Commit moves the refs: each lock renamed over its ref, then (durable)
// their folders fsynced. A rename that fails leaves that ref and the ones
// after it where they were (their locks removed).
func (tx *RefTx) Commit() error {
	defer tx.removeOwns()
	for i, p := range tx.refs {
		if err := os.Rename(p+".lock", p); err != nil {
			tx.refs = tx.refs[i:]
			tx.Abort()
			return err
		}
	}
	if !tx.durable {
		return nil
	}
	dirs := map[string]bool{}
	for _, p := range tx.refs {
		dirs[filepath.Dir(p)] = true
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// Abort removes the locks, moving no ref.
func (tx *RefTx) Abort() {
	for _, p := range tx.refs {
		os.Remove(p + ".lock")
	}
	tx.refs = nil
	tx.removeOwns()
}

func (tx *RefTx) removeOwns() {
	for _, p := range tx.owns {
		os.Remove(p)
	}
	tx.owns = nil
}

// ReplaceLocked replaces the file at path the way git does: "<path>.lock"
// created exclusively, data written and fsynced, check (if any) passed,
// then the lock renamed over path. On failure the lock is removed and path
// is untouched. The folder is not synced.
//
// The wait for a lock file another program holds gives up when ctx is
// done (see linkLock).
func ReplaceLocked(ctx context.Context, path string, data []byte, check func() error) error {
	return replaceLocked(ctx, path, data, true, GitFileMode, check)
}

// ReplaceCache replaces a file that only caches what can be rebuilt, as
// ReplaceLocked does but without the fsync, with the given mode
// (GitFileMode for git's .git/index, OwnFileMode for gitmem's own).
// The wait for a lock file another program holds gives up when ctx is
// done (see linkLock).
func ReplaceCache(ctx context.Context, path string, data []byte, mode os.FileMode) error {
	return replaceLocked(ctx, path, data, false, mode, nil)
}

// OwnFileMode is the mode of gitmem's own files in .git/gitmem (the
// write-ahead log, the history index, the journal, the clean mark,
// index-head, ...): its owner's alone, as .git is (0700).
const OwnFileMode os.FileMode = 0o600

// GitFileMode is the mode of the files gitmem writes that are git's (a
// branch, .git/index), as git makes them.
const GitFileMode os.FileMode = 0o644

// RewriteCache writes data over the file at path, in place (made when
// missing): for a small file that only caches what can be rebuilt, that
// no git command takes a lock of, and that one process at a time writes
// and reads (the writer lock's holder). No lock file and no new file:
// on a file system without a journal each inode made costs more the
// more were freed in the last half minute (ext4's recently_deleted
// scan), and ReplaceCache makes one and frees one per write. Anything
// but a regular file of one link is replaced instead (ReplaceCache): a
// file with another link (a backup's hard-linked copy) so that the other
// stays as it is, a symlink so that its target (anywhere on the host) is
// not written through, a FIFO without waiting for a reader. The file gets
// mode (one an earlier gitmem made 0644 too), or is replaced when it
// cannot.
func RewriteCache(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|openOwnFile, mode)
	if err != nil {
		return ReplaceCache(context.Background(), path, data, mode)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || linkedElsewhere(fi) || fi.Mode().Perm() != mode && f.Chmod(mode) != nil {
		f.Close()
		return ReplaceCache(context.Background(), path, data, mode)
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Truncate(int64(len(data)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func replaceLocked(ctx context.Context, path string, data []byte, durable bool, mode os.FileMode, check func() error) error {
	own, err := writeLock(ctx, path, data, durable, mode)
	if err != nil {
		return err
	}
	defer os.Remove(own)
	if check != nil {
		err = check()
	}
	if err == nil {
		err = os.Rename(path+".lock", path)
	}
	if err != nil {
		os.Remove(path + ".lock")
	}
	return err
}

// writeLock takes "<path>.lock" holding data, fsynced when durable. The
// data is written to a file of the process's own first, own (a name git
// passes over: it ends in ".lock", see ownLockName), which is then linked
// as the lock: the link is made only when no lock is there, as git's
// O_EXCL create, waiting up to LockWait for one another program holds
// (less when ctx is done: linkLock). So the lock file, whole from the start, has a second name while it is
// held, and a lock a killed gitmem left is provably its own
// (ClearOwnLocks). The caller removes own once the lock is renamed or
// removed; the lock, renamed over path, has mode. On failure neither is
// left.
func writeLock(ctx context.Context, path string, data []byte, durable bool, mode os.FileMode) (own string, err error) {
	own = ownLockName(path)
	f, err := os.OpenFile(own, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil && durable {
		err = syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = linkLock(ctx, own, path+".lock")
	}
	if err != nil {
		os.Remove(own)
		return "", err
	}
	return own, nil
}

// ProcTag is in the name of the files this process makes beside git's and
// in .git/gitmem/tmp: its pid, and a random number (a container's
// process has the same pid at every start).
var ProcTag = fmt.Sprintf("%d.%08x", os.Getpid(), rand.Uint32())

var ownLockSeq atomic.Uint64

// ownStart is this process's start time (readProcStart), for the second
// names of its locks.
var ownStart = sync.OnceValues(func() (uint64, bool) { return readProcStart(os.Getpid()) })

// startDigits is how many digits a second name's start time takes.
const startDigits = 20

// ownLockName is the second name of the lock of path this process takes:
// "<path>.gitmem-<pid>.<random>-<start><n>.lock", start this process's
// start time (readProcStart) in startDigits digits, none where it cannot
// be read (no /proc). A process that runs with the pid later, but started
// at another time, is not the owner (ownerGone): pids wrap. In the number
// after the dash, which only makes the name unique, the name is one an
// older gitmem reads as before (by its pid and tag).
func ownLockName(path string) string {
	return fmt.Sprintf("%s.gitmem-%s-%s%d.lock", path, ProcTag, ownStartDigits(), ownLockSeq.Add(1))
}

// ownStartDigits is this process's start time in startDigits digits,
// "" where it cannot be read.
func ownStartDigits() string {
	if t, ok := ownStart(); ok {
		return fmt.Sprintf("%0*d", startDigits, t)
	}
	return ""
}

// ownLockRE parses an ownLockName: the path, the ProcTag, the pid, the
// number after the dash. (Compiled at the first use: every command's
// start-up would pay for it.)
var ownLockRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(.+)\.gitmem-(([0-9]+)\.[0-9a-f]{8})-([0-9]+)\.lock$`)
})

// ownerGone says the process an ownLockRE match names no longer runs:
// none runs with its pid; or it has this process's pid but another
// ProcTag (an earlier process: in a container every start has the same
// pid, and one pid is never two running processes); or the process that
// runs with its pid started at another time than the name records (the
// owner died and the pid was given to another: pids wrap). Where either
// start time is not known (no /proc, a name an older gitmem made) a
// running pid is the owner's.
func (e *Env) ownerGone(m []string) bool {
	pid, err := strconv.Atoi(m[3])
	if err != nil {
		return false
	}
	if pid == os.Getpid() {
		return m[2] != ProcTag
	}
	if processGone(pid) {
		return true
	}
	if len(m[4]) <= startDigits {
		return false
	}
	was, err := strconv.ParseUint(m[4][:startDigits], 10, 64)
	now, ok := e.startOf(pid)
	return err == nil && ok && now != was
}

// HeldByAnother reports whether the lock file of path ("<path>.lock")
// is held, changed less than younger ago, by another program than this
// process: it is no file this process holds (writeLock), which has one
// of this process's ownLockName second names. git's lock files have no
// second name.
func HeldByAnother(path string, younger time.Duration) bool {
	return heldByAnother(path, younger, filepath.Glob)
}

// heldByAnother is HeldByAnother listing the second names with glob.
// The lock file is looked at again after its second names: one this
// process released meanwhile (renamed into place, then its second name
// removed) is found with no second name, and is no other program's. A
// lock file that is the same file at both looks had its second name
// throughout, if it is this process's (writeLock makes it first, the
// release removes it last).
func heldByAnother(path string, younger time.Duration, glob func(string) ([]string, error)) bool {
	lock, err := os.Lstat(path + ".lock")
	for {
		if err != nil || time.Since(lock.ModTime()) >= younger {
			return false
		}
		owns, _ := glob(path + ".gitmem-" + ProcTag + "-*.lock")
		for _, o := range owns {
			if fi, err := os.Lstat(o); err == nil && os.SameFile(fi, lock) {
				return false
			}
		}
		again, err2 := os.Lstat(path + ".lock")
		if err2 == nil && os.SameFile(again, lock) {
			return true
		}
		lock, err = again, err2
	}
}

// ListNames returns the names in dir (none when it cannot be read), for
// the sweeps of a writer's start to share: each folder they look in is
// listed once (counted in env's DirListings).
func ListNames(env *Env, dir string) []string {
	env.count(func(e *Env) *atomic.Int64 { return &e.dirListings })
	return listNames(dir)
}

// MatchNames returns the paths in dir of names (a listing of dir) that
// match one of patterns (filepath.Match patterns without a separator).
func MatchNames(dir string, names []string, patterns ...string) []string {
	var out []string
	for _, n := range names {
		for _, p := range patterns {
			if ok, _ := filepath.Match(p, n); ok {
				out = append(out, filepath.Join(dir, n))
				break
			}
		}
	}
	return out
}

// ClearOwnLocks removes the lock files a killed gitmem left in gitDir
// (its top folder, refs/, gitmem/ and objects/: maintenance.lock), and
// their second names: a lock that is one file with an ownLockName of a
// process that no longer runs (processGone) is that process's, however
// old. top, own and objs are listings of gitDir, gitDir/gitmem and
// gitDir/objects (ListNames), which the caller shares with its other
// sweeps. It returns the locks removed, relative to gitDir. Any other
// lock file is left as it is.
func ClearOwnLocks(env *Env, gitDir string, top, own, objs []string) []string {
	owns := MatchNames(gitDir, top, "*.gitmem-*.lock")
	owns = append(owns, MatchNames(filepath.Join(gitDir, "gitmem"), own, "*.gitmem-*.lock")...)
	owns = append(owns, MatchNames(filepath.Join(gitDir, "objects"), objs, "*.gitmem-*.lock")...)
	filepath.WalkDir(filepath.Join(gitDir, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && ownLockRE().MatchString(d.Name()) {
			owns = append(owns, p)
		}
		return nil
	})
	var removed []string
	for _, own := range owns {
		m := ownLockRE().FindStringSubmatch(own)
		if m == nil {
			continue
		}
		if !env.ownerGone(m) {
			continue
		}
		lock := m[1] + ".lock"
		ofi, err1 := os.Lstat(own)
		lfi, err2 := os.Lstat(lock)
		if err1 == nil && err2 == nil && os.SameFile(ofi, lfi) && os.Remove(lock) == nil {
			rel, _ := filepath.Rel(gitDir, lock)
			removed = append(removed, filepath.ToSlash(rel))
		}
		os.Remove(own)
	}
	return removed
}

// LockWait is how long gitmem waits for a git lock file another program
// holds before the step fails with ErrLocked. git holds one for
// milliseconds as a rule, but for longer at times: git gc holds a ref's
// while it expires the ref's reflog, git commit holds .git/index.lock
// while the editor is open.
const LockWait = 5 * time.Second

// ErrLocked says a git lock file stayed held past LockWait. gitmem never
// removes a lock file it did not take: a lock's age (its mtime) tells
// nothing of whether the git command holding it still runs, and removing
// a live one lets two writers write the same file. A lock left by a git
// command that was killed stays until the operator deletes it, as git
// itself asks.
var ErrLocked = errors.New("another program holds it (a git command still running, or one that was killed: if no git command runs, delete the file)")

// StaleLock is how long gitmem takes a held .git/index.lock for a git
// command writing the worktree (git reset --hard): a younger one makes an
// adopt wait (see gitmem's gitBusy). It is not a rule to remove locks.
const StaleLock = 2 * time.Second

// RemoveLock removes the lock file lock, one that a gitmem took (that a
// redaction's record names, say), and its second names.
func RemoveLock(lock string) {
	if fi, err := os.Lstat(lock); err == nil {
		m, _ := filepath.Glob(strings.TrimSuffix(lock, ".lock") + ".gitmem-*.lock")
		for _, own := range m {
			if ofi, err := os.Lstat(own); err == nil && os.SameFile(fi, ofi) {
				os.Remove(own)
			}
		}
	}
	os.Remove(lock)
}

// linkLock links own as the git lock file lock, made only when no lock
// is there, waiting up to LockWait for another program to release it,
// or until ctx is done: then the error is an *fs.PathError whose Err is
// ErrLocked. With ctx done the lock is tried once and not waited for:
// the repository is closing (its lifetime cancelled), and Close does
// not wait on another process; a wait under way ends with it, rather
// than hold the disk lock Close's own steps wait for.
func linkLock(ctx context.Context, own, lock string) error {
	deadline := time.Now().Add(LockWait)
	for {
		err := os.Link(own, lock)
		if err == nil || !errors.Is(err, os.ErrExist) {
			return err
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return &fs.PathError{Op: "lock", Path: lock, Err: ErrLocked}
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done(): // tried once more, then given up
		case <-t.C:
		}
		t.Stop()
	}
}

// ListRefs returns every ref under refs/ that names an object: loose ref
// files (a lock file is another writer's, not a ref) over packed-refs.
// The loose files are read first, as git reads them: git pack-refs writes
// a ref into packed-refs before it deletes its file, so a ref packed
// meanwhile is found in packed-refs, never missed. go-git's listing reads
// lock files too, and fails on one being written ("ref file is empty":
// git gc holds refs/heads/main.lock while it expires the reflog).
func ListRefs(gitDir string) (map[plumbing.ReferenceName]plumbing.Hash, error) {
	return ListRefsUnder(gitDir, "refs/")
}

// ListRefsUnder is ListRefs of the refs whose names begin with prefix (a
// folder of refs/, ending in '/'): only that folder is read, and the
// packed refs under it.
func ListRefsUnder(gitDir, prefix string) (map[plumbing.ReferenceName]plumbing.Hash, error) {
	out := map[plumbing.ReferenceName]plumbing.Hash{}
	root := filepath.Join(gitDir, filepath.FromSlash(prefix))
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a ref folder removed meanwhile
			}
			return err
		}
		if d.IsDir() || strings.HasSuffix(p, ".lock") {
			return nil
		}
		rel, _ := filepath.Rel(gitDir, p)
		name := filepath.ToSlash(rel)
		if !ValidRefName(name) {
			return nil
		}
		data, err := ReadFileMax(p, RefMax)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrTooBig) || errors.Is(err, ErrNotRegular) {
			return nil // no ref (nor read whole, nor waited on)
		}
		if err != nil {
			return err
		}
		if s := strings.TrimSpace(string(data)); plumbing.IsHash(s) {
			out[plumbing.ReferenceName(name)] = plumbing.NewHash(s)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	data, err := readPackedRefs(gitDir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if h, n, ok := strings.Cut(line, " "); ok && plumbing.IsHash(h) && ValidRefName(n) && strings.HasPrefix(n, "refs/") && strings.HasPrefix(n, prefix) {
			if _, loose := out[plumbing.ReferenceName(n)]; !loose {
				out[plumbing.ReferenceName(n)] = plumbing.NewHash(h)
			}
		}
	}
	return out, nil
}

// ListTips is ListRefs and HEAD when it names a commit itself (detached):
// every ref what git's gc keeps is reached from.
func ListTips(gitDir string) (map[plumbing.ReferenceName]plumbing.Hash, error) {
	out, err := ListRefs(gitDir)
	if err != nil {
		return nil, err
	}
	if data, err := ReadFileMax(filepath.Join(gitDir, "HEAD"), RefMax); err == nil {
		if s := strings.TrimSpace(string(data)); plumbing.IsHash(s) {
			out[plumbing.HEAD] = plumbing.NewHash(s)
		}
	}
	return out, nil
}
