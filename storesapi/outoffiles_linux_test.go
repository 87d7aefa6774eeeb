package storesapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/storesapi"
)

// A store opened while the server has no file descriptor to spare
// (EMFILE: the process's limit; ENFILE: the system's) is not damaged: the
// request is answered 503 with Retry-After: 1 and x-should-retry: true,
// which the SDKs retry, and the same request a moment later, once files
// are free, is answered; a list says so of the store. Before, a final 500 ("store s cannot be opened:
// its folder or repository cannot be read; ... Retrying does not help",
// x-should-retry: false), and the SDKs gave up. The descriptors run out
// for real: the test runs in a process of its own whose limit it lowers
// and fills (with the connection to the server made first).
func TestStoreOpenedOutOfFilesIsRetried(t *testing.T) {
	if os.Getenv("GITMEM_TEST_OUT_OF_FILES") == "" {
		t.Parallel()
		cmd := exec.Command(os.Args[0], "-test.run=^TestStoreOpenedOutOfFilesIsRetried$", "-test.v")
		cmd.Env = append(os.Environ(), "GITMEM_TEST_OUT_OF_FILES=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS") {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	// The stores keep the writer lock once opened (ReleaseIdle: an hour
	// without a change): a call that changes store u while files are out
	// needs no descriptor to take the lock. Before, u let the lock go
	// 200 ms after its last use, and a change after could not take it
	// back (a 503 for toolu_6 below, on a loaded machine).
	a := newStoresAPIRepo(t, storesapi.Options{Screen: policy.ScreenOff}, true, gitmem.Options{ReleaseIdle: time.Hour})
	a.createStores("s")
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
	send := func(method, path, body string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer secret-ops")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		data, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, res.Header, string(data)
	}
	send("GET", "/healthz", "") // the one connection, made while files are free
	tool := `{"type":"tool_use","id":"toolu_1","name":"memory","input":{"command":"view","path":"/memories"}}`
	routes := []struct{ method, path, body, said string }{
		{"GET", "/v1/stores/s/memories", "", `"error":"store s could not be opened: the server has too many files open; nothing was changed; retry after 1 s"`},
		{"GET", "/v1/memory_stores/s/memories", "", `"message":"memory store s could not be opened: the server has too many files open; nothing was changed; retry after 1 s","type":"overloaded_error"`},
		{"POST", "/v1/stores/s/tool_use", tool, `"error":"store s could not be opened: the server has too many files open; nothing was changed; retry after 1 s"`},
	}
	func() {
		free, spare := outOfFiles(t)
		defer free()
		for _, r := range routes {
			code, h, body := send(r.method, r.path, r.body)
			if code != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" || h.Get("x-should-retry") != "true" || !strings.Contains(body, r.said) {
				t.Errorf("%s %s out of files: %d Retry-After %q x-should-retry %q %s\nwant 503 1 true %s", r.method, r.path, code, h.Get("Retry-After"), h.Get("x-should-retry"), body, r.said)
			}
		}
		// The list, which opens each store for a moment, says so of it
		// (one file free: to read the stores folder).
		spare()
		want := `{"name":"s","error":"store s could not be opened: the server has too many files open; nothing was changed; retry after 1 s"}`
		if code, _, body := send("GET", "/v1/stores", ""); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("the list out of files: %d %s\nwant %s", code, body, want)
		}
	}()
	for _, r := range routes {
		if code, _, body := send(r.method, r.path, r.body); code != http.StatusOK {
			t.Errorf("%s %s once files are free: %d %s", r.method, r.path, code, body)
		}
	}
	// Store s is closed: its start-up work (the look at every worktree
	// file, the read of the tool_use ids), under way in the background,
	// would give back descriptors while u's files are out, and a call that
	// is to find none would find one.
	if err := a.dir.Delete("s"); err != nil {
		t.Fatal(err)
	}

	// The store open, a call that runs out of files before it changed
	// anything is answered the same way (an array too, when no call of it
	// before changed anything), and once files are free, the same call is
	// answered. Before: a 200 tool error "The memory store could not
	// complete the command; nothing was changed", final to the model, and
	// a final 500 on the other routes. Store u holds a memory written before the server opened it: its
	// content is read from git's files, not from what a call wrote.
	a.createStores("u")
	r, err := gitmem.Open(context.Background(), filepath.Join(a.dir.Root(), "u"), gitmem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res := handler.New(r, handler.Options{}).HandleJSON(context.Background(), handler.Caller{}, []byte(`{"type":"tool_use","id":"toolu_0","name":"memory","input":{"command":"create","path":"/memories/b.md","file_text":"b\n"}}`)); res.IsError {
		t.Fatal(res.Content)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if code, _, body := send("POST", "/v1/stores/u/tool_use", tool); code != http.StatusOK || strings.Contains(body, "is_error") {
		t.Fatalf("view: %d %s", code, body)
	}
	// u's start-up work is over before files run out: none of it holds a
	// descriptor it would give back meanwhile (a pack it reads, the
	// history index). A retried call waits for the tool_use ids of the
	// history to be read, and the commit it answers with for the look at
	// every worktree file for hand edits; it changes nothing.
	if code, _, body := send("POST", "/v1/stores/u/tool_use", `{"type":"tool_use","id":"toolu_0","name":"memory","input":{"command":"create","path":"/memories/b.md","file_text":"b\n"}}`); code != http.StatusOK || !strings.Contains(body, "File created successfully") {
		t.Fatalf("the retried create: %d %s", code, body)
	}
	calls := []struct{ method, path, body string }{
		{"POST", "/v1/stores/u/tool_use", `{"type":"tool_use","id":"toolu_3","name":"memory","input":{"command":"view","path":"/memories/b.md"}}`},
		{"POST", "/v1/stores/u/tool_use", `[{"type":"text","text":"..."},{"type":"tool_use","id":"toolu_4","name":"memory","input":{"command":"view","path":"/memories"}},` +
			`{"type":"tool_use","id":"toolu_5","name":"memory","input":{"command":"view","path":"/memories/b.md"}}]`},
		{"GET", "/v1/stores/u/memory?path=/memories/b.md", ""},
		{"GET", "/v1/stores/u/versions", ""},
		{"GET", "/v1/memory_stores/u/memory_versions", ""},
	}
	func() {
		free, _ := outOfFiles(t)
		defer free()
		for _, r := range calls {
			code, h, body := send(r.method, r.path, r.body)
			if code != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" || h.Get("x-should-retry") != "true" || !strings.Contains(body, "the server has too many files open; nothing was changed; retry after 1 s") {
				t.Errorf("%s %s out of files during the call: %d Retry-After %q x-should-retry %q %s\nwant 503 1 true", r.method, r.path, code, h.Get("Retry-After"), h.Get("x-should-retry"), body)
			}
		}
		// A call that committed is answered as such: an array whose
		// first call committed its change gets its results (a later call
		// out of files, a tool error), never a 503.
		code, _, body := send("POST", "/v1/stores/u/tool_use", `[{"type":"tool_use","id":"toolu_6","name":"memory","input":{"command":"create","path":"/memories/c.md","file_text":"c\n"}},`+
			`{"type":"tool_use","id":"toolu_7","name":"memory","input":{"command":"view","path":"/memories/b.md"}}]`)
		if want := `[{"type":"tool_result","tool_use_id":"toolu_6","content":"File created successfully at: /memories/c.md"},{"type":"tool_result","tool_use_id":"toolu_7",`; code != http.StatusOK || !strings.HasPrefix(body, want) {
			t.Errorf("an array whose first call committed, out of files: %d %s\nwant 200 %s", code, body, want)
		}
	}()
	for _, r := range calls {
		if code, _, body := send(r.method, r.path, r.body); code/100 != 2 || strings.Contains(body, "is_error") {
			t.Errorf("%s %s once files are free: %d %s", r.method, r.path, code, body)
		}
	}
}

// outOfFiles lowers the process's limit of open files to a few over
// those open, and opens files until no more can be: every open fails
// with EMFILE until free closes them and puts the limit back. spare
// closes one of them.
func outOfFiles(t *testing.T) (free, spare func()) {
	t.Helper()
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	low := was
	low.Cur = uint64(len(fds) + 16)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var held []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if errors.Is(err, syscall.EMFILE) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, f)
	}
	free = func() {
		for _, f := range held {
			f.Close()
		}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
			t.Fatal(err)
		}
	}
	spare = func() {
		held[0].Close()
		held = held[1:]
	}
	return free, spare
}
