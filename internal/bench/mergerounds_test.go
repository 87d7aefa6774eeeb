//go:build unix

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPullMerge measures the pull of `gitmem bench`'s merges row
// (callsDuringSync) without its callers: a memory of 4,000 files pulls
// another agent's 1,000 commits, a file each, from a remote of their
// own, after 40 calls of its own, so that each pull is a merge; the pull
// lasts until its files are in the worktree (MergeRounds.Pull). Each op
// is one pull; the rounds are made before the timer starts. cpu-ms/op
// is the process's CPU during the pulls: with GITMEM_PULLPROF=DIR it
// writes DIR/cpu-R.pprof (round R's pull only) and
// DIR/allocs-before-R.pprof, DIR/allocs-after-R.pprof (go tool pprof
// -base before after).
//
//	go test ./internal/bench -run '^$' -bench PullMerge -benchtime 6x -benchmem
func BenchmarkPullMerge(b *testing.B) {
	ctx := context.Background()
	m, err := NewMergeRounds(ctx, filepath.Join(b.TempDir(), "w"), 1000, b.N)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	prof := os.Getenv("GITMEM_PULLPROF")
	writeAllocs := func(name string) {
		if prof == "" {
			return
		}
		runtime.GC()
		f, err := os.Create(filepath.Join(prof, name))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
	}
	var cpuTime time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for r := range b.N {
		b.StopTimer()
		for k := range 40 { // calls of its own: the pull is a merge
			if err := m.Edit(ctx, fmt.Sprintf("c%d_%d", r, k), (r*100003+k)*13, 10+k%15); err != nil {
				b.Fatal(err)
			}
		}
		if err := m.A.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		writeAllocs(fmt.Sprintf("allocs-before-%d.pprof", r))
		var cpu *os.File
		if prof != "" {
			if cpu, err = os.Create(filepath.Join(prof, fmt.Sprintf("cpu-%d.pprof", r))); err != nil {
				b.Fatal(err)
			}
			pprof.StartCPUProfile(cpu)
		}
		b.StartTimer()
		c0 := processCPU()
		err := m.Pull(ctx, r)
		cpuTime += processCPU() - c0
		b.StopTimer()
		if cpu != nil {
			pprof.StopCPUProfile()
			cpu.Close()
		}
		writeAllocs(fmt.Sprintf("allocs-after-%d.pprof", r))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(cpuTime.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// processCPU is the CPU time (user and system) the process has used, all
// goroutines.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
