package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// histRow is one operation as fresh processes: gitmem and its peer, the
// same number of times, alternated.
type histRow struct {
	what, peer    string
	gitmem, other []time.Duration
}

// histCmds measures, at the largest memory, what an operator or a new
// session waits for, each as a fresh process against its peer in turn:
// a restart of serve (start, one view, exit) against the TypeScript
// backend's, and the history commands against the git CLI's on its own
// copy of the same repository. Each copy's index is brought up to date
// first (a copied file matches no stat data), as a repository in use has it.
func (rep *Report) histCmds(ctx context.Context, dir, base string, files int) error {
	cfg := rep.cfg
	gm, gt := filepath.Join(dir, "hist-gitmem"), filepath.Join(dir, "hist-git")
	for _, d := range []string{gm, gt} {
		os.RemoveAll(d)
		if err := copyTree(base, d); err != nil {
			return err
		}
	}
	session := func(cmd *exec.Cmd) error {
		s, err := startLineServer(cmd)
		if err != nil {
			return err
		}
		if err := s.call(viewOp(files)); err != nil {
			s.close()
			return err
		}
		return s.close()
	}
	if err := session(gitmemCmd(cfg, "--repo", gm, "serve", maxFiles)); err != nil {
		return fmt.Errorf("gitmem serve: %w", err)
	}
	if _, err := gitOutput(gt, "update-index", "-q", "--refresh"); err != nil {
		return err
	}
	var ts string
	if cfg.SDKDir != "" {
		ts = filepath.Join(dir, "hist-ts")
		os.RemoveAll(ts)
		if err := copyTree(filepath.Join(base, "memories"), filepath.Join(ts, "memories")); err != nil {
			return err
		}
	}
	head, err := gitOutput(gt, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	mid, err := gitOutput(gt, "rev-parse", fmt.Sprintf("HEAD~%d", cfg.History/2))
	if err != nil {
		return err
	}
	targets, err := untouchedSince(gt, 2*cfg.HistRuns+1)
	if err != nil {
		return err
	}
	show := targets[0]
	targets = targets[1:]
	run := func(cmd *exec.Cmd) (time.Duration, error) {
		var stderr strings.Builder
		cmd.Stderr = &stderr
		t := time.Now()
		err := cmd.Run()
		d := time.Since(t)
		if err != nil {
			return 0, fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return d, nil
	}
	gitmemRun := func(args ...string) func(int) (time.Duration, error) {
		return func(int) (time.Duration, error) {
			return run(gitmemCmd(cfg, append([]string{"--repo", gm}, args...)...))
		}
	}
	gitRun := func(args ...string) func(int) (time.Duration, error) {
		return func(int) (time.Duration, error) { return run(gitCmd(gt, args...)) }
	}
	type op struct {
		row       *histRow
		gitmem, o func(k int) (time.Duration, error)
	}
	var ops []op
	add := func(what, peer string, g, o func(int) (time.Duration, error)) {
		r := &histRow{what: what, peer: peer}
		rep.Hist = append(rep.Hist, r)
		ops = append(ops, op{r, g, o})
	}
	if ts != "" {
		timed := func(cmd func() (*exec.Cmd, error)) func(int) (time.Duration, error) {
			return func(int) (time.Duration, error) {
				t := time.Now()
				c, err := cmd()
				if err != nil {
					return 0, err
				}
				if err := session(c); err != nil {
					return 0, err
				}
				return time.Since(t), nil
			}
		}
		add("restart: start, one view, exit", "TS SDK file backend",
			timed(func() (*exec.Cmd, error) { return gitmemCmd(cfg, "--repo", gm, "serve", maxFiles), nil }),
			timed(func() (*exec.Cmd, error) { return tsCommand(ctx, cfg.SDKDir, dir, "stdio", ts) }))
	}
	add("log, first page (20)", "git log -n 20", gitmemRun("log", "-n", "20"), gitRun("log", "-n", "20"))
	add("show one call", "git show", gitmemRun("show", show.hash), gitRun("show", show.hash))
	add("blame one file", "git blame", gitmemRun("blame", "/memories/"+show.path), gitRun("blame", "memories/"+show.path))
	add(fmt.Sprintf("diff of two versions %s commits apart", count(cfg.History/2)), "git diff",
		gitmemRun("diff", mid, head), gitRun("diff", mid, head))
	add("revert one call", "git revert",
		func(k int) (time.Duration, error) { return gitmemRun("revert", targets[2*k].hash)(k) },
		func(k int) (time.Duration, error) { return gitRun("revert", "--no-edit", targets[2*k].hash)(k) })
	add("restore one file to before a call", "git restore + git commit",
		func(k int) (time.Duration, error) {
			t := targets[2*k+1]
			return gitmemRun("restore", "--to", t.hash+"~1", "--", "/memories/"+t.path)(k)
		},
		func(k int) (time.Duration, error) {
			t := targets[2*k+1]
			a, err := gitRun("restore", "--source", t.hash+"~1", "--staged", "--worktree", "memories/"+t.path)(k)
			if err != nil {
				return 0, err
			}
			b, err := gitRun("commit", "-q", "-m", "restore "+t.path)(k)
			return a + b, err
		})
	for k := range cfg.HistRuns {
		for _, o := range ops {
			order := []bool{k%2 == 0, k%2 == 1} // gitmem first in even runs
			for _, isGitmem := range order {
				if err := ctx.Err(); err != nil {
					return err
				}
				f := o.o
				if isGitmem {
					f = o.gitmem
				}
				// On a clean disk: git's revert, restore and commit sync
				// nothing, and gitmem's exit syncs the file system
				// (syncfs), which would write git's files out on gitmem's
				// time.
				writeBack(dir)
				d, err := f(k)
				if err != nil {
					return fmt.Errorf("%s: %w", o.row.what, err)
				}
				if isGitmem {
					o.row.gitmem = append(o.row.gitmem, d)
				} else {
					o.row.other = append(o.row.other, d)
				}
			}
		}
	}
	for _, r := range rep.Hist {
		cfg.logf("  %-40s gitmem %s, %s %s", r.what, span(r.gitmem), r.peer, span(r.other))
	}
	return nil
}

// gitCmd is the git CLI in dir, with no system or user configuration
// and an identity for its commits.
func gitCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(gitEnv(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@gitmem.invalid",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@gitmem.invalid")
	return cmd
}

// call is one commit of the history and the memory file it changed.
type call struct{ hash, path string }

// untouchedSince returns n commits, newest first, each of one memory
// file that no later commit changed (so reverting it conflicts with
// nothing).
func untouchedSince(dir string, n int) ([]call, error) {
	out, err := gitOutput(dir, "log", "--format=%H", "--name-only", "--no-renames")
	if err != nil {
		return nil, err
	}
	var calls []call
	seen := map[string]bool{}
	var hash string
	var paths []string
	flush := func() {
		fresh := len(paths) == 1 && !seen[paths[0]]
		for _, p := range paths {
			seen[p] = true
		}
		if fresh && strings.HasPrefix(paths[0], "memories/") {
			calls = append(calls, call{hash, strings.TrimPrefix(paths[0], "memories/")})
		}
		paths = nil
	}
	for _, line := range strings.Split(out, "\n") {
		switch {
		case line == "":
		case len(line) == 40 && !strings.Contains(line, "/"):
			flush()
			hash = line
		default:
			paths = append(paths, line)
		}
		if len(calls) == n {
			return calls, nil
		}
	}
	flush()
	if len(calls) < n {
		return nil, fmt.Errorf("the history has %d calls to revert one by one, %d are needed (a longer --history)", len(calls), n)
	}
	return calls[:n], nil
}

// histTable is the history commands' table.
func (rep *Report) histTable() table {
	return pairTable(fmt.Sprintf("Fresh processes at %s files and %s commits: gitmem and its peer alternated, median of %d [min–max]",
		count(slices.Max(rep.cfg.Files)), count(rep.cfg.History), rep.cfg.HistRuns), rep.Hist)
}

// pairTable shows rows of gitmem and its peer, run alternated.
func pairTable(title string, rows []*histRow) table {
	t := table{title: title, header: []string{"operation", "gitmem", "peer", "peer's time", "gitmem vs peer"}}
	for _, r := range rows {
		t.rows = append(t.rows, []string{r.what, span(r.gitmem), r.peer, span(r.other), ratio(float64(pct(r.gitmem, 50)), float64(pct(r.other, 50)))})
	}
	return t
}
