package gitdir

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// Objects in a pack git wrote with deltas (OFS_DELTA, and REF_DELTA in a
// thin-pack style repack) read back byte for byte, with their sizes.
func TestReadDeltifiedPacks(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
	dir := gittest.TempDir(t)
	git := func(args ...string) string {
		t.Helper()
		return gittest.Git(t, dir, args...)
	}
	git("init", "-q", "-b", "main")
	var text strings.Builder
	var versions []map[string]string
	for i := range 60 {
		fmt.Fprintf(&text, "line %d of a file that changes a little at each commit\n", i)
		versions = append(versions, map[string]string{"f.md": text.String(), fmt.Sprintf("g%d.md", i%7): strings.Repeat(fmt.Sprint(i), 300)})
	}
	importHistory(t, dir, versions)
	git("repack", "-adf", "--depth=50", "--window=50")
	s := Open(filepath.Join(dir, ".git"))
	defer s.Close()
	check := func() int {
		n := 0
		list := git("cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype) %(objectsize)")
		var lines [][]string
		var names []string
		sc := bufio.NewScanner(strings.NewReader(list))
		for sc.Scan() {
			lines = append(lines, strings.Fields(sc.Text()))
			names = append(names, lines[len(lines)-1][0])
		}
		objs := gittest.CatFiles(t, dir, names...)
		for i, f := range lines {
			h := plumbing.NewHash(f[0])
			want := objs[i].Data
			o, err := s.Encoded(plumbing.AnyObject, h)
			if err != nil {
				t.Fatalf("%s: %v", f[0], err)
			}
			r, _ := o.Reader()
			var got bytes.Buffer
			got.ReadFrom(r)
			if o.Type().String() != f[1] || !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("%s %s differs", f[1], f[0])
			}
			if size, err := s.Size(h); err != nil || fmt.Sprint(size) != f[2] {
				t.Fatalf("size of %s: %d %v, want %s", f[0], size, err, f[2])
			}
			n++
		}
		return n
	}
	if v := git("verify-pack", "-v", mustGlob(t, filepath.Join(dir, ".git", "objects", "pack", "*.idx"))); !strings.Contains(v, "chain length") {
		t.Fatalf("git wrote no deltas:\n%s", v)
	}
	if n := check(); n < 100 {
		t.Fatalf("only %d objects", n)
	}
	s.Release()
	// After a repack by another process, the new pack is found.
	git("commit", "-q", "--allow-empty", "-m", "later")
	git("repack", "-adf")
	s.Reindex()
	check()
}

// importHistory writes a commit on main for each of versions (the files
// it writes, path → content, over those of the commit before) with one
// git fast-import into the repository at dir, made with git init -b main:
// one git process where a git add and a git commit each would start two
// a commit.
func importHistory(t *testing.T, dir string, versions []map[string]string) {
	t.Helper()
	var b strings.Builder
	for i, files := range versions {
		msg := fmt.Sprint("v", i)
		fmt.Fprintf(&b, "commit refs/heads/main\ncommitter T <t@x> %d +0000\ndata %d\n%s\n", 1700000000+i, len(msg), msg)
		for _, p := range slices.Sorted(maps.Keys(files)) {
			fmt.Fprintf(&b, "M 100644 inline %s\ndata %d\n%s\n", p, len(files[p]), files[p])
		}
	}
	gittest.GitIn(t, dir, b.String(), "fast-import", "--quiet")
}

func mustGlob(t *testing.T, pattern string) string {
	m, _ := filepath.Glob(pattern)
	if len(m) != 1 {
		t.Fatalf("%s: %v", pattern, m)
	}
	return m[0]
}

