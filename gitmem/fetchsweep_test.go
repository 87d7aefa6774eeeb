package gitmem

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// A pull fetches without the writer lock. A writer's start in another
// process meanwhile (a second serve, an operator's command) swept the
// pack folder as if no gitmem were writing there: it removed the fetch's
// temporary files, and its pack placed without its index yet (a killed
// fetch's, as far as the sweep could tell), and the pull failed. A start
// now leaves the pack folder alone while a fetch holds .git/gitmem/fetch.
// Here the start is another Repo on the same memory, opened at the step
// between the fetched pack and its index (its own lock files: to flock,
// another process).
func TestStartBesideAFetchLeavesItsFiles(t *testing.T) {
	t.Parallel()
	_, a, b := twoAgents(t)
	put(t, a, "t1", "x.md", "x\n")
	syncOK(t, a)
	settle(t, b) // nothing of b's own is written during the pull
	var started atomic.Bool
	var startErr error
	var swept []string
	b.opt.hooks.env.SetFault(func(step, path string) error {
		if step != gd.StepPackIndex || !started.CompareAndSwap(false, true) {
			return nil
		}
		before := packFolder(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		other, err := Open(ctx, b.dir, agentOptions(t, "b-other"))
		if err != nil {
			startErr = err
			return nil
		}
		other.Close()
		after := packFolder(t, b)
		for name := range before {
			if !after[name] {
				swept = append(swept, name)
			}
		}
		return nil
	})
	res, err := b.Pull(context.Background(), "origin", SyncOptions{})
	b.opt.hooks.env.SetFault(nil)
	if !started.Load() {
		t.Fatal("the pull placed no pack")
	}
	if startErr != nil {
		t.Fatalf("the other start: %v", startErr)
	}
	if len(swept) > 0 || err != nil {
		t.Fatalf("a start beside the fetch removed %s from the pack folder; the pull: %v", strings.Join(swept, ", "), err)
	}
	if res.Fetched == 0 {
		t.Fatalf("the pull fetched nothing: %+v", res)
	}
	v, err := b.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if data, err := v.ReadFile("x.md"); err != nil || string(data) != "x\n" {
		t.Fatalf("x.md after the pull: %q, %v", data, err)
	}
}

// packFolder is the names in the memory's pack folder.
func packFolder(t *testing.T, r *Repo) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(r.gitDir, "objects", "pack"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, e := range ents {
		names[e.Name()] = true
	}
	return names
}

// A fetch's failure to place what it received is worded as any storage
// error is: the repository's files by their path from .git/ on, no
// host path (the temporary index gone before its rename: what a sweep
// beside the fetch did, above). The remote keeps its name.
func TestAFetchsFailureNamesNoHostPath(t *testing.T) {
	t.Parallel()
	_, a, b := twoAgents(t)
	put(t, a, "t1", "x.md", "x\n")
	syncOK(t, a)
	settle(t, b)
	b.opt.hooks.env.SetFault(func(step, path string) error {
		if step == gd.StepPackIndex {
			tmp, _ := filepath.Glob(filepath.Join(b.gitDir, "objects", "pack", gd.TmpPackPrefix+"idx_*"))
			for _, p := range tmp {
				os.Remove(p)
			}
		}
		return nil
	})
	_, err := b.Pull(context.Background(), "origin", SyncOptions{})
	b.opt.hooks.env.SetFault(nil)
	if err == nil {
		t.Fatal("the pull placed a pack whose index was gone")
	}
	msg := err.Error()
	if strings.Contains(msg, b.dir) || !strings.Contains(msg, "origin") || !strings.Contains(msg, ".git/objects/pack/") {
		t.Fatalf("the pull's error: %q; want the remote's name and the pack folder from .git/ on, not %s", msg, b.dir)
	}
}
