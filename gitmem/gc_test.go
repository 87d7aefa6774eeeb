package gitmem

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// noGarbage reports whether git count-objects -v found no garbage (not a
// substring test: size-garbage: 0 is there whatever the count).
func noGarbage(countObjects string) bool {
	return regexp.MustCompile(`(?m)^garbage: 0$`).MatchString(countObjects) && !strings.Contains(countObjects, "warning: garbage")
}

// pendingObjects is what an incremental collection packs: the loose
// objects and those of the packs gc did not write.
func pendingObjects(t *testing.T, r *Repo) (objects map[plumbing.Hash]bool, files int) {
	t.Helper()
	objects = map[plumbing.Hash]bool{}
	loose, _ := r.objects.st.LooseHashes()
	for _, h := range loose {
		objects[h] = true
	}
	packs, _ := gd.ListPacks(r.gitDir)
	for _, p := range packs {
		if p.Repacked {
			continue
		}
		hs, err := gd.PackHashes(gd.PackIndexPath(r.gitDir, p.Hash))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			objects[h] = true
		}
		files++
	}
	return objects, len(loose) + files
}

func TestGCPacksAndGitAgrees(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	for i := range 30 {
		write(t, r, fmt.Sprint("id", i), fmt.Sprintf("d%d/f.md", i%4), fmt.Sprintf("v%d\n", i))
	}
	settle(t, r)
	objects, files := pendingObjects(t, r)
	st, err := r.GC(context.Background(), false)
	if err != nil || st.Packed != len(objects) || st.Removed != files {
		t.Fatalf("incremental gc: %+v, %v (had %d objects in %d files)", st, err, len(objects), files)
	}
	if left, _ := r.objects.st.LooseHashes(); len(left) != 0 {
		t.Fatalf("%d loose objects left", len(left))
	}
	if packs, _ := gd.ListPacks(r.gitDir); len(packs) != 1 || !packs[0].Repacked {
		t.Fatalf("packs after an incremental gc: %+v", packs)
	}
	// gitmem's own record of the packs it wrote is not git's garbage.
	if count := gittest.Git(t, dir, "count-objects", "-v"); !noGarbage(count) {
		t.Fatalf("after an incremental gc:\n%s", count)
	}
	// Still readable by gitmem (its pack list is refreshed) and by git.
	write(t, r, "after", "d0/f.md", "after gc\n")
	if got := read(t, r, "d1/f.md"); got != "v29\n" {
		t.Fatalf("read after gc: %q", got)
	}
	st, err = r.GC(context.Background(), true)
	if err != nil || st.Packed == 0 {
		t.Fatalf("full gc: %+v %v", st, err)
	}
	gittest.Fsck(t, dir)
	count := gittest.Git(t, dir, "count-objects", "-v")
	if !strings.Contains(count, "count: 0\n") || !strings.Contains(count, "packs: 1\n") || !noGarbage(count) {
		t.Fatalf("after a full gc:\n%s", count)
	}
	if n := strings.TrimSpace(gittest.Git(t, dir, "rev-list", "--count", "HEAD")); n != "32" {
		t.Fatalf("%s commits", n)
	}
}

