package gitmem

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// BenchmarkMutation measures the CPU of one mutation, all of it: the
// commit (prepare, the log append) and its materialisation (objects, the
// branch, the worktree, the history index), which serve does in the
// background, here waited for after each call; cpu-ns/op is the
// process's CPU time (all goroutines) per call, steadier than ns/op on a
// shared machine. fsync and fdatasync are
// disabled, so that the figure is the CPU path, not this machine's disk;
// the index rewrite (IndexDelay) is held off. The calls cycle through the
// mix of `gitmem bench`: create a new file, str_replace and insert in a
// seeded file, rename the new file, delete it; files are 100 to a folder
// and the repository is reopened first, so that the stat cache is seeded
// from .git/index as at a serve start.
//
//	go test ./gitmem/ -run '^$' -bench Mutation -benchmem -count 6
func BenchmarkMutation(b *testing.B) {
	for _, files := range []int{10, 10000} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
			fsync, fdatasync := gd.Fsync, gd.Fdatasync
			gd.Fsync = func(*os.File) error { return nil }
			gd.Fdatasync = func(*os.File) error { return nil }
			defer func() { gd.Fsync, gd.Fdatasync = fsync, fdatasync }()
			r := mutationRepo(b, files)
			start := mutationSeq[files]
			mutationSeq[files] += b.N + 5 - b.N%5 // new names in every round
			folders := max(1, files/100)
			seeded := func(i int) string { j := (i * 37) % files; return fmt.Sprintf("d%03d/f%05d.md", j/100, j) }
			newName := func(i int) string { return fmt.Sprintf("d%03d/new-%d.md", (i/5)%folders, i/5) }
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for k := range b.N {
				i := start + k
				var fn func(tx *Tx) error
				switch i % 5 {
				case 0: // create
					fn = func(tx *Tx) error { return tx.WriteFile(newName(i), []byte(fmt.Sprintf("a new memory %d\n", i))) }
				case 1, 2: // str_replace, insert
					fn = func(tx *Tx) error {
						p := seeded(i)
						data, err := tx.ReadFile(p)
						if err != nil {
							return err
						}
						s := string(data)
						if i%5 == 1 {
							s = strings.Replace(s, "line two", fmt.Sprintf("line two (%d)", i), 1)
						} else {
							s += fmt.Sprintf("note %d\n", i)
						}
						return tx.WriteFile(p, []byte(s))
					}
				case 3: // rename
					fn = func(tx *Tx) error { return tx.Rename(newName(i), newName(i)+".moved") }
				case 4: // delete
					fn = func(tx *Tx) error { return tx.Remove(newName(i) + ".moved") }
				}
				if _, err := r.Update(context.Background(), Meta{Subject: "memory: mutation"}, fn); err != nil {
					b.Fatal(err)
				}
				if err := r.materialize(); err != nil {
					b.Fatal(err)
				}
			}
			if cpu := processCPU() - cpu0; cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

var mutationSeq = map[int]int{}

// vouchable is the number of files the cache vouches for: those it holds
// and those .git/index vouches for that no look has taken yet (a start
// that trusts its clean mark takes each at its first look: entry).
func (c *statCache) vouchable() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.files)
	for _, e := range c.index {
		if !c.taken[e.Path] && c.vouchedBy(e) {
			n++
		}
	}
	return n
}

