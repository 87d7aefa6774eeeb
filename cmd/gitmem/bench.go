package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/internal/bench"
)

// The reference SDK's npm harness in a checkout of gitmem: bench finds
// the pinned @anthropic-ai/sdk there (npm ci installs it).
const sdkHarness = "handler/testdata/reference"

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure gitmem against the TypeScript SDK's file backend, git and go-git on this machine, side by side",
		Description: `Runs the same mix of memory tool calls (create, str_replace, insert, view,
rename, delete on small memory files) at each memory size, on a generated
history, through: gitmem serve over stdio and over HTTP (child processes of
this binary), the Anthropic TypeScript SDK's file backend (node), git add +
git commit, and go-git's Worktree.Add + Commit, and at the largest memory
rename and delete on their own (a sixth of the mix each is too few for a
steady p50); then concurrent HTTP clients
against gitmem and against a node HTTP server over the SDK's backend; then
the Memory Stores API of gitmem serve --stores (creates and updates by one
client, and a whole store uploaded with many requests in flight); and at
the largest memory, as fresh processes each with its peer in turn, a
restart of gitmem serve (start, one view, exit) against the TypeScript
backend's, and log, show, blame, diff, revert and restore against the
git CLI on a copy of the same repository; and there too, a push and a
pull of many new commits against the git CLI's, by path and through git
daemon. Then tool calls during the merges of pulls against the same load
without a sync, and many stores: gitmem serve --stores over thousands of
stores against a node server over a folder each (the TypeScript SDK's
file backend): making them, a cold store's first call, and calls/s
spread over the active ones. It prints p50/p99 latencies
and throughput with ratios to the TypeScript backend and to git, and the
cost of one fsync and one fdatasync here. Backends take
turns in small blocks, so the ratios hold on a busy machine.

The TypeScript backend needs node and a folder whose node_modules holds
@anthropic-ai/sdk (--sdk; in a gitmem checkout, ` + sdkHarness + `
after npm ci is found by itself).

Stopped early (Ctrl-C, SIGTERM, the terminal closing, or a reader that
went away: gitmem bench | head), it stops its servers and removes its
temporary work folder before it exits (exit code 1).`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "quick", Usage: "a smoke run of seconds: tiny sizes, few calls (other flags still apply)"},
			&cli.StringFlag{Name: "files", Value: "10,1000,10000", Usage: "memory sizes, in files: `N,N,...`"},
			&cli.IntFlag{Name: "history", Value: 100000, Usage: "`COMMITS` of history under each size"},
			&cli.IntFlag{Name: "ops", Value: 1200, Usage: "calls per backend and size, one client"},
			&cli.IntFlag{Name: "move-ops", Value: 1000, Usage: "one client, at the largest memory: `N` rename and N delete calls per backend on their own, after the mix (0: none)"},
			&cli.DurationFlag{Name: "budget", Value: time.Minute, Usage: "at most this long per backend and size (go-git is slow on large trees)"},
			&cli.StringFlag{Name: "clients", Value: "1,8,32,64", Usage: "concurrency levels over HTTP: `N,N,...` (\"\": none)"},
			&cli.IntFlag{Name: "conc-ops", Value: 3200, Usage: "mutations per concurrency level and backend"},
			&cli.IntFlag{Name: "conc-files", Usage: "memory size of the concurrency runs (default: the largest)"},
			&cli.StringFlag{Name: "backends", Value: strings.Join(bench.AllBackends, ","), Usage: "one-client backends: `LIST` of " + strings.Join(bench.AllBackends, ", ")},
			&cli.StringFlag{Name: "sdk", EnvVars: []string{"GITMEM_BENCH_SDK"}, Usage: "`DIR` whose node_modules holds @anthropic-ai/sdk (\"none\": leave the TypeScript backend out)"},
			&cli.IntFlag{Name: "hist-runs", Value: 7, Usage: "restart and history commands (log, show, blame, diff, revert, restore) as fresh processes: `N` runs each, with the TypeScript backend's restart and the git CLI's commands alternated (0: none)"},
			&cli.IntFlag{Name: "ms-ops", Value: 1000, Usage: "Memory Stores API: `N` creates, then N updates, one client (0: none)"},
			&cli.IntFlag{Name: "ms-upload", Value: 2000, Usage: "Memory Stores API: a store of `N` memories uploaded --ms-inflight at a time (0: none)"},
			&cli.IntFlag{Name: "ms-inflight", Value: 32, Usage: "Memory Stores API: `N` requests in flight during the upload"},
			&cli.IntFlag{Name: "sync-commits", Value: 10000, Usage: "push and pull of `N` new commits at the largest memory, against git push and git pull, by path and through git daemon (0: none; fewer than --history)"},
			&cli.IntFlag{Name: "sync-runs", Value: 5, Usage: "rounds of the push and pull, `N` each, gitmem and the git CLI alternated"},
			&cli.IntFlag{Name: "merge-commits", Value: 1000, Usage: "tool calls during the merges of 6 pulls of `N` commits each into a memory of 4N files, against the same load without a sync (0: none)"},
			&cli.IntFlag{Name: "stores", Value: 10000, Usage: "many stores: gitmem serve --stores over `N` stores against a node server over a folder each (0: none)"},
			&cli.IntFlag{Name: "stores-active", Value: 100, Usage: "many stores: `N` of them under load"},
			&cli.IntFlag{Name: "stores-clients", Value: 50, Usage: "many stores: `N` concurrent clients"},
			&cli.DurationFlag{Name: "stores-load", Value: 10 * time.Second, Usage: "many stores: how long each run's load lasts"},
			&cli.IntFlag{Name: "stores-runs", Value: 3, Usage: "many stores: `N` runs, each server fresh, gitmem and the node server alternated (0: only make the stores)"},
			&cli.BoolFlag{Name: "stores-evict", Usage: "many stores: drop each run's cold stores, both peers' folders, from the page cache first (posix_fadvise; Linux): their first calls as on stores untouched for hours"},
			&cli.StringFlag{Name: "dir", Usage: "work in `DIR` and keep it (default: a temporary folder, removed)"},
			&cli.StringFlag{Name: "markdown", Usage: "also write the tables as markdown to `FILE`"},
		},
		Action: runBench,
	}
}

