package gitmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// BenchmarkRefusedRenameOntoHandMadeFiles measures a model's rename
// onto a folder that holds 20,000 files made by hand, left for want of
// room (the memory at --max-files): refused ("The destination ... already
// exists"), with the writer turn held throughout, and the adopt of the
// paths it looked at after it. cpu-ns/op is the process's CPU time per
// call.
//
//	go test ./gitmem/ -run '^$' -bench RefusedRenameOntoHandMadeFiles -count 6
func BenchmarkRefusedRenameOntoHandMadeFiles(b *testing.B) {
	ctx := context.Background()
	dir := gittest.TempDir(b)
	opt := Options{Operator: Signature{"op", "op@example.com"}, MaxFiles: 2,
		Logf: func(string, ...any) {}, Errorf: func(string, ...any) {}}
	r, _, err := Init(ctx, dir, opt)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for _, p := range []string{"a.md", "c.md"} {
		if _, err := r.Update(ctx, Meta{Subject: "w"}, func(tx *Tx) error { return tx.WriteFile(p, []byte(p+"\n")) }); err != nil {
			b.Fatal(err)
		}
	}
	x := filepath.Join(dir, "memories", "x")
	if err := os.MkdirAll(x, 0o700); err != nil {
		b.Fatal(err)
	}
	for i := range 20000 {
		if err := os.WriteFile(filepath.Join(x, fmt.Sprintf("h%05d.md", i)), []byte("by hand\n"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
		b.Fatalf("adopt: %v, want ErrNoChange (no room)", err)
	}
	rename := func(tx *Tx) error { // as the handler's: the destination first
		if _, err := tx.Stat("x"); err == nil {
			return ErrExist
		}
		return tx.Rename("c.md", "x")
	}
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		if _, err := r.Update(ctx, Meta{Subject: "mv"}, rename); !errors.Is(err, ErrExist) {
			b.Fatalf("rename: %v, want ErrExist", err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}
