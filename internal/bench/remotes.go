package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
)

// Remotes: a push and a pull of Config.SyncCommits new commits at once
// (a memory that was offline for a while) on the generated history of
// the largest memory, with the git CLI doing the very same push and pull
// in turn, the order swapped every round, through a bare repository by
// path and through git daemon (git://). The remote holds the history
// without its last SyncCommits commits; gitmem's agent A (the generated
// memory) pushes them, its agent B (a gitmem clone of the remote as it
// was) pulls them, worktree and index included (Flush), as git pull
// checks them out; the git CLI pushes them from a clone of the generated
// repository and pulls them into a clone of the remote as it was. Every
// round starts from fresh copies.

// syncMany adds the push and pull rows to rep.Sync.
func (rep *Report) syncMany(ctx context.Context, dir, base string) error {
	cfg := rep.cfg
	k := cfg.SyncCommits
	if k >= cfg.History {
		return fmt.Errorf("--sync-commits %d: the history has %d commits (--history)", k, cfg.History)
	}
	work := filepath.Join(dir, "remotes")
	os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(work)
	a := filepath.Join(work, "a")
	if err := copyTree(base, a); err != nil {
		return err
	}
	git := func(dir string, args ...string) error {
		_, err := gitOutput(dir, args...)
		return err
	}
	baseGit := filepath.Join(work, "base.git")
	for _, args := range [][]string{
		{"init", "-q", "--bare", "--initial-branch=main", baseGit},
		{"-C", a, "push", "-q", baseGit, fmt.Sprintf("HEAD~%d:refs/heads/main", k)},
		{"clone", "-q", "--no-checkout", a, "clia"},
		{"clone", "-q", baseGit, "clib0"},
	} {
		if err := git(work, args...); err != nil {
			return err
		}
	}
	opt := gitmem.Options{Logf: func(string, ...any) {}, Operator: gitmem.Signature{Name: "bench", Email: "bench@gitmem.invalid"}}
	sopt := gitmem.SyncOptions{Limits: policy.Limits{MaxFiles: 1000000}}
	b0 := filepath.Join(work, "b0")
	if err := cloneSettled(ctx, baseGit, b0, opt, sopt); err != nil {
		return err
	}
	ra, err := gitmem.Open(ctx, a, opt)
	if err != nil {
		return err
	}
	defer ra.Close()
	tip, err := ra.Commit(ctx, "HEAD")
	if err != nil {
		return err
	}
	daemon, stop, err := startGitDaemon(work)
	if err != nil {
		return err
	}
	defer stop()
	for _, remote := range []struct{ name, gm, cli string }{
		{"by path", filepath.Join(work, "gm.git"), filepath.Join(work, "cli.git")},
		{"through git daemon", daemon + "/gm.git", daemon + "/cli.git"},
	} {
		ra.RemoveRemote("origin")
		if err := ra.AddRemote("origin", remote.gm); err != nil {
			return err
		}
		push := &histRow{what: fmt.Sprintf("push %s commits, %s", count(k), remote.name), peer: "git push"}
		pull := &histRow{what: fmt.Sprintf("pull %s commits, %s (worktree and index written)", count(k), remote.name), peer: "git pull --ff-only"}
		rep.Sync = append(rep.Sync, push, pull)
		for i := range cfg.SyncRuns {
			if err := ctx.Err(); err != nil {
				return err
			}
			bdir, clib := filepath.Join(work, "b"), filepath.Join(work, "clib")
			for _, c := range [][2]string{{baseGit, filepath.Join(work, "gm.git")}, {baseGit, filepath.Join(work, "cli.git")}, {b0, bdir}, {filepath.Join(work, "clib0"), clib}} {
				os.RemoveAll(c[1])
				if err := copyTree(c[0], c[1]); err != nil {
					return err
				}
			}
			syncDisk() // the copies written out, not left to the first to sync
			rb, err := gitmem.Open(ctx, bdir, opt)
			if err != nil {
				return err
			}
			rb.RemoveRemote("origin")
			err = rb.AddRemote("origin", remote.gm)
			timed := func(row *histRow, gm bool, f func() error) func() error {
				return func() error {
					t := time.Now()
					if err := f(); err != nil {
						return err
					}
					if gm {
						row.gitmem = append(row.gitmem, time.Since(t))
					} else {
						row.other = append(row.other, time.Since(t))
					}
					return nil
				}
			}
			gmPush := timed(push, true, func() error {
				res, err := ra.Push(ctx, "origin", sopt)
				if err == nil && res.Pushed != k {
					err = fmt.Errorf("pushed %d commits, not %d", res.Pushed, k)
				}
				return err
			})
			cliPush := timed(push, false, func() error { return git(filepath.Join(work, "clia"), "push", "-q", remote.cli, "main") })
			gmPull := timed(pull, true, func() error {
				res, err := rb.Pull(ctx, "origin", sopt)
				if err == nil && (res.FastForward != tip.Hash || res.Merged != k) {
					err = fmt.Errorf("pulled %+v, not a fast-forward to %s of %d commits", res, tip.Hash, k)
				}
				if err == nil {
					err = rb.Flush(ctx) // the worktree and the index, as git pull checks them out
				}
				return err
			})
			cliPull := timed(pull, false, func() error { return git(clib, "pull", "-q", "--ff-only", remote.cli, "main") })
			steps := []func() error{gmPush, cliPush, gmPull, cliPull}
			if i%2 == 1 {
				steps = []func() error{cliPush, gmPush, cliPull, gmPull}
			}
			for _, step := range steps {
				if err == nil {
					err = step()
				}
			}
			if cerr := rb.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", remote.name, err)
			}
			if head, err := gitOutput(clib, "rev-parse", "HEAD"); err != nil || head != tip.Hash {
				return fmt.Errorf("the git CLI's clone is at %s (%v), gitmem's at %s", head, err, tip.Hash)
			}
		}
		for _, r := range []*histRow{push, pull} {
			cfg.logf("  %-55s gitmem %s, %s %s", r.what, span(r.gitmem), r.peer, span(r.other))
		}
	}
	return nil
}

