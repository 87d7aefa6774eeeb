package gitdir

import (
	"bytes"
	stdzlib "compress/zlib"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// objectNames are the objects' hashes, as gittest.CatFiles takes them.
func objectNames(objs []Object) []string {
	var ns []string
	for _, o := range objs {
		ns = append(ns, o.Hash.String())
	}
	return ns
}

// gitInit makes an empty repository with the git CLI and returns its
// folder and its .git.
func gitInit(t *testing.T) (dir, gitDir string) {
	t.Helper()
	needGit(t)
	dir = gittest.TempDir(t)
	gittest.Git(t, dir, "init", "-q")
	return dir, filepath.Join(dir, ".git")
}

// A pack gitmem writes is one git reads: `git verify-pack` accepts it and
// every object comes back, through git and through go-git, byte for byte.
func TestWriteObjectsPack(t *testing.T) {
	t.Parallel()
	dir, gitDir := gitInit(t)
	var objs []Object
	for i := range 300 {
		data := bytes.Repeat([]byte(fmt.Sprintf("object %d\n", i)), 1+i*7)
		objs = append(objs, Object{Type: plumbing.BlobObject, Hash: plumbing.ComputeHash(plumbing.BlobObject, data), Data: data})
	}
	objs = append(objs, objs[3]) // a duplicate is written once
	s := Open(gitDir)
	defer s.Close()
	h, err := s.WriteObjectsPack(objs, true)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(gitDir, "objects", "pack", "pack-"+h.String())
	if out := gittest.Git(t, dir, "verify-pack", "-v", base+".idx"); !strings.Contains(out, "non delta: 300 objects") {
		t.Fatalf("git verify-pack:\n%s", out)
	}
	byGit := gittest.CatFiles(t, dir, objectNames(objs[:300])...)
	for i, o := range objs[:300] {
		if got := byGit[i]; got.Type != "blob" || !bytes.Equal(got.Data, o.Data) {
			t.Fatalf("git cat-file %s: %s %q", o.Hash, got.Type, got.Data)
		}
		data, err := s.Blob(o.Hash)
		if err != nil || !bytes.Equal(data, o.Data) {
			t.Fatalf("go-git %s: %v", o.Hash, err)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", TmpPackPrefix+"*")); len(m) != 0 {
		t.Fatalf("temporary files left: %v", m)
	}
	if _, err := os.Stat(base + ".pack"); err != nil {
		t.Fatal(err)
	}
}

// PackSmall packs loose objects and small packs into one pack and removes
// them: every object stays readable, through git and the Store.
func TestPackSmallTakesLooseObjectsAndPacks(t *testing.T) {
	t.Parallel()
	dir, gitDir := gitInit(t)
	s := Open(gitDir)
	defer s.Close()
	blob := func(i int) Object {
		data := []byte(fmt.Sprintf("object %d\n", i))
		return Object{Type: plumbing.BlobObject, Hash: plumbing.ComputeHash(plumbing.BlobObject, data), Data: data}
	}
	var all []Object
	for i := range 3 {
		objs := []Object{blob(2 * i), blob(2*i + 1)}
		if _, err := s.WriteObjectsPack(objs, true); err != nil {
			t.Fatal(err)
		}
		all = append(all, objs...)
	}
	packs, err := ListPacks(gitDir)
	if err != nil {
		t.Fatal(err)
	}
	ow := NewObjectWriter(nil, gitDir)
	var loose []plumbing.Hash
	for i := 6; i < 8; i++ {
		o := blob(i)
		if _, err := ow.Write(o.Type, o.Data); err != nil {
			t.Fatal(err)
		}
		loose, all = append(loose, o.Hash), append(all, o)
	}
	n, removed, err := s.PackSmall(loose, packs)
	if err != nil || n != 8 || removed != 5 {
		t.Fatalf("PackSmall: %d objects, %d files removed, %v", n, removed, err)
	}
	s.Reindex()
	for _, o := range all {
		if data, err := s.Blob(o.Hash); err != nil || !bytes.Equal(data, o.Data) {
			t.Errorf("%s: %v", o.Hash, err)
		}
	}
	if out := gittest.Git(t, dir, "count-objects", "-v"); !strings.Contains(out, "count: 0\n") || !strings.Contains(out, "packs: 1\n") {
		t.Errorf("git count-objects -v:\n%s", out)
	}
	gittest.Fsck(t, dir)
}

// A burst's trees are stored as deltas of their Base, the same folder's
// tree in the parent commit, when the pack holds it (a tree whose base is
// elsewhere is stored whole): git verify-pack accepts the pack, and every
// tree reads back byte for byte through git and through the Store.
func TestPackStoresTreesAsDeltasOfTheirBase(t *testing.T) {
	t.Parallel()
	dir, gitDir := gitInit(t)
	var objs []Object
	blob := func(i int) plumbing.Hash {
		data := []byte(fmt.Sprintf("memory %d\n", i))
		h := plumbing.ComputeHash(plumbing.BlobObject, data)
		objs = append(objs, Object{Type: plumbing.BlobObject, Hash: h, Data: data})
		return h
	}
	entries := make([]object.TreeEntry, 100)
	for i := range entries {
		entries[i] = object.TreeEntry{Name: fmt.Sprintf("f%03d.md", i), Mode: filemode.Regular, Hash: blob(i)}
	}
	outside := plumbing.NewHash("1111111111111111111111111111111111111111") // a base in another pack
	base := outside
	var trees []Object
	for v := range 20 { // 20 versions of one folder, each changing one file
		entries[v*5%100].Hash = blob(1000 + v)
		data := EncodeEntries(entries)
		h := plumbing.ComputeHash(plumbing.TreeObject, data)
		o := Object{Type: plumbing.TreeObject, Hash: h, Data: data, Base: base}
		objs = append(objs, o)
		trees = append(trees, o)
		base = h
	}
	s := Open(gitDir)
	defer s.Close()
	h, err := s.WriteObjectsPack(objs, true)
	if err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(gitDir, "objects", "pack", "pack-"+h.String()+".idx")
	if out := gittest.Git(t, dir, "verify-pack", "-v", idx); !strings.Contains(out, "chain length = 19: 1 object") {
		t.Fatalf("git verify-pack:\n%s", out)
	}
	byGit := gittest.CatFiles(t, dir, objectNames(trees)...)
	for i, o := range trees {
		if got := byGit[i]; got.Type != "tree" || !bytes.Equal(got.Data, o.Data) {
			t.Fatalf("git cat-file %s: %s %q", o.Hash, got.Type, got.Data)
		}
		typ, data, err := s.ReadObject(o.Hash)
		if err != nil || typ != plumbing.TreeObject || !bytes.Equal(data, o.Data) {
			t.Fatalf("read %s: %v %v", o.Hash, typ, err)
		}
	}
	fi, err := os.Stat(strings.TrimSuffix(idx, ".idx") + ".pack")
	if err != nil {
		t.Fatal(err)
	}
	if whole := 20 * len(trees[0].Data); fi.Size() > int64(whole)/4 {
		t.Errorf("the pack is %d bytes; 20 trees stored whole are %d", fi.Size(), whole)
	}
}

// A pack the Store writes joins its known packs: the pack folder is not
// listed again (it was, after every pack materialisation: about 5% of a
// mutation's CPU under load), and its objects, and the older packs', read
// at once. A pack another process adds is still found (listed on a miss).
func TestWrittenPackJoinsTheKnownPacks(t *testing.T) {
	t.Parallel()
	gitDir := t.TempDir() // a git folder of objects only
	s := Open(gitDir)
	defer s.Close()
	obj := func(i int) Object {
		data := []byte(fmt.Sprintf("object %d\n", i))
		return Object{Type: plumbing.BlobObject, Hash: plumbing.ComputeHash(plumbing.BlobObject, data), Data: data}
	}
	s.packs.list() // the folder listed once, as by a first read
	var written []Object
	for i := range 3 {
		o := obj(i)
		if _, err := s.WriteObjectsPack([]Object{o}, false); err != nil {
			t.Fatal(err)
		}
		written = append(written, o)
		s.packs.mu.Lock()
		loaded, n := s.packs.loaded, len(s.packs.packs)
		s.packs.mu.Unlock()
		if !loaded || n != i+1 {
			t.Fatalf("after pack %d: list kept %v, %d packs known; want the list kept, %d packs", i, loaded, n, i+1)
		}
		for _, w := range written {
			if data, err := s.Blob(w.Hash); err != nil || !bytes.Equal(data, w.Data) {
				t.Fatalf("after pack %d, object %s: %q, %v", i, w.Hash, data, err)
			}
		}
	}
	// Another process's pack: written by a second Store.
	other := Open(gitDir)
	o := obj(99)
	if _, err := other.WriteObjectsPack([]Object{o}, false); err != nil {
		t.Fatal(err)
	}
	other.Close()
	if data, err := s.Blob(o.Hash); err != nil || !bytes.Equal(data, o.Data) {
		t.Fatalf("another process's pack: %q, %v", data, err)
	}
}

// BenchmarkPackThenRead is a materialisation that writes a pack (a group
// of 16 objects) followed by a read from an older pack, in a folder of
// 100 packs (gc packs them into one; between two runs they pile up).
func BenchmarkPackThenRead(b *testing.B) {
	s := Open(b.TempDir())
	defer s.Close()
	n := 0
	group := func() []Object {
		var objs []Object
		for range 16 {
			data := []byte(fmt.Sprintf("memory %d\n", n))
			n++
			objs = append(objs, Object{Type: plumbing.BlobObject, Hash: plumbing.ComputeHash(plumbing.BlobObject, data), Data: data})
		}
		return objs
	}
	old := group()
	for range 100 {
		if _, err := s.WriteObjectsPack(group(), false); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.WriteObjectsPack(old, false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.WriteObjectsPack(group(), false); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Blob(old[0].Hash); err != nil {
			b.Fatal(err)
		}
	}
}

// A small object is stored as a zlib stream of one stored block: the
// standard library's reader (not the one gitmem reads with) gives every
// size back byte for byte.
func TestPutStoredIsZlib(t *testing.T) {
	t.Parallel()
	for n := range storedBelow {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i*31 + n)
		}
		var buf bytes.Buffer
		putStored(&buf, data)
		zr, err := stdzlib.NewReader(&buf)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: got %x, %v", n, got, err)
		}
	}
}

