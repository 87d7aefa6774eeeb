package handler_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/policy"
)

// TestMemoryUnderLoad measures the peak memory (VmHWM) of a server that
// gets GITMEM_MEMTEST concurrent requests, each one tool_use block of about
// 31 MiB (refused by the 1 MiB file limit, after being read and parsed).
// Each measurement runs in a fresh process. It is a measurement, not a
// check: run it by hand, numbers in docs/performance.md:
//
//	GITMEM_MEMTEST=60 go test ./handler -run TestMemoryUnderLoad -v
//
// GITMEM_MEMLIMIT=off lifts the bounds on requests and bytes in flight.
func TestMemoryUnderLoad(t *testing.T) {
	t.Parallel()
	n, _ := strconv.Atoi(os.Getenv("GITMEM_MEMTEST"))
	if n == 0 {
		t.Skip("a measurement: set GITMEM_MEMTEST=<concurrent requests>")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("reads VmHWM from /proc")
	}
	for _, c := range []int{1, n} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryChild$", "-test.v")
		cmd.Env = append(os.Environ(), "GITMEM_MEMCHILD="+strconv.Itoa(c))
		out, err := cmd.CombinedOutput()
		m := regexp.MustCompile(`RESULT .*`).Find(out)
		if err != nil || m == nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		t.Logf("%d concurrent: %s", c, m)
	}
}

func TestMemoryChild(t *testing.T) {
	t.Parallel()
	n, _ := strconv.Atoi(os.Getenv("GITMEM_MEMCHILD"))
	if n == 0 {
		t.Skip("run by TestMemoryUnderLoad")
	}
	h, _ := newHandler(t, policy.DefaultLimits)
	opt := handler.HTTPOptions{}
	if os.Getenv("GITMEM_MEMLIMIT") == "off" {
		opt = handler.HTTPOptions{MaxInflightBytes: 1 << 40, MaxInflight: 1 << 20}
	}
	srv := httptest.NewServer(h.HTTP(opt))
	defer srv.Close()
	base := vmHWM(t)
	const size = 31 << 20
	head := `{"type":"tool_use","id":"toolu_big","name":"memory","input":{"command":"create","path":"/memories/big.md","file_text":"`
	tail := `"}}`
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := io.MultiReader(strings.NewReader(head), io.LimitReader(repeat('a'), size), strings.NewReader(tail))
			req, _ := http.NewRequest("POST", srv.URL+"/v1/tool_use", body)
			req.ContentLength = int64(len(head) + size + len(tail))
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			key := "error"
			if err == nil {
				var b bytes.Buffer
				b.ReadFrom(res.Body)
				res.Body.Close()
				key = strconv.Itoa(res.StatusCode)
			}
			mu.Lock()
			codes[key]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	peak := vmHWM(t)
	fmt.Printf("RESULT peak %d MiB (before the requests %d MiB; %.1f MiB per request); statuses %v\n",
		peak>>20, base>>20, float64(peak-base)/float64(n)/(1<<20), codes)
}

// vmHWM is the process's peak resident set size in bytes.
func vmHWM(t *testing.T) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(data)
	if m == nil {
		t.Fatal("no VmHWM")
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

type repeat byte

func (r repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}
