package gitmem

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"sync"
	"testing"

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
