package gitdir

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A push, and a copy between repositories on this machine, send packed
// objects as they are stored, as git does: none is read whole (inflated,
// its delta chain resolved) to be compressed again, deltas stay deltas,
// and what arrives reads back the same through gitmem and git. A delta
// whose base is not sent goes whole.
func TestSendPackedObjectsAsStored(t *testing.T) {
	t.Parallel()
	_, srcGit := gitInit(t)
	var objs []Object
	blob := func(i int) plumbing.Hash {
		data := []byte(fmt.Sprintf("memory %d\n%s", i, strings.Repeat("a line of a memory file\n", i%7)))
		h := plumbing.ComputeHash(plumbing.BlobObject, data)
		objs = append(objs, Object{Type: plumbing.BlobObject, Hash: h, Data: data})
		return h
	}
	entries := make([]object.TreeEntry, 100)
	for i := range entries {
		entries[i] = object.TreeEntry{Name: fmt.Sprintf("f%03d.md", i), Mode: filemode.Regular, Hash: blob(i)}
	}
	var base plumbing.Hash
	for v := range 20 { // 20 versions of a folder, each a delta of the one before
		entries[v*5%100].Hash = blob(1000 + v)
		data := EncodeEntries(entries)
		h := plumbing.ComputeHash(plumbing.TreeObject, data)
		objs = append(objs, Object{Type: plumbing.TreeObject, Hash: h, Data: data, Base: base})
		base = h
	}
	src := Open(srcGit)
	defer src.Close()
	if _, err := src.WriteObjectsPack(objs, true); err != nil {
		t.Fatal(err)
	}
	var hashes []plumbing.Hash
	for _, o := range objs {
		hashes = append(hashes, o.Hash)
	}
	gitReads := func(dir string, want []Object) {
		t.Helper()
		var names []string
		for _, o := range want {
			names = append(names, o.Hash.String())
		}
		for i, got := range gittest.CatFiles(t, dir, names...) {
			if o := want[i]; got.Type != o.Type.String() || !bytes.Equal(got.Data, o.Data) {
				t.Fatalf("git cat-file %s: %s %q", o.Hash, got.Type, got.Data)
			}
		}
	}
	check := func(dir string, st *Store, want []Object) {
		t.Helper()
		for _, o := range want {
			typ, data, err := st.ReadObject(o.Hash)
			if err != nil || typ != o.Type || !bytes.Equal(data, o.Data) {
				t.Fatalf("read %s: %v %v", o.Hash, typ, err)
			}
		}
		gitReads(dir, want)
	}

	// Into another repository on this machine.
	dstDir, dstGit := gitInit(t)
	dst := Open(dstGit)
	defer dst.Close()
	reads := src.PackReads()
	h, err := dst.WritePackFrom(src, hashes)
	if err != nil {
		t.Fatal(err)
	}
	if n := src.PackReads() - reads; n != 0 {
		t.Errorf("the copy read %d of the %d objects whole", n, len(hashes))
	}
	if out := gittest.Git(t, dstDir, "verify-pack", "-v", PackIndexPath(dstGit, h)); !strings.Contains(out, "chain length = 19: 1 object") {
		t.Errorf("the deltas did not stay deltas: git verify-pack:\n%s", out)
	}
	check(dstDir, dst, objs)

	// Named deltas first: each base still goes before its deltas.
	backward := slices.Clone(hashes)
	slices.Reverse(backward)
	backDir, backGit := gitInit(t)
	back := Open(backGit)
	defer back.Close()
	if h, err = back.WritePackFrom(src, backward); err != nil {
		t.Fatal(err)
	}
	if out := gittest.Git(t, backDir, "verify-pack", "-v", PackIndexPath(backGit, h)); !strings.Contains(out, "chain length = 19: 1 object") {
		t.Errorf("the deltas did not stay deltas: git verify-pack:\n%s", out)
	}
	check(backDir, back, objs)

	// As a pack stream, which git indexes, in either order: every base
	// before its deltas, which refer to it by offset when the receiver
	// takes OFS_DELTA (as git sends them: a few bytes, not a 20-byte
	// hash), else by hash.
	for _, order := range [][]plumbing.Hash{hashes, backward} {
		for _, ofs := range []bool{true, false} {
			var stream bytes.Buffer
			reads = src.PackReads()
			if err := src.EncodePack(&stream, order, ofs); err != nil {
				t.Fatal(err)
			}
			if n := src.PackReads() - reads; n != 0 {
				t.Errorf("the pack stream read %d of the %d objects whole", n, len(hashes))
			}
			kinds := entryKinds(t, stream.Bytes())
			want := map[bool]plumbing.ObjectType{true: plumbing.OFSDeltaObject, false: plumbing.REFDeltaObject}[ofs]
			if kinds[want] != 19 || kinds[plumbing.OFSDeltaObject]+kinds[plumbing.REFDeltaObject] != 19 {
				t.Errorf("ofs %v: the stream's entries: %v; want the 19 deltas as %v", ofs, kinds, want)
			}
			gitDir, _ := gitInit(t)
			cmd := gittest.Command(t, gitDir, "index-pack", "--stdin", "--strict")
			cmd.Stdin = &stream
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git index-pack: %v\n%s", err, out)
			}
			gitReads(gitDir, objs)
		}
	}

	// The newest version alone: its base is not sent, so it goes whole.
	oneDir, oneGit := gitInit(t)
	one := Open(oneGit)
	defer one.Close()
	last := objs[len(objs)-1]
	if h, err = one.WritePackFrom(src, []plumbing.Hash{last.Hash}); err != nil {
		t.Fatal(err)
	}
	if out := gittest.Git(t, oneDir, "verify-pack", "-v", PackIndexPath(oneGit, h)); !strings.Contains(out, "non delta: 1 object") {
		t.Errorf("git verify-pack:\n%s", out)
	}
	check(oneDir, one, []Object{last})
}

// entryKinds counts the entries of a pack stream by their kind as stored
// (a delta's OFS_DELTA or REF_DELTA).
func entryKinds(t *testing.T, stream []byte) map[plumbing.ObjectType]int {
	t.Helper()
	sc := packfile.NewScanner(bytes.NewReader(stream))
	_, n, err := sc.Header()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[plumbing.ObjectType]int{}
	for range n {
		h, err := sc.NextObjectHeader()
		if err != nil {
			t.Fatal(err)
		}
		kinds[h.Type]++
	}
	return kinds
}

// radixSort sorts as slices.Sort does, whatever the keys' width and
// number (by comparison below radixMin, by digits from it on).
func TestRadixSort(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ n, bits int }{{0, 8}, {1, 8}, {2, 1}, {1000, 12}, {1000, 16}, {radixMin - 1, 33},
		{radixMin, 12}, {radixMin, 16}, {5000, 33}, {5000, 64}} {
		keys := make([]uint64, c.n)
		for i := range keys {
			keys[i] = rng.Uint64() >> (64 - c.bits)
		}
		want := slices.Clone(keys)
		slices.Sort(want)
		if got := radixSort(keys); !slices.Equal(got, want) {
			t.Errorf("%d keys of %d bits: not sorted", c.n, c.bits)
		}
	}
}
