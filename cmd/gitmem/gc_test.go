package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// An operator command (a revert at 5,000 files here) runs no garbage
// collection while its heap is small: it ends before the garbage would
// matter, and each collection was CPU taken from the command (a revert
// at 10,000 files collected 5 times, 4 MB to 14 MB: 10% of its CPU).
// GODEBUG=gctrace=1 makes the Go runtime say each collection on stderr.
func TestOperatorCommandCollectsNoGarbageOnASmallHeap(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	repo := filepath.Join(gittest.TempDir(t), "memory")
	gitmemOut(t, env, "--repo", repo, "init")
	r, err := gitmem.Open(context.Background(), repo, gitmem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Update(context.Background(), gitmem.Meta{Subject: "seed"}, func(tx *gitmem.Tx) error {
		for i := range 5000 {
			if err := tx.WriteFile(fmt.Sprintf("d%02d/f%04d.md", i%50, i), []byte(fmt.Sprintf("note %d\n", i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Update(context.Background(), gitmem.Meta{Subject: "edit", Trailers: []gitmem.Trailer{{Key: gitmem.TrailerToolUseID, Value: "toolu_1"}}}, func(tx *gitmem.Tx) error {
		return tx.WriteFile("d01/f0001.md", []byte("edited\n"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("gitmem", "--repo", repo, "revert", c.Hash)
	cmd.Env = append(env, "GODEBUG=gctrace=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("revert: %v\n%s", err, stderr.String())
	}
	// The runtime's first collection, at a 4 MB heap, may begin before
	// main runs (the packages' init, more under -race): that one is not
	// the command's to prevent. Any other is.
	gcs := regexp.MustCompile(`(?m)^gc \d+ @.* (\d+)->\d+->\d+ MB`).FindAllStringSubmatch(stderr.String(), -1)
	startHeap := func(gc []string) int { mb, _ := strconv.Atoi(gc[1]); return mb }
	if len(gcs) > 1 || len(gcs) == 1 && startHeap(gcs[0]) > 4 {
		t.Fatalf("the revert collected garbage %d times:\n%s", len(gcs), stderr.String())
	}
}
