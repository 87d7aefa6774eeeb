package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

// The pull rows' memory is cloned once and copied for every run: the copy
// must hold the history index, as the source memory does, so that each
// run's Open does not rebuild it (for the whole history, 4-6 s of CPU at
// 100,000 commits) while the timed pull runs.
func TestCloneSettledHoldsTheHistoryIndex(t *testing.T) {
	dir := gittest.TempDir(t)
	base := filepath.Join(dir, "base")
	if err := Generate(base, 5, 40); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(dir, "base.git")
	gittest.Git(t, dir, "init", "-q", "--bare", "--initial-branch=main", bare)
	gittest.Git(t, base, "push", "-q", bare, "HEAD:refs/heads/main")
	opt := gitmem.Options{Logf: func(string, ...any) {}}
	clone := filepath.Join(dir, "clone")
	if err := cloneSettled(context.Background(), bare, clone, opt, gitmem.SyncOptions{Limits: policy.Limits{MaxFiles: 1000}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(clone, ".git", "gitmem", "history")); err != nil {
		t.Fatalf("the clone has no history index: each copy's Open would build it: %v", err)
	}
}
