package gitmem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// branch returns the branch HEAD points to (refs/heads/main for a gitmem
// repository; an adopted repository may use another name).
func (o *objects) branch() (plumbing.ReferenceName, error) {
	ref, err := o.st.Reference(plumbing.HEAD)
	if err != nil {
		return "", err
	}
	if ref.Type() != plumbing.SymbolicReference {
		return "", errors.New("HEAD is detached")
	}
	return ref.Target(), nil
}

// head returns the commit the branch points to; zero before the first commit.
func (o *objects) head(branch plumbing.ReferenceName) (plumbing.Hash, error) {
	ref, err := o.st.Reference(branch)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return ref.Hash(), nil
}

// updateRef moves branch from old to new the way git does: create
// "<ref>.lock" exclusively, write and fsync it, check that the ref still
// holds old, rename the lock over the ref and fsync the folder. go-git's own
// reference update truncates the ref in place, which a crash can leave
// empty. Readers see the old or the new value, never a partial one.
func (o *objects) updateRef(branch plumbing.ReferenceName, old, new plumbing.Hash) error {
	path := filepath.Join(o.gitDir, filepath.FromSlash(string(branch)))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	err := replaceLocked(path, []byte(new.String()+"\n"), func() error {
		cur, err := o.head(branch)
		if err == nil && cur != old {
			err = fmt.Errorf("%s moved from %s to %s during the update", branch, old, cur)
		}
		return err
	})
	if err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// replaceLocked replaces the file at path the way git does: "<path>.lock"
// created exclusively, data written and fsynced, check (if any) passed,
// then the lock renamed over path. On failure the lock is removed and path
// is untouched. The folder is not synced.
func replaceLocked(path string, data []byte, check func() error) error {
	lock := path + ".lock"
	f, err := openLockFile(lock)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = fsync(f)
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

// staleLock is how old a git lock file must be to count as abandoned: git
// holds one for milliseconds, and gitmem takes them only under its own
// writer lock.
const staleLock = 2 * time.Second

// openLockFile creates a git lock file exclusively, waiting a little for a
// concurrent git process to release it. A lock left by a killed process
// (older than staleLock) is removed once.
func openLockFile(path string) (*os.File, error) {
	deadline := time.Now().Add(staleLock + 500*time.Millisecond)
	removed := false
	for {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil || !errors.Is(err, os.ErrExist) {
			return f, err
		}
		if fi, serr := os.Stat(path); serr == nil && !removed && time.Since(fi.ModTime()) > staleLock {
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
