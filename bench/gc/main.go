// Command gc measures gitmem's packing as docs/performance.md reports it,
// next to git's, in one run on one machine:
//
//   - `gitmem gc` (incremental), `gitmem gc --full` and `git repack -adf`,
//     each on its own copy of the same repository, each in its own process:
//     wall time, peak resident memory, the size of the packs left;
//   - writers while gitmem collects: clients committing in a loop through
//     the store, and the latency of each commit before and while
//     GC(false) and GC(true) run in the same process (as `serve` runs its
//     background gc).
//
// The repository is made here, through gitmem's own API, as agents make
// one: a flat folder of small files seeded in one commit, then one commit
// per edit of one file, from several clients at once (so the commits are
// materialised both as loose objects and as the small packs of bursts).
// Or -repo names an existing gitmem repository (copied, never changed),
// such as the 100,000-commit history BenchmarkHistory generates.
//
//	go run ./bench/gc                              # 9,000 files in one folder, 2,000 commits
//	go run ./bench/gc -files 9000 -commits 3000 -keep /tmp/flat
//	go run ./bench/gc -repo /tmp/gitmem-history-123
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
)

var (
	repoFlag = flag.String("repo", "", "an existing gitmem repository to measure (copied); default: make one")
	keep     = flag.String("keep", "", "keep the repository made here in this folder (reused when it exists)")
	nFiles   = flag.Int("files", 9000, "files in the flat folder")
	nCommits = flag.Int("commits", 2000, "commits after the seed, one edited file each")
	nWriters = flag.Int("writers", 8, "concurrent writers (while making the repository and while gc runs)")
	warmup   = flag.Duration("warmup", 5*time.Second, "writes timed before each gc starts")
)

