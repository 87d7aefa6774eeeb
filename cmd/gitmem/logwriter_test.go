package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// gatedWriter takes nothing until open is closed (a stderr read by a
// busy process, journald behind), then keeps what it is given.
type gatedWriter struct {
	open chan struct{}
	mu   sync.Mutex
	b    strings.Builder
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.b.Write(p)
}

func (g *gatedWriter) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.b.String()
}

// serve's log lines go out from a goroutine of their own (logWriter): a
// call's answer does not wait for stderr to take them. Here stderr takes
// nothing until the calls are done: 400 calls, two lines each (about
// 130 KB, twice what a pipe holds), are all answered, and once stderr
// goes on every line is there, in order. Before, the calls stopped being
// answered once the pipe was full: each waited in slog's write(2).
func TestServeCallsDoNotWaitForStderr(t *testing.T) {
	t.Parallel()
	gate := &gatedWriter{open: make(chan struct{})} // the start's few lines wait in the pipe
	var once sync.Once
	release := func() { once.Do(func() { close(gate.open) }) }
	repo := filepath.Join(gittest.TempDir(t), "memory")
	base, _, stopServe := startHTTPProcessTo(t, gate, testEnv(t), repo, "--http")
	t.Cleanup(release) // before stopServe (cleanups run last first)
	client := &http.Client{Timeout: 20 * time.Second}
	const calls = 400
	for i := range calls {
		if _, err := postCall(client, base, fmt.Sprintf("toolu_%03d", i), `{"command":"view","path":"/memories"}`); err != nil {
			t.Fatalf("call %d while stderr took nothing: %v", i, err)
		}
	}
	release()
	stopServe()
	var ids []string
	for _, line := range strings.Split(gate.String(), "\n") {
		if strings.Contains(line, `msg="tool call"`) {
			_, after, _ := strings.Cut(line, " id=")
			ids = append(ids, strings.Fields(after)[0])
		}
	}
	if len(ids) != calls {
		t.Fatalf("%d tool call lines, want %d", len(ids), calls)
	}
	for i, id := range ids {
		if want := fmt.Sprintf("toolu_%03d", i); id != want {
			t.Fatalf("tool call line %d is %s's, want %s's", i, id, want)
		}
	}
}
