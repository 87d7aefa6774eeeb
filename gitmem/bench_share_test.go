//go:build unix

package gitmem

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"

	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

// BenchmarkSync measures push and pull of 1 and of 1,000 new commits on
// the generated history (100,000 commits, 10,000 files: see
// BenchmarkHistory), with gitmem and with the git CLI doing the same in
// the same run, through a bare repository by path and through git daemon
// (git://). Each round, agent A makes the new commits (not timed), pushes
// them, and agent B, a copy of the memory as it was, pulls them (a
// fast-forward, worktree included). The git CLI pushes the very same
// commits from a clone of its own and pulls them into another.
//
//	go test ./gitmem -run '^$' -bench Sync -benchtime 5x -timeout 60m
func BenchmarkSync(b *testing.B) {
	g := genHistory(b)
	work := b.TempDir()
	run := func(dir string, args ...string) {
		b.Helper()
		gittest.Git(b, dir, args...)
	}
	// Two gitmem agents with the whole history, and a git CLI clone pair.
	a, bdir := filepath.Join(work, "a"), filepath.Join(work, "b")
	run(work, "clone", "-q", "--bare", g, "gm.git")
	run(work, "clone", "-q", "--bare", g, "cli.git")
	for _, d := range []string{a, bdir} {
		if out, err := exec.Command("cp", "-a", g, d).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v %s", err, out)
		}
	}
	run(work, "clone", "-q", "--no-checkout", g, "clia")
	run(work, "clone", "-q", g, "clib")
	opt := Options{Logf: func(string, ...any) {}, Operator: Signature{"op", "op@x"}}
	ra, err := Open(context.Background(), a, opt)
	if err != nil {
		b.Fatal(err)
	}
	defer ra.Close()
	rb, err := Open(context.Background(), bdir, opt)
	if err != nil {
		b.Fatal(err)
	}
	defer rb.Close()
	// git daemon serving the bare repositories, for git://.
	daemon := gitDaemon(b, work)

	ctx := context.Background()
	n := 0
	sopt := SyncOptions{Limits: policy.Limits{MaxFiles: 100000}}
	for _, remote := range []struct{ name, gm, cli string }{
		{"path", filepath.Join(work, "gm.git"), filepath.Join(work, "cli.git")},
		{"git-daemon", daemon + "/gm.git", daemon + "/cli.git"},
	} {
		for _, r := range []*Repo{ra, rb} {
			r.RemoveRemote("origin")
			if err := r.AddRemote("origin", remote.gm); err != nil {
				b.Fatal(err)
			}
		}
		for _, k := range []int{1, 1000} {
			b.Run(fmt.Sprintf("%s/%d-commits", remote.name, k), func(b *testing.B) {
				var push, pull, gitPush, gitPull time.Duration
				for range b.N {
					for range k { // the new commits
						n++
						i := n * 7919 % 10000 // an existing file (the generator's names)
						p := fmt.Sprintf("d%d/s%d/f%04d.md", i/1000, i/100%10, i)
						put(b, ra, fmt.Sprintf("toolu_sync_%d", n), p, fmt.Sprintf("memory %s\nsync round %d\n", p, n))
					}
					ra.Flush(context.Background())
					t0 := time.Now()
					res, err := ra.Push(ctx, "origin", sopt)
					push += time.Since(t0)
					if err != nil || res.Pushed != k {
						b.Fatalf("push: %+v %v", res, err)
					}
					t0 = time.Now()
					res, err = rb.Pull(ctx, "origin", sopt)
					if err == nil {
						err = rb.materialize() // the worktree too, as git pull checks it out (not .git/index: gitmem rewrites it a second later)
					}
					pull += time.Since(t0)
					if err != nil || res.FastForward == "" || res.Merged != k {
						b.Fatalf("pull: %+v %v", res, err)
					}
					// The git CLI: the same commits, pushed from one clone
					// and pulled into another.
					run(filepath.Join(work, "clia"), "fetch", "-q", a, "main")
					run(filepath.Join(work, "clia"), "update-ref", "refs/heads/main", "FETCH_HEAD")
					t0 = time.Now()
					run(filepath.Join(work, "clia"), "push", "-q", remote.cli, "main")
					gitPush += time.Since(t0)
					t0 = time.Now()
					run(filepath.Join(work, "clib"), "pull", "-q", "--ff-only", remote.cli, "main")
					gitPull += time.Since(t0)
				}
				per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
				b.ReportMetric(per(push), "push-ms")
				b.ReportMetric(per(gitPush), "git-push-ms")
				b.ReportMetric(per(pull), "pull-ms")
				b.ReportMetric(per(gitPull), "git-pull-ms")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
	head, _ := ra.Commit(context.Background(), "HEAD")
	if out := gittest.Git(b, filepath.Join(work, "clib"), "rev-parse", "HEAD"); strings.TrimSpace(out) != head.Hash {
		b.Errorf("the git CLI clone is at %s, gitmem at %s", out, head.Hash)
	}
	// go-git's own Push, for one new commit, for comparison: it lists the
	// objects to send by walking the whole history.
	b.Run("path/1-commits/go-git", func(b *testing.B) {
		for _, r := range []*Repo{ra, rb} {
			r.RemoveRemote("origin")
			r.AddRemote("origin", filepath.Join(work, "gm.git"))
		}
		var push time.Duration
		for range b.N {
			n++
			put(b, ra, fmt.Sprintf("toolu_sync_%d", n), "d0/s0/f0000.md", fmt.Sprintf("round %d\n", n))
			ra.Flush(context.Background())
			repo, err := git.PlainOpen(a)
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			err = repo.Push(&git.PushOptions{RemoteName: "origin", RefSpecs: []config.RefSpec{"refs/heads/main:refs/heads/main"}})
			push += time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(push.Microseconds())/1000/float64(b.N), "push-ms")
		b.ReportMetric(0, "ns/op")
	})
	os.RemoveAll(work)
}

// BenchmarkCallsDuringSync measures what a sync costs the tool calls made
// beside it: four callers each make str_replace-like changes to a memory
// of 4,000 files, first alone, then while the memory pulls, one after the
// other, rounds of another agent's work: 1,000 of the files changed in
// 1,000 commits per round, some of them files the callers change too
// (other lines), so that each pull is a merge of 1,000 files and of
// histories that went apart a thousand commits before. The callers make
// a call every 10 ms each, for 5 seconds alone, then until every round is
// merged. It reports the calls' p50, p99 and slowest wait in each phase,
// the calls made while syncing and the merges.
//
//	go test ./gitmem -run '^$' -bench CallsDuringSync -benchtime 1x
func BenchmarkCallsDuringSync(b *testing.B) {
	const files, callers, rounds, perRound = 4000, 4, 6, 1000
	remote := bareRemote(b)
	a := agent(b, remote, "a")
	name := func(i int) string { return fmt.Sprintf("d%02d/f%04d.md", i/100, i) }
	var lines []string
	for l := range 30 {
		lines = append(lines, fmt.Sprintf("line %d of a memory file, long enough to be a note", l))
	}
	text := strings.Join(lines, "\n") + "\n"
	if _, err := a.Update(context.Background(), Meta{Subject: "seed"}, func(tx *Tx) error {
		for i := range files {
			if err := tx.WriteFile(name(i), []byte(text)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	syncOK(b, a)
	edit := func(r *Repo, id, p string, line int) {
		_, err := r.Update(context.Background(), Meta{Subject: "memory: str_replace", Trailers: []Trailer{{TrailerToolUseID, id}}}, func(tx *Tx) error {
			data, err := tx.ReadFile(p)
			if err != nil {
				return err
			}
			ls := strings.Split(string(data), "\n")
			ls[line] = id
			return tx.WriteFile(p, []byte(strings.Join(ls, "\n")))
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	// The other agent's rounds, each pushed to a remote of its own, so
	// that the pulls come one after the other, a merge each.
	other := agent(b, remote, "b")
	for r := range rounds {
		for k := range perRound { // a file each
			edit(other, fmt.Sprintf("o%d_%d", r, k), name((r*211+k)*7%files), 1+r%5)
		}
		rem := bareRemote(b)
		other.AddRemote(fmt.Sprint("r", r), rem)
		if _, err := other.Push(context.Background(), fmt.Sprint("r", r), SyncOptions{}); err != nil {
			b.Fatal(err)
		}
		a.AddRemote(fmt.Sprint("r", r), rem)
	}
	// The callers: each a call every 10 ms (400 calls a second in all),
	// for 5 seconds alone, then until every round is merged.
	phase := func(syncing bool) (waits []time.Duration, merges int) {
		stop := make(chan struct{})
		if syncing {
			go func() {
				defer close(stop)
				for r := range rounds {
					res, err := a.Pull(context.Background(), fmt.Sprint("r", r), SyncOptions{})
					if err != nil {
						b.Error(err)
						return
					}
					if res.Merge != "" {
						merges++
					}
				}
			}()
		} else {
			time.AfterFunc(5*time.Second, func() { close(stop) })
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for k := 0; ; k++ {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					t0 := time.Now()
					edit(a, fmt.Sprintf("c%v_%d_%d", syncing, c, k), name((c*100003+k)*13%files), 10+k%15)
					d := time.Since(t0)
					mu.Lock()
					waits = append(waits, d)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		slices.Sort(waits)
		return waits, merges
	}
	for range b.N {
		for _, syncing := range []bool{false, true} {
			waits, merges := phase(syncing)
			q := func(f float64) float64 { return float64(waits[int(f*float64(len(waits)-1))].Microseconds()) / 1000 }
			label := "alone"
			if syncing {
				label = "syncing"
				b.ReportMetric(float64(merges), "merges")
				b.ReportMetric(float64(len(waits)), "syncing-calls")
			}
			b.ReportMetric(q(0.5), label+"-p50-ms")
			b.ReportMetric(q(0.99), label+"-p99-ms")
			b.ReportMetric(q(1), label+"-max-ms")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSyncMany measures a push and a pull of 10,000 new commits at
// once (a memory that was offline for a while), with the git CLI doing
// the very same push and pull in the same run, the order swapped every
// round. The history is the generated one (see BenchmarkHistory;
// GITMEM_BENCH_COMMITS=20000 makes it 10,000 commits and 10,000 new
// ones): the remote, a bare repository, holds it without its last 10,000
// commits; agent A (the generated memory) pushes them, agent B (a gitmem
// clone of the remote as it was) pulls them, worktree included; the git
// CLI pushes them from a clone of the generated repository and pulls them
// into a clone of the remote as it was. Every round starts from fresh
// copies. It logs each side's median [min–max] of the rounds.
//
//	GITMEM_BENCH_COMMITS=20000 go test ./gitmem -run '^$' -bench SyncMany -benchtime 7x -timeout 60m
func BenchmarkSyncMany(b *testing.B) {
	const k = 10000
	if _, commits := historySize(); commits <= k {
		b.Skipf("the generated history has %d commits: %d new ones need more (GITMEM_BENCH_COMMITS)", commits, k)
	}
	g := genHistory(b)
	work := b.TempDir()
	run := func(dir string, args ...string) {
		b.Helper()
		gittest.Git(b, dir, args...)
	}
	cp := func(from, to string) {
		b.Helper()
		os.RemoveAll(to)
		if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v %s", err, out)
		}
	}
	base := filepath.Join(work, "base.git")
	run(g, "branch", "-f", "bench-base", fmt.Sprintf("HEAD~%d", k))
	run(work, "clone", "-q", "--bare", "--no-local", "--single-branch", "--branch", "bench-base", g, base)
	run(g, "branch", "-D", "bench-base")
	run(base, "branch", "-m", "bench-base", "main")
	run(base, "symbolic-ref", "HEAD", "refs/heads/main")
	run(work, "clone", "-q", "--no-checkout", g, "clia")
	run(work, "clone", "-q", base, "clib0")
	opt := Options{Logf: func(string, ...any) {}, Operator: Signature{"op", "op@x"}}
	sopt := SyncOptions{Limits: policy.Limits{MaxFiles: 100000}}
	b0 := filepath.Join(work, "b0")
	rb0, _, err := Clone(context.Background(), base, b0, opt, sopt)
	if err != nil {
		b.Fatal(err)
	}
	rb0.Close()
	ra, err := Open(context.Background(), g, opt)
	if err != nil {
		b.Fatal(err)
	}
	defer ra.Close()
	tip, _ := ra.Commit(context.Background(), "HEAD")
	daemon := gitDaemon(b, work)

	ctx := context.Background()
	for _, remote := range []struct{ name, gm, cli string }{
		{"path", filepath.Join(work, "gm.git"), filepath.Join(work, "cli.git")},
		{"git-daemon", daemon + "/gm.git", daemon + "/cli.git"},
	} {
		ra.RemoveRemote("origin")
		if err := ra.AddRemote("origin", remote.gm); err != nil {
			b.Fatal(err)
		}
		b.Run(remote.name, func(b *testing.B) {
			var push, pull, gitPush, gitPull []time.Duration
			for i := range b.N {
				cp(base, filepath.Join(work, "gm.git"))
				cp(base, filepath.Join(work, "cli.git"))
				bdir, clib := filepath.Join(work, "b"), filepath.Join(work, "clib")
				cp(b0, bdir)
				cp(filepath.Join(work, "clib0"), clib)
				syscall.Sync() // the copies written out, not left to the first to sync
				gmPush := func() {
					t0 := time.Now()
					res, err := ra.Push(ctx, "origin", sopt)
					push = append(push, time.Since(t0))
					if err != nil || res.Pushed != k {
						b.Fatalf("push: %+v %v", res, err)
					}
				}
				cliPush := func() {
					t0 := time.Now()
					run(filepath.Join(work, "clia"), "push", "-q", remote.cli, "main")
					gitPush = append(gitPush, time.Since(t0))
				}
				rb, err := Open(ctx, bdir, opt)
				if err != nil {
					b.Fatal(err)
				}
				rb.RemoveRemote("origin")
				if err := rb.AddRemote("origin", remote.gm); err != nil {
					b.Fatal(err)
				}
				gmPull := func() {
					t0 := time.Now()
					res, err := rb.Pull(ctx, "origin", sopt)
					if err == nil {
						err = rb.materialize() // the worktree too, as git pull checks it out
					}
					pull = append(pull, time.Since(t0))
					if err != nil || res.FastForward != tip.Hash || res.Merged != k {
						b.Fatalf("pull: %+v %v", res, err)
					}
				}
				cliPull := func() {
					t0 := time.Now()
					run(clib, "pull", "-q", "--ff-only", remote.cli, "main")
					gitPull = append(gitPull, time.Since(t0))
				}
				if i%2 == 0 {
					gmPush()
					cliPush()
					gmPull()
					cliPull()
				} else {
					cliPush()
					gmPush()
					cliPull()
					gmPull()
				}
				rb.Close()
				b.Logf("%s round %d: push %v, git push %v, pull %v, git pull %v", remote.name, i, push[i].Round(time.Millisecond),
					gitPush[i].Round(time.Millisecond), pull[i].Round(time.Millisecond), gitPull[i].Round(time.Millisecond))
				if out := gittest.Git(b, clib, "rev-parse", "HEAD"); strings.TrimSpace(out) != tip.Hash {
					b.Fatalf("the git CLI clone is at %s, gitmem at %s", out, tip.Hash)
				}
			}
			med := func(name string, ds []time.Duration) float64 {
				s := slices.Clone(ds)
				slices.Sort(s)
				m := float64(s[len(s)/2].Microseconds()) / 1000
				b.Logf("%s %s: %.0f ms [%.0f–%.0f] over %d rounds", remote.name, name, m,
					float64(s[0].Microseconds())/1000, float64(s[len(s)-1].Microseconds())/1000, len(s))
				b.ReportMetric(m, name+"-ms")
				return m
			}
			p, gp := med("push", push), med("git-push", gitPush)
			l, gl := med("pull", pull), med("git-pull", gitPull)
			b.ReportMetric(p/gp, "push/git")
			b.ReportMetric(l/gl, "pull/git")
			b.ReportMetric(0, "ns/op")
		})
	}
}
