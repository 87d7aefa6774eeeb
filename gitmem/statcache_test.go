package gitmem

import (
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// TestStatCacheForgetsAsAScanWould checks the stat cache's per-folder
// counts against forgetting by a scan of every entry (what forgetStats
// did): the same files are dropped, for files, folders, new paths, and
// names that share a prefix without being under the folder.
func TestStatCacheForgetsAsAScanWould(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	c := newStatCache()
	naive := map[string]statEntry{}
	names := []string{"memories/a", "memories/a/b", "memories/ab", "memories/a/b/c", "memories/a/bc", "memories/d", "memories/d/e", "memories"}
	pick := func() string {
		p := names[rng.IntN(len(names))]
		if rng.IntN(2) == 0 {
			p += fmt.Sprintf("/f%d.md", rng.IntN(3))
		}
		return p
	}
	for i := range 5000 {
		if rng.IntN(3) > 0 {
			p := pick()
			e := statEntry{}
			c.put(p, e, rng.IntN(2) == 0)
			naive[p] = e
			continue
		}
		paths := []string{pick()}
		if rng.IntN(2) == 0 {
			paths = append(paths, pick())
		}
		c.forget(paths)
		var folders []string
		for _, p := range paths {
			if _, ok := naive[p]; ok {
				delete(naive, p)
			} else {
				folders = append(folders, p)
			}
		}
		maps.DeleteFunc(naive, func(p string, _ statEntry) bool { return len(folders) > 0 && under(p, folders) })
		if !maps.Equal(c.files, naive) {
			t.Fatalf("step %d: forget %q left %v, a scan leaves %v", i, paths, slices.Sorted(maps.Keys(c.files)), slices.Sorted(maps.Keys(naive)))
		}
		for p := range c.read { // what the index is to learn is of files still cached
			if _, ok := c.files[p]; !ok {
				t.Fatalf("step %d: %s forgotten but still to go into the index", i, p)
			}
		}
		// The counts are those of the files left.
		want := map[string]int{}
		for p := range naive {
			for d := path.Dir(p); d != "."; d = path.Dir(d) {
				want[d]++
			}
		}
		if !maps.Equal(c.dirs, want) {
			t.Fatalf("step %d: folder counts %v, want %v", i, c.dirs, want)
		}
	}
}

// The stat cache and the repair state take their own locks: the
// materialiser, an adopt, the index writer and a redaction call them at
// once, holding no lock of theirs (run with -race). What is left is what
// a serial run leaves.
func TestMirrorStateIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	c, rp := newStatCache(), newRepairs()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				p := fmt.Sprintf("memories/g%d/f%d.md", g, i%10)
				c.put(p, statEntry{}, i%2 == 0)
				c.vouches(p, gd.Stat{}, plumbing.ZeroHash)
				c.takeRead()
				c.forget([]string{fmt.Sprintf("memories/g%d", g)})
				q := &prepared{paths: []string{p}}
				rp.inFlight(q)
				rp.pendingFor([]string{"memories"})
				rp.noteBase(p, handBase{})
				rp.baseOf(p)
				rp.dropBases(p)
				rp.droppedPaths([]*prepared{q})
			}
		}()
	}
	wg.Wait()
	if n := c.len(); n != 0 {
		t.Errorf("the stat cache holds %d files, want none", n)
	}
	if s := rp.pendingFor([]string{"memories"}); len(s) != 0 || rp.handKept() {
		t.Errorf("repairs hold %v in flight, hand edits kept %v; want nothing", s, rp.handKept())
	}
}

// fakeStat is lstat data of a given size and modification time.
type fakeStat struct {
	size  int64
	mtime time.Time
}

func (s fakeStat) Name() string       { return "f" }
func (s fakeStat) Size() int64        { return s.size }
func (s fakeStat) Mode() fs.FileMode  { return 0o600 }
func (s fakeStat) ModTime() time.Time { return s.mtime }
func (s fakeStat) IsDir() bool        { return false }
func (s fakeStat) Sys() any           { return nil }