// A damaged byte in a pack entry stored without compression is caught by
// the stream's checksum, not read as the object; and where a loose copy
// of the object, or a copy in another pack, is sound, it is read instead,
// as git does.
func TestDamagedPackEntry(t *testing.T) {
	t.Parallel()
	dir, gitDir := gitInit(t)
	gittest.Damaged(t, dir, "a byte of a pack entry is changed")
	data := []byte("a small memory, stored as it is\n")
	h := plumbing.ComputeHash(plumbing.BlobObject, data)
	s := Open(gitDir)
	defer s.Close()
	pack, err := s.WriteObjectsPack([]Object{{Type: plumbing.BlobObject, Hash: h, Data: data}}, true)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(gitDir, "objects", "pack", "pack-"+pack.String())
	idx, err := openPackIdx(base + ".idx")
	if err != nil {
		t.Fatal(err)
	}
	off, ok := idx.find(h)
	idx.unmap()
	if !ok {
		t.Fatal("the pack does not hold the blob")
	}
	raw, err := os.ReadFile(base + ".pack")
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(raw[off:], data[:8])
	if at < 0 {
		t.Fatal("the blob is not stored as it is")
	}
	raw[int(off)+at] ^= 0x20 // "a" becomes "A"
	if err := os.WriteFile(base+".pack", raw, 0o644); err != nil {
		t.Fatal(err)
	}
	s.Release()
	if got, err := s.Blob(h); err == nil {
		t.Fatalf("damaged entry read as %q", got)
	}
	w := NewObjectWriter(nil, gitDir)
	if _, err := w.Write(plumbing.BlobObject, data); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Blob(h); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("with a sound loose copy: %q, %v", got, err)
	}
	// Without it, a sound copy in another pack, listed after the damaged
	// one, is read.
	hex := h.String()
	if err := os.Remove(filepath.Join(gitDir, "objects", hex[:2], hex[2:])); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		extra := []byte(fmt.Sprintf("another memory %d\n", i))
		sound, err := s.WriteObjectsPack([]Object{{Type: plumbing.BlobObject, Hash: h, Data: data},
			{Type: plumbing.BlobObject, Hash: plumbing.ComputeHash(plumbing.BlobObject, extra), Data: extra}}, true)
		if err != nil {
			t.Fatal(err)
		}
		if sound.String() > pack.String() {
			break
		}
		RemovePacks(gitDir, []plumbing.Hash{sound}) // listed first: try another
		s.Reindex()
	}
	s.Reindex()
	if got, err := s.Blob(h); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("with a sound copy in another pack: %q, %v", got, err)
	}
}

