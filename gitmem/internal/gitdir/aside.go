package gitdir

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
)

// A folder built aside is one this process fills under a temporary name
// (NewTempPrefix) and renames into place once complete: a new repository
// (gitmem.Create). Nothing written under it needs to be durable step by
// step, since what a crash leaves of it is a temporary folder that a
// later ClearNewTemps removes, never part of it in place: while it is
// built the syncs of the files and folders in it (syncFile, syncData,
// SyncDir, SyncFS) do nothing, and the builder makes the whole tree
// durable at once (SyncTree) before the rename.
var aside struct {
	n     atomic.Int32 // len(roots): no lock taken while nothing is built aside
	mu    sync.RWMutex
	roots map[string]bool
}

// BuildAside marks the folder root as built aside until done is called
// (before it is renamed into place, or removed).
func BuildAside(root string) (done func()) {
	root = filepath.Clean(root)
	aside.mu.Lock()
	if aside.roots == nil {
		aside.roots = map[string]bool{}
	}
	aside.roots[root] = true
	aside.n.Store(int32(len(aside.roots)))
	aside.mu.Unlock()
	return func() {
		aside.mu.Lock()
		delete(aside.roots, root)
		aside.n.Store(int32(len(aside.roots)))
		aside.mu.Unlock()
	}
}

// isAside reports whether path is in a folder built aside (or is one).
func isAside(path string) bool {
	if aside.n.Load() == 0 {
		return false
	}
	path = filepath.Clean(path)
	aside.mu.RLock()
	defer aside.mu.RUnlock()
	for root := range aside.roots {
		if path == root || strings.HasPrefix(path, root+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// syncFile is Fsync, but nothing in a folder built aside.
func syncFile(f *os.File) error {
	if isAside(f.Name()) {
		return nil
	}
	return Fsync(f)
}

// syncData is Fdatasync, but nothing in a folder built aside; env's
// hook (SetDataSync) sees each.
func syncData(env *Env, f *os.File) error {
	if isAside(f.Name()) {
		return nil
	}
	if env != nil {
		if h := env.dataSync.Load(); h != nil {
			(*h)(f.Name())
		}
	}
	return Fdatasync(f)
}

// SyncFS makes what was written in dir durable (syncFS: paths are what
// was written there, files and folders, which only some systems need),
// but nothing in a folder built aside.
func SyncFS(env *Env, dir string, paths []string) error {
	if isAside(dir) {
		return nil
	}
	if err := env.Injected(StepSync, dir); err != nil {
		return err
	}
	return syncFS(dir, paths)
}

// SyncTree makes every file and folder in root (a folder built aside,
// about to be renamed into place) durable: one syncfs(2) on Linux, each
// of them synced elsewhere (SyncFS takes the paths there).
func SyncTree(env *Env, root string) error {
	var paths []string
	if runtime.GOOS != "linux" {
		err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			paths = append(paths, p)
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := env.Injected(StepSync, "tree"); err != nil {
		return err
	}
	return syncFS(root, paths)
}
