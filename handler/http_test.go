package handler_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
	"github.com/gitmem-dev/gitmem/storesapi"
)

func TestHTTP(t *testing.T) {
	t.Parallel()
	h, repo := newHandler(t, policy.DefaultLimits)
	srv := httptest.NewServer(h.HTTP(handler.HTTPOptions{Token: "s3cret", MaxBodyBytes: 4096}))
	defer srv.Close()
	status := func(body, token string) int {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/tool_use", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := status(`{}`, ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d", code)
	}
	if code := status(`{}`, "wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", code)
	}
	if code := status(`not json`, "s3cret"); code != http.StatusBadRequest {
		t.Errorf("bad json: %d", code)
	}
	if code := status(`"`+strings.Repeat("x", 5000)+`"`, "s3cret"); code != http.StatusRequestEntityTooLarge {
		t.Errorf("big body: %d", code)
	}

	// An assistant message's content: text and other tools are skipped,
	// memory calls run in order.
	content := `[{"type":"text","text":"Let me note that."},
	 {"type":"tool_use","id":"toolu_a","name":"memory","input":{"command":"create","path":"/memories/n.md","file_text":"one\n"}},
	 {"type":"tool_use","id":"toolu_b","name":"web_search","input":{}},
	 {"type":"tool_use","id":"toolu_c","name":"memory","input":{"command":"view","path":"/memories/n.md"}}]`
	req, _ := http.NewRequest("POST", srv.URL+"/v1/tool_use", strings.NewReader(content))
	req.Header.Set("Authorization", "Bearer s3cret")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(handler.HeaderSession, "sess-9")
	req.Header.Set(handler.HeaderAgent, "planner")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	timing := regexp.MustCompile(`^call;dur=[0-9]+\.[0-9]{3}$`)
	if st := res.Header.Get("Server-Timing"); !timing.MatchString(st) {
		t.Errorf("array: Server-Timing %q", st)
	}
	var results []handler.Result
	json.NewDecoder(res.Body).Decode(&results)
	res.Body.Close()
	want := []handler.Result{
		{Type: "tool_result", ToolUseID: "toolu_a", Content: "File created successfully at: /memories/n.md"},
		{Type: "tool_result", ToolUseID: "toolu_c", Content: "Here's the content of /memories/n.md with line numbers:\n     1\tone\n     2\t"},
	}
	if len(results) != 2 || results[0] != want[0] || results[1] != want[1] {
		t.Fatalf("results %+v", results)
	}
	head, _ := repo.Commit(context.Background(), "HEAD")
	if head.Trailer("Session") != "sess-9" || head.Trailer("Agent") != "planner" || head.Author.Name != "planner" {
		t.Errorf("headers did not become trailers: %+v", head)
	}

	// One block in, one result out.
	req, _ = http.NewRequest("POST", srv.URL+"/v1/tool_use", strings.NewReader(`{"type":"tool_use","id":"toolu_d","name":"memory","input":{"command":"delete","path":"/memories/n.md"}}`))
	req.Header.Set("Authorization", "Bearer s3cret")
	req.Header.Set("Content-Type", "application/json")
	res, _ = http.DefaultClient.Do(req)
	var one handler.Result
	json.NewDecoder(res.Body).Decode(&one)
	res.Body.Close()
	if one.Content != "Successfully deleted /memories/n.md" || res.Header.Get("Content-Type") != "application/json" {
		t.Errorf("single block: %+v", one)
	}
	if st := res.Header.Get("Server-Timing"); !timing.MatchString(st) {
		t.Errorf("single block: Server-Timing %q", st)
	}
	req, _ = http.NewRequest("GET", srv.URL+"/healthz", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	if res, _ := http.DefaultClient.Do(req); res.StatusCode != 200 {
		t.Errorf("healthz %d", res.StatusCode)
	}
}

// TestRoutingRefusalsAreJSON: a path no route serves (404) and a method a
// route does not take (405, with Allow) are JSON refusals like every
// other, on each HTTP server gitmem runs.
func TestRoutingRefusalsAreJSON(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t, policy.DefaultLimits)
	d, err := stores.Open(gittest.TempDir(t), stores.Options{IdleClose: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	for name, tc := range map[string]struct {
		h       http.Handler
		path    string // served, by POST only
		allowed string
	}{
		"tool_use": {h.HTTP(handler.HTTPOptions{}), "/v1/tool_use", "POST"},
		"mcp":      {h.MCPHTTP(handler.HTTPOptions{}, handler.MCPOptions{}), handler.MCPPath, "POST, DELETE"},
		"stores":   {storesapi.New(d, storesapi.Options{}), "/v1/stores/x/tool_use", "POST"},
	} {
		srv := httptest.NewServer(tc.h)
		for _, req := range []struct {
			method, path string
			status       int
			msg          string
		}{
			{"GET", "/v1/nothing-here", http.StatusNotFound, "no such endpoint: GET /v1/nothing-here"},
			{"GET", tc.path, http.StatusMethodNotAllowed, "GET is not allowed on " + tc.path + " (allowed: " + tc.allowed + ")"},
		} {
			r, _ := http.NewRequest(req.method, srv.URL+req.path, nil)
			res, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			var body struct{ Error string }
			err = json.NewDecoder(res.Body).Decode(&body)
			res.Body.Close()
			switch {
			case res.StatusCode != req.status:
				t.Errorf("%s: %s %s: %d, want %d", name, req.method, req.path, res.StatusCode, req.status)
			case res.Header.Get("Content-Type") != "application/json" || err != nil:
				t.Errorf("%s: %s %s: %s body (%v)", name, req.method, req.path, res.Header.Get("Content-Type"), err)
			case !strings.HasPrefix(body.Error, req.msg):
				t.Errorf("%s: %s %s: %q, want %q", name, req.method, req.path, body.Error, req.msg)
			case req.status == http.StatusMethodNotAllowed && res.Header.Get("Allow") != tc.allowed:
				t.Errorf("%s: Allow %q, want %q", name, res.Header.Get("Allow"), tc.allowed)
			}
		}
		srv.Close()
	}
}