// git prune-packed (git gc, git repack -d) removes empty object folders;
// one removed between the folder's creation and the object's temporary
// file is made again, and the write goes on.
func TestObjectWriteOutlivesPrunedFolders(t *testing.T) {
	t.Parallel()
	_, gitDir := gitInit(t)
	pruned := 0
	env := &Env{beforeObjectTemp: func(folder string) {
		if pruned < 2 && os.Remove(folder) == nil { // empty: git would remove it
			pruned++
		}
	}}
	w := NewObjectWriter(env, gitDir)
	h, err := w.Write(plumbing.BlobObject, []byte("a memory\n"))
	if err != nil || pruned != 2 {
		t.Fatalf("after %d prunes: %v", pruned, err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	hex := h.String()
	if !LooseIntact(filepath.Join(gitDir, "objects", hex[:2], hex[2:]), h) {
		t.Fatal("the object is not there")
	}
}

// Every pack gitmem writes into its repository keeps a .keep for good:
// git's gc, prune, repack and multi-pack-index expire leave it and its
// objects alone, even when no ref reaches them. One written in flight
// becomes gitmem's own at Settle; gitmem's gc replaces its own packs
// (Ours), not one in flight nor one another program keeps.
func TestPacksAreKeptFromGitForGood(t *testing.T) {
	t.Parallel()
	dir, gitDir := gitInit(t)
	s := Open(gitDir)
	defer s.Close()
	own, err := s.WriteObjectsPack([]Object{textBlob("own\n")}, true)
	if err != nil {
		t.Fatal(err)
	}
	flight, err := s.WritePackFiles([]Object{textBlob("in flight\n")}, true, InFlight)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := s.WritePackFiles([]Object{textBlob("foreign\n")}, true, NoKeep)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(gitDir, "objects", "pack", "pack-"+foreign.String()+".keep"), []byte("receive-pack 1 on host\n"), 0o644)
	ours := func() map[plumbing.Hash]bool {
		packs, _ := ListPacks(gitDir)
		m := map[plumbing.Hash]bool{}
		for _, p := range packs {
			if !p.Kept {
				t.Errorf("pack %s has no .keep", p.Hash)
			}
			m[p.Hash] = p.Ours
		}
		return m
	}
	if got := ours(); !got[own] || got[flight] || got[foreign] || len(got) != 3 {
		t.Errorf("gitmem's own packs: %v (own %s)", got, own)
	}
	for _, op := range [][]string{{"gc", "--prune=now", "--quiet"}, {"repack", "-a", "-d", "-q"}, {"prune", "--expire=now"},
		{"multi-pack-index", "write"}, {"multi-pack-index", "expire"}, {"repack", "-d", "-q", "--cruft", "--cruft-expiration=now"}} {
		gittest.Git(t, dir, op...)
	}
	for _, text := range []string{"own\n", "in flight\n", "foreign\n"} {
		if got := gittest.Git(t, dir, "cat-file", "blob", textBlob(text).Hash.String()); got != text {
			t.Errorf("git cat-file after git's gc: %q, want %q", got, text)
		}
	}
	if err := Settle(gitDir, flight); err != nil {
		t.Fatal(err)
	}
	if err := Settle(gitDir, foreign); err != nil {
		t.Fatal(err)
	}
	if got := ours(); !got[own] || !got[flight] || got[foreign] {
		t.Errorf("after Settle: %v", got)
	}
	// A pack deleted before it was settled (a redaction's full gc runs
	// before the rewritten history's packs are settled) gets no .keep:
	// one alone is litter the next start takes for a killed run's.
	gone, err := s.WritePackFiles([]Object{textBlob("gone\n")}, true, InFlight)
	if err != nil {
		t.Fatal(err)
	}
	RemovePacks(gitDir, []plumbing.Hash{gone})
	if err := Settle(gitDir, gone); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "pack-"+gone.String()+".*")); len(m) != 0 {
		t.Errorf("Settle of a deleted pack left %v", m)
	}
	if m, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", TmpPackPrefix+"*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

