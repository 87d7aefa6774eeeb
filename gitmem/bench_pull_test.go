//go:build unix

package gitmem

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

// BenchmarkPullMerge measures the pull of `gitmem bench`'s merges row
// (internal/bench callsDuringSync) without its callers: a memory of 4,000
// files pulls another agent's 1,000 commits, a file each, from a remote of
// their own, after commits of its own, so that each pull is a merge; the
// pull lasts until its files are in the worktree (Flush). Each op is one
// pull; the rounds are made before the timer starts. The CPU and the
// allocations are the pull's alone: with GITMEM_PULLPROF=DIR it writes
// DIR/cpu.pprof (the pulls only) and DIR/allocs-before.pprof,
// DIR/allocs-after.pprof (go tool pprof -base before after).
//
//	go test ./gitmem -run '^$' -bench PullMerge -benchtime 6x -benchmem
func BenchmarkPullMerge(b *testing.B) {
	const per = 1000
	files := 4 * per
	ctx := context.Background()
	work := b.TempDir()
	remote := filepath.Join(work, "shared.git")
	gittest.Git(b, work, "init", "-q", "--bare", "--initial-branch=main", remote)
	opt := func(name string) Options {
		return Options{Logf: func(string, ...any) {}, Author: Signature{Name: name, Email: name + "@agents.invalid"},
			Operator: Signature{Name: "op-" + name, Email: "op@agents.invalid"}}
	}
	sopt := SyncOptions{Limits: policy.Limits{MaxFiles: 1000000}}
	a, _, err := Clone(ctx, remote, filepath.Join(work, "a"), opt("a"), sopt)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	name := func(i int) string { return fmt.Sprintf("d%02d/f%04d.md", i/100, i) }
	var lines []string
	for l := range 30 {
		lines = append(lines, fmt.Sprintf("line %d of a memory file, long enough to be a note", l))
	}
	text := strings.Join(lines, "\n") + "\n"
	if _, err := a.Update(ctx, Meta{Subject: "seed"}, func(tx *Tx) error {
		for i := range files {
			if err := tx.WriteFile(name(i), []byte(text)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	if _, err := a.Sync(ctx, "origin", sopt); err != nil {
		b.Fatal(err)
	}
	edit := func(r *Repo, id, p string, line int) {
		b.Helper()
		if _, err := r.Update(ctx, Meta{Subject: "memory: str_replace", Trailers: []Trailer{{Key: TrailerToolUseID, Value: id}}}, func(tx *Tx) error {
			data, err := tx.ReadFile(p)
			if err != nil {
				return err
			}
			ls := strings.Split(string(data), "\n")
			ls[line] = id
			return tx.WriteFile(p, []byte(strings.Join(ls, "\n")))
		}); err != nil {
			b.Fatal(err)
		}
	}
	other, _, err := Clone(ctx, remote, filepath.Join(work, "b"), opt("b"), sopt)
	if err != nil {
		b.Fatal(err)
	}
	defer other.Close()
	for r := range b.N {
		for k := range per {
			edit(other, fmt.Sprintf("o%d_%d", r, k), name((r*211+k)*7%files), 1+r%5)
		}
		rem := filepath.Join(work, fmt.Sprintf("round%d.git", r))
		gittest.Git(b, work, "init", "-q", "--bare", "--initial-branch=main", rem)
		for _, x := range []*Repo{other, a} {
			if err := x.AddRemote(fmt.Sprint("r", r), rem); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := other.Push(ctx, fmt.Sprint("r", r), sopt); err != nil {
			b.Fatal(err)
		}
	}
	if err := other.Flush(ctx); err != nil {
		b.Fatal(err)
	}
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
			edit(a, fmt.Sprintf("c%d_%d", r, k), name((r*100003+k)*13%files), 10+k%15)
		}
		if err := a.Flush(ctx); err != nil {
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
		got, err := a.Pull(ctx, fmt.Sprint("r", r), sopt)
		if err == nil && got.Merge == "" {
			err = fmt.Errorf("the pull of round %d merged nothing: %+v", r, got)
		}
		if err == nil {
			err = a.Flush(ctx)
		}
		cpuTime += processCPU() - c0
		if os.Getenv("GITMEM_PULLLOG") != "" {
			b.Logf("round %d: %+v", r, got)
		}
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
