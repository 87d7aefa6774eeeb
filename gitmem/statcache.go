package gitmem

import (
	"path"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// statCache is the lstat data of the worktree files known to hold a blob
// (their HEAD blob when it was looked at), with the number of them under
// each folder, so that forgetting a path that is no cached file (a new
// file, a rename's target, a deletion) costs a lookup, not a scan of every
// entry: only a folder that holds cached files is scanned for them.
//
// It is part of the worktree mirror. Its methods take its lock; nothing
// else touches its fields.
type statCache struct {
	// mu guards the fields below. A leaf of the lock
	// order: it may be taken with any other lock held (the disk lock in handEdited,
	// the index lock in writeIndexLocked, the writer turn in adoptDrift), and no lock is taken
	// while it is held.
	mu    sync.Mutex
	files map[string]statEntry
	dirs  map[string]int // folder -> cached files at any depth under it
	// read are the files whose entry a read of the file found since
	// .git/index was last written (takeRead): the index lacks them.
	read map[string]statEntry
}

// statEntry says that the file with lstat data st held the blob hash,
// read and hashed (or so .git/index said) when st was not racy.
type statEntry struct {
	st   gd.Stat
	hash plumbing.Hash
}

func newStatCache() *statCache {
	return &statCache{files: map[string]statEntry{}, dirs: map[string]int{}, read: map[string]statEntry{}}
}

// vouches reports whether the cache says that the file at p with lstat
// data st holds blob h.
func (c *statCache) vouches(p string, st gd.Stat, h plumbing.Hash) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.files[p]
	return ok && e.st == st && e.hash == h
}

// hashAt returns the blob the cache says the file at p with lstat data
// st holds.
func (c *statCache) hashAt(p string, st gd.Stat) (plumbing.Hash, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.files[p]
	return e.hash, ok && e.st == st
}

// len is the number of files cached.
func (c *statCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.files)
}

// put caches e for p; read says a read of the file found it (the index
// is to learn it).
func (c *statCache) put(p string, e statEntry, read bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.add(p, e, read)
}

// add is put with mu held.
func (c *statCache) add(p string, e statEntry, read bool) {
	if _, ok := c.files[p]; !ok {
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			c.dirs[d]++
		}
	}
	c.files[p] = e
	if read {
		c.read[p] = e
	}
}

// takeRead returns the entries reads found since it was last called.
func (c *statCache) takeRead() map[string]statEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.read) == 0 {
		return nil
	}
	m := c.read
	c.read = map[string]statEntry{}
	return m
}

// del drops p. Called with mu held.
func (c *statCache) del(p string) {
	if _, ok := c.files[p]; !ok {
		return
	}
	delete(c.files, p)
	delete(c.read, p)
	for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
		if c.dirs[d]--; c.dirs[d] <= 0 {
			delete(c.dirs, d)
		}
	}
}

// clear drops every entry.
func (c *statCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.files)
	clear(c.dirs)
	clear(c.read)
}

// forget drops the files at or under paths. A path that is a cached file
// is dropped alone (nothing can be cached under a file); the cache is
// scanned only for folders that hold cached files.
func (c *statCache) forget(paths []string) {
	if len(paths) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var folders []string
	for _, p := range paths {
		if _, ok := c.files[p]; ok {
			c.del(p) // a file: the common case, no scan
		} else if c.dirs[p] > 0 {
			folders = append(folders, p)
		}
	}
	if len(folders) == 0 {
		return
	}
	var drop []string
	for p := range c.files {
		if under(p, folders) {
			drop = append(drop, p)
		}
	}
	for _, p := range drop {
		c.del(p)
	}
}

// seed caches the entries of .git/index (written at written) that vouch
// for their file: an entry whose blob is tree's and that is not racy
// (changed no earlier than the index was written).
func (c *statCache) seed(entries []gd.IndexEntry, tree *node, written time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range entries {
		if n := lookup(tree, e.Path); n.isFile() && n.hash == e.Hash && !e.Stat.IsZero() && e.Stat.MtimeBefore(written) {
			c.add(e.Path, statEntry{e.Stat, e.Hash}, false)
		}
	}
}