func runBench(c *cli.Context) error {
	if c.NArg() > 0 {
		return failf(exitUsage, "bench takes no arguments (got %q)", c.Args().First())
	}
	cfg := bench.Config{
		History:       c.Int("history"),
		Ops:           c.Int("ops"),
		MoveOps:       c.Int("move-ops"),
		Budget:        c.Duration("budget"),
		ConcOps:       c.Int("conc-ops"),
		ConcFiles:     c.Int("conc-files"),
		Dir:           c.String("dir"),
		FloorOps:      200,
		MSOps:         c.Int("ms-ops"),
		MSUpload:      c.Int("ms-upload"),
		MSInflight:    max(1, c.Int("ms-inflight")),
		HistRuns:      c.Int("hist-runs"),
		SyncCommits:   c.Int("sync-commits"),
		SyncRuns:      c.Int("sync-runs"),
		MergeCommits:  c.Int("merge-commits"),
		Stores:        c.Int("stores"),
		StoresActive:  c.Int("stores-active"),
		StoresClients: c.Int("stores-clients"),
		StoresLoad:    c.Duration("stores-load"),
		StoresRuns:    c.Int("stores-runs"),
		StoresEvict:   c.Bool("stores-evict"),
		Quick:         c.Bool("quick"),
		Log:           c.App.ErrWriter,
	}
	files, clients := c.String("files"), c.String("clients")
	if c.Bool("quick") {
		quick := map[string]func(){
			"files":          func() { files = "10,100" },
			"history":        func() { cfg.History = 200 },
			"ops":            func() { cfg.Ops = 30 },
			"move-ops":       func() { cfg.MoveOps = 10 },
			"budget":         func() { cfg.Budget = 10 * time.Second },
			"clients":        func() { clients = "1,4" },
			"conc-ops":       func() { cfg.ConcOps = 40 },
			"ms-ops":         func() { cfg.MSOps = 20 },
			"ms-upload":      func() { cfg.MSUpload = 100 },
			"hist-runs":      func() { cfg.HistRuns = 2 },
			"sync-commits":   func() { cfg.SyncCommits = 10 },
			"sync-runs":      func() { cfg.SyncRuns = 2 },
			"merge-commits":  func() { cfg.MergeCommits = 10 },
			"stores":         func() { cfg.Stores = 20 },
			"stores-active":  func() { cfg.StoresActive = 4 },
			"stores-clients": func() { cfg.StoresClients = 4 },
			"stores-load":    func() { cfg.StoresLoad = 500 * time.Millisecond },
			"stores-runs":    func() { cfg.StoresRuns = 2 },
		}
		for name, set := range quick {
			if !c.IsSet(name) {
				set()
			}
		}
		cfg.FloorOps = 20
		if !c.IsSet("sync-commits") { // fewer than the history has
			cfg.SyncCommits = min(cfg.SyncCommits, cfg.History/2)
		}
	}
	var err error
	if cfg.Files, err = intList("--files", files); err != nil {
		return err
	}
	if cfg.Clients, err = intList("--clients", clients); err != nil {
		return err
	}
	for _, n := range cfg.Files {
		if n < 1 {
			return failf(exitUsage, "--files: a memory holds at least one file")
		}
	}
	for _, f := range []string{"move-ops", "sync-commits", "sync-runs", "merge-commits", "stores", "stores-runs"} {
		if c.Int(f) < 0 {
			return failf(exitUsage, "--%s: %d is not a count", f, c.Int(f))
		}
	}
	if cfg.Stores > 0 && (cfg.StoresActive < 1 || cfg.StoresClients < 1 || cfg.StoresActive >= cfg.Stores) {
		return failf(exitUsage, "--stores-active and --stores-clients: at least one, and fewer active stores than --stores")
	}
	if cfg.SyncCommits >= cfg.History && cfg.SyncCommits > 0 {
		if c.IsSet("sync-commits") {
			return failf(exitUsage, "--sync-commits: %d new commits need a longer --history than %d", cfg.SyncCommits, cfg.History)
		}
		fmt.Fprintf(c.App.ErrWriter, "gitmem bench: push and pull are left out: --history %d is not longer than --sync-commits %d\n", cfg.History, cfg.SyncCommits)
		cfg.SyncCommits = 0
	}
	for _, b := range strings.Split(c.String("backends"), ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		if !slices.Contains(bench.AllBackends, b) {
			return failf(exitUsage, "--backends: unknown backend %q (known: %s)", b, strings.Join(bench.AllBackends, ", "))
		}
		cfg.Backends = append(cfg.Backends, b)
	}
	if cfg.SDKDir, err = sdkDir(c); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return failf(exitFailure, "cannot find this program to start its servers: %v", err)
	}
	cfg.Gitmem = func(args ...string) *exec.Cmd {
		cmd := exec.Command(exe, args...)
		cmd.Args[0] = "gitmem"
		return cmd
	}
	// Stopped early — Ctrl-C, kill, the terminal closing, or a reader
	// that went away (bench | head: SIGPIPE, which would otherwise kill
	// bench at its next write) — bench stops its servers and removes its
	// work folder before it exits.
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	defer stop()
	rep, err := bench.Run(ctx, cfg)
	if ctx.Err() != nil {
		stop()
		what := "its work folder removed"
		if cfg.Dir != "" {
			what = "its work folder " + cfg.Dir + " kept"
		}
		return failf(exitFailure, "bench stopped: %s; its servers were stopped and %s", context.Cause(ctx), what)
	}
	if err != nil {
		return failf(exitFailure, "bench: %v", err)
	}
	rep.Text(c.App.Writer)
	if path := c.String("markdown"); path != "" {
		var b strings.Builder
		rep.Markdown(&b, strings.TrimSpace("gitmem bench "+flagLine(c)))
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			return failf(exitFailure, "write %s: %v", path, err)
		}
	}
	return nil
}

