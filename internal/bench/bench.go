// Package bench is gitmem bench: the same memory tool workload through
// gitmem (stdio and HTTP, real server processes), the Anthropic TypeScript
// SDK's file backend, the git CLI and go-git, in one run on one machine,
// so that their ratios hold whatever else the machine is doing.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Backend names, as --backends takes them.
const (
	GitmemStdio = "gitmem-stdio"
	GitmemHTTP  = "gitmem-http"
	TS          = "ts"
	GitCLI      = "git"
	GoGit       = "go-git"
)

// AllBackends in the order the tables show them.
var AllBackends = []string{GitmemStdio, GitmemHTTP, TS, GitCLI, GoGit}

var titles = map[string]string{
	GitmemStdio: "gitmem, stdio",
	GitmemHTTP:  "gitmem, HTTP",
	TS:          "TS SDK file backend",
	GitCLI:      "git add + commit (CLI)",
	GoGit:       "go-git Add + Commit",
}

// Config is one benchmark run.
type Config struct {
	Files   []int         // memory sizes (seeded files)
	History int           // commits of history under each
	Ops     int           // calls per backend and size, one client
	Budget  time.Duration // at most this long per backend and size (go-git is slow on large trees)
	Clients []int         // concurrency levels over HTTP
	ConcOps int           // mutations per concurrency level and backend
	// ConcFiles is the memory size of the concurrency runs (one of Files;
	// 0: the largest).
	ConcFiles int
	Backends  []string // which of AllBackends run one client
	// SDKDir holds node_modules/@anthropic-ai/sdk; "" leaves the TS
	// backend out (and the ratios to it).
	SDKDir string
	// Dir is the work folder; "" makes a temporary one, removed at the end.
	Dir      string
	FloorOps int // syncs per floor measurement
	// The Memory Stores API: MSOps creates then updates by one client,
	// then a store of MSUpload memories uploaded MSInflight at a time (0
	// and 0: not measured).
	MSOps, MSUpload, MSInflight int
	// HistRuns is how many times each history command runs as a fresh
	// process, and its peer (gitmem restarted against the TypeScript
	// backend; log, show, blame, diff, revert and restore against the git
	// CLI), at the largest memory (0: not measured).
	HistRuns int
	// Many stores (manystores.go): Stores stores (0: not measured),
	// StoresActive of them used by StoresClients clients for StoresLoad
	// in each of StoresRuns runs, gitmem and the node peer in turn.
	Stores, StoresActive, StoresClients, StoresRuns int
	StoresLoad                                      time.Duration
	// StoresEvict drops each run's cold stores (gitmem's and the peer's
	// folders alike) from the page cache before the run's server starts:
	// stores no call has used for hours (Linux only; see evict).
	StoresEvict bool
	// Remotes (remotes.go): a push and a pull of SyncCommits commits at
	// the largest memory, SyncRuns rounds alternated with the git CLI's
	// (0: not measured); calls during the merges of pulls of
	// MergeCommits commits each (0: not measured).
	SyncCommits, SyncRuns, MergeCommits int
	// MoveOps is how many rename and how many delete calls each
	// one-client backend makes at the largest memory on their own, after
	// the mix (0: none; the mix's are a sixth of Ops each).
	MoveOps int
	// Quick makes the fixed parts small: a smoke run.
	Quick bool
	// Gitmem returns a command running gitmem with args (the benchmark
	// starts its servers as child processes).
	Gitmem func(args ...string) *exec.Cmd
	Log    io.Writer // progress lines
}

