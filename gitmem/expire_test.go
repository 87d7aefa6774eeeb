package gitmem

import (
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// TestStaleGoesByCommitOrder pins which commit expire names as a file's
// last change: the one that descends from the others, whatever the times
// say (commits in one second; a clock that went back), and the later in
// time only between changes neither of which descends from the other.
func TestStaleGoesByCommitOrder(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hash := func(n byte) plumbing.Hash { return plumbing.Hash{n} }
	rec := func(n byte, at int, parents ...byte) histRec {
		h := histRec{hash: hash(n), when: t0.Add(time.Duration(at) * time.Second)}
		for _, p := range parents {
			h.parents = append(h.parents, hash(p))
		}
		h.change("f.md", hash(100+n))
		return h
	}
	files := map[string]string{"f.md": "x"}
	for _, tc := range []struct {
		name string
		hist []histRec
		want byte
	}{
		{"one second", []histRec{rec(1, 0), rec(2, 0, 1), rec(3, 0, 2)}, 3},
		{"a clock that went back", []histRec{rec(1, 0), rec(2, 10, 1), rec(3, 5, 2)}, 3},
		{"concurrent: the later in time", []histRec{rec(1, 0), rec(2, 100, 1), rec(3, 50, 1)}, 2},
		{"concurrent, then a descendant of the earlier", []histRec{rec(1, 0), rec(2, 100, 1), rec(3, 50, 1), rec(4, 60, 3)}, 2},
		// A merge (4) counts only for the files it resolved a conflict in;
		// a change after it (5) descends from both sides.
		{"concurrent, merged, changed again", []histRec{rec(1, 0), rec(2, 100, 1), rec(3, 50, 1), rec(4, 60, 3, 2), rec(5, 70, 4)}, 5},
	} {
		stale, err := staleIn(tc.hist, files, t0.Add(time.Hour), nil)
		if err != nil || len(stale) != 1 {
			t.Fatalf("%s: %v, %v", tc.name, stale, err)
		}
		if got := stale[0].Commit; got != hash(tc.want).String() {
			t.Errorf("%s: the last change is %s, want %s", tc.name, got[:2], hash(tc.want).String()[:2])
		}
	}
}