// A flat folder's tree changes by one entry per commit: every version
// but the newest is a delta, and the pack is a fraction of the trees'
// size.
func TestGCDeltifiesAFlatFolder(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	_, err := r.Update(context.Background(), Meta{Subject: "seed"}, func(tx *Tx) error {
		for i := range 500 {
			if err := tx.WriteFile(fmt.Sprintf("notes/n%03d.md", i), []byte(fmt.Sprintf("note %d\n", i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	const edits = 40
	for i := range edits {
		write(t, r, fmt.Sprint("e", i), fmt.Sprintf("notes/n%03d.md", i*7), fmt.Sprintf("note edited %d\n", i))
	}
	settle(t, r)
	st, err := r.GC(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	// Each edit: the folder's tree as a delta (memories/ and the root, of
	// one entry each, are smaller whole).
	if st.Deltas < edits {
		t.Fatalf("%d deltas of %d objects", st.Deltas, st.Packed)
	}
	packs, _ := gd.ListPacks(r.gitDir)
	treeBytes := int64(edits) * 500 * 30 // 40 versions of a 500-entry tree, whole
	if len(packs) != 1 || packs[0].Bytes > treeBytes/5 {
		t.Fatalf("packs %+v; the trees alone would take %d bytes whole", packs, treeBytes)
	}
	gittest.Fsck(t, dir)
}

// gc writes its pack holding none of the writer's locks: a change made
// and materialised while the pack is being written (here, between writing
// it and swapping it in) goes through, and the swap keeps it.
func TestGCDoesNotHoldUpWriters(t *testing.T) {
	t.Parallel()
	for _, full := range []bool{false, true} {
		t.Run(fmt.Sprint("full=", full), func(t *testing.T) {
			hooked := 0
			var r *Repo
			r, dir := newRepoWith(t, &testHooks{gc: func(stage string) {
				if stage != "packed" {
					return
				}
				hooked++
				for i := range 5 {
					write(t, r, fmt.Sprint("during", i), fmt.Sprintf("during%d.md", i), "written during gc\n")
				}
				settle(t, r) // materialised too: the disk lock is free
			}})
			for i := range 20 {
				write(t, r, fmt.Sprint("id", i), fmt.Sprintf("f%d.md", i%3), fmt.Sprintf("v%d\n", i))
			}
			settle(t, r)
			if _, err := r.GC(context.Background(), full); err != nil {
				t.Fatal(err)
			}
			if hooked != 1 {
				t.Fatalf("the hook ran %d times", hooked)
			}
			settle(t, r)
			gittest.Fsck(t, dir)
			if got := gittest.Git(t, dir, "show", "HEAD:memories/during4.md"); got != "written during gc\n" {
				t.Fatalf("the change made during gc: %q", got)
			}
		})
	}
}

// A full collection deletes what no ref reaches, except what a commit
// made while it ran uses again: a loose object (gitmem does not write a
// loose object twice), or one only in a pack being replaced (here, a
// commit git made refers to it); made while the pack is written, and
// just before the swap.
func TestFullGCKeepsWhatCommitsMadeMeanwhileUse(t *testing.T) {
	t.Parallel()
	var hook func(stage string) // set for the full collection
	r, dir := newRepoWith(t, &testHooks{gc: func(stage string) {
		if hook != nil {
			hook(stage)
		}
	}})
	write(t, r, "a", "a.md", "a\n")
	settle(t, r)
	hashObject := func(content string) string {
		return strings.TrimSpace(gittest.GitIn(t, dir, content, "hash-object", "-w", "--stdin"))
	}
	// An unreachable blob, packed by an incremental gc.
	packed := hashObject("only in a pack\n")
	if _, err := r.GC(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	loose := hashObject("loose and unreachable\n")
	garbage := hashObject("garbage\n")
	hook = func(stage string) {
		switch stage {
		case "planned":
			return
		case "packed":
			write(t, r, "b", "b.md", "loose and unreachable\n")
			settle(t, r)
			return
		}
		tree := strings.TrimSpace(gittest.GitIn(t, dir, "100644 blob "+packed+"\tp.md\n", "mktree"))
		commit := strings.TrimSpace(gittest.Git(t, dir, "-c", "user.name=x", "-c", "user.email=x@x", "commit-tree", tree, "-m", "by git"))
		gittest.Git(t, dir, "update-ref", "refs/heads/other", commit)
	}
	st, err := r.GC(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	gittest.Fsck(t, dir)
	for _, h := range []string{packed, loose} {
		gittest.Git(t, dir, "cat-file", "-e", h)
	}
	if out, err := gittest.Command(t, dir, "cat-file", "-e", garbage).CombinedOutput(); err == nil {
		t.Fatalf("the unreachable blob survived a full gc (%+v) %s", st, out)
	}
}

// The packs left after merging form a geometric progression, and every
// burst (a small pack gc did not write) is merged.
func TestPacksToMerge(t *testing.T) {
	t.Parallel()
	h := func(i int) plumbing.Hash { return plumbing.ComputeHash(plumbing.BlobObject, []byte(fmt.Sprint(i))) }
	ours := func(i, n int) gd.Pack { return gd.Pack{Hash: h(i), Objects: n, Repacked: true} }
	fresh := func(i, n int) gd.Pack { return gd.Pack{Hash: h(i), Objects: n} }
	names := func(ps []gd.Pack) []plumbing.Hash {
		var out []plumbing.Hash
		for _, p := range ps {
			out = append(out, p.Hash)
		}
		return out
	}
	cases := []struct {
		packs []gd.Pack
		loose int
		want  []int
	}{
		{[]gd.Pack{ours(1, 1000)}, 10, nil},
		{[]gd.Pack{ours(1, 1000), fresh(2, 20), fresh(3, 30)}, 10, []int{2, 3}},
		{[]gd.Pack{ours(1, 1000), ours(2, 100), ours(3, 9)}, 5, []int{3}},     // 9 < 2*5: merged; 100 >= 2*(5+9)
		{[]gd.Pack{ours(1, 1000), ours(2, 100), ours(3, 60)}, 5, []int{3, 2}}, // 100 < 2*65
		{[]gd.Pack{ours(1, 100), ours(2, 100)}, 0, []int{1, 2}},
		{[]gd.Pack{ours(1, 100), ours(2, 1000)}, 0, nil},
		// A history git packed (500,000 objects) is not rewritten for a
		// few thousand loose objects; a burst beside it is packed.
		{[]gd.Pack{fresh(1, 500_000), fresh(2, 300)}, 6_000, []int{2}},
		{[]gd.Pack{fresh(1, 500_000), ours(2, 5_000)}, 6_000, []int{2}}, // 5,000 < 2*6,000
	}
	for i, c := range cases {
		got := names(packsToMerge(c.packs, c.loose))
		var want []plumbing.Hash
		for _, w := range c.want {
			want = append(want, h(w))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("case %d: merged %v, want %v", i, got, want)
		}
	}
}

// An interrupted collection leaves its temporary pack; a collection
// clears it once it is old (a young one may be being written), a
// redaction at once (gitmem's TestRedactLeavesNoOpenOrTemporaryPacks).
func TestGCClearsTemporaryPacks(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	write(t, r, "a", "a.md", "a\n")
	settle(t, r)
	tmp := filepath.Join(r.gitDir, "objects", "pack", gd.TmpPackPrefix+"pack_killed")
	os.WriteFile(tmp, []byte("half a pack"), 0o444)
	for _, full := range []bool{false, true} {
		if _, err := r.GC(context.Background(), full); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(tmp); err != nil {
			t.Fatalf("a young temporary pack was deleted (full %v)", full)
		}
	}
	old := time.Now().Add(-2 * gd.StaleTemp)
	os.Chtimes(tmp, old, old)
	if _, err := r.GC(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); err == nil {
		t.Fatal("gc left an old temporary pack")
	}
}

// A pack marked the old way (pack-H.gitmem beside it in objects/pack,
// which git counts as garbage) still counts as gc's, and the next start
// moves the mark out of git's folder.
func TestOldRepackedMarksMove(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		write(t, r, fmt.Sprint("id", i), "f.md", fmt.Sprintf("v%d\n", i))
	}
	settle(t, r)
	if _, err := r.GC(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	r.Close()
	packs, _ := gd.ListPacks(filepath.Join(dir, ".git"))
	if len(packs) != 1 || !packs[0].Repacked {
		t.Fatalf("packs after gc: %+v", packs)
	}
	// As an earlier gitmem left it: the mark in objects/pack only, and one
	// for a pack git's own gc has since deleted.
	pack := filepath.Join(dir, ".git", "objects", "pack", "pack-"+packs[0].Hash.String())
	os.RemoveAll(filepath.Join(dir, ".git", "gitmem", "repacked"))
	os.WriteFile(pack+".gitmem", nil, 0o444)
	gone := filepath.Join(dir, ".git", "objects", "pack", "pack-"+strings.Repeat("ab", 20)+".gitmem")
	os.WriteFile(gone, nil, 0o444)
	if packs, _ := gd.ListPacks(filepath.Join(dir, ".git")); len(packs) != 1 || !packs[0].Repacked {
		t.Fatalf("an old mark is not honoured: %+v", packs)
	}
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if packs, _ := gd.ListPacks(r.gitDir); len(packs) != 1 || !packs[0].Repacked {
		t.Fatalf("the moved mark is lost: %+v", packs)
	}
	for _, p := range []string{pack + ".gitmem", gone} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", filepath.Base(p), err)
		}
	}
	if count := gittest.Git(t, dir, "count-objects", "-v"); !noGarbage(count) {
		t.Fatalf("after the start:\n%s", count)
	}
}

// Each one-command change (gitmem revert, restore, ...) writes a small
// pack, and nothing merged them across processes unless a server ran:
// after ~250 reverts a memory held 253 packs and a revert spent 17% of
// its CPU opening pack indexes. Like git's gc --auto after a commit
// (gc.autoPackLimit), a one-command process that changed the memory
// packs them once it holds more than autoPackLimit: not at 10, nor at
// 50, and at 51 into one pack of gc's (a few milliseconds here).
func TestOneCommandFoldsItsPacks(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	bursts := func() int {
		packs, err := gd.ListPacks(filepath.Join(dir, ".git"))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := bursts(packs)
		return n
	}
	opt := testOptions(t)
	opt.OneCommand, opt.TouchedOnly = true, true
	before := bursts()
	for i := 1; ; i++ {
		r, err := Open(context.Background(), dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		write(t, r, fmt.Sprintf("t%d", i), fmt.Sprintf("f%d.md", i%4), fmt.Sprintf("change %d\n", i))
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		n := bursts()
		if before+i <= autoPackLimit {
			if n != before+i {
				t.Fatalf("after %d one-command changes the memory holds %d packs of changes, want %d: folded under the limit", i, n, before+i)
			}
			continue
		}
		if n != 0 {
			t.Fatalf("after %d one-command changes the memory holds %d packs of changes: not folded", i, n)
		}
		break
	}
	if got := gittest.Git(t, dir, "show", "HEAD:memories/f1.md"); !strings.HasPrefix(got, "change ") {
		t.Fatalf("f1.md at HEAD is %q", got)
	}
}
