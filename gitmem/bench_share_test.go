//go:build unix

package gitmem

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
