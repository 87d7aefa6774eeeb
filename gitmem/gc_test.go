package gitmem

import (
	"fmt"
	"strings"
	"testing"
)

func TestGCPacksAndGitAgrees(t *testing.T) {
	dir := t.TempDir()
	r, _, err := Init(dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range 30 {
		write(t, r, fmt.Sprint("id", i), fmt.Sprintf("d%d/f.md", i%4), fmt.Sprintf("v%d\n", i))
	}
	settle(t, r)
	loose, _ := r.obj.LooseHashes()
	st, err := r.GC(false)
	if err != nil || st.Packed != len(loose) || st.Removed != len(loose) {
		t.Fatalf("incremental gc: %+v, %v (had %d loose)", st, err, len(loose))
	}
	if left, _ := r.obj.LooseHashes(); len(left) != 0 {
		t.Fatalf("%d loose objects left", len(left))
	}
	// Still readable by gitmem (its pack list is refreshed) and by git.
	write(t, r, "after", "d0/f.md", "after gc\n")
	if got := read(t, r, "d1/f.md"); got != "v29\n" {
		t.Fatalf("read after gc: %q", got)
	}
	st, err = r.GC(true)
	if err != nil || st.Packed == 0 {
		t.Fatalf("full gc: %+v %v", st, err)
	}
	gitCLI(t, dir, "fsck", "--strict", "--no-dangling")
	count := gitCLI(t, dir, "count-objects", "-v")
	if !strings.Contains(count, "count: 0\n") || !strings.Contains(count, "packs: 1\n") {
		t.Fatalf("after a full gc:\n%s", count)
	}
	if n := strings.TrimSpace(gitCLI(t, dir, "rev-list", "--count", "HEAD")); n != "32" {
		t.Fatalf("%s commits", n)
	}
}
