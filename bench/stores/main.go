// Command stores benchmarks the multi-store server (gitmem serve --stores)
// as docs/performance.md reports it: many stores, a few of them active
// under load from many clients, against its peer, a node server over a
// folder per store, each the TypeScript SDK's file backend
// (node_stores.js). It builds gitmem, makes the stores (kept in -dir
// between runs; the peer's folders in DIR-node), and measures: how long
// making the stores took, server start time with few and with all
// stores, then for each run, each peer a fresh server in turn (the order
// swapped every run): the first call on cold stores (new to both), calls
// per second and p50/p99 under load, memory and open files. Linux only
// (it reads /proc).
//
//	go run ./bench/stores                       # 10,000 stores, 100 active, 50 clients, 3 runs of 10 s
//	go run ./bench/stores -dir /tmp/stores10k   # keep the stores for the next run
package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
	"github.com/gitmem-dev/gitmem/storesapi"
)

var (
	dirFlag    = flag.String("dir", "", "folder of the stores (kept; made when missing); default: a temporary folder, removed")
	nStores    = flag.Int("stores", 10000, "stores in the folder")
	nActive    = flag.Int("active", 100, "stores the clients use")
	nClients   = flag.Int("clients", 50, "concurrent clients")
	duration   = flag.Duration("duration", 10*time.Second, "how long each run of the load lasts")
	nCold      = flag.Int("cold", 20, "cold stores whose first call is timed")
	maxOpen    = flag.Int("max-open", 256, "serve --max-open-stores")
	mixFlag    = flag.String("mix", "view=60,str_replace=30,create=10", "the calls the clients make, in percent")
	runs       = flag.Int("runs", 3, "runs of the load, each peer a fresh server in turn, the order swapped every run (0: only make the stores)")
	peerFlag   = flag.Bool("peer", true, "run the node peer (a folder per store, the TypeScript SDK's file backend) alternated with gitmem")
	sdkFlag    = flag.String("sdk", "handler/testdata/reference", "the folder whose node_modules holds @anthropic-ai/sdk")
	binFlag    = flag.String("bin", "", "the gitmem binary to run (default: built from ./cmd/gitmem)")
	beforeFlag = flag.String("before", "", "a second gitmem binary (an earlier build), run as a third peer in turn with the others")
)

const secret = "gitmem_benchmark_token"