// cloneSettled clones url into dir and builds the clone's history index,
// as a memory that has run a while has it (the memory it was cloned from
// has it: Generate). A clone closed at once has none (Close stops the
// background build), so every copy of it would build it for the whole
// history at its Open, on the CPU the timed pull runs on, and the pull
// would wait for that build's save: at 100,000 commits a pull of 10,000
// took 3.7-4.3 s instead of 1.3-1.5 s.
func cloneSettled(ctx context.Context, url, dir string, opt gitmem.Options, sopt gitmem.SyncOptions) error {
	r, _, err := gitmem.Clone(ctx, url, dir, opt, sopt)
	if err != nil {
		return fmt.Errorf("gitmem clone: %w", err)
	}
	err = buildHistoryIndex(ctx, r)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	return err
}

// startGitDaemon serves the repositories under root with git daemon
// (pushes allowed) on a free loopback port, and returns its git:// URL
// and what stops it.
func startGitDaemon(root string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().(*net.TCPAddr)
	ln.Close()
	cmd := exec.Command("git", "daemon", "--reuseaddr", "--listen=127.0.0.1", fmt.Sprintf("--port=%d", addr.Port),
		"--base-path="+root, "--export-all", "--enable=receive-pack", root)
	cmd.Env = gitEnv()
	newProcessGroup(cmd) // the daemon forks a child per connection
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("git daemon: %w", err)
	}
	stop := func() { killGroup(cmd); cmd.Wait() }
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr.String()); err == nil {
			c.Close()
			return "git://" + addr.String(), stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, errors.New("git daemon did not listen within 10 s")
		}
	}
}

// Calls during a sync: four callers each make str_replace-like changes
// (gitmem.Repo.Update, as the tool's calls do) to a memory of
// 4 x Config.MergeCommits files, a call every 10 ms each, while the
// memory pulls, one after the other, syncRounds rounds of another agent's
// work, each MergeCommits of the files changed in as many commits, some
// of them files the callers change too (other lines), so that each pull
// is a merge of that many files and of histories that went apart that
// many commits before; a pull lasts until its files are in the worktree
// (Flush), so that none of its work falls on the next phase. Its peer is
// the same load without a sync, before or after each pull (the order
// swapped every round), as long as the last pull took (2 s before the
// first).

// syncRounds is the pulls of the calls-during-a-sync measurement.
const syncRounds = 6

// mergeResult is the calls made during the merges and alone.
type mergeResult struct {
	files, merges   int
	during, without []time.Duration
}