// mutationRepo makes (once per size and process: TestMain removes it) a
// repository of files files (100 to a folder), written to git's files and
// .git/index, and opens it again.
func mutationRepo(b *testing.B, files int) *Repo {
	b.Helper()
	if r := benchRepos[[2]int{files, -1}]; r != nil {
		return r
	}
	dir, err := os.MkdirTemp("", "gitmem-bench-")
	if err != nil {
		b.Fatal(err)
	}
	opt := Options{Logf: func(string, ...any) {}, Operator: Signature{"op", "op@x"}}
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		b.Fatal(err)
	}
	const batch = 500
	for i := 0; i < files; i += batch {
		if _, err := r.Update(context.Background(), Meta{Subject: "seed"}, func(tx *Tx) error {
			for j := i; j < min(files, i+batch); j++ {
				if err := tx.WriteFile(fmt.Sprintf("d%03d/f%05d.md", j/100, j), []byte(fmt.Sprintf("memory %d\nline two\n", j))); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	if err := r.materialize(); err != nil {
		b.Fatal(err)
	}
	time.Sleep(gd.RacyWindow + 20*time.Millisecond) // not racy: the index vouches for every file
	if err := r.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := r.Close(); err != nil {
		b.Fatal(err)
	}
	opt.IndexDelay = time.Hour
	if r, err = Open(context.Background(), dir, opt); err != nil {
		b.Fatal(err)
	}
	if n := r.mirror.stats.vouchable(); n < files {
		b.Fatalf("the stat cache vouches for %d files of %d", n, files)
	}
	benchRepos[[2]int{files, -1}] = r
	return r
}

// BenchmarkMutationParallel is the load of `gitmem bench`'s concurrency
// runs without HTTP: 64 goroutines make the same mix of mutations at once,
// each on its own files, through one Repo, with fsync and fdatasync as in
// serve (on TMPDIR's file system) and materialisation in the background
// as serve does it (the backlog is waited for before the clock stops).
// cpu-ns/op is the process's CPU time per call, calls/s the throughput,
// p99-ms the slowest 1% of calls.
//
//	go test ./gitmem/ -run '^$' -bench MutationParallel -benchtime 3200x -count 6
func BenchmarkMutationParallel(b *testing.B) {
	r := mutationRepo(b, parallelFiles)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, t0 := processCPU(), time.Now()
	all := parallelMutations(b, r, b.N)
	if err := r.materialize(); err != nil {
		b.Fatal(err)
	}
	wall, cpu := time.Since(t0), processCPU()-cpu0
	b.StopTimer()
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/wall.Seconds(), "calls/s")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

const parallelFiles = 10000

// parallelMutations makes n mutations of the mix from 64 goroutines at
// once, each on its own files, and returns their latencies.
func parallelMutations(b *testing.B, r *Repo, n int) []time.Duration {
	const files, clients = parallelFiles, 64
	start := mutationSeq[-files]
	mutationSeq[-files] += n
	folders := files / 100
	lat := make([][]time.Duration, clients)
	errs := make(chan error, clients)
	done := make(chan struct{})
	for c := range clients {
		go func() {
			defer func() { done <- struct{}{} }()
			seeded := func(i int) string {
				j := (i*37)%(files/clients)*clients + c
				return fmt.Sprintf("d%03d/f%05d.md", j/100, j)
			}
			newName := func(i int) string { return fmt.Sprintf("d%03d/p%d-%d.md", (start+i/5)%folders, c, start+i/5) }
			for i := 0; i < (n+clients-1-c)/clients; i++ {
				var fn func(tx *Tx) error
				switch i % 5 {
				case 0:
					fn = func(tx *Tx) error { return tx.WriteFile(newName(i), []byte(fmt.Sprintf("a new memory %d\n", i))) }
				case 1, 2:
					fn = func(tx *Tx) error {
						p := seeded(i)
						data, err := tx.ReadFile(p)
						if err != nil {
							return err
						}
						return tx.WriteFile(p, append(data[:len(data):len(data)], fmt.Sprintf("note %d\n", i)...))
					}
				case 3:
					fn = func(tx *Tx) error { return tx.Rename(newName(i), newName(i)+".moved") }
				case 4:
					fn = func(tx *Tx) error { return tx.Remove(newName(i) + ".moved") }
				}
				t := time.Now()
				if _, err := r.Update(context.Background(), Meta{Subject: "memory: mutation"}, fn); err != nil {
					errs <- err
					return
				}
				lat[c] = append(lat[c], time.Since(t))
			}
		}()
	}
	for range clients {
		<-done
	}
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	return all
}

// BenchmarkGC measures a background collection after a burst: 3,200
// mutations of BenchmarkMutationParallel's load (untimed, materialised
// as serve does it: burst packs), then GC(false), timed. cpu-ns/op is the
// process's CPU time per collection, objects/op what it packed,
// pack-bytes the size of all packs at the end.
//
//	go test ./gitmem/ -run '^$' -bench 'GC$' -benchtime 10x -count 6
func BenchmarkGC(b *testing.B) {
	r := mutationRepo(b, parallelFiles)
	if _, err := r.GC(context.Background(), false); err != nil { // the seed's loose objects
		b.Fatal(err)
	}
	var cpu time.Duration
	objects := 0
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		parallelMutations(b, r, 3200)
		if err := r.materialize(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		cpu0 := processCPU()
		st, err := r.GC(context.Background(), false)
		if err != nil {
			b.Fatal(err)
		}
		cpu += processCPU() - cpu0
		objects += st.Packed
	}
	b.StopTimer()
	packs, err := gd.ListPacks(r.gitDir)
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, p := range packs {
		size += p.Bytes
	}
	b.ReportMetric(float64(size), "pack-bytes")
	b.ReportMetric(float64(objects)/float64(b.N), "objects/op")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