func main() {
	flag.Parse()
	log.SetFlags(0)
	work, err := os.MkdirTemp("", "gitmem-bench-stores-")
	check(err)
	defer os.RemoveAll(work)
	dir := *dirFlag
	if dir == "" {
		dir = filepath.Join(work, "stores")
	}

	bin := filepath.Join(work, "gitmem")
	if *binFlag != "" {
		bin = *binFlag
	} else {
		run("go", "build", "-o", bin, "./cmd/gitmem")
	}
	tokens := filepath.Join(work, "tokens.json")
	check(os.WriteFile(tokens, []byte(`{"tokens":[{"name":"bench","sha256":"`+storesapi.HashToken(secret)+
		`","stores":["*"],"access":"read-write","role":"operator"}]}`), 0o600))

	log.Printf("making %d stores in %s ...", *nStores, dir)
	t0 := time.Now()
	made := populate(dir, *nStores)
	making := time.Since(t0)
	log.Printf("made %d stores in %v (%.1f a second)", made, making.Round(time.Millisecond), float64(made)/making.Seconds())
	if *runs == 0 {
		return
	}
	small := filepath.Join(work, "small")
	populate(small, 10)

	peers := []peer{{name: "gitmem", start: func() *server { return serve(bin, dir, tokens) }}}
	if *beforeFlag != "" {
		peers = append(peers, peer{name: "before", start: func() *server { return serve(*beforeFlag, dir, tokens) }})
	}
	if node := nodePeer(work, dir+"-node"); node != nil {
		peers = append(peers, *node)
	}

	startSmall := median(5, func() time.Duration { s := serve(bin, small, tokens); s.stop(); return s.started })
	startBig := median(5, func() time.Duration { s := serve(bin, dir, tokens); s.stop(); return s.started })

	// The runs: each peer a fresh server in turn, the order swapped every
	// run; each run's cold stores are new to both.
	coldOrder := rand.New(rand.NewPCG(1, 2)).Perm(*nStores - *nActive)
	results := map[string][]loadResult{}
	for i := range *runs {
		order := append(slices.Clone(peers[i%len(peers):]), peers[:i%len(peers)]...)
		var cold []string
		for _, k := range coldOrder[i**nCold : (i+1)**nCold] {
			cold = append(cold, storeName(*nActive+k))
		}
		for _, p := range order {
			res := measure(p, cold)
			results[p.name] = append(results[p.name], res)
			log.Printf("run %d %-6s %6.0f calls/s, p50 %s, p99 %s, cold p50 %s", i+1, p.name, res.rate,
				ms(res.all50), ms(res.all99), ms(res.cold50))
		}
	}

	fmt.Printf("\n%s stores, %d active, %d clients, mix %s, %d runs of %v (gitmem serve --max-open-stores %d); medians [min–max]\n\n",
		policy.Thousands(int64(*nStores)), *nActive, *nClients, *mixFlag, *runs, *duration, *maxOpen)
	fmt.Printf("| |")
	for _, p := range peers {
		fmt.Printf(" %s |", p.name)
	}
	for _, p := range peers[1:] {
		fmt.Printf(" gitmem / %s |", p.name)
	}
	fmt.Printf("\n|---|%s\n", strings.Repeat("--:|", 2*len(peers)-1))
	row := func(what string, f func(loadResult) float64, unit func(float64) string) {
		fmt.Printf("| %s |", what)
		var meds []float64
		for _, p := range peers {
			var xs []float64
			for _, r := range results[p.name] {
				xs = append(xs, f(r))
			}
			slices.Sort(xs)
			med := xs[len(xs)/2]
			meds = append(meds, med)
			fmt.Printf(" %s [%s–%s] |", unit(med), unit(xs[0]), unit(xs[len(xs)-1]))
		}
		for _, m := range meds[1:] {
			fmt.Printf(" %.2fx |", meds[0]/m)
		}
		fmt.Println()
	}
	dms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	row("calls per second", func(r loadResult) float64 { return r.rate }, func(x float64) string { return fmt.Sprintf("%.0f", x) })
	msUnit := func(x float64) string { return fmt.Sprintf("%.1f ms", x) }
	row("all calls p50", func(r loadResult) float64 { return dms(r.all50) }, msUnit)
	row("all calls p99", func(r loadResult) float64 { return dms(r.all99) }, msUnit)
	row(fmt.Sprintf("first call on a cold store, p50 of %d", *nCold), func(r loadResult) float64 { return dms(r.cold50) }, msUnit)
	row("first call on a cold store, max", func(r loadResult) float64 { return dms(r.coldMax) }, msUnit)
	row("RSS peak", func(r loadResult) float64 { return float64(r.peak.rss) / (1 << 20) }, func(x float64) string { return fmt.Sprintf("%.0f MiB", x) })
	row("open files peak", func(r loadResult) float64 { return float64(r.peak.fds) }, func(x float64) string { return fmt.Sprintf("%.0f", x) })
	fmt.Printf("\n| gitmem | |\n|---|---|\n")
	fmt.Printf("| making %s stores (8 in parallel) | %v |\n", policy.Thousands(int64(made)), making.Round(time.Second))
	fmt.Printf("| server start, 10 stores / %s stores (median of 5) | %s / %s |\n", policy.Thousands(int64(*nStores)), ms(startSmall), ms(startBig))
	last := results["gitmem"][len(results["gitmem"])-1]
	for _, op := range []string{"view", "str_replace", "create"} {
		if ds := last.byOp[op]; len(ds) > 0 {
			fmt.Printf("| %s p50 / p99 (last run) | %s / %s |\n", op, ms(pct(ds, 50)), ms(pct(ds, 99)))
		}
	}
	fmt.Printf("| RSS idle / peak, open files idle / peak / after (last run) | %s / %s, %d / %d / %d |\n",
		mib(last.idle.rss), mib(last.peak.rss), last.idle.fds, last.peak.fds, last.after.fds)
}

// peer is a server under test: gitmem, or the node peer.
type peer struct {
	name  string
	start func() *server
}

type loadResult struct {
	rate                          float64 // calls per second
	all50, all99, cold50, coldMax time.Duration
	byOp                          map[string][]time.Duration
	idle, peak, after             stats
}

