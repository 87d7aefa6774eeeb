package gitdir

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/klauspost/compress/zlib"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// WalkPack gives every object of a pack once, with the content ReadObject
// gives, rebuilding deltas (OFS_DELTA of trees and blobs as git repack
// stores them, REF_DELTA before its base as a copy between repositories
// writes them, a REF_DELTA of a base in another pack), and decodes no
// blob: not even a blob stored as a delta, nor the base of one.
func TestWalkPack(t *testing.T) {
	t.Parallel()
	dir := history(t, 300)
	gittest.Git(t, dir, "repack", "-adfq")
	gitDir := filepath.Join(dir, ".git")
	src := Open(gitDir)
	defer src.Close()
	idx := mustGlob(t, filepath.Join(gitDir, "objects", "pack", "*.idx"))
	packHash := plumbing.NewHash(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(idx), "pack-"), ".idx"))
	verify := gittest.Git(t, dir, "verify-pack", "-v", idx)
	blobDeltas := 0
	for _, l := range strings.Split(verify, "\n") {
		if f := strings.Fields(l); len(f) == 7 && f[1] == "blob" {
			blobDeltas++
		}
	}
	if blobDeltas == 0 || !strings.Contains(verify, "chain length = 2") {
		t.Fatalf("git repack stored no blob as a delta, or no chain:\n%s", verify)
	}
	all, err := PackHashes(idx)
	if err != nil {
		t.Fatal(err)
	}
	walk := func(st *Store, pack plumbing.Hash, want []plumbing.Hash, outside int64) {
		t.Helper()
		ref := Open(st.Dir)
		defer ref.Close()
		seen := map[plumbing.Hash]bool{}
		whole := 0
		before := st.Decoded()
		err := st.WalkPack(pack, func(t plumbing.ObjectType) bool { return t != plumbing.BlobObject }, func(h plumbing.Hash, typ plumbing.ObjectType, data []byte) error {
			if seen[h] {
				t.Errorf("%s came twice", h)
			}
			seen[h] = true
			rt, rdata, err := ref.ReadObject(h)
			switch {
			case err != nil:
				t.Errorf("ReadObject %s: %v", h, err)
			case rt != typ:
				t.Errorf("%s: a %s, ReadObject says a %s", h, typ, rt)
			case typ == plumbing.BlobObject && data != nil:
				t.Errorf("the blob %s was decoded", h)
			case typ != plumbing.BlobObject && !bytes.Equal(data, rdata):
				t.Errorf("%s: %q, ReadObject gives %q", h, data, rdata)
			}
			if typ != plumbing.BlobObject {
				whole++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != len(want) {
			t.Errorf("the walk gave %d objects of %d", len(seen), len(want))
		}
		if got := st.Decoded() - before; got != int64(whole)+outside {
			t.Errorf("the walk decoded %d objects; %d are not blobs, %d bases outside the pack", got, whole, outside)
		}
	}
	walk(src, packHash, all, 0)

	// Copied into another repository deltas first: REF_DELTAs before
	// their bases.
	backward := slices.Clone(all)
	slices.SortFunc(backward, func(a, b plumbing.Hash) int {
		_, oa, _ := src.packs.lookup(a)
		_, ob, _ := src.packs.lookup(b)
		return int(ob - oa)
	})
	_, dstGit := gitInit(t)
	dst := Open(dstGit)
	defer dst.Close()
	copied, err := dst.WritePackFrom(src, backward)
	if err != nil {
		t.Fatal(err)
	}
	walk(dst, copied, all, 0)

	// A REF_DELTA whose base is in another pack: a thin pack, which no
	// fetch keeps (go-git's parser refuses it), but ReadObject reads.
	var tree1, tree2 plumbing.Hash
	for _, l := range strings.Split(verify, "\n") {
		if f := strings.Fields(l); len(f) == 7 && f[1] == "tree" && tree1.IsZero() {
			tree1, tree2 = plumbing.NewHash(f[0]), plumbing.NewHash(f[6])
		}
	}
	_, data1, err := src.ReadObject(tree1)
	if err != nil {
		t.Fatal(err)
	}
	_, data2, err := src.ReadObject(tree2)
	if err != nil {
		t.Fatal(err)
	}
	_, thinGit := gitInit(t)
	thin := Open(thinGit)
	defer thin.Close()
	if _, err := thin.WriteObjectsPack([]Object{{Type: plumbing.TreeObject, Hash: tree2, Data: data2}}, true); err != nil {
		t.Fatal(err)
	}
	var pack bytes.Buffer
	pack.WriteString("PACK")
	binary.Write(&pack, binary.BigEndian, [2]uint32{2, 1})
	delta := Delta(data2, data1, 0)
	entry := append(putEntryHeader(plumbing.REFDeltaObject, int64(len(delta))), tree2[:]...)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(delta)
	zw.Close()
	entry = append(entry, z.Bytes()...)
	pack.Write(entry)
	sum := plumbing.Hash(sha1.Sum(pack.Bytes()))
	pack.Write(sum[:])
	base := filepath.Join(thinGit, "objects", "pack", "pack-"+sum.String())
	if err := os.WriteFile(base+".pack", pack.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
	xf, err := os.Create(base + ".idx")
	if err != nil {
		t.Fatal(err)
	}
	if err := writeIndex(xf, []packEntry{{hash: tree1, off: 12, crc: crc32.ChecksumIEEE(entry)}}, sum); err != nil {
		t.Fatal(err)
	}
	xf.Close()
	thin.Reindex()
	walk(thin, sum, []plumbing.Hash{tree1}, 1)
	thin.Close()
	RemovePacks(thinGit, []plumbing.Hash{sum}) // which git fsck refuses: it reads no base outside a pack
}