// A pack is put in place before its index, as git does: an index that
// cannot follow (a fault between the two) takes the pack and the .keep
// with it; and a pack a crash left without its index (with gitmem's
// .keep) is removed by the next start (SettleStaleKeeps), while another
// program's is left alone.
func TestPackWithoutItsIndexIsNeverLeft(t *testing.T) {
	t.Parallel()
	_, gitDir := gitInit(t)
	s := Open(gitDir)
	defer s.Close()
	s.Env = new(Env)
	blob := textBlob("x\n")
	packDir := filepath.Join(gitDir, "objects", "pack")
	var seen []string
	s.Env.SetFault(func(step, p string) error {
		if step != StepPackIndex {
			return nil
		}
		seen, _ = filepath.Glob(filepath.Join(packDir, "pack-*"))
		return &os.PathError{Op: "rename", Path: p, Err: syscall.EIO}
	})
	if _, err := s.WritePackFiles([]Object{blob}, true, Own); !errors.Is(err, syscall.EIO) {
		t.Fatalf("WritePackFiles = %v, want EIO", err)
	}
	s.Env.SetFault(nil)
	var names []string
	for _, p := range seen {
		names = append(names, filepath.Ext(p))
	}
	if slices.Sort(names); !slices.Equal(names, []string{".keep", ".pack"}) {
		t.Errorf("before the index: %v, want the .keep and the pack", names)
	}
	if left, _ := os.ReadDir(packDir); len(left) != 0 {
		t.Errorf("a failed index left %v", left)
	}

	h, err := s.WritePackFiles([]Object{blob}, true, Own)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.WritePackFiles([]Object{textBlob("y\n")}, true, NoKeep)
	if err != nil {
		t.Fatal(err)
	}
	base, otherBase := filepath.Join(packDir, "pack-"+h.String()), filepath.Join(packDir, "pack-"+other.String())
	os.WriteFile(otherBase+".keep", []byte("receive-pack 1 on host\n"), 0o644)
	os.Remove(base + ".idx") // killed between the pack and its index
	os.Remove(otherBase + ".idx")
	if n := SettleStaleKeeps(nil, gitDir); n != 2 {
		t.Errorf("SettleStaleKeeps removed %d files, want 2 (the pack and its .keep)", n)
	}
	for _, ext := range []string{".pack", ".keep"} {
		if _, err := os.Stat(base + ext); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("gitmem's pack without its index: the %s is still there", ext)
		}
		if _, err := os.Stat(otherBase + ext); err != nil {
			t.Errorf("another program's pack without its index: %v", err)
		}
	}
}