// Run runs the benchmark.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if len(cfg.Files) == 0 {
		return nil, errors.New("no memory size to measure")
	}
	if cfg.ConcFiles == 0 {
		cfg.ConcFiles = slices.Max(cfg.Files)
	}
	if !slices.Contains(cfg.Files, cfg.ConcFiles) && len(cfg.Clients) > 0 {
		return nil, fmt.Errorf("the concurrency runs' size %d is not one of the sizes measured", cfg.ConcFiles)
	}
	if _, err := exec.LookPath("git"); err != nil {
		return nil, errors.New("the git CLI is needed (it generates the history)")
	}
	if cfg.SDKDir != "" {
		if _, err := exec.LookPath("node"); err != nil {
			return nil, errors.New("the TypeScript backend needs node on PATH")
		}
	}
	work := cfg.Dir
	if work == "" {
		d, err := os.MkdirTemp("", "gitmem-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		work = d
	} else if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, err
	}
	rep := &Report{cfg: cfg, Started: time.Now()}
	rep.Machine = readMachine(work, cfg.SDKDir)
	cfg.logf("gitmem bench in %s (%s, load average %s)", work, rep.Machine.FS, rep.Machine.LoadStart)
	fl, err := measureFloor(work, cfg.FloorOps)
	if err != nil {
		return nil, fmt.Errorf("measure fsync: %w", err)
	}
	rep.Floor = fl
	cfg.logf("fsync of a 200-byte append: p50 %s; fdatasync %s; fdatasync into a preallocated file %s",
		ms(pct(fl.fsync, 50)), ms(pct(fl.fdatasync, 50)), ms(pct(fl.prealloc, 50)))
	for _, files := range cfg.Files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		dir := filepath.Join(work, fmt.Sprintf("files-%d", files))
		if err := rep.size(ctx, dir, files); err != nil {
			return nil, err
		}
		if cfg.Dir == "" {
			os.RemoveAll(dir)
		}
	}
	if cfg.MergeCommits > 0 {
		cfg.logf("calls during the merges of pulls of %d commits", cfg.MergeCommits)
		if err := rep.callsDuringSync(ctx, filepath.Join(work, "merges")); err != nil {
			return nil, fmt.Errorf("calls during a sync: %w", err)
		}
	}
	if cfg.Stores > 0 {
		cfg.logf("many stores: %d", cfg.Stores)
		if err := rep.manyStores(ctx, work); err != nil {
			return nil, fmt.Errorf("many stores: %w", err)
		}
	}
	if cfg.MSOps > 0 || cfg.MSUpload > 0 {
		if err := rep.memoryStores(ctx, filepath.Join(work, "memory-stores")); err != nil {
			return nil, fmt.Errorf("the Memory Stores API: %w", err)
		}
	}
	rep.Machine.LoadEnd = loadAverage()
	rep.Took = time.Since(rep.Started)
	return rep, nil
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", args...)
	}
}

