//go:build unix

package storesapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
	"github.com/gitmem-dev/gitmem/storesapi"
)

// BenchmarkColdStoreFirstCall is the many-stores row's first call on a
// cold store (gitmem bench --stores): b.N stores made first (not timed),
// then on each a `view /memories` through the stores server's handler,
// the store's open included. It reports the process's CPU and minor page
// faults per call beside the wall time:
//
//	go test -run '^$' -bench ColdStoreFirstCall -benchtime 300x ./storesapi
//
// GITMEM_BENCH_COLD_DIR names a folder of such stores, made before (a
// copy of those of an earlier run, say), to time without making any:
// strace -c -f of the test then counts the calls' system calls alone.
//
// The calls and what they start (a store's maintainer, its background
// reads) carry the profile label phase=cold (pprof -tagfocus phase=cold
// leaves the stores' making out).
func BenchmarkColdStoreFirstCall(b *testing.B) {
	root, made := os.Getenv("GITMEM_BENCH_COLD_DIR"), true
	if root == "" {
		root, made = b.TempDir(), false
	}
	d, err := stores.Open(root, stores.Options{Repo: gitmem.Options{Logf: func(string, ...any) {}},
		MaxOpen: b.N + 1, IdleClose: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	for i := range b.N {
		if made {
			break
		}
		if _, err := d.Create(fmt.Sprintf("s-%05d", i), stores.Meta{Description: "cold"}, gitmem.Signature{}); err != nil {
			b.Fatal(err)
		}
	}
	h := storesapi.New(d, storesapi.Options{Limits: policy.DefaultLimits, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	call := func(i int) {
		req := httptest.NewRequest("POST", fmt.Sprintf("/v1/stores/s-%05d/tool_use", i),
			strings.NewReader(`{"type":"tool_use","id":"toolu_cold","name":"memory","input":{"command":"view","path":"/memories"}}`))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"is_error":true`) {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	var before, after syscall.Rusage
	b.ReportAllocs()
	b.ResetTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	pprof.Do(context.Background(), pprof.Labels("phase", "cold"), func(context.Context) {
		for i := range b.N {
			call(i)
		}
	})
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	b.StopTimer()
	cpu := func(r syscall.Rusage) int64 { return r.Utime.Nano() + r.Stime.Nano() }
	b.ReportMetric(float64(cpu(after)-cpu(before))/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(after.Minflt-before.Minflt)/float64(b.N), "minflt/op")
}
