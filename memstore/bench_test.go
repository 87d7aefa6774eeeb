package memstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/memstore"
)

// BenchmarkIndexFirstUse is what the first Memory Stores request on a
// store costs: the index built from a history of 10,000 commits (tool
// calls over 1,000 memories), by a fresh Index (as after a restart or a
// redaction).
func BenchmarkIndexFirstUse(b *testing.B) {
	dir := gittest.TempDir(b)
	r, _, err := gitmem.Init(context.Background(), dir, gitmem.Options{Logf: b.Logf})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for i := range 10000 {
		_, err := r.Update(context.Background(), gitmem.Meta{Subject: "w", Trailers: []gitmem.Trailer{{Key: gitmem.TrailerToolUseID, Value: fmt.Sprintf("toolu_%d", i)},
			{Key: gitmem.TrailerCommand, Value: "create"}}}, func(tx *gitmem.Tx) error {
			return tx.WriteFile(fmt.Sprintf("d%02d/m%03d.md", i%10, i%1000), []byte(fmt.Sprintf("version %d\n", i)))
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := r.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		vs, _, err := memstore.NewIndex().Versions(ctx, r, memstore.VersionFilter{}, "", 1, false)
		if err != nil || len(vs) != 1 {
			b.Fatal(vs, err)
		}
	}
}
