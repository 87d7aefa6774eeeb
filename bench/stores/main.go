// Command stores benchmarks the multi-store server (gitmem serve --stores)
// as docs/performance.md reports it: many stores, a few of them active
// under load from many clients. It builds gitmem, makes the stores (kept
// in -dir between runs), starts the real server process and measures:
// server start time with few and with all stores, the first call on a
// cold store, p50/p99 per call under load, the server's memory and open
// files. Linux only (it reads /proc).
//
//	go run ./bench/stores                       # 10,000 stores, 100 active, 50 clients, 30 s
//	go run ./bench/stores -dir /tmp/stores10k   # keep the stores for the next run
package main

import (
	"bytes"
	"context"
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
	"github.com/gitmem-dev/gitmem/operator"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
	"github.com/gitmem-dev/gitmem/storesapi"
)

var (
	dirFlag  = flag.String("dir", "", "folder of the stores (kept; made when missing); default: a temporary folder, removed")
	nStores  = flag.Int("stores", 10000, "stores in the folder")
	nActive  = flag.Int("active", 100, "stores the clients use")
	nClients = flag.Int("clients", 50, "concurrent clients")
	duration = flag.Duration("duration", 30*time.Second, "how long the load runs")
	nCold    = flag.Int("cold", 20, "cold stores whose first call is timed")
	maxOpen  = flag.Int("max-open", 256, "serve --max-open-stores")
	mixFlag  = flag.String("mix", "view=60,str_replace=30,create=10", "the calls the clients make, in percent")
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
	run("go", "build", "-o", bin, "./cmd/gitmem")
	tokens := filepath.Join(work, "tokens.json")
	check(os.WriteFile(tokens, []byte(`{"tokens":[{"name":"bench","sha256":"`+storesapi.HashToken(secret)+
		`","stores":["*"],"access":"read-write","role":"operator"}]}`), 0o600))

	log.Printf("making %d stores in %s ...", *nStores, dir)
	t0 := time.Now()
	made := populate(dir, *nStores, *nActive, *nClients)
	log.Printf("made %d stores in %v", made, time.Since(t0).Round(time.Second))
	small := filepath.Join(work, "small")
	populate(small, 10, 0, 0)

	startSmall := median(5, func() time.Duration { _, d, stop := serve(bin, small, tokens); stop(); return d })
	startBig := median(5, func() time.Duration { _, d, stop := serve(bin, dir, tokens); stop(); return d })

	srv, _, stop := serve(bin, dir, tokens)
	defer stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *nClients * 2}}
	idle := procStats(srv.pid)

	// The first call on stores no call has opened.
	r := rand.New(rand.NewPCG(1, 2))
	var cold []time.Duration
	for range *nCold {
		name := storeName(*nActive + r.IntN(*nStores-*nActive))
		t := time.Now()
		res := srv.call(client, name, "toolu_cold_"+name, `{"command":"view","path":"/memories"}`)
		cold = append(cold, time.Since(t))
		if res.IsError {
			log.Fatalf("cold call on %s: %s", name, res.Content)
		}
	}

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
	go func() {
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
					input = `{"command":"view","path":"/memories/notes.md"}`
				case "str_replace":
					n := counters[s]
					counters[s] = n + 1
					input = fmt.Sprintf(`{"command":"str_replace","path":"/memories/notes.md","old_str":"client-%02d: %d\n","new_str":"client-%02d: %d\n"}`, c, n, c, n+1)
				case "create":
					input = fmt.Sprintf(`{"command":"create","path":"/memories/c%02d/%d.md","file_text":"note %d of client %d\n"}`, c, i, i, c)
				}
				t := time.Now()
				res := srv.call(client, name, fmt.Sprintf("toolu_%02d_%d", c, i), input)
				results[c] = append(results[c], sample{op, time.Since(t)})
				if res.IsError {
					log.Fatalf("%s on %s: %s", op, name, res.Content)
				}
			}
		}()
	}
	wg.Wait()
	close(stopSampling)
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
	fmt.Printf("\n| | |\n|---|---|\n")
	fmt.Printf("| stores / active / clients | %s / %d / %d (serve --max-open-stores %d) |\n", policy.Thousands(int64(*nStores)), *nActive, *nClients, *maxOpen)
	fmt.Printf("| calls in %v | %s (%.0f per second) |\n", *duration, policy.Thousands(int64(total)), float64(total)/duration.Seconds())
	for _, op := range []string{"all", "view", "str_replace", "create"} {
		if ds := byOp[op]; len(ds) > 0 {
			fmt.Printf("| %s p50 / p99 | %s / %s |\n", op, ms(pct(ds, 50)), ms(pct(ds, 99)))
		}
	}
	fmt.Printf("| first call on a cold store, p50 / max (%d stores) | %s / %s |\n", len(cold), ms(pct(cold, 50)), ms(pct(cold, 100)))
	fmt.Printf("| server start, 10 stores / %s stores (median of 5) | %s / %s |\n", policy.Thousands(int64(*nStores)), ms(startSmall), ms(startBig))
	fmt.Printf("| RSS idle / peak under load | %s / %s |\n", mib(idle.rss), mib(peak.rss))
	fmt.Printf("| open files idle / peak / after | %d / %d / %d |\n", idle.fds, peak.fds, after.fds)
}

func storeName(i int) string { return fmt.Sprintf("store-%05d", i) }

// populate makes n stores in dir (those missing), the first active ones
// with a notes.md holding a line per client, and returns how many it made.
func populate(dir string, n, active, clients int) int {
	d, err := stores.Open(dir, stores.Options{Repo: gitmem.Options{Logf: func(string, ...any) {}}, MaxOpen: 64, IdleClose: -1})
	check(err)
	defer d.Close()
	var lines strings.Builder
	for c := range clients {
		fmt.Fprintf(&lines, "client-%02d: 0\n", c)
	}
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
				if i < active {
					s, err := d.Acquire(context.Background(), name)
					check(err)
					check(s.Use(func(r *gitmem.Repo, _ stores.Meta) error {
						_, _, err := operator.PutMemory(r, "notes.md", []byte(lines.String()), nil, policy.Limits{}, gitmem.Signature{})
						return err
					}))
					s.Release()
				}
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
	base string
	pid  int
}

// serve starts gitmem serve --stores dir and returns when it answers
// /healthz, with how long that took.
func serve(bin, dir, tokens string) (*server, time.Duration, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "serve", "--http", addr, "--stores", dir, "--tokens", tokens,
		"--max-open-stores", strconv.Itoa(*maxOpen))
	cmd.Stderr = io.Discard
	t := time.Now()
	check(cmd.Start())
	s := &server{base: "http://" + addr, pid: cmd.Process.Pid}
	for {
		if res, err := http.Get(s.base + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		if time.Since(t) > 30*time.Second {
			log.Fatal("the server did not start")
		}
		time.Sleep(time.Millisecond)
	}
	started := time.Since(t)
	return s, started, func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
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
		log.Fatalf("%s: %d %s", store, res.StatusCode, data)
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
		log.Fatal(err)
	}
}