// measure starts p's server, times the first call on each cold store,
// then runs the load on the active stores.
func measure(p peer, coldStores []string) loadResult {
	srv := p.start()
	defer srv.stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *nClients * 2}}
	idle := procStats(srv.pid)

	// The first call on stores no call has opened.
	var cold []time.Duration
	for _, name := range coldStores {
		t := time.Now()
		res := srv.call(client, name, "toolu_cold_"+name, `{"command":"view","path":"/memories"}`)
		cold = append(cold, time.Since(t))
		if res.IsError {
			fatalf("%s: cold call on %s: %s", p.name, name, res.Content)
		}
	}

	// Each client gets a file of this run in each active store, of one
	// line, which it views and edits in the load (the SDK's str_replace
	// reads and writes the file without a lock: two clients editing one
	// file would lose each other's changes; and it finds no old_str that
	// spans lines). A store kept from an earlier run holds that run's
	// files.
	run := time.Now().UnixNano()
	notes := func(c int) string { return fmt.Sprintf("/memories/notes-%x-%02d.md", run, c) }
	var made sync.WaitGroup
	for c := range *nClients {
		made.Add(1)
		go func() {
			defer made.Done()
			text, _ := json.Marshal(fmt.Sprintf("client-%02d: 0\n", c))
			for s := range *nActive {
				res := srv.call(client, storeName(s), fmt.Sprintf("toolu_notes_%x_%d_%d", run, c, s),
					`{"command":"create","path":"`+notes(c)+`","file_text":`+string(text)+`}`)
				if res.IsError {
					fatalf("%s: create %s in %s: %s", p.name, notes(c), storeName(s), res.Content)
				}
			}
		}()
	}
	made.Wait()

	// Load: each client calls stores picked at random among the active
	// ones, in the mix given.
	mix := parseMix(*mixFlag)
	type sample struct {
		op string
		d  time.Duration
	}
	results := make([][]sample, *nClients)
	peak := idle
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				peak = peak.max(procStats(srv.pid))
			}
		}
	}()
	t0 := time.Now()
	for c := range *nClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 99))
			counters := map[int]int{}
			for i := 0; ctx.Err() == nil; i++ {
				s := r.IntN(*nActive)
				name := storeName(s)
				op := mix.pick(r)
				var input string
				switch op {
				case "view":
					input = `{"command":"view","path":"` + notes(c) + `"}`
				case "str_replace":
					n := counters[s]
					counters[s] = n + 1
					input = fmt.Sprintf(`{"command":"str_replace","path":%q,"old_str":"client-%02d: %d","new_str":"client-%02d: %d"}`, notes(c), c, n, c, n+1)
				case "create":
					input = fmt.Sprintf(`{"command":"create","path":"/memories/c%x-%02d/%d.md","file_text":"note %d of client %d\n"}`, run, c, i, i, c)
				}
				t := time.Now()
				res := srv.call(client, name, fmt.Sprintf("toolu_%x_%02d_%d", run, c, i), input)
				results[c] = append(results[c], sample{op, time.Since(t)})
				if res.IsError {
					fatalf("%s: %s on %s: %s", p.name, op, name, res.Content)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	close(stopSampling)
	<-sampled
	after := procStats(srv.pid)
	peak = peak.max(after)

	byOp := map[string][]time.Duration{}
	total := 0
	for _, rs := range results {
		for _, s := range rs {
			byOp[s.op] = append(byOp[s.op], s.d)
			byOp["all"] = append(byOp["all"], s.d)
			total++
		}
	}
	return loadResult{rate: float64(total) / elapsed.Seconds(), all50: pct(byOp["all"], 50), all99: pct(byOp["all"], 99),
		cold50: pct(cold, 50), coldMax: pct(cold, 100), byOp: byOp, idle: idle, peak: peak, after: after}
}

func storeName(i int) string { return fmt.Sprintf("store-%05d", i) }

// populate makes n stores in dir (those missing), 8 at a time, and
// returns how many it made.
func populate(dir string, n int) int {
	d, err := stores.Open(dir, stores.Options{Repo: gitmem.Options{Logf: func(string, ...any) {}}, MaxOpen: 64, IdleClose: -1})
	check(err)
	defer d.Close()
	var mu sync.Mutex
	made := 0
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				name := storeName(i)
				if _, err := os.Stat(filepath.Join(dir, name, ".git")); err == nil {
					continue
				}
				_, err := d.Create(name, stores.Meta{Description: "Benchmark store " + name, Metadata: map[string]string{"user": name}}, gitmem.Signature{})
				check(err)
				mu.Lock()
				if made++; made%1000 == 0 {
					log.Printf("  %d", made)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return made
}

type server struct {
	base    string
	pid     int
	started time.Duration // from the process's start to its first answer
	stop    func()
}

// serve starts gitmem serve --stores dir and returns when it answers
// /healthz.
func serve(bin, dir, tokens string) *server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "serve", "--http", addr, "--stores", dir, "--tokens", tokens,
		"--max-open-stores", strconv.Itoa(*maxOpen))
	cmd.Stderr = io.Discard
	t := time.Now()
	check(cmd.Start())
	s := started(&server{base: "http://" + addr, pid: cmd.Process.Pid}, cmd)
	for {
		if res, err := http.Get(s.base + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		if time.Since(t) > 30*time.Second {
			fatalf("the server did not start")
		}
		time.Sleep(time.Millisecond)
	}
	s.started = time.Since(t)
	return s
}

// started sets s.stop, which ends cmd, and keeps s with the servers a
// failing run stops.
func started(s *server, cmd *exec.Cmd) *server {
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			running.Delete(s)
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		})
	}
	running.Store(s, struct{}{})
	return s
}

