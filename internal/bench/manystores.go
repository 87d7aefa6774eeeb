package bench

import (
	"context"
	_ "embed"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/stores"
	"github.com/gitmem-dev/gitmem/storesapi"
)

// Many stores: gitmem serve --stores over a folder of Config.Stores
// stores, a few of them (StoresActive) under load from many clients,
// against its peer, a node server over a folder per store, each the
// TypeScript SDK's file backend (node_stores.js), behind the same route
// and token check. Measured: making the stores (the peer: a folder
// each), in blocks alternated with the peer's; then StoresRuns runs, each
// peer a fresh server in turn, the order swapped every run: its start,
// the first call on stores no call has opened (new to both), and calls
// per second and their p50/p99 under load, with the server's memory.

// storesRun is one server's run.
type storesRun struct {
	start      time.Duration // to the line that says it serves
	cold       []time.Duration
	rate       float64 // calls per second under load
	all        []time.Duration
	rssPeakMiB float64
	cpuPerCall time.Duration // the server's CPU (user and system) under load, per call; 0 where /proc does not tell
}

// storesResult is the many-stores measurements: gitmem's and the peer's
// runs (no peer: none).
type storesResult struct {
	made               int // stores made by this run (a kept --dir holds the rest)
	making, peerMaking time.Duration
	cold               int // cold stores timed per run
	gitmem, peer       []storesRun
}

// storesToken is the bearer token of both servers.
const storesToken = "gitmem_benchmark_token"

//go:embed node_stores.js
var nodeStoresJS []byte

// manyStores measures many stores in work.
func (rep *Report) manyStores(ctx context.Context, work string) error {
	cfg := rep.cfg
	if cfg.StoresActive >= cfg.Stores {
		return fmt.Errorf("--stores-active %d: not fewer than the %d stores", cfg.StoresActive, cfg.Stores)
	}
	res := &storesResult{cold: min(20, (cfg.Stores-cfg.StoresActive)/max(1, cfg.StoresRuns))}
	if res.cold < 1 && cfg.StoresRuns > 0 {
		return fmt.Errorf("%d stores leave no cold store for each of %d runs beside the %d active ones", cfg.Stores, cfg.StoresRuns, cfg.StoresActive)
	}
	dir := filepath.Join(work, fmt.Sprintf("stores-%d", cfg.Stores))
	nodeDir := dir + "-node"
	for _, d := range []string{dir, nodeDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := rep.makeStores(ctx, res, dir, nodeDir); err != nil {
		return err
	}
	rep.Stores = res
	if cfg.StoresRuns == 0 {
		return nil
	}
	tokens := filepath.Join(work, "tokens.json")
	if err := os.WriteFile(tokens, []byte(`{"tokens":[{"name":"bench","sha256":"`+storesapi.HashToken(storesToken)+
		`","stores":["*"],"access":"read-write","role":"operator"}]}`), 0o600); err != nil {
		return err
	}
	type peer struct {
		gitmem bool
		start  func() (*httpServer, error)
	}
	peers := []peer{{true, func() (*httpServer, error) {
		return startHTTPServer(gitmemCmd(cfg, "serve", "--http", "127.0.0.1:0", "--stores", dir, "--tokens", tokens,
			"--max-open-stores", "256"), true, gitmemAnnounce)
	}}}
	if cfg.SDKDir != "" {
		script := filepath.Join(work, "node_stores.js")
		if err := os.WriteFile(script, nodeStoresJS, 0o600); err != nil {
			return err
		}
		peers = append(peers, peer{false, func() (*httpServer, error) {
			return startHTTPServer(nodeCommand(ctx, cfg.SDKDir, script, nodeDir, storesapi.HashToken(storesToken)), false, "listening ")
		}})
	}
	coldOrder := rand.New(rand.NewPCG(1, 2)).Perm(cfg.Stores - cfg.StoresActive)
	for i := range cfg.StoresRuns {
		var cold []string
		for _, k := range coldOrder[i*res.cold : (i+1)*res.cold] {
			cold = append(cold, storeName(cfg.StoresActive+k))
		}
		for k := range peers {
			p := peers[(k+i)%len(peers)]
			if err := ctx.Err(); err != nil {
				return err
			}
			name := "gitmem"
			if !p.gitmem {
				name = "node"
			}
			if cfg.StoresEvict {
				folder := nodeDir
				if p.gitmem {
					folder = dir
				}
				var paths []string
				for _, c := range cold {
					paths = append(paths, filepath.Join(folder, c))
				}
				if err := evict(paths); err != nil {
					return err
				}
			}
			t := time.Now()
			s, err := p.start()
			if err != nil {
				return fmt.Errorf("%s over %d stores: %w", name, cfg.Stores, err)
			}
			r, err := rep.storesLoad(ctx, s, time.Since(t), cold, fmt.Sprintf("%d%s", i, name))
			if cerr := s.close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("%s over %d stores: %w", name, cfg.Stores, err)
			}
			cfg.logf("  stores run %d, %-6s start %s, cold first call p50 %s, %.0f calls/s, p50 %s, p99 %s, CPU %s a call, RSS peak %.0f MiB", i+1, name,
				ms(r.start), ms(pct(r.cold, 50)), r.rate, ms(pct(r.all, 50)), ms(pct(r.all, 99)), ms(r.cpuPerCall), r.rssPeakMiB)
			if p.gitmem {
				res.gitmem = append(res.gitmem, r)
			} else {
				res.peer = append(res.peer, r)
			}
		}
	}
	return nil
}

