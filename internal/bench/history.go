package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
)

// Generate makes a gitmem repository in dir (which must not exist) with
// files seeded memory files (seedName) and commits commits of history,
// as gitmem would have left them: the first commits create the files, the
// rest each edit one file with a str_replace's message and trailers.
//
// The history is written by git fast-import, straight into one pack
// (100,000 commits over 10,000 files take seconds, where the tool itself
// would take an hour); then gitmem opens the repository once, which
// writes .git/index, and reads the log, which builds its history index:
// the repository is then as a long-running memory has it.
func Generate(dir string, files, commits int) error {
	now := func() time.Time { return genEpoch }
	quiet := gitmem.Options{Now: now, Logf: func(string, ...any) {}}
	r, _, err := gitmem.Init(context.Background(), dir, quiet)
	if err != nil {
		return err
	}
	head, err := r.Commit(context.Background(), "HEAD")
	r.Close()
	if err != nil {
		return err
	}
	last := make([]int, files) // the call that last edited each file
	if err := fastImport(dir, head.Hash, files, commits, last); err != nil {
		return err
	}
	for i := range files {
		p := filepath.Join(dir, "memories", filepath.FromSlash(seedName(i)))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(seedContent(i, last[i])), 0o600); err != nil {
			return err
		}
	}
	tip, err := gitOutput(dir, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	r, err = gitmem.Open(context.Background(), dir, quiet)
	if err != nil {
		return err
	}
	err = buildHistoryIndex(context.Background(), r)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if after, _ := gitOutput(dir, "rev-parse", "HEAD"); after != tip {
		return fmt.Errorf("gitmem moved the generated branch at its first start (%s -> %s): the worktree did not match", tip, after)
	}
	return err
}

// buildHistoryIndex builds r's history index and saves it: reading the
// log does.
func buildHistoryIndex(ctx context.Context, r *gitmem.Repo) error {
	return r.Log(ctx, gitmem.LogOptions{Limit: 1}, nil, func(gitmem.Commit) error { return nil })
}

var genEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// fastImport streams the history to git fast-import on top of parent.
func fastImport(dir, parent string, files, commits int, last []int) error {
	cmd := exec.Command("git", "fast-import", "--quiet", "--done")
	cmd.Dir = dir
	cmd.Env = gitEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("git fast-import: %w", err)
	}
	w := bufio.NewWriterSize(in, 1<<20)
	rng := rand.New(rand.NewPCG(7, uint64(files)))
	// Creating the files takes the first commits: one file each, or
	// batches when the history is shorter than the file count.
	perCreate := max(1, (files+commits-1)/max(commits, 1))
	n, created := 0, 0
	for ; n < commits || created < files; n++ {
		var touched []int
		var cmdName string
		if created < files {
			cmdName = "create"
			for ; len(touched) < perCreate && created < files; created++ {
				touched = append(touched, created)
			}
		} else {
			cmdName = "str_replace"
			i := rng.IntN(files)
			last[i] = n
			touched = []int{i}
		}
		p := seedName(touched[0])
		msg := fmt.Sprintf("memory: %s /memories/%s\n\nTool-Use-Id: toolu_hist_%d\nMemory-Command: %s\nMemory-Path: /memories/%s\n",
			cmdName, p, n, cmdName, p)
		t := genEpoch.Add(time.Duration(n) * time.Minute).Unix()
		fmt.Fprintf(w, "commit refs/heads/main\nauthor Claude <claude@gitmem.invalid> %d +0000\ncommitter gitmem <gitmem@gitmem.invalid> %d +0000\ndata %d\n%s", t, t, len(msg), msg)
		if n == 0 {
			fmt.Fprintf(w, "from %s\n", parent)
		}
		for _, i := range touched {
			c := seedContent(i, last[i])
			fmt.Fprintf(w, "M 100644 inline memories/%s\ndata %d\n%s\n", seedName(i), len(c), c)
		}
	}
	fmt.Fprintf(w, "done\n")
	werr := w.Flush() // fails when git fast-import ended early: Wait says why
	in.Close()
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git fast-import: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return werr
}

// gitEnv is the environment for the git CLI: no system or user config.
func gitEnv() []string {
	return append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
}

func gitOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}
