//go:build unix

package storesapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
	"github.com/gitmem-dev/gitmem/storesapi"
)

// BenchmarkStoresCalls is the many-stores row of `gitmem bench` in one
// process: memory tool calls over a real loopback HTTP server
// (storesapi.New over a stores.Dir, as `gitmem serve --stores`), 32
// clients each calling stores picked at random among 20 (and the row's
// own shape, 50 clients over 100 stores, each store taking a change or
// two a second: spread), 60% `view` of
// a one-line file of its own, 30% `str_replace` in it, 10% `create` of a
// new file; every change one durable commit (fsync on). cpu-ms/call is
// the process's CPU (user and system, from getrusage; the clients' share
// included) over the timed calls, divided by them: steadier than the
// rate on a shared machine. peak-rss-MiB is the process's peak resident
// memory (its whole life: run one benchmark a process to compare it).
//
//	go test ./storesapi/ -run '^$' -bench StoresCalls -benchtime 3000x -count 6
func BenchmarkStoresCalls(b *testing.B) {
	benchStoresCalls(b, 20, 32, 0)
}

// BenchmarkStoresCallsSpread is BenchmarkStoresCalls with 50 clients over
// 100 stores: the row of issue 25, where a store takes a change or two a
// second.
func BenchmarkStoresCallsSpread(b *testing.B) {
	benchStoresCalls(b, 100, 50, 0)
}

// BenchmarkStoresCallsSpreadGrown is BenchmarkStoresCallsSpread on stores
// that already hold 500 files each, all in /memories itself (written in
// one commit a store before the calls), as the row's stores become after
// five runs of `gitmem bench --stores` (each run adds 50 files and up to
// 50 folders there): what a call costs that grows with the files beside
// the one it changes (the folder's tree object, .git/index).
func BenchmarkStoresCallsSpreadGrown(b *testing.B) {
	benchStoresCalls(b, 100, 50, 500)
}

func benchStoresCalls(b *testing.B, nStores, clients, grown int) {
	d, err := stores.Open(gittest.TempDir(b), stores.Options{Repo: gitmem.Options{}, IdleClose: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	author := gitmem.Signature{Name: "bench", Email: "bench@example.com"}
	for i := range nStores {
		if _, err := d.Create(fmt.Sprintf("store-%03d", i), stores.Meta{}, author); err != nil {
			b.Fatal(err)
		}
	}
	for i := range nStores * min(grown, 1) {
		st, err := d.Acquire(context.Background(), fmt.Sprintf("store-%03d", i))
		if err != nil {
			b.Fatal(err)
		}
		err = st.Use(func(r *gitmem.Repo, _ stores.Meta) error {
			_, err := r.Update(context.Background(), gitmem.Meta{Subject: "grown"}, func(tx *gitmem.Tx) error {
				for k := range grown {
					if err := tx.WriteFile(fmt.Sprintf("g-%d.md", k), []byte(fmt.Sprintf("note %d\n", k))); err != nil {
						return err
					}
				}
				return nil
			})
			return err
		})
		st.Release()
		if err != nil {
			b.Fatal(err)
		}
	}
	srv := httptest.NewServer(storesapi.New(d, storesapi.Options{Limits: policy.DefaultLimits,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var seq atomic.Int64
	call := func(store int, input map[string]any) error {
		body, _ := json.Marshal(map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_b%d", seq.Add(1)), "name": "memory", "input": input})
		res, err := hc.Post(fmt.Sprintf("%s/v1/stores/store-%03d/tool_use", srv.URL, store), "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer res.Body.Close()
		var out handler.Result
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			return err
		}
		if res.StatusCode != http.StatusOK || out.IsError {
			return fmt.Errorf("%v in store %d: %d %s", input, store, res.StatusCode, out.Content)
		}
		return nil
	}
	notes := func(c int) string { return fmt.Sprintf("/memories/notes-%02d.md", c) }
	line := func(c, n int) string { return fmt.Sprintf("client-%02d: %d", c, n) }
	// Each client's files, the clients at once (not timed).
	var made sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		made.Go(func() {
			for st := range nStores {
				if err := call(st, map[string]any{"command": "create", "path": notes(c), "file_text": line(c, 0) + "\n"}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	made.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	// The calls are handed out by b.Loop: the stores are made once a run,
	// not again for b.N = 1 first.
	work := make(chan struct{})
	var mu sync.Mutex
	var failed error
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			edits := make([]int, nStores)
			i := 0
			for range work {
				i++
				st := rng.IntN(nStores)
				var input map[string]any
				switch k := rng.IntN(10); {
				case k < 6:
					input = map[string]any{"command": "view", "path": notes(c)}
				case k < 9:
					input = map[string]any{"command": "str_replace", "path": notes(c), "old_str": line(c, edits[st]), "new_str": line(c, edits[st]+1)}
					edits[st]++
				default:
					input = map[string]any{"command": "create", "path": fmt.Sprintf("/memories/c-%02d/%d.md", c, i), "file_text": fmt.Sprintf("note %d\n", i)}
				}
				mu.Lock()
				stop := failed != nil
				mu.Unlock()
				if stop {
					continue // drained: the loop below ends
				}
				if err := call(st, input); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
		})
	}
	n := 0
	cpu0, t0 := cpuTime(), time.Now()
	for b.Loop() {
		work <- struct{}{}
		n++
	}
	close(work)
	wg.Wait()
	elapsed, cpu := time.Since(t0), cpuTime()-cpu0
	if failed != nil {
		b.Fatal(failed)
	}
	b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(n), "cpu-ms/call")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "calls/s")
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-rss-MiB") // Linux: KiB
	}
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
