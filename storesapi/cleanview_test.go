package storesapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
	"github.com/gitmem-dev/gitmem/storesapi"
)

// storesServer is a stores server over root, as gitmem serve --stores
// starts one: its Dir and its handler.
func storesServer(t *testing.T, root string) (*stores.Dir, http.Handler) {
	t.Helper()
	// Changes reach the worktree as they are made (not 2 s later): the
	// test's files are no longer racy when its stores are closed.
	d, err := stores.Open(root, stores.Options{Repo: gitmem.Options{Logf: t.Logf, MaterialiseEvery: time.Nanosecond}, IdleClose: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, storesapi.New(d, storesapi.Options{Limits: policy.DefaultLimits, Logger: testLog(t)})
}

// toolCall sends one tool_use block to store and returns the result's text.
func toolCall(t *testing.T, h http.Handler, store, input string) string {
	t.Helper()
	req := httptest.NewRequest("POST", "/v1/stores/"+store+"/tool_use",
		strings.NewReader(fmt.Sprintf(`{"type":"tool_use","id":"toolu_%d","name":"memory","input":%s}`, time.Now().UnixNano(), input)))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var res handler.Result
	if err := json.Unmarshal(w.Body.Bytes(), &res); w.Code != http.StatusOK || err != nil || res.IsError {
		t.Fatalf("%s: %d %s", input, w.Code, w.Body)
	}
	return res.Content
}

// A cold store's first view of a folder is answered from its clean mark
// and worktree, without opening the store (nothing is opened), the same
// answer as through the opened store; a hand edit since is committed
// first, by opening the store, as before: the view shows the memory as
// committed.
func TestColdStoresFirstViewOpensNothing(t *testing.T) {
	t.Parallel()
	root := gittest.TempDir(t)
	d, h := storesServer(t, root)
	if _, err := d.Create("s1", stores.Meta{Description: "cold"}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	toolCall(t, h, "s1", `{"command":"create","path":"/memories/notes/a.md","file_text":"alpha\n"}`)
	toolCall(t, h, "s1", `{"command":"create","path":"/memories/b.md","file_text":"bravo bravo\n"}`)
	time.Sleep(250 * time.Millisecond) // the files are no longer racy when the store is closed (gitmem's RacyWindow, 100 ms)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d, h = storesServer(t, root)
	cold := toolCall(t, h, "s1", `{"command":"view","path":"/memories"}`)
	if n := d.OpenCount(); n != 0 {
		t.Fatalf("a clean store's first view opened %d store(s)", n)
	}
	toolCall(t, h, "s1", `{"command":"view","path":"/memories/b.md"}`) // a file's view opens the store
	if n := d.OpenCount(); n != 1 {
		t.Fatalf("a file's view: %d store(s) open, want 1", n)
	}
	if warm := toolCall(t, h, "s1", `{"command":"view","path":"/memories"}`); warm != cold {
		t.Fatalf("the cold view:\n%s\nthe opened store's:\n%s", cold, warm)
	}
	if !strings.Contains(cold, "/memories/notes/a.md") || !strings.Contains(cold, "12B\t/memories/b.md") {
		t.Fatalf("the cold view lacks the files:\n%s", cold)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	// Edited by hand while no server ran: the first view opens the store,
	// whose start commits the edit before the folder's view answers.
	mem := filepath.Join(root, "s1", "memories")
	if err := os.WriteFile(filepath.Join(mem, "b.md"), []byte("bravo bravo bravo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, h = storesServer(t, root)
	got := toolCall(t, h, "s1", `{"command":"view","path":"/memories"}`)
	if n := d.OpenCount(); n != 1 {
		t.Fatalf("a hand-edited store's first view: %d store(s) open, want 1", n)
	}
	if !strings.Contains(got, "18B\t/memories/b.md") {
		t.Fatalf("the view after a hand edit shows the old size:\n%s", got)
	}
	if log := gittest.Git(t, filepath.Join(root, "s1"), "log", "-1", "--format=%(trailers:key=Memory-Command,valueonly)"); !strings.Contains(log, "adopt") {
		t.Fatalf("no adopt commit before the view: the last commit's command is %q", log)
	}
}

// Each store's tool calls are logged with its name, the store's logger
// kept with the open store (made once, not for every call).
func TestToolCallsAreLoggedWithTheirStore(t *testing.T) {
	t.Parallel()
	d, err := stores.Open(gittest.TempDir(t), stores.Options{Repo: gitmem.Options{Logf: t.Logf}, IdleClose: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	var mu sync.Mutex
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	h := storesapi.New(d, storesapi.Options{Limits: policy.DefaultLimits, Logger: log})
	for _, name := range []string{"s1", "s2"} {
		if _, err := d.Create(name, stores.Meta{}, gitmem.Signature{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, name := range []string{"s1", "s2", "s1", "s2"} {
		toolCall(t, h, name, fmt.Sprintf(`{"command":"create","path":"/memories/%s-%d.md","file_text":"x\n"}`, name, i))
	}
	mu.Lock()
	defer mu.Unlock()
	calls := 0
	for line := range strings.Lines(buf.String()) {
		if !strings.Contains(line, `msg="tool call"`) {
			continue
		}
		calls++
		for _, name := range []string{"s1", "s2"} {
			if strings.Contains(line, "path=/memories/"+name+"-") && !strings.Contains(line, "store="+name+" ") {
				t.Errorf("a call on %s logged without its store: %s", name, line)
			}
		}
	}
	if calls != 4 {
		t.Errorf("%d tool calls logged, want 4:\n%s", calls, buf.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