func storeName(i int) string { return fmt.Sprintf("store-%05d", i) }

// makeStores makes the stores missing from dir (gitmem's, 8 at a time)
// and their peer's folders in nodeDir (with the SDK), in ten blocks,
// gitmem's and the peer's in turn.
func (rep *Report) makeStores(ctx context.Context, res *storesResult, dir, nodeDir string) error {
	cfg := rep.cfg
	d, err := stores.Open(dir, stores.Options{Repo: gitmem.Options{Logf: func(string, ...any) {}}, MaxOpen: 64, IdleClose: -1})
	if err != nil {
		return err
	}
	defer d.Close()
	var missing []int
	for i := range cfg.Stores {
		if _, err := os.Stat(filepath.Join(dir, storeName(i), ".git")); err != nil {
			missing = append(missing, i)
		}
	}
	if len(missing) < cfg.Stores {
		cfg.logf("%d stores: %d made by an earlier run", cfg.Stores, cfg.Stores-len(missing))
	}
	makeGitmem := func(i int) error {
		name := storeName(i)
		_, err := d.Create(name, stores.Meta{Description: "Benchmark store " + name, Metadata: map[string]string{"user": name}}, gitmem.Signature{})
		return err
	}
	makeNode := func(i int) error { return os.MkdirAll(filepath.Join(nodeDir, storeName(i), "memories"), 0o700) }
	block := max(1, (len(missing)+9)/10)
	for b := 0; b*block < len(missing); b++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		these := missing[b*block : min(len(missing), (b+1)*block)]
		for k := range 2 {
			isGitmem := (k+b)%2 == 0
			if !isGitmem && cfg.SDKDir == "" {
				continue // no peer
			}
			f, took := makeNode, &res.peerMaking
			if isGitmem {
				f, took = makeGitmem, &res.making
			}
			t := time.Now()
			if err := parallel(8, these, f); err != nil {
				return fmt.Errorf("make the stores: %w", err)
			}
			*took += time.Since(t)
		}
		res.made += len(these)
	}
	if res.made > 0 {
		cfg.logf("%d stores made in %s (8 at a time; the peer's folders in %s)", res.made, res.making.Round(time.Millisecond), res.peerMaking.Round(time.Millisecond))
	}
	return nil
}

