package gitdir

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// indexStream runs indexPack on a pack stream written to a file.
func indexStream(t *testing.T, stream []byte) (plumbing.Hash, []packEntry, error) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "pack")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(stream); err != nil {
		t.Fatal(err)
	}
	return indexPack(f)
}

// packStream is what git pack-objects writes of the revisions in revs.
func packStream(t *testing.T, dir, revs string, args ...string) []byte {
	t.Helper()
	cmd := gittest.Command(t, dir, append([]string{"pack-objects", "--stdout", "--revs", "-q"}, args...)...)
	cmd.Stdin = strings.NewReader(revs)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git pack-objects: %v", err)
	}
	return out
}

// A pack a remote sends is indexed as git index-pack indexes it: the same
// objects at the same offsets with the same CRCs and checksum, whether
// its deltas refer to their bases by offset or by hash (before or after
// them); each object is inflated at most twice (go-git's parser read each
// whole object twice and rebuilt each delta twice, through a zlib reader
// of its own). What git index-pack refuses is refused: a pack cut short,
// a bad checksum, bytes after the last object, more objects announced
// than sent, a thin pack (a delta of an object not in it). Not parallel:
// it counts the inflations of the whole process.
func TestIndexPackAsGit(t *testing.T) {
	dir := history(t, 300)
	var backward bytes.Buffer
	{
		st := Open(filepath.Join(dir, ".git"))
		gittest.Git(t, dir, "repack", "-adq")
		all, err := PackHashes(mustGlob(t, filepath.Join(dir, ".git", "objects", "pack", "*.idx")))
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(all, func(a, b plumbing.Hash) int {
			_, oa, _ := st.packs.lookup(a)
			_, ob, _ := st.packs.lookup(b)
			return int(ob - oa)
		})
		backward.Write(refDeltasInOrder(t, st, all))
		st.Close()
	}
	for _, c := range []struct {
		name   string
		stream []byte
	}{
		{"OFS_DELTA", packStream(t, dir, "", "--all", "--delta-base-offset")},
		{"REF_DELTA", packStream(t, dir, "", "--all")},
		{"REF_DELTA before its base", backward.Bytes()},
	} {
		before := inflations.Load()
		sum, entries, err := indexStream(t, c.stream)
		inflated := inflations.Load() - before
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		gitDir, _ := gitInit(t)
		cmd := gittest.Command(t, gitDir, "index-pack", "--stdin", "--strict")
		cmd.Stdin = bytes.NewReader(c.stream)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: git index-pack: %v\n%s", c.name, err, out)
		}
		if got := strings.TrimSpace(strings.TrimPrefix(string(out), "pack\t")); got != sum.String() {
			t.Errorf("%s: checksum %s, git's %s", c.name, sum, got)
		}
		var ours []string
		for _, e := range entries {
			ours = append(ours, fmt.Sprintf("%d %s (%08x)", e.off, e.hash, e.crc))
		}
		f, _ := os.Open(PackIndexPath(filepath.Join(gitDir, ".git"), sum))
		cmd = gittest.Command(t, gitDir, "show-index")
		cmd.Stdin = f
		shown, err := cmd.Output()
		f.Close()
		if err != nil {
			t.Fatalf("git show-index: %v", err)
		}
		gits := strings.Split(strings.TrimSpace(string(shown)), "\n")
		slices.Sort(ours)
		slices.Sort(gits)
		if !slices.Equal(ours, gits) {
			t.Errorf("%s: %d entries, git's %d; first ours %q, git's %q", c.name, len(ours), len(gits), ours[0], gits[0])
		}
		if n := int64(len(entries)); inflated < n || inflated > 2*n {
			t.Errorf("%s: %d inflations for %d objects", c.name, inflated, n)
		}
	}

	ok := packStream(t, dir, "", "--all", "--delta-base-offset")
	resum := func(b []byte) []byte {
		s := sha1.Sum(b[:len(b)-20])
		return append(b[:len(b)-20], s[:]...)
	}
	flipped := slices.Clone(ok)
	flipped[len(flipped)/2] ^= 1
	trailing := resum(append(slices.Clone(ok[:len(ok)-20]), append(bytes.Repeat([]byte{0}, 9), make([]byte, 20)...)...))
	more := slices.Clone(ok)
	binary.BigEndian.PutUint32(more[8:], binary.BigEndian.Uint32(more[8:])+1)
	more = resum(more)
	for _, c := range []struct {
		name, want string
		stream     []byte
	}{
		{"cut short", "checksum", ok[:len(ok)-30]},
		{"a bad checksum", "checksum", flipped},
		{"bytes after the last object", "bytes after its last object", trailing},
		{"one object more announced", "ends before its", more},
		{"a thin pack", "is not in it", packStream(t, dir, "HEAD\n^HEAD~20\n", "--thin", "--delta-base-offset")},
		{"not a pack", "no pack header", []byte("this is not a pack, not at all")},
	} {
		if _, _, err := indexStream(t, c.stream); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
		gitDir, _ := gitInit(t)
		cmd := gittest.Command(t, gitDir, "index-pack", "--stdin", "--strict")
		cmd.Stdin = bytes.NewReader(c.stream)
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("%s: git index-pack takes it: %s", c.name, out)
		}
	}
}

// refDeltasInOrder is a pack stream of st's packed objects in the order
// of hashes, each entry as stored, a delta referring to its base by hash
// wherever the base is (EncodePack puts every base first).
func refDeltasInOrder(t *testing.T, st *Store, hashes []plumbing.Hash) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("PACK\x00\x00\x00\x02")
	binary.Write(&b, binary.BigEndian, uint32(len(hashes)))
	x := st.newSender(hashes)
	for _, h := range hashes {
		e, ok := x.stored(h)
		if !ok {
			t.Fatalf("%s is not sent as stored", h)
		}
		b.Write(e.header())
		b.Write(e.z)
	}
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}
