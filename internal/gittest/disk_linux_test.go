//go:build linux

package gittest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// free gives the filler's bytes back at once, though the test process
// starts programs meanwhile: a fork during fill copied the filler's
// descriptor, and its bytes stayed taken until the child's exec, so a
// write just after free found the disk still full (TestSpareOnAFullDisk,
// once in CI's run at load 5; here 44 of 300 rounds before fill held
// syscall.ForkLock, 0 after). The os package's one check of pidfd, at
// a process's first start of a program, clones a child without ForkLock:
// SmallDisk makes it before any fill (round 0 failed so once, in a whole
// run of the suite, as the helpers below started their first programs).
func TestFreeGivesTheBytesBackBesideForks(t *testing.T) {
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				exec.Command("true").Run()
			}
		})
	}
	defer wg.Wait()
	defer stop.Store(true)
	for i := range 50 {
		dir, fill, free := SmallDisk(t, "1m")
		fill()
		free()
		if err := os.WriteFile(filepath.Join(dir, "after"), make([]byte, 64<<10), 0o600); err != nil {
			t.Fatalf("round %d: a write after free: %v", i, err)
		}
	}
}