// Size of a delta reads the start of its zlib stream with a reader from
// the pool, as a read does: a local fetch asks the size of every object
// it copies, and a new zlib reader each time (about 40 KiB) was half of
// that and a tenth of a merging pull's samples (issue 25). Not parallel:
// it counts the zlib readers the process makes.
func TestSizeOfADeltaAllocatesNoInflater(t *testing.T) {
	_, gitDir := gitInit(t)
	var objs []Object
	entries := make([]object.TreeEntry, 100)
	for i := range entries {
		entries[i] = object.TreeEntry{Name: fmt.Sprintf("f%03d.md", i), Mode: filemode.Regular, Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte{byte(i)})}
	}
	var base plumbing.Hash
	for v := range 20 { // 20 versions of a folder, each a delta of the one before
		entries[v].Hash = plumbing.ComputeHash(plumbing.BlobObject, []byte{byte(v), 1})
		data := EncodeEntries(entries)
		o := Object{Type: plumbing.TreeObject, Hash: plumbing.ComputeHash(plumbing.TreeObject, data), Data: data, Base: base}
		objs = append(objs, o)
		base = o.Hash
	}
	st := Open(gitDir)
	defer st.Close()
	if _, err := st.WriteObjectsPack(objs, true); err != nil {
		t.Fatal(err)
	}
	size := func() {
		for _, o := range objs[1:] {
			if n, err := st.Size(o.Hash); err != nil || n != int64(len(o.Data)) {
				t.Fatalf("Size(%s) = %d, %v; want %d", o.Hash, n, err, len(o.Data))
			}
		}
	}
	size() // the pack opened, the pool filled
	const rounds = 20
	calls := int64(rounds * (len(objs) - 1))
	before := inflatersMade.Load()
	for range rounds {
		size()
	}
	// Under -race sync.Pool drops a quarter of what is put back, at
	// random: half leaves room for that, and fails a reader made per call.
	if made := inflatersMade.Load() - before; made > calls/2 {
		t.Errorf("%d Sizes of a delta made %d zlib readers, want at most %d: each takes the pool's", calls, made, calls/2)
	}
}

// A delta whose base is cached costs one allocation, its result: the
// delta's own data is inflated into a buffer reused for the next (a
// diff across 50,000 commits inflated 95,000 deltas, each into a new
// slice it threw away once applied). Not parallel: it counts what the
// process allocates.
func TestReadingADeltaAllocatesOnlyItsResult(t *testing.T) {
	_, gitDir := gitInit(t)
	var objs []Object
	var base plumbing.Hash
	entries := make([]object.TreeEntry, 4000)
	for v := range 3 { // a folder of 4,000 files, every other one changed in each version: long deltas
		for i := range entries {
			if v == 0 || i%2 == 0 {
				entries[i] = object.TreeEntry{Name: fmt.Sprintf("f%04d.md", i), Mode: filemode.Regular, Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte(fmt.Sprint(v, i)))}
			}
		}
		data := EncodeEntries(entries)
		o := Object{Type: plumbing.TreeObject, Hash: plumbing.ComputeHash(plumbing.TreeObject, data), Data: data, Base: base}
		objs = append(objs, o)
		base = o.Hash
	}
	st := Open(gitDir)
	defer st.Close()
	if _, err := st.WriteObjectsPack(objs, true); err != nil {
		t.Fatal(err)
	}
	last := objs[len(objs)-1]
	read := func() {
		_, data, _, err := st.packs.read(last.Hash)
		if err != nil || !bytes.Equal(data, last.Data) {
			t.Fatalf("read %s: %v", last.Hash, err)
		}
	}
	read() // its bases cached, the pools filled
	p, off, _ := st.packs.lookup(last.Hash)
	if size, err := st.packs.sizeAt(p, off); err != nil || size != int64(len(last.Data)) {
		t.Fatalf("size %d, %v", size, err)
	}
	r, done, _ := st.packs.entry(p, off)
	if typ, deltaSize, _ := entryHeader(r); typ != plumbing.OFSDeltaObject || deltaSize < int64(len(last.Data))/3 {
		t.Fatalf("the last tree is a %v of %d bytes, not a delta of a third of its length (%d) or more", typ, deltaSize, len(last.Data))
	}
	done()
	// The least of 20 reads: under -race sync.Pool drops a quarter of
	// what is put back, at random.
	least := uint64(1 << 62)
	for range 20 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		read()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	if want := len(last.Data) + len(last.Data)/4; least > uint64(want) {
		t.Errorf("reading a %d-byte delta of a cached base allocated %d bytes, want at most %d: only its result", len(last.Data), least, want)
	}
}

