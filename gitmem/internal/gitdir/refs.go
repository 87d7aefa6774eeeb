package gitdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// ReadHEAD returns the branch HEAD points to (refs/heads/main for a
// gitmem repository; an adopted repository may use another name). A
// detached or unreadable HEAD is a *Damaged.
func ReadHEAD(gitDir string) (plumbing.ReferenceName, error) {
	data, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return "", err
	}
	target, ok := strings.CutPrefix(strings.TrimRight(string(data), "\n"), "ref: ")
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

// ErrNoRef says a ref exists neither as a file nor in packed-refs.
var ErrNoRef = errors.New("no such ref")

// ReadRef returns the commit a ref names: its file under .git, else its
// line in packed-refs; ErrNoRef if neither has it. A ref file that exists
// but does not hold a hash (empty, cut short, garbage) is an error, never
// "no ref": go-git reads such a file as missing, and gitmem would then
// start a new history over the old one.
func ReadRef(gitDir string, name plumbing.ReferenceName) (plumbing.Hash, error) {
	data, err := os.ReadFile(filepath.Join(gitDir, filepath.FromSlash(string(name))))
	switch {
	case err == nil:
		s := strings.TrimRight(string(data), "\n")
		if !plumbing.IsHash(s) || strings.ContainsAny(s, "\n") {
			return plumbing.ZeroHash, &Damaged{Problem: fmt.Sprintf("the branch %s is damaged (its file holds %d bytes that are not a commit hash)", name, len(data)),
				Repair: "run gitmem fsck --repair to point it at the newest commit, or git update-ref " + string(name) + " <commit>"}
		}
		return plumbing.NewHash(s), nil
	case !errors.Is(err, fs.ErrNotExist):
		return plumbing.ZeroHash, err
	}
	return packedRef(gitDir, name)
}

// packedRef finds a ref in .git/packed-refs.
func packedRef(gitDir string, name plumbing.ReferenceName) (plumbing.Hash, error) {
	data, err := os.ReadFile(filepath.Join(gitDir, "packed-refs"))
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

// updateRef moves branch from old to new the way git does: create
// "<ref>.lock" exclusively, write and Fsync it, check that the ref still
// holds old, rename the lock over the ref and Fsync the folder. go-git's own
// reference update truncates the ref in place, which a crash can leave
// empty. Readers see the old or the new value, never a partial one.
//
// With durable false nothing is fsynced: the caller makes the ref durable
// later (SyncFS), having made the commit durable by other means.
func (s *Store) UpdateRef(branch plumbing.ReferenceName, old, new plumbing.Hash, durable bool) error {
	if err := Injected(StepRef, string(branch)); err != nil {
		return err
	}
	path := filepath.Join(s.Dir, filepath.FromSlash(string(branch)))
	if err := mkdirIn(s.Dir, filepath.Dir(path), 0o755); err != nil {
		return err
	}
	err := replaceLocked(path, []byte(new.String()+"\n"), durable, func() error {
		cur, err := ReadRef(s.Dir, branch)
		if errors.Is(err, ErrNoRef) {
			cur, err = plumbing.ZeroHash, nil
		}
		if err == nil && cur != old {
			err = fmt.Errorf("%s moved from %s to %s during the update", branch, old, cur)
		}
		return err
	})
	if err != nil || !durable {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// ReplaceLocked replaces the file at path the way git does: "<path>.lock"
// created exclusively, data written and fsynced, check (if any) passed,
// then the lock renamed over path. On failure the lock is removed and path
// is untouched. The folder is not synced.
func ReplaceLocked(path string, data []byte, check func() error) error {
	return replaceLocked(path, data, true, check)
}

// ReplaceCache replaces a file that only caches what can be rebuilt, as
// ReplaceLocked does but without the fsync.
func ReplaceCache(path string, data []byte) error {
	return replaceLocked(path, data, false, nil)
}

func replaceLocked(path string, data []byte, durable bool, check func() error) error {
	lock := path + ".lock"
	f, err := openLockFile(lock)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && durable {
		err = Fsync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && check != nil {
		err = check()
	}
	if err == nil {
		err = os.Rename(lock, path)
	}
	if err != nil {
		os.Remove(lock)
	}
	return err
}

// StaleLock is how old a git lock file must be to count as abandoned: git
// holds one for milliseconds, and gitmem takes them only under its own
// writer lock.
const StaleLock = 2 * time.Second

// openLockFile creates a git lock file exclusively, waiting a little for a
// concurrent git process to release it. A lock left by a killed process
// (older than StaleLock) is removed once.
func openLockFile(path string) (*os.File, error) {
	deadline := time.Now().Add(StaleLock + 500*time.Millisecond)
	removed := false
	for {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil || !errors.Is(err, os.ErrExist) {
			return f, err
		}
		if fi, serr := os.Stat(path); serr == nil && !removed && time.Since(fi.ModTime()) > StaleLock {
			os.Remove(path)
			removed = true
			continue
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(10 * time.Millisecond)
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
	out := map[plumbing.ReferenceName]plumbing.Hash{}
	root := filepath.Join(gitDir, "refs")
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
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
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
	data, err := os.ReadFile(filepath.Join(gitDir, "packed-refs"))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if h, n, ok := strings.Cut(line, " "); ok && plumbing.IsHash(h) && ValidRefName(n) && strings.HasPrefix(n, "refs/") {
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
	if data, err := os.ReadFile(filepath.Join(gitDir, "HEAD")); err == nil {
		if s := strings.TrimSpace(string(data)); plumbing.IsHash(s) {
			out[plumbing.HEAD] = plumbing.NewHash(s)
		}
	}
	return out, nil
}
