package gitdir

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// A branch file far larger than any ref (64 MiB here, sparse; 300 MB was
// seen) is damage, said as such without the host path, and is not read
// whole to be refused: ReadRef reads at most what a ref can be. Before,
// the whole file was read (64 MiB and more allocated) and then refused.
// Not parallel: the bytes allocated are counted with no other test
// running.
func TestAHugeBranchFileIsNotReadWhole(t *testing.T) {
	gitDir := t.TempDir()
	heads := filepath.Join(gitDir, "refs", "heads")
	if err := os.MkdirAll(heads, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(heads, "main"), []byte(strings.Repeat("a", 40)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(heads, "main"), 64<<20); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadRef(gitDir, plumbing.NewBranchReferenceName("main"))
	runtime.ReadMemStats(&after)
	var d *Damaged
	if !errors.As(err, &d) || !strings.Contains(d.Problem, "more than a ref") || strings.Contains(err.Error(), gitDir) {
		t.Errorf("ReadRef of a 64 MiB branch file: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("ReadRef of a 64 MiB branch file allocated %d bytes: read whole", n)
	}
}