func main() {
	flag.Parse()
	log.SetFlags(0)
	work, err := os.MkdirTemp("", "gitmem-bench-gc-")
	check(err)
	defer os.RemoveAll(work)
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("%s, %d CPUs, load average %s\n", time.Now().Format(time.DateTime), runtimeCPUs(), strings.Join(strings.Fields(string(load))[:3], " "))

	src := *repoFlag
	if src == "" {
		src = *keep
		if src == "" {
			src = filepath.Join(work, "made")
		}
		if _, err := os.Stat(filepath.Join(src, ".git")); err != nil {
			t0 := time.Now()
			check(makeRepo(src, *nFiles, *nCommits))
			fmt.Printf("made %s: %d files in one folder, %d commits, in %v\n", src, *nFiles, *nCommits+1, time.Since(t0).Round(time.Second))
		}
	}
	fmt.Printf("repository: %s (.git %s)\n\n", src, mib(duSize(filepath.Join(src, ".git"))))

	bin := filepath.Join(work, "gitmem")
	build := exec.Command("go", "build", "-o", bin, "./cmd/gitmem")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	check(build.Run())

	fmt.Println("| | wall time | CPU time (user + system) | peak memory (RSS) | packs after | objects packed |")
	fmt.Println("|---|---|---|---|---|---|")
	var gitTime, fullTime time.Duration
	var gitSize, fullSize int64
	for _, run := range []struct {
		name string
		args []string
	}{
		{"`git repack -adf`", []string{"git", "repack", "-adf", "-q"}},
		{"`gitmem gc --full`", []string{bin, "gc", "--full"}},
		{"`gitmem gc` (incremental)", []string{bin, "gc"}},
	} {
		dir := filepath.Join(work, "copy")
		check(copyTree(src, dir))
		// /usr/bin/time reports the command's own peak memory: a child
		// of this process would start with this process's high-water mark.
		stats := filepath.Join(work, "time")
		cmd := exec.Command("/usr/bin/time", append([]string{"-o", stats, "-f", "%e %U %S %M"}, run.args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GITMEM_REPO="+dir)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			log.Fatalf("%v: %v\n%s", run.args, err, out.String())
		}
		data, err := os.ReadFile(stats)
		check(err)
		var wallS, user, sys float64
		var rssKiB int64
		if _, err := fmt.Sscan(string(data), &wallS, &user, &sys, &rssKiB); err != nil {
			log.Fatalf("/usr/bin/time: %q: %v", data, err)
		}
		wall := time.Duration(wallS * float64(time.Second))
		packs := duSize(filepath.Join(dir, ".git", "objects", "pack"))
		count := gitOut(dir, "count-objects", "-v")
		fmt.Printf("| %s | %.1f s | %.1f s | %s | %s | %s |\n", run.name, wallS, user+sys, mib(rssKiB<<10), mib(packs), field(count, "in-pack"))
		switch run.args[1] {
		case "repack":
			gitTime, gitSize = wall, packs
		case "gc":
			if len(run.args) == 2 {
				break
			}
			fullTime, fullSize = wall, packs
			gitOut(dir, "fsck", "--strict", "--no-dangling") // the pack is sound
		}
		check(os.RemoveAll(dir))
	}
	fmt.Printf("\ngitmem gc --full / git repack -adf: time %.2fx, size %.2fx\n\n", fullTime.Seconds()/gitTime.Seconds(), float64(fullSize)/float64(gitSize))

	fmt.Printf("Writers while gc runs (%d clients committing in a loop, in the process that collects):\n\n", *nWriters)
	fmt.Println("| gc | writes before (p50 / p99 / max) | writes during gc (p50 / p99 / max) | gc took | gc held mmu+omu | writer lock held by gc |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, full := range []bool{false, true} {
		dir := filepath.Join(work, "copy")
		check(copyTree(src, dir))
		writersDuringGC(dir, full)
		check(os.RemoveAll(dir))
	}
}

// makeRepo makes a repository with a flat folder of small files (names
// of the length a notes folder has) and commits editing one file each,
// from several clients at once.
func makeRepo(dir string, files, commits int) error {
	r, _, err := gitmem.Init(context.Background(), dir, options())
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = r.Update(context.Background(), gitmem.Meta{Subject: "memory: seed"}, func(tx *gitmem.Tx) error {
		for i := range files {
			if err := tx.WriteFile(name(i), []byte(fmt.Sprintf("# note %d\n\nsomething worth remembering, number %d\n", i, i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, *nWriters)
	for w := range *nWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for n := next.Add(1); n <= int64(commits); n = next.Add(1) {
				if err := edit(r, rng, files, fmt.Sprintf("toolu_seed_%d", n)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func name(i int) string {
	return fmt.Sprintf("notes/2025-%02d-%02d-meeting-notes-%05d.md", i%12+1, i%28+1, i)
}

// edit is one client's change: a line appended to one file of the flat
// folder.
func edit(r *gitmem.Repo, rng *rand.Rand, files int, id string) error {
	p := name(rng.IntN(files))
	meta := gitmem.Meta{Subject: "memory: str_replace /memories/" + p, Trailers: []gitmem.Trailer{{Key: gitmem.TrailerToolUseID, Value: id}}}
	_, err := r.Update(context.Background(), meta, func(tx *gitmem.Tx) error {
		v, _ := tx.ReadFile(p)
		return tx.WriteFile(p, append(slices.Clone(v), fmt.Sprintf("- %s\n", id)...))
	})
	return err
}

// writersDuringGC times commits from several clients for a while, then
// while a collection runs, and prints one row.
func writersDuringGC(dir string, full bool) {
	r, err := gitmem.Open(context.Background(), dir, options())
	check(err)
	defer r.Close()
	files := *nFiles
	check(edit(r, rand.New(rand.NewPCG(0, 0)), files, "toolu_first")) // the first change after a start reads the history index alone
	type sample struct {
		at  time.Time
		lat time.Duration
	}
	var mu sync.Mutex
	var samples []sample
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range *nWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				if err := edit(r, rng, files, fmt.Sprintf("toolu_w%d_%d", w, i)); err != nil {
					log.Fatalf("%v (%v)", err, errors.Unwrap(err))
				}
				mu.Lock()
				samples = append(samples, sample{t0, time.Since(t0)})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(*warmup)
	gcStart := time.Now()
	st, err := r.GC(context.Background(), full)
	check(err)
	gcEnd := time.Now()
	close(stop)
	wg.Wait()
	var before, during []time.Duration
	for _, s := range samples {
		switch {
		case s.at.Before(gcStart) && s.at.Add(s.lat).Before(gcStart):
			before = append(before, s.lat)
		case s.at.Add(s.lat).After(gcStart) && s.at.Before(gcEnd):
			during = append(during, s.lat)
		}
	}
	kind := "`GC(false)` (incremental, background)"
	if full {
		kind = "`GC(true)` (full)"
	}
	fmt.Printf("| %s | %s (%d writes) | %s (%d writes) | %.1f s | %v | none |\n", kind, pcts(before), len(before), pcts(during), len(during),
		gcEnd.Sub(gcStart).Seconds(), st.Locked.Round(time.Millisecond))
}

func pcts(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	ms := func(x time.Duration) string { return fmt.Sprintf("%.1f", float64(x)/1e6) }
	return ms(q(0.5)) + " / " + ms(q(0.99)) + " / " + ms(d[len(d)-1]) + " ms"
}

func options() gitmem.Options {
	return gitmem.Options{Logf: func(string, ...any) {}, Operator: gitmem.Signature{Name: "bench", Email: "bench@gitmem.invalid"}}
}

func gitOut(dir string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		log.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func field(out, key string) string {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, key+": "); ok {
			return v
		}
	}
	return "?"
}

func copyTree(src, dst string) error {
	out, err := exec.Command("cp", "-a", src, dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cp: %v: %s", err, out)
	}
	return nil
}

func duSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func runtimeCPUs() int {
	data, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(data), "processor\t:")
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
