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
	lock := path + ".lock"
	f, err := openLockFile(lock)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			os.Remove(lock)
		}
	}()
	_, err = f.WriteString(new.String() + "\n")
	if err == nil {
		err = fsync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	cur, err := o.head(branch)
	if err != nil {
		return err
	}
	if cur != old {
		return fmt.Errorf("%s moved from %s to %s during the update", branch, old, cur)
	}
	if err := os.Rename(lock, path); err != nil {
		return err
	}
	committed = true
	return syncDir(filepath.Dir(path))
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
