package handler_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/policy"
)

func TestHTTP(t *testing.T) {
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
	head, _ := repo.Commit("HEAD")
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