// flagLine repeats the flags given, in their order of definition, for
// the markdown's "how to reproduce" line (not the local folders).
func flagLine(c *cli.Context) string {
	var parts []string
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if !c.IsSet(name) || name == "markdown" || name == "dir" || name == "sdk" {
			continue
		}
		if name == "quick" {
			parts = append(parts, "--quick")
			continue
		}
		parts = append(parts, fmt.Sprintf("--%s=%v", name, c.Value(name)))
	}
	return strings.Join(parts, " ")
}

func intList(flag, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(strings.ReplaceAll(f, "_", ""))
		if err != nil || n < 1 {
			return nil, failf(exitUsage, "%s: %q is not a positive number", flag, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// sdkDir is the folder with the TypeScript SDK, or "" to leave it out:
// --sdk, else the reference harness of the gitmem checkout we are in.
func sdkDir(c *cli.Context) (string, error) {
	has := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, "node_modules", "@anthropic-ai", "sdk", "package.json"))
		return err == nil
	}
	switch dir := c.String("sdk"); {
	case dir == "none":
		return "", nil
	case dir != "":
		if !has(dir) {
			return "", failf(exitUsage, "--sdk: %s has no node_modules/@anthropic-ai/sdk (npm ci there)", dir)
		}
		return filepath.Abs(dir)
	}
	for dir, _ := os.Getwd(); dir != ""; {
		if h := filepath.Join(dir, sdkHarness); has(h) {
			return h, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	fmt.Fprintf(c.App.ErrWriter, "gitmem bench: the TypeScript SDK backend is left out: no --sdk, and no %s with node_modules above this folder\n", sdkHarness)
	return "", nil
}