// parallel runs f on each of items, n at a time, and returns the first
// error.
func parallel(n int, items []int, f func(int) error) error {
	work := make(chan int)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, i := range items {
		work <- i
	}
	close(work)
	wg.Wait()
	return first
}

// storeCall runs one memory tool call in store through the server s of
// many stores.
func storeCall(s *httpServer, store, id string, input map[string]any) error {
	res, _, err := s.postTo(strings.TrimSuffix(s.url, "/v1/tool_use")+"/v1/stores/"+store+"/tool_use", storesToken, toolUseBlock(id, input))
	if err == nil && res.IsError {
		err = fmt.Errorf("%s %v in %s: %s", input["command"], input["path"], store, res.Content)
	}
	return err
}

// storesLoad times the first call on each cold store of the server s
// (started in start), then runs the load: each client calls stores
// picked at random among the active ones, 60% views, 30% str_replace,
// 10% creates, for StoresLoad.
func (rep *Report) storesLoad(ctx context.Context, s *httpServer, start time.Duration, coldStores []string, tag string) (storesRun, error) {
	cfg := rep.cfg
	r := storesRun{start: start}
	run := fmt.Sprintf("%s-%x", tag, time.Now().UnixNano())
	for _, name := range coldStores {
		t := time.Now()
		if err := storeCall(s, name, "toolu_cold_"+run+"_"+name, map[string]any{"command": "view", "path": "/memories"}); err != nil {
			return r, fmt.Errorf("the first call on a cold store: %w", err)
		}
		r.cold = append(r.cold, time.Since(t))
	}
	peak := rssMiB(s.cmd.Process.Pid)
	// Each client gets a file of this run in each active store, of one
	// line, which it views and edits (the SDK's str_replace reads and
	// writes the file without a lock: two clients editing one file would
	// lose each other's changes; and it finds no old_str that spans
	// lines). A store kept from an earlier run holds that run's files.
	notes := func(c int) string { return fmt.Sprintf("/memories/notes-%s-%02d.md", run, c) }
	clients := cfg.StoresClients
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for st := range cfg.StoresActive {
				err := storeCall(s, storeName(st), fmt.Sprintf("toolu_notes_%s_%d_%d", run, c, st),
					map[string]any{"command": "create", "path": notes(c), "file_text": fmt.Sprintf("client-%02d: 0\n", c)})
				if err != nil {
					errs[c] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	lats := make([][]time.Duration, clients)
	lctx, cancel := context.WithTimeout(ctx, cfg.StoresLoad)
	defer cancel()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-t.C:
				peak = max(peak, rssMiB(s.cmd.Process.Pid))
			}
		}
	}()
	t0 := time.Now()
	cpu0, cpuOK := cpuTicks(s.cmd.Process.Pid)
	for c := range clients {
		if errs[c] != nil {
			return r, errs[c]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 99))
			edits := map[int]int{}
			for i := 0; lctx.Err() == nil; i++ {
				st := rng.IntN(cfg.StoresActive)
				var input map[string]any
				switch k := rng.IntN(10); {
				case k < 6:
					input = map[string]any{"command": "view", "path": notes(c)}
				case k < 9:
					n := edits[st]
					edits[st] = n + 1
					input = map[string]any{"command": "str_replace", "path": notes(c),
						"old_str": fmt.Sprintf("client-%02d: %d", c, n), "new_str": fmt.Sprintf("client-%02d: %d", c, n+1)}
				default:
					input = map[string]any{"command": "create", "path": fmt.Sprintf("/memories/c-%s-%02d/%d.md", run, c, i),
						"file_text": fmt.Sprintf("note %d of client %d\n", i, c)}
				}
				t := time.Now()
				if err := storeCall(s, storeName(st), fmt.Sprintf("toolu_%s_%d_%d", run, c, i), input); err != nil {
					errs[c] = err
					return
				}
				lats[c] = append(lats[c], time.Since(t))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	cpu1, cpuOK1 := cpuTicks(s.cmd.Process.Pid)
	cancel()
	<-sampled
	for c := range clients {
		if errs[c] != nil {
			return r, errs[c]
		}
		r.all = append(r.all, lats[c]...)
	}
	r.rate = float64(len(r.all)) / elapsed.Seconds()
	if cpuOK && cpuOK1 && len(r.all) > 0 {
		r.cpuPerCall = time.Duration(cpu1-cpu0) * (time.Second / 100) / time.Duration(len(r.all)) // USER_HZ
	}
	r.rssPeakMiB = max(peak, rssMiB(s.cmd.Process.Pid))
	return r, nil
}