// RemoveOrphanIndexes deletes an index without its pack and a gc mark
// whose pack is gone, from one listing of the folder, and leaves a whole
// pack and its mark alone.
func TestRemoveOrphanIndexes(t *testing.T) {
	t.Parallel()
	_, gitDir := gitInit(t)
	s := Open(gitDir)
	defer s.Close()
	whole, orphan := twoPacks(t, s)
	for _, h := range []plumbing.Hash{whole, orphan} {
		if err := MarkRepacked(gitDir, h); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(filepath.Join(gitDir, "objects", "pack", "pack-"+orphan.String()+".pack"))
	if n := RemoveOrphanIndexes(nil, gitDir); n != 1 {
		t.Errorf("removed %d indexes, want 1", n)
	}
	if _, err := os.Stat(PackIndexPath(gitDir, orphan)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the index without its pack: %v", err)
	}
	if !PackExists(gitDir, whole) || !isRepacked(gitDir, whole.String()) {
		t.Error("the whole pack, or its mark, was removed")
	}
	if isRepacked(gitDir, orphan.String()) {
		t.Error("the mark of a pack that is gone stayed")
	}
}

// Missing answers from git's files as they are, not from the packs the
// store listed before: a pack deleted since (by a program that ignores
// .keep) holds nothing.
func TestMissingReadsTheFilesNotTheListedPacks(t *testing.T) {
	t.Parallel()
	_, gitDir := gitInit(t)
	s := Open(gitDir)
	defer s.Close()
	var a, b []Object
	for i := range 5 {
		for name, side := range map[string]*[]Object{"a": &a, "b": &b} {
			text := fmt.Sprintf("object %d of %s\n", i, name)
			*side = append(*side, textBlob(text))
		}
	}
	if _, err := s.WriteObjectsPack(a, true); err != nil {
		t.Fatal(err)
	}
	pb, err := s.WriteObjectsPack(b, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Blob(b[0].Hash); err != nil { // the packs are listed
		t.Fatal(err)
	}
	base := filepath.Join(gitDir, "objects", "pack", "pack-"+pb.String())
	for _, ext := range []string{".pack", ".idx", ".keep"} {
		os.Remove(base + ext)
	}
	got := s.Missing(append(slices.Clone(a), b...))
	if len(got) != len(b) {
		t.Fatalf("Missing: %d objects, want the %d of the deleted pack", len(got), len(b))
	}
	for i, o := range got {
		if o.Hash != b[i].Hash {
			t.Errorf("Missing[%d] = %s, want %s", i, o.Hash, b[i].Hash)
		}
	}
}

// A writer's start sweeps the pack folder from one listing of it (five
// before: a Glob or a ReadDir for each kind, 13% of a cold store's first
// call with the other sweeps): gitmem's temporary files go, git's
// half-written packs once older than StaleTemp, an old-style gc mark
// moves to .git/gitmem/repacked (gone with its pack), an index without
// its pack goes with its .keep; a whole pack, a young git temporary file
// and another program's file stay.
func TestSweepPacksListsThePackFolderOnce(t *testing.T) {
	t.Parallel()
	_, gitDir := gitInit(t)
	s := Open(gitDir)
	defer s.Close()
	whole, orphan := twoPacks(t, s)
	packDir := filepath.Join(gitDir, "objects", "pack")
	os.Remove(filepath.Join(packDir, "pack-"+orphan.String()+".pack"))
	old := time.Now().Add(-2 * StaleTemp)
	files := map[string]bool{ // name: removed
		TmpPackPrefix + "pack_1":              true,
		"tmp_pack_old":                        true,
		"tmp_pack_young":                      false,
		"pack-" + whole.String() + oldMarkExt: true, // moved
		"another-program.txt":                 false,
	}
	for name := range files {
		if err := os.WriteFile(filepath.Join(packDir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(filepath.Join(packDir, "tmp_pack_old"), old, old); err != nil {
		t.Fatal(err)
	}
	env := new(Env)
	n := SweepPacks(env, gitDir, ListNames(env, filepath.Join(gitDir, "gitmem")))
	if got := env.PackListings(); got != 2 { // to see, then under .git/gitmem/fetch
		t.Errorf("SweepPacks listed the pack folder %d times, want 2", got)
	}
	if n != 4 { // two temporary files, the orphan's index and .keep (the mark moved)
		t.Errorf("SweepPacks removed %d files, want 4", n)
	}
	for name, removed := range files {
		if _, err := os.Stat(filepath.Join(packDir, name)); errors.Is(err, fs.ErrNotExist) != removed {
			t.Errorf("%s: removed %v, want %v", name, !removed, removed)
		}
	}
	for _, ext := range []string{".idx", ".keep"} {
		if _, err := os.Stat(filepath.Join(packDir, "pack-"+orphan.String()+ext)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the %s without its pack: %v", ext, err)
		}
	}
	if !PackExists(gitDir, whole) || !isRepacked(gitDir, whole.String()) {
		t.Error("the whole pack, or its mark in .git/gitmem/repacked, is missing")
	}
}

// A start's sweep of a pack folder with nothing to remove (a clean last
// run's) lists it once and leaves .git/gitmem/fetch alone: not made, not
// opened, a file fewer for a store's first call where the disk's cache
// no longer holds the store. Each kind of leftover alone still has it
// swept (under the fetch lock, TestStartBesideAFetchLeavesItsFiles).
// Before, every start made or opened the fetch lock.
func TestSweepPacksOfACleanFolderLeavesTheFetchLock(t *testing.T) {
	t.Parallel()
	_, gitDir := gitInit(t)
	s := Open(gitDir)
	defer s.Close()
	twoPacks(t, s) // gitmem's own, settled: nothing to sweep
	fetch := filepath.Join(gitDir, "gitmem", "fetch")
	if err := os.MkdirAll(filepath.Dir(fetch), 0o700); err != nil {
		t.Fatal(err)
	}
	env := new(Env)
	if n := SweepPacks(env, gitDir, nil); n != 0 {
		t.Errorf("SweepPacks removed %d files of a clean folder", n)
	}
	if got := env.PackListings(); got != 1 {
		t.Errorf("SweepPacks listed a clean pack folder %d times, want 1", got)
	}
	if _, err := os.Lstat(fetch); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the sweep of a clean pack folder made or opened %s: %v", fetch, err)
	}
}

// Each kind of leftover alone is swept (packSweepNeeded sees each).
func TestSweepPacksSeesEachLeftoverAlone(t *testing.T) {
	t.Parallel()
	old := time.Now().Add(-2 * StaleTemp)
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, s *Store, packDir string) (gone string)
	}{
		{"gitmem's temporary file", func(t *testing.T, s *Store, packDir string) string {
			return plantFile(t, packDir, TmpPackPrefix+"pack_1", time.Time{})
		}},
		{"git's old temporary pack", func(t *testing.T, s *Store, packDir string) string {
			return plantFile(t, packDir, "tmp_pack_old", old)
		}},
		{"an old-style mark", func(t *testing.T, s *Store, packDir string) string {
			whole, _ := twoPacks(t, s)
			return plantFile(t, packDir, "pack-"+whole.String()+oldMarkExt, time.Time{})
		}},
		{"an index without its pack", func(t *testing.T, s *Store, packDir string) string {
			_, orphan := twoPacks(t, s)
			os.Remove(filepath.Join(packDir, "pack-"+orphan.String()+".pack"))
			return "pack-" + orphan.String() + ".idx"
		}},
		{"a .keep without its pack", func(t *testing.T, s *Store, packDir string) string {
			_, orphan := twoPacks(t, s)
			os.Remove(filepath.Join(packDir, "pack-"+orphan.String()+".pack"))
			os.Remove(filepath.Join(packDir, "pack-"+orphan.String()+".idx"))
			return "pack-" + orphan.String() + ".keep"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, gitDir := gitInit(t)
			s := Open(gitDir)
			defer s.Close()
			packDir := filepath.Join(gitDir, "objects", "pack")
			gone := tc.plant(t, s, packDir)
			SweepPacks(new(Env), gitDir, nil)
			if _, err := os.Lstat(filepath.Join(packDir, gone)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s left after the sweep: %v", gone, err)
			}
		})
	}
	t.Run("a pack in flight", func(t *testing.T) {
		t.Parallel()
		_, gitDir := gitInit(t)
		s := Open(gitDir)
		defer s.Close()
		h, err := s.WritePackFiles([]Object{textBlob("in flight\n")}, true, InFlight)
		if err != nil {
			t.Fatal(err)
		}
		keep := filepath.Join(gitDir, "objects", "pack", "pack-"+h.String()+".keep")
		SweepPacks(new(Env), gitDir, nil)
		if k, _ := keptBy(strings.TrimSuffix(keep, ".keep")); k == InFlight {
			t.Error("a whole pack's .keep still in flight after the sweep: not settled")
		}
	})
}

// plantFile writes an empty file name in dir, dated at (unless zero),
// and returns name.
func plantFile(t *testing.T, dir, name string, at time.Time) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !at.IsZero() {
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// textBlob is the blob object of text.
func textBlob(text string) Object {
	return Object{Type: plumbing.BlobObject, Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte(text)), Data: []byte(text)}
}

// twoPacks writes two packs of one blob each with gitmem's .keep: one to
// stay whole, one whose .pack the test then removes.
func twoPacks(t *testing.T, s *Store) (whole, orphan plumbing.Hash) {
	t.Helper()
	whole, err := s.WritePackFiles([]Object{textBlob("whole\n")}, true, Own)
	if err != nil {
		t.Fatal(err)
	}
	orphan, err = s.WritePackFiles([]Object{textBlob("orphan\n")}, true, Own)
	if err != nil {
		t.Fatal(err)
	}
	return whole, orphan
}

// TestRemovePacksTriesOnlyWhatIsThere: RemovePacks removes each pack's
// files, the ones git may add beside it and gitmem's mark of a repack
// included, and tries no file that is not there: a fold removes 32
// small packs of three files each (issue 25), for which it tried eleven
// removals a pack.
func TestRemovePacksTriesOnlyWhatIsThere(t *testing.T) {
	_, gitDir := gitInit(t)
	s := Open(gitDir)
	defer s.Close()
	var packs []plumbing.Hash
	for i := range 4 {
		h, err := s.WritePackFiles([]Object{textBlob(fmt.Sprintf("pack %d\n", i))}, false, Own)
		if err != nil {
			t.Fatal(err)
		}
		packs = append(packs, h)
	}
	base := filepath.Join(gitDir, "objects", "pack", "pack-"+packs[0].String())
	if err := os.WriteFile(base+".rev", nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := MarkRepacked(gitDir, packs[1]); err != nil {
		t.Fatal(err)
	}
	before := packRemovals.Load()
	if n := RemovePacks(gitDir, packs); n != len(packs) {
		t.Errorf("RemovePacks removed %d packs, want %d", n, len(packs))
	}
	if got, want := packRemovals.Load()-before, int64(3*len(packs)+2); got != want {
		t.Errorf("%d removals tried, want %d (the files there)", got, want)
	}
	for _, h := range packs {
		if m, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "pack-"+h.String()+".*")); len(m) != 0 {
			t.Errorf("left %v", m)
		}
	}
	if _, err := os.Stat(repackedMarkPath(gitDir, packs[1].String())); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the repack mark: %v", err)
	}
}