// A cache seeded from .git/index takes each entry at the first look at
// its path: whatever is put and forgotten meanwhile (files, folders, new
// paths, names sharing a prefix with a folder), what it says of a file
// is what a cache that took every entry at once says.
func TestStatCacheSeedIsAsEagerAsItLooks(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	written := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var files []string
	for _, d := range []string{"memories/a", "memories/a/b", "memories/a-x", "memories/ab", "memories/d"} {
		for i := range 3 {
			files = append(files, fmt.Sprintf("%s/f%d.md", d, i))
		}
	}
	files = append(files, "memories/a.md", "memories/top.md")
	statOf := func(i int) gd.Stat {
		return gd.StatOf(fakeStat{int64(i), written.Add(-time.Duration(rng.IntN(3)-1) * time.Second)})
	}
	for round := range 200 {
		var root *node
		var entries []gd.IndexEntry
		for i, p := range files {
			h := plumbing.ComputeHash(plumbing.BlobObject, []byte(p))
			var err error
			if root, err = with(root, split(p), &node{mode: 0o100644, hash: h}); err != nil {
				t.Fatal(err)
			}
			switch rng.IntN(4) {
			case 0: // not vouched for
				entries = append(entries, gd.IndexEntry{Path: p, Hash: h})
			case 1: // another blob
				entries = append(entries, gd.IndexEntry{Path: p, Hash: plumbing.ComputeHash(plumbing.BlobObject, nil), Stat: statOf(i)})
			default: // racy or not
				entries = append(entries, gd.IndexEntry{Path: p, Hash: h, Stat: statOf(i)})
			}
		}
		slices.SortFunc(entries, inIndexOrder)
		lazy, eager := newStatCache(), newStatCache()
		lazy.seed(entries, root, written)
		eager.seed(entries, root, written)
		eager.mu.Lock()
		eager.takeAll()
		eager.mu.Unlock()
		look := func(step int, p string) {
			for _, e := range entries {
				if e.Path == p {
					if a, b := lazy.vouches(p, e.Stat, e.Hash), eager.vouches(p, e.Stat, e.Hash); a != b {
						t.Fatalf("round %d step %d: %s vouched for %v, taken at once %v", round, step, p, a, b)
					}
				}
			}
			ha, oka := lazy.hashAt(p, gd.Stat{})
			hb, okb := eager.hashAt(p, gd.Stat{})
			if ha != hb || oka != okb {
				t.Fatalf("round %d step %d: %s hashAt %v %v, taken at once %v %v", round, step, p, ha, oka, hb, okb)
			}
		}
		pick := func() string {
			switch rng.IntN(4) {
			case 0:
				return path.Dir(files[rng.IntN(len(files))]) // a folder
			case 1:
				return "memories/new.md"
			}
			return files[rng.IntN(len(files))]
		}
		for step := range 20 {
			switch rng.IntN(3) {
			case 0:
				p, e := files[rng.IntN(len(files))], statEntry{statOf(99), plumbing.ComputeHash(plumbing.BlobObject, []byte("put"))}
				lazy.put(p, e, false)
				eager.put(p, e, false)
			case 1:
				paths := []string{pick()}
				lazy.forget(paths)
				eager.forget(paths)
			}
			look(step, files[rng.IntN(len(files))])
		}
		for _, p := range files {
			look(-1, p)
		}
		if !maps.Equal(lazy.files, eager.files) || !maps.Equal(lazy.dirs, eager.dirs) {
			t.Fatalf("round %d: looked at every file, the caches differ:\n%v\n%v", round, lazy.files, eager.files)
		}
	}
}

// The entries left when the first were looked at already are all taken
// at once (takeAll), files at the repository's top included.
func TestStatCacheTakesTheRestAfterTheFirstWereLookedAt(t *testing.T) {
	t.Parallel()
	written := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var root *node
	var entries []gd.IndexEntry
	for i, p := range []string{"a.md", "b.md", "memories/c.md"} {
		h := plumbing.ComputeHash(plumbing.BlobObject, []byte(p))
		var err error
		if root, err = with(root, split(p), &node{mode: 0o100644, hash: h}); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, gd.IndexEntry{Path: p, Hash: h, Stat: gd.StatOf(fakeStat{int64(i), written.Add(-time.Second)})})
	}
	c := newStatCache()
	c.seed(entries, root, written)
	if !c.vouches("a.md", entries[0].Stat, entries[0].Hash) { // taken at its look
		t.Fatal("a.md not vouched for at its look")
	}
	c.takeRest()
	for _, e := range entries[1:] {
		if !c.vouches(e.Path, e.Stat, e.Hash) {
			t.Errorf("%s not vouched for after the rest was taken", e.Path)
		}
	}
}
