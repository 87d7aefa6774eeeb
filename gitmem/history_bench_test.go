package gitmem

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// BenchmarkReadHistoryIndex: loading the index of 100,000 commits.
func BenchmarkReadHistoryIndex(b *testing.B) {
	dir := b.TempDir()
	os.MkdirAll(filepath.Join(dir, ".git", "gitmem"), 0o700)
	x := newHistoryIndex(filepath.Join(dir, ".git"), nil)
	var recs []histRec
	var parent plumbing.Hash
	for i := range 100000 {
		h := plumbing.ComputeHash(plumbing.CommitObject, []byte(fmt.Sprint(i)))
		p := fmt.Sprintf("d%d/s%d/f%04d.md", i%10, i%100/10, i%10000)
		rec := newRec(h, parentList(parent), time.Unix(int64(1.7e9)+int64(i)*60, 0).UTC(), Signature{"bench", "bench@x"}, "memory: str_replace /memories/"+p,
			[]Trailer{{TrailerToolUseID, fmt.Sprint("toolu_gen_", i)}, {TrailerCommand, "str_replace"}, {TrailerPath, "/memories/" + p}, {TrailerSession, "s1"}})
		rec.change(p, h)
		recs = append(recs, rec)
		parent = h
	}
	if err := x.writeFile(recs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if got, _ := x.readFile(); len(got) != 100000 {
			b.Fatalf("%d records", len(got))
		}
	}
}
