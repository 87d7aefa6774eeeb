package gitmem

import (
	"path"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// statCache is the lstat data of the worktree files known to hold a blob
// (their HEAD blob when it was looked at), with the number of them under
// each folder, so that forgetting a path that is no cached file (a new
// file, a rename's target, a deletion) costs a lookup, not a scan of every
// entry: only a folder that holds cached files is scanned for them.
type statCache struct {
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

func (c *statCache) get(p string) (statEntry, bool) {
	e, ok := c.files[p]
	return e, ok
}

func (c *statCache) len() int { return len(c.files) }

// put caches e for p; read says a read of the file found it (the index
// is to learn it).
func (c *statCache) put(p string, e statEntry, read bool) {
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
	if len(c.read) == 0 {
		return nil
	}
	m := c.read
	c.read = map[string]statEntry{}
	return m
}

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

func (c *statCache) clear() {
	clear(c.files)
	clear(c.dirs)
	clear(c.read)
}

// forget drops the files at or under paths. A path that is a cached file
// is dropped alone (nothing can be cached under a file); the cache is
// scanned only for folders that hold cached files.
func (c *statCache) forget(paths []string) {
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