// size measures every backend on a memory of files files.
func (rep *Report) size(ctx context.Context, dir string, files int) error {
	cfg := rep.cfg
	base := filepath.Join(dir, "base")
	// A kept work folder (--dir) keeps the generated memories for the
	// next run; what the backends changed is made again from them.
	marker := filepath.Join(dir, "generated")
	want := fmt.Sprintf("%d files, %d commits\n", files, cfg.History)
	if have, err := os.ReadFile(marker); err == nil && string(have) == want {
		cfg.logf("%d files, %d commits of history: generated by an earlier run", files, cfg.History)
	} else {
		os.RemoveAll(dir)
		t0 := time.Now()
		if err := Generate(base, files, cfg.History); err != nil {
			return fmt.Errorf("generate %d files with %d commits: %w", files, cfg.History, err)
		}
		if err := os.WriteFile(marker, []byte(want), 0o600); err != nil {
			return err
		}
		cfg.logf("%d files, %d commits of history: generated in %s", files, cfg.History, time.Since(t0).Round(time.Millisecond))
	}
	var runs []*run
	defer func() {
		for _, r := range runs {
			if r.b != nil {
				r.b.close()
			}
		}
	}()
	for _, name := range cfg.Backends {
		if name == TS && cfg.SDKDir == "" {
			continue
		}
		r := &run{name: name, files: files}
		r.mix = phase{w: newWorkload(files, 0, 1, make([]int, files), "s", false), byCmd: map[string][]time.Duration{}}
		runs = append(runs, r)
	}
	// The first start on a fresh copy, to the first answer (a view), as
	// a user waits for it: firstStarts copies of each backend in turn,
	// the order swapped each time; the last one stays for the mix. The
	// start is timed from the process's launch, the copy made: a copy of
	// gitmem's folder holds .git too (its 32 MB history index at 100,000
	// commits), which is no part of the start.
	for k := range firstStarts {
		for i := range runs {
			r := runs[(i+k)%len(runs)]
			if k > 0 && (r.name == GitCLI || r.name == GoGit) {
				continue // no process to start: copied once
			}
			if r.b != nil {
				err := r.b.close()
				r.b = nil
				if err != nil {
					return fmt.Errorf("%s at %d files: %w", r.name, files, err)
				}
			}
			own, err := rep.copyFor(r.name, dir, base, "stdio")
			if err != nil {
				return fmt.Errorf("%s at %d files: %w", r.name, files, err)
			}
			t := time.Now()
			if r.b, err = rep.start(ctx, r.name, dir, own, "stdio"); err != nil {
				return fmt.Errorf("%s at %d files: %w", r.name, files, err)
			}
			if err := r.b.call(viewOp(files)); err != nil {
				return fmt.Errorf("%s at %d files: %w", r.name, files, err)
			}
			r.starts = append(r.starts, time.Since(t))
		}
	}
	for _, r := range runs {
		for _, op := range r.mix.w.next() { // warm up, not measured
			if err := r.b.call(op); err != nil {
				return fmt.Errorf("%s at %d files: %w", r.name, files, err)
			}
		}
	}
	if err := alternate(ctx, runs, func(r *run) *phase { return &r.mix }, cfg.Ops, cfg.Budget); err != nil {
		return err
	}
	// rename and delete on their own, alternated likewise: in the mix
	// they are a sixth of the calls each, too few for a steady p50. Each
	// round creates a file (not timed), renames it and deletes it.
	if cfg.MoveOps > 0 && files == slices.Max(cfg.Files) {
		for _, r := range runs {
			r.moves = phase{w: newWorkload(files, 0, 1, make([]int, files), "m", true), byCmd: map[string][]time.Duration{}, only: moveCommands}
			r.moves.w.movesOnly = true
		}
		if err := alternate(ctx, runs, func(r *run) *phase { return &r.moves }, 2*cfg.MoveOps, cfg.Budget); err != nil {
			return err
		}
	}
	for _, r := range runs {
		err := r.b.close()
		r.b = nil
		if err != nil {
			return fmt.Errorf("%s at %d files: %w", r.name, files, err)
		}
		cfg.logf("  %-24s %5d calls  mutation p50 %s  p99 %s", titles[r.name], r.mix.calls, ms(pct(r.mutations(), 50)), ms(pct(r.mutations(), 99)))
		if r.moves.calls > 0 {
			cfg.logf("  %-24s %5d calls  rename p50 %s  delete p50 %s", "", r.moves.calls, ms(pct(r.moves.byCmd["rename"], 50)), ms(pct(r.moves.byCmd["delete"], 50)))
		}
		rep.Single = append(rep.Single, r)
	}
	if files == slices.Max(cfg.Files) && cfg.HistRuns > 0 {
		cfg.logf("restart and history commands at %d files, %d runs each", files, cfg.HistRuns)
		if err := rep.histCmds(ctx, dir, base, files); err != nil {
			return fmt.Errorf("history commands at %d files: %w", files, err)
		}
	}
	if files == slices.Max(cfg.Files) && cfg.SyncCommits > 0 && cfg.SyncRuns > 0 {
		cfg.logf("push and pull of %d commits at %d files, %d runs each", cfg.SyncCommits, files, cfg.SyncRuns)
		if err := rep.syncMany(ctx, dir, base); err != nil {
			return fmt.Errorf("push and pull at %d files: %w", files, err)
		}
	}
	if files == cfg.ConcFiles && len(cfg.Clients) > 0 {
		return rep.concurrency(ctx, dir, base, files)
	}
	return nil
}

func viewOp(files int) Op {
	return Op{"view", map[string]any{"command": "view", "path": memPath(seedName(files - 1))}}
}

// open prepares a copy of the generated memory for backend name and
// starts it. mode is "stdio" or "http" for the TypeScript backend.
func (rep *Report) open(ctx context.Context, name, dir, base, mode string) (backend, error) {
	own, err := rep.copyFor(name, dir, base, mode)
	if err != nil {
		return nil, err
	}
	return rep.start(ctx, name, dir, own, mode)
}

// copyFor makes backend name's own copy of the generated memory under
// dir (the memory files alone for the TypeScript backend), and returns
// its folder.
func (rep *Report) copyFor(name, dir, base, mode string) (string, error) {
	own := filepath.Join(dir, name)
	if name == TS {
		own = filepath.Join(dir, "ts-"+mode)
	}
	if err := os.RemoveAll(own); err != nil {
		return "", err
	}
	if name == TS {
		return own, copyTree(filepath.Join(base, "memories"), filepath.Join(own, "memories"))
	}
	return own, copyTree(base, own)
}