func (rep *Report) callsDuringSync(ctx context.Context, work string) error {
	cfg := rep.cfg
	per := cfg.MergeCommits
	callers := 4
	rounds := syncRounds
	if cfg.Quick {
		rounds = 2
	}
	os.RemoveAll(work)
	defer os.RemoveAll(work)
	m, err := NewMergeRounds(ctx, work, per, rounds)
	if err != nil {
		return err
	}
	defer m.Close()
	res := &mergeResult{files: m.Files}
	// callers make calls, the first at once, until stop closes, and
	// return their waits.
	n := 0
	callersUntil := func(stop <-chan struct{}) ([]time.Duration, error) {
		n++
		var mu sync.Mutex
		var waits []time.Duration
		var first error
		var wg sync.WaitGroup
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for k := 0; ; k++ {
					if k > 0 { // the first call at once: every phase has some
						select {
						case <-stop:
							return
						case <-tick.C:
						}
						select {
						case <-stop:
							return
						default:
						}
					}
					t0 := time.Now()
					err := m.Edit(ctx, fmt.Sprintf("c%d_%d_%d", n, c, k), (c*100003+k)*13, 10+k%15)
					d := time.Since(t0)
					mu.Lock()
					waits = append(waits, d)
					if err != nil && first == nil {
						first = err
					}
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
		wg.Wait()
		return waits, first
	}
	last := 2 * time.Second // how long the load without a sync lasts until a pull was timed
	if cfg.Quick {
		last = 200 * time.Millisecond
	}
	for r := range rounds {
		alone := func() error {
			stop := make(chan struct{})
			time.AfterFunc(last, func() { close(stop) })
			ws, err := callersUntil(stop)
			res.without = append(res.without, ws...)
			return err
		}
		merge := func() error {
			stop := make(chan struct{})
			var pullErr error
			t0 := time.Now()
			go func() {
				defer close(stop)
				pullErr = m.Pull(ctx, r)
			}()
			ws, err := callersUntil(stop)
			last = time.Since(t0)
			res.during = append(res.during, ws...)
			res.merges++
			return errors.Join(pullErr, err)
		}
		steps := []func() error{alone, merge}
		if r%2 == 1 {
			steps = []func() error{merge, alone}
		}
		for _, step := range steps {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := step(); err != nil {
				return fmt.Errorf("calls during a sync: %w", err)
			}
		}
	}
	cfg.logf("  calls during %d merges of %d commits: %d calls, p50 %s, p99 %s, max %s; without a sync: %d calls, p50 %s, p99 %s, max %s",
		res.merges, per, len(res.during), ms(pct(res.during, 50)), ms(pct(res.during, 99)), ms(pct(res.during, 100)),
		len(res.without), ms(pct(res.without, 50)), ms(pct(res.without, 99)), ms(pct(res.without, 100)))
	rep.Merge = res
	return nil
}

// span is a median with its range, of at least one duration.
func span(ds []time.Duration) string {
	return fmt.Sprintf("%s [%s–%s]", ms(pct(ds, 50)), ms(slices.Min(ds)), ms(slices.Max(ds)))
}

// syncTable is the remotes' table.
func (rep *Report) syncTable() table {
	return pairTable(fmt.Sprintf("Remotes: %s new commits of the %s-commit history at %s files, gitmem and the git CLI alternated, median of %d [min–max]",
		count(rep.cfg.SyncCommits), count(rep.cfg.History), count(slices.Max(rep.cfg.Files)), rep.cfg.SyncRuns), rep.Sync)
}

// mergeTable is the calls-during-a-sync table.
func (rep *Report) mergeTable() table {
	r := rep.Merge
	t := table{title: fmt.Sprintf("Calls during a sync's merge: 4 callers, a call every 10 ms each, on a memory of %s files, during %d pulls each merging %s commits, alternated with as long without a sync",
		count(r.files), r.merges, count(rep.cfg.MergeCommits)),
		header: []string{"calls", "count", "p50", "p99", "max"}}
	for _, x := range []struct {
		what string
		ds   []time.Duration
	}{{"during the merges", r.during}, {"the same load without a sync", r.without}} {
		t.rows = append(t.rows, []string{x.what, count(len(x.ds)), ms(pct(x.ds, 50)), ms(pct(x.ds, 99)), ms(pct(x.ds, 100))})
	}
	t.rows = append(t.rows, []string{"during / without", "", ratio(float64(pct(r.during, 50)), float64(pct(r.without, 50))),
		ratio(float64(pct(r.during, 99)), float64(pct(r.without, 99))), ratio(float64(pct(r.during, 100)), float64(pct(r.without, 100)))})
	return t
}