//go:embed node_stores.js
var nodeScript []byte

// nodePeer is the node server over a folder per store (node_stores.js),
// its folders made in dir like the stores; nil (and why, logged) when
// node or the SDK is missing.
func nodePeer(work, dir string) *peer {
	if !*peerFlag {
		return nil
	}
	modules, err := filepath.Abs(filepath.Join(*sdkFlag, "node_modules"))
	check(err)
	if _, err := exec.LookPath("node"); err != nil {
		log.Printf("no node peer: node is not installed")
		return nil
	}
	if _, err := os.Stat(filepath.Join(modules, "@anthropic-ai", "sdk")); err != nil {
		log.Printf("no node peer: no @anthropic-ai/sdk in %s (npm ci there)", modules)
		return nil
	}
	script := filepath.Join(work, "node_stores.js")
	check(os.WriteFile(script, nodeScript, 0o600))
	log.Printf("making %d folders in %s ...", *nStores, dir)
	t0 := time.Now()
	for i := range *nStores {
		check(os.MkdirAll(filepath.Join(dir, storeName(i), "memories"), 0o700))
	}
	log.Printf("made them in %v", time.Since(t0).Round(time.Millisecond))
	return &peer{name: "node", start: func() *server {
		cmd := exec.Command("node", script, dir, storesapi.HashToken(secret))
		cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		check(err)
		t := time.Now()
		check(cmd.Start())
		line, err := bufio.NewReader(out).ReadString('\n')
		check(err)
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
		if !ok {
			fatalf("node peer: %q", line)
		}
		return started(&server{base: "http://" + addr, pid: cmd.Process.Pid, started: time.Since(t)}, cmd)
	}}
}

func (s *server) call(c *http.Client, store, id, input string) handler.Result {
	body := fmt.Sprintf(`{"type":"tool_use","id":%q,"name":"memory","input":%s}`, id, input)
	req, _ := http.NewRequest("POST", s.base+"/v1/stores/"+store+"/tool_use", bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	check(err)
	defer res.Body.Close()
	var out handler.Result
	if res.StatusCode != 200 {
		data, _ := io.ReadAll(res.Body)
		fatalf("%s: %d %s", store, res.StatusCode, data)
	}
	check(json.NewDecoder(res.Body).Decode(&out))
	return out
}

type stats struct {
	rss int64 // bytes
	fds int
}

func (a stats) max(b stats) stats { return stats{max(a.rss, b.rss), max(a.fds, b.fds)} }

func procStats(pid int) stats {
	var s stats
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			s.rss = kb << 10
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	check(err)
	s.fds = len(fds)
	return s
}

type mixture struct {
	ops     []string
	weights []int
	total   int
}

func parseMix(s string) mixture {
	var m mixture
	for _, part := range strings.Split(s, ",") {
		op, w, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(w)
		if !ok || err != nil || !slices.Contains([]string{"view", "str_replace", "create"}, op) {
			log.Fatalf("-mix: %q", part)
		}
		m.ops, m.weights, m.total = append(m.ops, op), append(m.weights, n), m.total+n
	}
	return m
}

func (m mixture) pick(r *rand.Rand) string {
	n := r.IntN(m.total)
	for i, w := range m.weights {
		if n < w {
			return m.ops[i]
		}
		n -= w
	}
	return m.ops[len(m.ops)-1]
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, len(s)*p/100)
	return s[i]
}

func median(n int, f func() time.Duration) time.Duration {
	var ds []time.Duration
	for range n {
		ds = append(ds, f())
	}
	return pct(ds, 50)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func run(name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	check(cmd.Run())
}

func check(err error) {
	if err != nil {
		fatalf("%v", err)
	}
}

// running are the servers started and not stopped: a failing run stops
// them before it exits (fatal).
var running sync.Map // *server -> struct{}

func fatalf(format string, args ...any) {
	running.Range(func(k, _ any) bool { k.(*server).stop(); return true })
	log.Fatalf(format, args...)
}