// start starts backend name on its copy own (copyFor's).
func (rep *Report) start(ctx context.Context, name, dir, own, mode string) (backend, error) {
	cfg := rep.cfg
	if name == TS {
		cmd, err := tsCommand(ctx, cfg.SDKDir, dir, mode, own)
		if err != nil {
			return nil, err
		}
		if mode == "http" {
			return startHTTPServer(cmd, false, "listening ")
		}
		return startLineServer(cmd)
	}
	switch name {
	case GitmemStdio:
		return startLineServer(gitmemCmd(cfg, "--repo", own, "serve", maxFiles))
	case GitmemHTTP:
		return startHTTPServer(gitmemCmd(cfg, "--repo", own, "serve", maxFiles, "--http", "127.0.0.1:0"), true, gitmemAnnounce)
	case GitCLI:
		return &gitCLI{dir: own}, nil
	case GoGit:
		return openGoGit(own)
	}
	return nil, fmt.Errorf("unknown backend %q", name)
}

// firstStarts is how many fresh copies of each backend are started, to
// its first answer, before the mix.
const firstStarts = 5

// maxFiles lifts serve's file limit (10,000 by default) above what the
// largest memory holds while the mix runs.
const maxFiles = "--max-files=1000000"

// gitmemCmd is a gitmem child with no GITMEM_ settings from our
// environment (GITMEM_HTTP would change what serve does).
func gitmemCmd(cfg Config, args ...string) *exec.Cmd {
	cmd := cfg.Gitmem(args...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "GITMEM_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	return cmd
}

// run is one backend's single-client measurements at one size.
type run struct {
	name   string
	files  int
	b      backend
	starts []time.Duration // first starts on a fresh copy, to the first answer
	mix    phase           // the mix of every command
	moves  phase           // rename and delete alone (Config.MoveOps)
}

// phase is a run's calls of one workload.
type phase struct {
	w     *workload
	only  []string // the commands timed (nil: all)
	byCmd map[string][]time.Duration
	calls int           // timed calls
	busy  time.Duration // wall time of its blocks
}

// moveCommands are the commands the moves phase times.
var moveCommands = []string{"rename", "delete"}

// alternate runs blocks of a few rounds per backend in turn, so that
// whatever else the machine does falls on every backend alike, until
// each has made limit timed calls of the phase or spent budget on it.
func alternate(ctx context.Context, runs []*run, of func(*run) *phase, limit int, budget time.Duration) error {
	const blockRounds = 5
	for turn := 0; ; turn++ {
		active := 0
		for k := range runs {
			r := runs[(k+turn)%len(runs)]
			ph := of(r)
			if ph.calls >= limit || ph.busy >= budget {
				continue
			}
			active++
			if err := ph.block(r.b, blockRounds, limit); err != nil {
				return fmt.Errorf("%s at %d files: %w", r.name, r.files, err)
			}
		}
		if active == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// block runs up to rounds rounds on b, stopping at limit timed calls.
func (ph *phase) block(b backend, rounds, limit int) error {
	t0 := time.Now()
	defer func() { ph.busy += time.Since(t0) }()
	for i := 0; i < rounds && ph.calls < limit; i++ {
		for _, op := range ph.w.next() {
			t := time.Now()
			if err := b.call(op); err != nil {
				return err
			}
			if ph.only != nil && !slices.Contains(ph.only, op.Cmd) {
				continue
			}
			ph.byCmd[op.Cmd] = append(ph.byCmd[op.Cmd], time.Since(t))
			ph.calls++
		}
	}
	return nil
}

func (r *run) mutations() []time.Duration {
	var out []time.Duration
	for cmd, ds := range r.mix.byCmd {
		if cmd != "view" {
			out = append(out, ds...)
		}
	}
	return out
}

// conc is one backend's run at one concurrency level.
type conc struct {
	name    string
	clients int
	lat     []time.Duration
	server  []time.Duration // the server's own time over each call, when it says (Server-Timing)
	wall    time.Duration
	// settle is how long after the last answer the server last used the
	// CPU (its background writes, and the pauses before them), after the
	// CPU time it used meanwhile: the work its sustained rate counts.
	settle, after time.Duration
}

// concurrency runs each level with gitmem over HTTP and the TypeScript
// backend's HTTP server, taking turns.
func (rep *Report) concurrency(ctx context.Context, dir, base string, files int) error {
	cfg := rep.cfg
	names := []string{GitmemHTTP}
	if cfg.SDKDir != "" {
		names = append(names, TS)
	}
	cdir := filepath.Join(dir, "concurrent")
	servers := map[string]backend{}
	revs := map[string][]int{}
	defer func() {
		for _, b := range servers {
			b.close()
		}
	}()
	for _, name := range names {
		b, err := rep.open(ctx, name, cdir, base, "http")
		if err != nil {
			return fmt.Errorf("%s, concurrent: %w", name, err)
		}
		servers[name] = b
		revs[name] = make([]int, files)
		for _, op := range newWorkload(files, 0, 1, revs[name], "warm", true).next() {
			if err := b.call(op); err != nil {
				return fmt.Errorf("%s, concurrent: %w", name, err)
			}
		}
	}
	// A run starts when every server is idle, and a server's time to
	// finish its work after the last answer counts in its sustained rate:
	// gitmem answers once a change is in its log and writes git's files
	// just after, and that backlog must neither slow the next backend's
	// run nor go uncounted. It starts on a clean disk too: gitmem's
	// checkpoint syncs the whole file system (syncfs), which would write
	// out the copies made above and the other backend's unsynced files
	// (the TS backend never syncs) on gitmem's time.
	settleAll := func() {
		for _, b := range servers {
			if s, ok := b.(settler); ok {
				s.settle(time.Minute)
			}
		}
		writeBack(cdir)
	}
	for i, clients := range cfg.Clients {
		for k := range names {
			name := names[(k+i)%len(names)]
			settleAll()
			c, err := drive(servers[name], files, clients, cfg.ConcOps, revs[name], fmt.Sprintf("x%d", clients))
			if err != nil {
				return fmt.Errorf("%s, %d clients: %w", name, clients, err)
			}
			if s, ok := servers[name].(settler); ok {
				c.settle, c.after = s.settle(time.Minute)
			}
			c.name = name
			rep.Conc = append(rep.Conc, c)
			cfg.logf("  %-24s %3d clients  p50 %s  p99 %s (in the server: %s)  %.0f mutations/s, %.0f/s with the work after the last answer (%s of CPU, the last %s after it)", titles[name], clients,
				ms(pct(c.lat, 50)), ms(pct(c.lat, 99)), c.serverP99(), c.rate(), c.sustained(), ms(c.after), ms(c.settle))
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	for name, b := range servers {
		delete(servers, name)
		if err := b.close(); err != nil {
			return err
		}
	}
	return nil
}

// drive runs clients concurrent clients making about total mutations
// together, each on its own files.
func drive(b backend, files, clients, total int, revs []int, tag string) (*conc, error) {
	per := max(1, total/clients)
	lats := make([][]time.Duration, clients)
	servers := make([][]time.Duration, clients)
	timed, _ := b.(interface {
		timedCall(Op) (time.Duration, error)
	})
	errs := make([]error, clients)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newWorkload(files, c, clients, revs, tag, true)
			<-start
			for len(lats[c]) < per {
				for _, op := range w.next() {
					t := time.Now()
					took, err := time.Duration(-1), error(nil)
					if timed != nil {
						took, err = timed.timedCall(op)
					} else {
						err = b.call(op)
					}
					if err != nil {
						errs[c] = err
						return
					}
					lats[c] = append(lats[c], time.Since(t))
					if took >= 0 {
						servers[c] = append(servers[c], took)
					}
				}
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	c := &conc{clients: clients, wall: time.Since(t0)}
	for i := range clients {
		if errs[i] != nil {
			return nil, errs[i]
		}
		c.lat = append(c.lat, lats[i]...)
		c.server = append(c.server, servers[i]...)
	}
	return c, nil
}

// serverP99 is the p99 of the server's own time over the calls, "–"
// unless it said it for every call.
func (c *conc) serverP99() string {
	if len(c.server) == 0 || len(c.server) != len(c.lat) {
		return "–"
	}
	return ms(pct(c.server, 99))
}

func (c *conc) rate() float64 { return float64(len(c.lat)) / c.wall.Seconds() }

// sustained is the rate counting the server's work after the last
// answer: its CPU time then, as if done during the run. Until 2026-12-01
// the wall time until its last use of the CPU was counted, which held
// gitmem's idle pause before letting the writer lock go (200 ms and
// more, no work) and made the row swing 0.9x-2x run to run.
func (c *conc) sustained() float64 {
	return float64(len(c.lat)) / (c.wall + c.after).Seconds()
}

// settler is a backend that runs as a process whose CPU time can be
// watched (see child.settle).
type settler interface {
	settle(limit time.Duration) (wall, cpu time.Duration)
}

// copyTree copies the folder src to dst. Pack files are linked, not
// copied: git never changes a pack in place.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, info.Mode().Perm())
		case filepath.Base(filepath.Dir(p)) == "pack" && strings.HasPrefix(d.Name(), "pack-"):
			return os.Link(p, to)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, info.Mode().Perm())
	})
}