// Every Own .keep of a repository gitmem owns (one with .git/gitmem/tmp)
// is a link of one file, .git/gitmem/keep, made once: a pack written
// makes no inode for its .keep (issue 25: each inode made cost more the
// more were freed lately). git and gitmem read it as before; one changed
// in place by another program is made again, not linked; a repository
// without .git/gitmem (a push's remote) gets a file of its own.
func TestOwnKeepsAreLinksOfOneFile(t *testing.T) {
	t.Parallel()
	dir, gitDir := gitInit(t)
	if err := os.MkdirAll(filepath.Join(gitDir, "gitmem", "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	s := Open(gitDir)
	defer s.Close()
	write := func(i int) string {
		t.Helper()
		data := []byte(fmt.Sprintf("blob %d\n", i))
		h, err := s.WritePackFiles([]Object{{Type: plumbing.BlobObject, Hash: plumbing.ComputeHash(plumbing.BlobObject, data), Data: data}}, false, Own)
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Join(gitDir, "objects", "pack", "pack-"+h.String())
	}
	tmpl := filepath.Join(gitDir, "gitmem", OwnKeepName)
	same := func(base string) bool {
		t.Helper()
		a, err := os.Stat(base + ".keep")
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.Stat(tmpl)
		return err == nil && os.SameFile(a, b)
	}
	var bases []string
	for i := range 3 {
		bases = append(bases, write(i))
		if !same(bases[i]) {
			t.Fatalf("pack %d: its .keep is a file of its own, not a link of %s", i, tmpl)
		}
		if k, foreign := keptBy(bases[i]); k != Own || foreign {
			t.Fatalf("pack %d: kept by %v (foreign %v)", i, k, foreign)
		}
	}
	if fi, _ := os.Stat(tmpl); fi.Mode().Perm() != 0o444 {
		t.Fatalf("%s: mode %v", tmpl, fi.Mode())
	}
	// Changed in place: a new template, the old links keep what they hold.
	os.Chmod(tmpl, 0o644)
	if err := os.WriteFile(tmpl, []byte("an operator's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ownKeepsChecked.Delete(tmpl) // as a new process finds it
	b := write(10)
	if !same(b) {
		t.Fatal("no link of a template made again")
	}
	if k, foreign := keptBy(b); k != Own || foreign {
		t.Fatalf("after the template changed: kept by %v (foreign %v)", k, foreign)
	}
	// Removed: made again.
	os.Remove(tmpl)
	ownKeepsChecked.Delete(tmpl)
	if b := write(11); !same(b) {
		t.Fatal("no template made again")
	}
	// No .git/gitmem: a file of its own, as before.
	_, plain := gitInit(t)
	ps := Open(plain)
	defer ps.Close()
	data := []byte("plain\n")
	h, err := ps.WritePackFiles([]Object{{Type: plumbing.BlobObject, Hash: plumbing.ComputeHash(plumbing.BlobObject, data), Data: data}}, false, Own)
	if err != nil {
		t.Fatal(err)
	}
	if k, foreign := keptBy(filepath.Join(plain, "objects", "pack", "pack-"+h.String())); k != Own || foreign {
		t.Fatalf("plain repository: kept by %v (foreign %v)", k, foreign)
	}
	if _, err := os.Stat(filepath.Join(plain, "gitmem")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("plain repository: .git/gitmem made: %v", err)
	}
	// git keeps them: a repack -a -d leaves every kept pack.
	gittest.Git(t, dir, "repack", "-a", "-d", "-q")
	for _, base := range bases {
		if _, err := os.Stat(base + ".pack"); err != nil {
			t.Fatalf("git repack -a -d deleted a kept pack: %v", err)
		}
	}
}

// Reading a small file of git's (HEAD, a branch, .git/config) makes no
// *os.File: os.ReadFile's registers the file with Go's poller (four
// fcntl and a failing epoll_ctl) and looks its size up, six system calls
// more per file, and opening a store reads a dozen (issue 25: a cold
// store's first call). The *os.File is 3 of os.ReadFile's 5 allocations,
// which ReadRef made 9 with, 6 without.
func TestReadingARefMakesNoFile(t *testing.T) { // not parallel: AllocsPerRun
	gitDir := t.TempDir()
	ref := filepath.Join(gitDir, "refs", "heads", "main")
	if err := os.MkdirAll(filepath.Dir(ref), 0o755); err != nil {
		t.Fatal(err)
	}
	h := plumbing.ComputeHash(plumbing.BlobObject, []byte("x"))
	if err := os.WriteFile(ref, []byte(h.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gitDir, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadRef(gitDir, "refs/heads/main"); err != nil || got != h {
		t.Fatalf("ReadRef: %v %v", got, err)
	}
	if n := testing.AllocsPerRun(50, func() { ReadRef(gitDir, "refs/heads/main") }); n > 6 {
		t.Fatalf("ReadRef: %v allocations, want at most 6 (no *os.File)", n)
	}
	if n := testing.AllocsPerRun(50, func() { ReadHEAD(gitDir) }); n > 4 {
		t.Fatalf("ReadHEAD: %v allocations, want at most 4 (no *os.File)", n)
	}
	// A file that is not there is os's error.
	if _, err := ReadFile(filepath.Join(gitDir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
	// A larger one is read whole.
	big := bytes.Repeat([]byte("0123456789abcdef"), 1000)
	if err := os.WriteFile(filepath.Join(gitDir, "config"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFile(filepath.Join(gitDir, "config")); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("a 16 KB file: %d bytes, %v", len(got), err)
	}
}

// Listing the packs (a store's first read of an object, and after every
// reset) reads the folder with listNames and takes a pack's presence from
// that listing: no *os.File and no lstat of the folder (filepath.Glob's),
// no stat of a pack not known yet (issue 25: a cold store's first call). A re-listing
// of two known packs (seven names in the folder) allocated 32 times
// before, 21 after.
func TestListingPacksStatsNoPack(t *testing.T) { // not parallel: AllocsPerRun
	_, gitDir := gitInit(t)
	s := Open(gitDir)
	defer s.Close()
	for i := range 2 {
		data := []byte(fmt.Sprintf("blob %d\n", i))
		if _, err := s.WritePackFiles([]Object{{Type: plumbing.BlobObject, Hash: plumbing.ComputeHash(plumbing.BlobObject, data), Data: data}}, false, Own); err != nil {
			t.Fatal(err)
		}
	}
	// an index whose pack is not there is no pack
	if err := os.WriteFile(filepath.Join(gitDir, "objects", "pack", "pack-"+strings.Repeat("0", 40)+".idx"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	relist := func() int {
		s.packs.mu.Lock()
		s.packs.loaded = false
		s.packs.mu.Unlock()
		return len(s.packs.list())
	}
	if n := relist(); n != 2 {
		t.Fatalf("%d packs listed, want 2", n)
	}
	if n := testing.AllocsPerRun(50, func() { relist() }); n > 25 {
		t.Fatalf("listing the packs: %v allocations, want at most 25 (no *os.File, no stat of a pack)", n)
	}
}

// A fetch writes its temporary files in the pack folder without the
// writer lock, holding .git/gitmem/fetch (HoldFetch). gc's ClearGarbage
// removed them whatever held it: all of them for a redaction (a pull
// under way in another process then failed), those older than
// StaleTemp otherwise (a fetch stalled that long). It leaves the pack
// folder's temporary files alone while a fetch holds the file, as a
// start's sweep does.
func TestClearGarbageLeavesAFetchsFiles(t *testing.T) {
	t.Parallel()
	_, gitDir := gitInit(t)
	s := Open(gitDir)
	defer s.Close()
	packDir := filepath.Join(gitDir, "objects", "pack")
	old := time.Now().Add(-2 * StaleTemp)
	plant := func() []string {
		var names []string
		for _, name := range []string{TmpPackPrefix + "pack_1", "tmp_pack_1"} {
			p := filepath.Join(packDir, name)
			if err := os.WriteFile(p, []byte("in flight"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
			names = append(names, p)
		}
		return names
	}
	files := plant()
	if err := os.MkdirAll(filepath.Join(gitDir, "gitmem"), 0o755); err != nil {
		t.Fatal(err)
	}
	release := HoldFetch(gitDir)
	for _, all := range []bool{false, true} {
		if n := s.ClearGarbage(all); n != 0 {
			t.Errorf("ClearGarbage(%v) beside a fetch removed %d files, want 0", all, n)
		}
		for _, p := range files {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("ClearGarbage(%v) beside a fetch: %s: %v", all, filepath.Base(p), err)
			}
		}
	}
	release()
	if n := s.ClearGarbage(false); n != len(files) {
		t.Errorf("ClearGarbage after the fetch removed %d files, want %d", n, len(files))
	}
}