// rssMiB is the resident memory of process pid, in MiB (0 where /proc
// does not tell).
func rssMiB(pid int) float64 {
	kb, _ := strconv.ParseFloat(strings.TrimSuffix(firstField(fmt.Sprintf("/proc/%d/status", pid), "VmRSS"), " kB"), 64)
	return kb / 1024
}

// storesTable is the many-stores table.
func (rep *Report) storesTable() table {
	cfg, r := rep.cfg, rep.Stores
	peer := ""
	if cfg.SDKDir != "" {
		peer = " against a node server over a folder each (the SDK's file backend)"
	}
	t := table{title: fmt.Sprintf("Many stores: gitmem serve --stores over %s stores%s; %d active, %d clients (60%% view, 30%% str_replace, 10%% create), %d runs of %s alternated, median [min–max]",
		count(cfg.Stores), peer, cfg.StoresActive, cfg.StoresClients, cfg.StoresRuns, cfg.StoresLoad),
		header: []string{"operation", "gitmem", "node peer", "gitmem / peer"}}
	if r.made > 0 {
		t.rows = append(t.rows, []string{fmt.Sprintf("making %s stores, 8 at a time (the peer: a folder each)", count(r.made)),
			ms(r.making), ms(r.peerMaking), ratio(float64(r.making), float64(r.peerMaking))})
	}
	if len(r.gitmem) == 0 {
		return t
	}
	row := func(what string, f func(storesRun) float64, unit func(float64) string) {
		span := func(runs []storesRun) (string, float64) {
			if len(runs) == 0 {
				return "–", 0
			}
			var xs []float64
			for _, x := range runs {
				xs = append(xs, f(x))
			}
			slices.Sort(xs)
			med := xs[(len(xs)-1)/2] // the lower of two, as pct
			return fmt.Sprintf("%s [%s–%s]", unit(med), unit(xs[0]), unit(xs[len(xs)-1])), med
		}
		g, gm := span(r.gitmem)
		p, pm := span(r.peer)
		t.rows = append(t.rows, []string{what, g, p, ratio(gm, pm)})
	}
	dur := func(x float64) string { return ms(time.Duration(x)) }
	row(fmt.Sprintf("server start over %s stores", count(cfg.Stores)), func(x storesRun) float64 { return float64(x.start) }, dur)
	evicted := ""
	if cfg.StoresEvict {
		evicted = ", evicted from the page cache"
	}
	row(fmt.Sprintf("first call to a cold store%s, p50 of %d", evicted, r.cold), func(x storesRun) float64 { return float64(pct(x.cold, 50)) }, dur)
	row(fmt.Sprintf("calls/s spread over %d stores", cfg.StoresActive), func(x storesRun) float64 { return x.rate }, func(x float64) string { return fmt.Sprintf("%.0f", x) })
	row("calls p50 under load", func(x storesRun) float64 { return float64(pct(x.all, 50)) }, dur)
	row("calls p99 under load", func(x storesRun) float64 { return float64(pct(x.all, 99)) }, dur)
	row("RSS peak", func(x storesRun) float64 { return x.rssPeakMiB }, func(x float64) string { return fmt.Sprintf("%.0f MiB", x) })
	return t
}
