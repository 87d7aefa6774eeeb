package gitmem

import (
	"path"
	"slices"
	"strings"
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
	// index is .git/index as start read it (seed): its entries, sorted
	// by path, HEAD's tree then and when the index was written. An entry
	// is taken into files at the first look at its path (entry), not all
	// at start: a command that looks at a few files (a revert) does not
	// cache 10,000. taken are the paths looked at or forgotten since,
	// whose entry there says nothing more. A folder forgotten takes every
	// entry left first (takeAll).
	index   []gd.IndexEntry
	tree    *node
	written time.Time
	taken   map[string]bool
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
	e, ok := c.entry(p)
	return ok && e.st == st && e.hash == h
}

// entry is the cached entry of p, taking .git/index's (see index) at
// the first look. Called with mu held.
func (c *statCache) entry(p string) (statEntry, bool) {
	if e, ok := c.files[p]; ok || c.index == nil || c.taken[p] {
		return e, ok
	}
	c.taken[p] = true
	if i, ok := slices.BinarySearchFunc(c.index, p, byPath); ok {
		c.take(c.index[i])
	}
	e, ok := c.files[p]
	return e, ok
}

// take caches the index entry e when it vouches for its file: its blob
// is the tree's and it is not racy (changed no earlier than the index
// was written). Called with mu held.
func (c *statCache) take(e gd.IndexEntry) {
	if c.vouchedBy(e) {
		c.add(e.Path, statEntry{e.Stat, e.Hash}, false)
	}
}

// vouchedBy reports whether the index entry e vouches for its file: its
// blob is the tree's and it is not racy. Called with mu held.
func (c *statCache) vouchedBy(e gd.IndexEntry) bool { return c.nodeVouched(lookup(c.tree, e.Path), e) }

// nodeVouched reports whether e vouches for its file, n being the tree's node
// at its path (nil: none).
func (c *statCache) nodeVouched(n *node, e gd.IndexEntry) bool {
	return n.isFile() && n.hash == e.Hash && !e.Stat.IsZero() && e.Stat.MtimeBefore(c.written)
}

// takeAll takes every index entry not looked at yet, and forgets the
// index. Called with mu held.
func (c *statCache) takeAll() {
	index, tree, taken := c.index, c.tree, c.taken
	c.index, c.tree, c.taken = nil, nil, nil // so add notes nothing as taken
	if len(c.files) == 0 {
		c.files = make(map[string]statEntry, len(index))
	}
	// The entries are sorted by path: a folder's files come one after the
	// other (but for its subfolders'), so the folder is looked up in the
	// tree once for them.
	var dir string
	var folder *node
	looked := false // folder is dir's
	for i := range index {
		e := &index[i]
		if taken[e.Path] {
			continue
		}
		d, name := "", e.Path
		if j := strings.LastIndexByte(e.Path, '/'); j >= 0 {
			d, name = e.Path[:j], e.Path[j+1:]
		}
		if !looked || d != dir {
			dir, folder, looked = d, lookup(tree, d), true
		}
		var n *node
		if folder.isDir() {
			n = folder.kid(name)
		}
		if c.nodeVouched(n, *e) {
			c.add(e.Path, statEntry{e.Stat, e.Hash}, false)
		}
	}
}

// takeRest is takeAll, taking mu.
func (c *statCache) takeRest() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.takeAll()
}

// hashAt returns the blob the cache says the file at p with lstat data
// st holds.
func (c *statCache) hashAt(p string, st gd.Stat) (plumbing.Hash, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entry(p)
	return e.hash, ok && e.st == st
}

// len is the number of files cached (not counting the index's entries
// not looked at yet).
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
	if c.index != nil {
		c.taken[p] = true // what the index says of p is history
	}
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
	c.index, c.tree, c.taken = nil, nil, nil
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
	if c.index != nil {
		for _, p := range paths {
			if c.taken[p] {
				continue
			}
			// Past p+"/" (not p: "d-x.md" sorts between "d" and "d/...").
			if i, _ := slices.BinarySearchFunc(c.index, p+"/", byPath); i < len(c.index) && strings.HasPrefix(c.index[i].Path, p+"/") {
				c.takeAll() // a folder of the index: its files are dropped below
				break
			}
			c.taken[p] = true
		}
	}
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

// seed gives the cache the entries of .git/index (written at written),
// each taken at the first look at its path (entry): one whose blob is
// tree's and that is not racy (changed no earlier than the index was
// written) vouches for its file. entries are sorted by path, as in the
// file.
func (c *statCache) seed(entries []gd.IndexEntry, tree *node, written time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.index, c.tree, c.written, c.taken = entries, tree, written, map[string]bool{}
}
