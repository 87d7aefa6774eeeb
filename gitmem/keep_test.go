package gitmem

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// .git/gitmem/keep is every gitmem pack's .keep (one file, linked): an
// edit of it in place relabels them all as another program's, and gitmem
// gc then never folds those packs (git reads a .keep by its name alone,
// and keeps them either way). gitmem fsck names it; --repair writes the
// file anew and makes each of those .keep files a link of it again, in
// one rename each (no pack is ever without its .keep), and the next gc
// folds the packs.
func TestFsckRepairsAKeepEditedInPlace(t *testing.T) {
	t.Parallel()
	for _, anew := range []bool{false, true} {
		t.Run(fmt.Sprint("made anew since ", anew), func(t *testing.T) {
			t.Parallel()
			fsckRepairsAKeepEditedInPlace(t, anew)
		})
	}
}

func fsckRepairsAKeepEditedInPlace(t *testing.T, anew bool) {
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []string{"a.md", "b.md", "c.md"} {
		write(t, r, p, p, strings.Repeat(p+"\n", i+1))
		if err := r.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	packs := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "pack-*.pack"))
		return m
	}
	before := len(packs())
	if before < 2 {
		t.Fatalf("%d packs written, want several", before)
	}
	tmpl := filepath.Join(dir, ".git", "gitmem", gd.OwnKeepName)
	os.Chmod(tmpl, 0o644)
	if err := os.WriteFile(tmpl, []byte("mine now\n"), 0o644); err != nil { // in place
		t.Fatal(err)
	}
	// A later start writing a pack finds the template changed and makes
	// it anew, as linkOwnKeep does (a new file renamed over it): the packs
	// it kept are still one file, relabelled.
	if anew {
		fresh := tmpl + ".new"
		if err := os.WriteFile(fresh, []byte("gitmem: this pack is gitmem's; gitmem gc replaces it, git's gc leaves it\n"), 0o444); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(fresh, tmpl); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Fsck(context.Background(), dir, testOptions(t), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].What, fmt.Sprintf("was edited in place: %d pack(s)", before)) || strings.Contains(rep.Problems[0].What, dir) {
		t.Fatalf("fsck with .git/gitmem/keep edited in place: %+v", rep.Problems)
	}
	if rep, err = Fsck(context.Background(), dir, testOptions(t), true); err != nil || len(rep.Problems) != 1 || !rep.Problems[0].Repaired {
		t.Fatalf("fsck --repair: %+v, %v", rep.Problems, err)
	}
	if rep, err = Fsck(context.Background(), dir, testOptions(t), false); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("fsck after the repair: %+v, %v", rep.Problems, err)
	}
	tfi, err := os.Stat(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range packs() {
		keep := strings.TrimSuffix(p, ".pack") + ".keep"
		fi, err := os.Stat(keep)
		if err != nil || !os.SameFile(fi, tfi) {
			t.Errorf("%s: %v, not a link of %s", filepath.Base(keep), err, gd.OwnKeepName)
		}
	}
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.GC(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if after := len(packs()); after >= before {
		t.Errorf("gc after the repair left %d packs of %d: not folded", after, before)
	}
}