// The delta base cache, once full, evicts its oldest base for each new
// one without allocating: its order is a ring, its index a map of keys
// with no pointer (the slice it was, cut at one end and grown at the
// other, and its map were 15% of what a diff across 50,000 commits
// allocated). Not parallel: it counts what the process allocates.
func TestBaseCacheEvictsWithoutAllocating(t *testing.T) {
	var c baseCache
	p := &packIdx{}
	data := make([]byte, 64) // small bases, as memory files and their folders are: many of them
	var off int64
	put := func(n int) {
		for range n {
			c.put(p, off, plumbing.BlobObject, data)
			off += 100
		}
	}
	full := baseCacheBytes / len(data)
	put(2 * full) // full, and evicting
	if typ, got, ok := c.get(p, off-100); !ok || typ != plumbing.BlobObject || len(got) != len(data) {
		t.Fatal("the last base put is not in the cache")
	}
	if _, _, ok := c.get(p, 0); ok {
		t.Fatal("the first base put is still in the cache, past its bound")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	put(2 * full)
	runtime.ReadMemStats(&after)
	if perPut := float64(after.TotalAlloc-before.TotalAlloc) / float64(2*full); perPut > 1 {
		t.Errorf("puts into a full cache allocated %.1f bytes each, want (nearly) none", perPut)
	}
}

// Blobs read in the order SortForReading gives (pack by pack, each from
// its end back) inflate fewer pack entries than in the order of their
// paths, once the delta base cache is full: the deepest chains, read
// first, leave in it the bases the others share (a diff across 50,000
// commits of 10,000 files inflated 75,500 entries so, 95,300 in the
// order of its paths). Not parallel: it counts the zlib streams the
// process inflates.
func TestReadingInPackOrderInflatesLess(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
	dir := gittest.TempDir(t)
	git := func(args ...string) string {
		t.Helper()
		return gittest.Git(t, dir, args...)
	}
	git("init", "-q", "-b", "main")
	const files, versions = 10, 30
	var old, last []plumbing.Hash // each file's second version and its last, in the order of the paths
	var history []map[string]string
	for v := range versions {
		changed := map[string]string{}
		for i := range files {
			var body strings.Builder // each version one more line changed: long delta chains
			fmt.Fprintf(&body, "file %d\n", i)
			for l := range versions {
				if l <= v {
					fmt.Fprintf(&body, "line %d, changed in version %d of the file\n", l, l)
				} else {
					fmt.Fprintf(&body, "line %d as it was first written, before any change\n", l)
				}
			}
			changed[fmt.Sprintf("f%02d.md", i)] = body.String()
			h := plumbing.ComputeHash(plumbing.BlobObject, []byte(body.String()))
			switch v {
			case 1:
				old = append(old, h)
			case versions - 1:
				last = append(last, h)
			}
		}
		history = append(history, changed)
	}
	importHistory(t, dir, history)
	git("-c", "pack.threads=1", "repack", "-adf", "-q", "--depth=50", "--window=50") // one thread: the same deltas every run
	var byPath []plumbing.Hash
	for i := range files {
		byPath = append(byPath, old[i], last[i])
	}
	read := func(sorted bool) int64 {
		s := Open(filepath.Join(dir, ".git"))
		defer s.Close()
		s.packs.bases.limit = 8 << 10 // a few bases: the cache full, as a large diff fills it
		before := inflations.Load()
		var err error
		if sorted {
			for _, l := range s.SortForReading(byPath) {
				if _, err = s.BlobAt(l); err != nil {
					break
				}
			}
		} else {
			for _, h := range byPath {
				if _, err = s.Blob(h); err != nil {
					break
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		return inflations.Load() - before
	}
	inPathOrder, inPackOrder := read(false), read(true)
	if inPathOrder < 2*int64(len(byPath)) {
		t.Fatalf("%d blobs inflated %d entries in the order of their paths: not a test of delta chains", len(byPath), inPathOrder)
	}
	if inPackOrder >= inPathOrder {
		t.Errorf("%d blobs inflated %d pack entries in pack order, %d in the order of their paths: want fewer", len(byPath), inPackOrder, inPathOrder)
	}
}

// Reading a packed object makes no name of a loose file it would have
// been: the name (its hex and a path joined) was made for every object
// read, 3 of the 7 allocations of reading a small blob, and a twentieth
// of the CPU of the trees a push of 10,000 commits reads. Not parallel:
// AllocsPerRun.
func TestReadingAPackedObjectNamesNoLooseFile(t *testing.T) {
	_, gitDir := gitInit(t)
	data := []byte("a memory\n")
	h := plumbing.ComputeHash(plumbing.BlobObject, data)
	s := Open(gitDir)
	defer s.Close()
	if _, err := s.WriteObjectsPack([]Object{{Type: plumbing.BlobObject, Hash: h, Data: data}}, true); err != nil {
		t.Fatal(err)
	}
	var err error
	allocs := testing.AllocsPerRun(100, func() { _, _, err = s.readUncached(h) })
	if err != nil {
		t.Fatal(err)
	}
	if allocs > 4+poolSlack { // 7 before, 4 now
		t.Errorf("reading a packed blob of %d bytes made %.0f allocations", len(data), allocs)
	}
}
