package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/internal/nodetest"
	"github.com/gitmem-dev/gitmem/memstore"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/storesapi"
)

// The Memory Stores API through the official SDKs, unchanged but for the
// base URL: one table of calls (sdkCases), run through the Go SDK
// (anthropic-sdk-go/v2, in this process) and through the TypeScript SDK
// (@anthropic-ai/sdk, pinned in testdata/memstores-sdk, in node), each
// against its own gitmem serve --http --stores process. Every call checks
// what the SDK returned (fields, or the error's status, type, class and
// request id, and that a final error was not retried), and the table
// checks the store's git history beside: one commit per change, none for
// a refusal, the memory tool reading what the API wrote and the reverse,
// a redacted content in no git object, git fsck --strict at the end.

// sdkCall is one call as each SDK driver takes it.
type sdkCall struct {
	Op     string  `json:"op"`
	Secret string  `json:"secret"`
	Auth   string  `json:"auth,omitempty"` // "" an API key, "token" an auth token, "x-api-key" the old header
	Args   sdkArgs `json:"args"`
}

type sdkArgs struct {
	Store  string         `json:"store,omitempty"`
	ID     string         `json:"id,omitempty"`
	Params map[string]any `json:"params,omitempty"` // the SDK's params, on the wire's names
	Extra  map[string]any `json:"extra,omitempty"`  // body fields the SDK's types cannot say, set raw
}

// sdkResult is what a call returned: the object (a page as {data,
// next_page}), or the error as the SDK typed it.
type sdkResult struct {
	OK        bool            `json:"ok"`
	Value     json.RawMessage `json:"value"`
	Status    int             `json:"status"`
	Class     string          `json:"class"` // the TypeScript error class
	Type      string          `json:"type"`
	Message   string          `json:"message"`
	RequestID string          `json:"request_id"`
	Error     json.RawMessage `json:"error"` // the error's body
	Requests  int             `json:"requests"`
}

// sdkStep is a row of the table: an SDK call, or a check of the store
// beside the API (Local).
type sdkStep struct {
	Name      string
	Token     string // the token's name ("" ops); its secret is "secret-" + name
	Auth      string
	Op        string
	Store, ID string // "$var.field" names a saved value
	Params    map[string]any
	Extra     map[string]any
	Repeat    int // run it Repeat times, "{i}" in its strings the count
	Save      string
	Select    map[string]any // with Save on a listing: the item of data with these fields
	Err       string         // the error type expected ("" success)
	Status    int
	Want      map[string]any // paths into the value (or the error body) -> values; "*" any but null; "#" a length
	Local     func(t *testing.T, h *msHarness)
}

// The tokens of the table (the secret is "secret-" + the name).
var sdkTokens = []policy.Token{
	{Name: "ops", Stores: []string{"*"}, Access: policy.ReadWrite, Role: policy.Operator},
	{Name: "auditor", Stores: []string{"*"}, Access: policy.ReadOnly, Role: policy.Operator},
	{Name: "agent", Stores: []string{"*"}, Access: policy.ReadWrite, Role: policy.Agent},
	{Name: "reader", Stores: []string{"*"}, Access: policy.ReadOnly, Role: policy.Agent},
	{Name: "legacy-only", Stores: []string{"legacy"}, Access: policy.ReadWrite, Role: policy.Agent},
}

// tsClass is the error class the TypeScript SDK makes of a status.
func tsClass(status int) string {
	return map[int]string{400: "BadRequestError", 401: "AuthenticationError", 403: "PermissionDeniedError", 404: "NotFoundError",
		409: "ConflictError", 413: "ContentTooLargeError", 429: "RateLimitError", 500: "InternalServerError", 503: "ServiceUnavailableError"}[status]
}

func TestMemoryStoresWithTheOfficialSDKs(t *testing.T) {
	t.Parallel()
	t.Run("go", func(t *testing.T) {
		h := newMSHarness(t)
		h.call = goSDKCall(h.base)
		h.run(sdkCases())
	})
	t.Run("typescript", func(t *testing.T) {
		dir := nodetest.Harness(t, "testdata/memstores-sdk", "@anthropic-ai/sdk")
		h := newMSHarness(t)
		h.call = tsSDK(t, dir, h.base)
		h.run(sdkCases())
	})
}

// msHarness is a gitmem serve --stores process and the values the table
// saved.
type msHarness struct {
	t      *testing.T
	dir    string // the temporary folder: no message may name it
	stores string
	base   string
	call   func(sdkCall) sdkResult
	vars   map[string]any
	marks  map[string]int
}

func newMSHarness(t *testing.T) *msHarness {
	env := append(testEnv(t), "ANTHROPIC_API_KEY=", "ANTHROPIC_AUTH_TOKEN=", "ANTHROPIC_BASE_URL=")
	dir := gittest.TempDir(t)
	h := &msHarness{t: t, dir: dir, stores: filepath.Join(dir, "stores"), vars: map[string]any{}, marks: map[string]int{}}
	tokens := filepath.Join(dir, "tokens.json")
	f := policy.TokenFile{}
	for _, tok := range sdkTokens {
		tok.SHA256 = storesapi.HashToken("secret-" + tok.Name)
		f.Tokens = append(f.Tokens, tok)
	}
	data, _ := json.Marshal(f)
	if err := os.WriteFile(tokens, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// A store made with the CLI before the server: reachable by its name.
	gitmemOut(t, env, "store", "create", "legacy", "--stores", h.stores, "--description", "made by gitmem store create")
	base, stop := serveHTTPProcess(t, env, filepath.Join(dir, "unused"), "--http", "--stores", h.stores, "--tokens", tokens)
	t.Cleanup(stop)
	h.base = base
	return h
}

// run runs the table's steps in order.
func (h *msHarness) run(steps []sdkStep) {
	for _, st := range steps {
		n := max(st.Repeat, 1)
		for i := range n {
			s := st
			if st.Repeat > 0 {
				s = h.nth(st, i)
			}
			if !h.step(s) {
				h.t.Fatalf("stopped at %q", s.Name)
			}
		}
	}
}

// nth is step st with "{i}" in its strings replaced by i.
func (h *msHarness) nth(st sdkStep, i int) sdkStep {
	rep := func(v any) any {
		data, _ := json.Marshal(v)
		var out any
		json.Unmarshal([]byte(strings.ReplaceAll(string(data), "{i}", fmt.Sprintf("%02d", i))), &out)
		return out
	}
	st.Name = strings.ReplaceAll(st.Name, "{i}", strconv.Itoa(i))
	if st.Params != nil {
		st.Params = rep(st.Params).(map[string]any)
	}
	return st
}

// resolve replaces "$var.path" strings by the value saved.
func (h *msHarness) resolve(v any) any {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, "$") {
			name, path, _ := strings.Cut(x[1:], ".")
			val, ok := h.vars[name]
			if !ok {
				h.t.Fatalf("no saved value %s", name)
			}
			if path != "" {
				val = jsonPath(val, path)
			}
			return val
		}
		return x
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = h.resolve(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = h.resolve(e)
		}
		return out
	}
	return v
}

func (h *msHarness) str(s string) string {
	if s == "" {
		return ""
	}
	v, _ := h.resolve(s).(string)
	return v
}

// jsonPath walks a decoded JSON value: "data.0.id", "data.#" (a length).
func jsonPath(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			if k == "#" {
				return float64(len(x))
			}
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func (h *msHarness) step(s sdkStep) bool {
	t := h.t
	if s.Local != nil {
		s.Local(t, h)
		return !t.Failed()
	}
	token := s.Token
	if token == "" {
		token = "ops"
	}
	call := sdkCall{Op: s.Op, Secret: "secret-" + token, Auth: s.Auth, Args: sdkArgs{Store: h.str(s.Store), ID: h.str(s.ID)}}
	// As JSON carries them to either driver (numbers as float64).
	asJSON := func(v any) map[string]any {
		var out map[string]any
		data, _ := json.Marshal(h.resolve(v))
		json.Unmarshal(data, &out)
		return out
	}
	if s.Params != nil {
		call.Args.Params = asJSON(s.Params)
	}
	if s.Extra != nil {
		call.Args.Extra = asJSON(s.Extra)
	}
	res := h.call(call)
	ok := true
	fail := func(format string, args ...any) {
		t.Errorf("%s (%s): %s", s.Name, s.Op, fmt.Sprintf(format, args...))
		ok = false
	}
	var value any
	if s.Err == "" {
		if !res.OK {
			fail("failed: %d %s %s %s", res.Status, res.Type, res.Message, res.Error)
			return false
		}
		json.Unmarshal(res.Value, &value)
	} else {
		if res.OK {
			fail("succeeded, want %s: %s", s.Err, res.Value)
			return false
		}
		json.Unmarshal(res.Error, &value)
		switch {
		case res.Status != s.Status || res.Type != s.Err:
			fail("%d %s (%s), want %d %s", res.Status, res.Type, res.Message, s.Status, s.Err)
		case res.Class != "" && res.Class != tsClass(s.Status):
			fail("the TypeScript SDK threw %s, want %s", res.Class, tsClass(s.Status))
		case !strings.HasPrefix(res.RequestID, "req_"):
			fail("request id %q", res.RequestID)
		case res.Message == "":
			fail("no message")
		}
		if strings.Contains(string(res.Error), h.dir) {
			fail("the error names a host path: %s", res.Error)
		}
	}
	// A final error is not retried (x-should-retry: false); nothing is.
	if res.Requests != 1 && !strings.HasSuffix(s.Op, "listAll") {
		fail("%d requests, want 1", res.Requests)
	}
	for path, want := range s.Want {
		got := jsonPath(value, path)
		want = h.resolve(want)
		switch {
		case want == "*":
			if got == nil {
				fail("%s is null or missing", path)
			}
		default:
			var norm any
			data, _ := json.Marshal(want)
			json.Unmarshal(data, &norm)
			if !reflect.DeepEqual(got, norm) {
				g, _ := json.Marshal(got)
				fail("%s = %s, want %s", path, g, data)
			}
		}
	}
	if s.Save != "" {
		if s.Select != nil {
			value = h.selectItem(s, value)
		}
		h.vars[s.Save] = value
	}
	return ok
}

// selectItem is the item of a listing's data whose fields are s.Select's.
func (h *msHarness) selectItem(s sdkStep, value any) any {
	items, _ := jsonPath(value, "data").([]any)
	want := h.resolve(s.Select).(map[string]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		match := true
		for k, v := range want {
			if m[k] != v {
				match = false
			}
		}
		if match {
			return it
		}
	}
	h.t.Fatalf("%s: no item with %v in %v", s.Name, want, items)
	return nil
}

// commits is the number of commits of a store, through the server's
// operator API (git's own files follow the server by milliseconds).
func (h *msHarness) commits(store string) int {
	h.t.Helper()
	n := 0
	for page := ""; ; {
		req, _ := http.NewRequest("GET", h.base+"/v1/stores/"+store+"/versions?limit=100&page="+page, nil)
		req.Header.Set("Authorization", "Bearer secret-ops")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			h.t.Fatal(err)
		}
		var out struct {
			Data     []json.RawMessage
			NextPage *string `json:"next_page"`
		}
		json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		n += len(out.Data)
		if out.NextPage == nil {
			return n
		}
		page = *out.NextPage
	}
}

// mark remembers a store's commit count; since checks the commits made
// since.
func mark(name, store string) sdkStep {
	return sdkStep{Name: "count the commits (" + name + ")", Local: func(t *testing.T, h *msHarness) {
		h.marks[name] = h.commits(h.str(store))
	}}
}

func since(name, store string, want int) sdkStep {
	return sdkStep{Name: fmt.Sprintf("%d commit(s) since %s", want, name), Local: func(t *testing.T, h *msHarness) {
		if got := h.commits(h.str(store)) - h.marks[name]; got != want {
			t.Errorf("%d commits since %s, want %d", got, name, want)
		}
	}}
}

// tool makes a memory tool call on a store through its tool_use endpoint.
func tool(name, store, session, input string, check func(t *testing.T, result string)) sdkStep {
	return sdkStep{Name: name, Local: func(t *testing.T, h *msHarness) {
		body := `{"type":"tool_use","id":"toolu_` + strings.ReplaceAll(name, " ", "_") + `","name":"memory","input":` + input + `}`
		req, _ := http.NewRequest("POST", h.base+"/v1/stores/"+h.str(store)+"/tool_use", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer secret-agent")
		req.Header.Set("Content-Type", "application/json")
		if session != "" {
			req.Header.Set("Gitmem-Session", session)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out struct {
			Content string
			IsError bool `json:"is_error"`
		}
		json.NewDecoder(res.Body).Decode(&out)
		if res.StatusCode != 200 || out.IsError {
			t.Fatalf("%s: %d %+v", name, res.StatusCode, out)
		}
		check(t, out.Content)
	}}
}

// sdkCases is the table: every route, every memory operation and error
// type, listing with depth and pages, versions and their filters, redact,
// conditional delete, archive, tokens, bad input.
func sdkCases() []sdkStep {
	const oat = "buy oat milk\n"
	sha := func(s string) string { return memstore.SHA256([]byte(s)) }
	return []sdkStep{
		// Stores.
		{Name: "create a store", Op: "stores.create", Params: map[string]any{"name": "Alice's notes", "description": "What the agent knows about Alice", "metadata": map[string]any{"user": "alice"}},
			Save: "s", Want: map[string]any{"type": "memory_store", "name": "Alice's notes", "description": "What the agent knows about Alice",
				"metadata": map[string]any{"user": "alice"}, "archived_at": nil, "created_at": "2026-03-01T09:00:00Z", "updated_at": "2026-03-01T09:00:00Z"}},
		{Name: "retrieve it", Op: "stores.retrieve", ID: "$s.id", Want: map[string]any{"id": "$s.id", "name": "Alice's notes", "metadata": map[string]any{"user": "alice"}}},
		{Name: "rename it, add metadata", Op: "stores.update", ID: "$s.id", Params: map[string]any{"name": "Alice", "metadata": map[string]any{"tier": "gold"}},
			Want: map[string]any{"name": "Alice", "description": "What the agent knows about Alice", "metadata": map[string]any{"user": "alice", "tier": "gold"}}},
		{Name: "a null value deletes a metadata key", Op: "stores.update", ID: "$s.id", Extra: map[string]any{"metadata": map[string]any{"tier": nil}},
			Want: map[string]any{"name": "Alice", "metadata": map[string]any{"user": "alice"}}},
		{Name: "a second store", Op: "stores.create", Params: map[string]any{"name": "Bob"}, Save: "s2", Want: map[string]any{"description": "", "metadata": map[string]any{}}},
		{Name: "a store made by the CLI is reachable by its name", Op: "stores.retrieve", ID: "legacy",
			Want: map[string]any{"id": "legacy", "type": "memory_store", "name": "legacy", "description": "made by gitmem store create"}},
		{Name: "list a page", Op: "stores.list", Params: map[string]any{"limit": 1}, Want: map[string]any{"data.#": 1, "data.0.id": "legacy", "next_page": "*"}},
		{Name: "list every page", Op: "stores.listAll", Params: map[string]any{"limit": 2}, Want: map[string]any{"data.#": 3, "data.1.id": "$s.id", "data.2.id": "$s2.id"}},
		{Name: "list created from a time", Op: "stores.listAll", Params: map[string]any{"created_at[gte]": "2026-03-01T09:00:00Z"}, Want: map[string]any{"data.#": 3}},
		{Name: "list created before a time", Op: "stores.listAll", Params: map[string]any{"created_at[lte]": "2026-02-28T00:00:00Z"}, Want: map[string]any{"data.#": 0}},

		// Memories.
		mark("memories", "$s.id"),
		{Name: "create a memory", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/notes/todo.md", "content": "buy milk\n"}, Save: "m1",
			Want: map[string]any{"type": "memory", "memory_store_id": "$s.id", "path": "/notes/todo.md", "content": nil,
				"content_sha256": sha("buy milk\n"), "content_size_bytes": 9, "memory_version_id": "*", "created_at": "2026-03-01T09:00:00Z"}},
		{Name: "create an empty one, view full", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/notes/done.md", "content": "", "view": "full"}, Save: "m2",
			Want: map[string]any{"content": "", "content_size_bytes": 0, "content_sha256": sha("")}},
		since("memories", "$s.id", 2),
		{Name: "retrieve it with its content", Op: "memories.retrieve", Store: "$s.id", ID: "$m1.id", Want: map[string]any{"content": "buy milk\n", "memory_version_id": "$m1.memory_version_id"}},
		{Name: "retrieve it, view basic", Op: "memories.retrieve", Store: "$s.id", ID: "$m1.id", Params: map[string]any{"view": "basic"}, Want: map[string]any{"content": nil, "content_sha256": sha("buy milk\n")}},
		mark("refusals", "$s.id"),
		{Name: "create at a path held", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/notes/todo.md", "content": "again"},
			Err: "memory_path_conflict_error", Status: 409, Want: map[string]any{"error.conflicting_memory_id": "$m1.id", "error.conflicting_path": "/notes/todo.md"}},
		{Name: "create below a memory", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/notes/todo.md/sub.md", "content": "x"},
			Err: "memory_path_conflict_error", Status: 409, Want: map[string]any{"error.conflicting_memory_id": "$m1.id"}},
		{Name: "create above memories", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/notes", "content": "x"},
			Err: "memory_path_conflict_error", Status: 409, Want: map[string]any{"error.conflicting_path": "/notes/done.md", "error.conflicting_memory_id": "$m2.id"}},
		since("refusals", "$s.id", 0),
		{Name: "update on a precondition", Op: "memories.update", Store: "$s.id", ID: "$m1.id",
			Params: map[string]any{"content": oat, "precondition": map[string]any{"type": "content_sha256", "content_sha256": sha("buy milk\n")}}, Save: "m1b",
			Want: map[string]any{"id": "$m1.id", "content_sha256": sha(oat), "content": nil}},
		mark("retried update", "$s.id"),
		{Name: "the same update again (a retry): it already matches", Op: "memories.update", Store: "$s.id", ID: "$m1.id",
			Params: map[string]any{"content": oat, "precondition": map[string]any{"type": "content_sha256", "content_sha256": sha("buy milk\n")}},
			Want:   map[string]any{"memory_version_id": "$m1b.memory_version_id", "updated_at": "$m1b.updated_at"}},
		{Name: "an update on a stale precondition", Op: "memories.update", Store: "$s.id", ID: "$m1.id",
			Params: map[string]any{"content": "x", "precondition": map[string]any{"type": "content_sha256", "content_sha256": sha("buy milk\n")}},
			Err:    "memory_precondition_failed_error", Status: 409},
		{Name: "an update of nothing", Op: "memories.update", Store: "$s.id", ID: "$m1.id", Want: map[string]any{"memory_version_id": "$m1b.memory_version_id"}},
		since("retried update", "$s.id", 0),
		{Name: "rename it: the id stays", Op: "memories.update", Store: "$s.id", ID: "$m1.id", Params: map[string]any{"path": "/notes/shopping.md", "view": "full"}, Save: "m1c",
			Want: map[string]any{"id": "$m1.id", "path": "/notes/shopping.md", "content": oat}},
		{Name: "rename onto another memory", Op: "memories.update", Store: "$s.id", ID: "$m1.id", Params: map[string]any{"path": "/notes/done.md"},
			Err: "memory_path_conflict_error", Status: 409, Want: map[string]any{"error.conflicting_memory_id": "$m2.id"}},
		{Name: "more memories", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/projects/a/plan.md", "content": "plan"}},
		{Name: "more memories", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/projects/a/notes/x.md", "content": "x"}},
		{Name: "more memories", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/projects/b.md", "content": "b"}},
		{Name: "list a prefix", Op: "memories.list", Store: "$s.id", Params: map[string]any{"path_prefix": "/notes/"},
			Want: map[string]any{"data.#": 2, "data.0.path": "/notes/done.md", "data.1.path": "/notes/shopping.md", "data.1.content": nil, "next_page": nil}},
		{Name: "list one level deep", Op: "memories.list", Store: "$s.id", Params: map[string]any{"depth": 1},
			Want: map[string]any{"data": []any{map[string]any{"type": "memory_prefix", "path": "/notes/"}, map[string]any{"type": "memory_prefix", "path": "/projects/"}}}},
		{Name: "list one level below a prefix", Op: "memories.list", Store: "$s.id", Params: map[string]any{"path_prefix": "/projects/", "depth": 1},
			Want: map[string]any{"data.#": 2, "data.0.type": "memory_prefix", "data.0.path": "/projects/a/", "data.1.type": "memory", "data.1.path": "/projects/b.md"}},
		{Name: "list by pages of two", Op: "memories.list", Store: "$s.id", Params: map[string]any{"limit": 2}, Want: map[string]any{"data.#": 2, "next_page": "*"}},
		{Name: "list every page of two", Op: "memories.listAll", Store: "$s.id", Params: map[string]any{"limit": 2, "view": "full"},
			Want: map[string]any{"data.#": 5, "data.2.path": "/projects/a/notes/x.md", "data.2.content": "x"}},
		{Name: "bulk memories", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/bulk/{i}.md", "content": "n{i}"}, Repeat: 21},
		{Name: "view=full caps a page at 20", Op: "memories.list", Store: "$s.id", Params: map[string]any{"path_prefix": "/bulk/", "view": "full", "limit": 100},
			Want: map[string]any{"data.#": 20, "data.19.content": "n19", "next_page": "*"}},

		// The memory tool, on the same store.
		mark("tool", "$s.id"),
		tool("the tool reads what the API wrote", "$s.id", "", `{"command":"view","path":"/memories/notes/shopping.md"}`, func(t *testing.T, out string) {
			if !strings.Contains(out, "buy oat milk") {
				t.Errorf("view: %q", out)
			}
		}),
		tool("the tool writes", "$s.id", "sesn_tool", `{"command":"create","path":"/memories/from-tool.md","file_text":"written by the tool\n"}`, func(*testing.T, string) {}),
		since("tool", "$s.id", 1),
		{Name: "the API reads what the tool wrote", Op: "memories.list", Store: "$s.id", Params: map[string]any{"depth": 1, "view": "full"}, Save: "tm",
			Select: map[string]any{"path": "/from-tool.md"}},
		{Name: "its version says the session", Op: "versions.list", Store: "$s.id", Params: map[string]any{"memory_id": "$tm.id"},
			Want: map[string]any{"data.#": 1, "data.0.operation": "created", "data.0.created_by": map[string]any{"type": "session_actor", "session_id": "sesn_tool"}, "data.0.id": "$tm.memory_version_id"}},
		{Name: "filter by session", Op: "versions.list", Store: "$s.id", Params: map[string]any{"session_id": "sesn_tool"}, Want: map[string]any{"data.#": 1, "data.0.memory_id": "$tm.id"}},
		tool("the tool renames it", "$s.id", "sesn_tool", `{"command":"rename","old_path":"/memories/from-tool.md","new_path":"/memories/tool/renamed.md"}`, func(*testing.T, string) {}),
		{Name: "the id survives the tool's rename", Op: "memories.retrieve", Store: "$s.id", ID: "$tm.id", Want: map[string]any{"path": "/tool/renamed.md", "content": "written by the tool\n"}},

		// Versions.
		{Name: "a memory's versions, newest first", Op: "versions.list", Store: "$s.id", Params: map[string]any{"memory_id": "$m1.id"},
			Want: map[string]any{"data.#": 3, "data.0.operation": "modified", "data.0.path": "/notes/shopping.md", "data.1.id": "$m1b.memory_version_id",
				"data.2.operation": "created", "data.2.id": "$m1.memory_version_id", "data.2.content": nil, "data.2.content_sha256": sha("buy milk\n"),
				"data.2.created_by": map[string]any{"type": "api_actor", "api_key_id": "ops"}, "data.2.redacted_at": nil, "data.2.redacted_by": nil}},
		{Name: "retrieve a version with its content", Op: "versions.retrieve", Store: "$s.id", ID: "$m1.memory_version_id",
			Want: map[string]any{"type": "memory_version", "memory_id": "$m1.id", "memory_store_id": "$s.id", "content": "buy milk\n", "path": "/notes/todo.md", "content_size_bytes": 9}},
		{Name: "versions by pages", Op: "versions.listAll", Store: "$s.id", Params: map[string]any{"limit": 7}, Want: map[string]any{"data.#": 30}},
		{Name: "versions by operation", Op: "versions.list", Store: "$s.id", Params: map[string]any{"operation": "created", "limit": 100}, Want: map[string]any{"data.#": 27}},
		{Name: "versions by API key", Op: "versions.list", Store: "$s.id", Params: map[string]any{"api_key_id": "ops", "limit": 100}, Want: map[string]any{"data.#": 28}},
		{Name: "versions by time", Op: "versions.list", Store: "$s.id", Params: map[string]any{"created_at[lte]": "2026-02-01T00:00:00Z"}, Want: map[string]any{"data.#": 0}},

		// Conditional delete.
		{Name: "delete on a stale hash", Op: "memories.delete", Store: "$s.id", ID: "$m2.id", Params: map[string]any{"expected_content_sha256": sha("x")}, Err: "memory_precondition_failed_error", Status: 409},
		{Name: "delete on the current hash", Op: "memories.delete", Store: "$s.id", ID: "$m2.id", Params: map[string]any{"expected_content_sha256": sha("")},
			Want: map[string]any{"id": "$m2.id", "type": "memory_deleted"}},
		{Name: "a deleted memory is not found", Op: "memories.retrieve", Store: "$s.id", ID: "$m2.id", Err: "not_found_error", Status: 404},
		{Name: "its versions stay, the deletion last", Op: "versions.list", Store: "$s.id", Params: map[string]any{"memory_id": "$m2.id"},
			Want: map[string]any{"data.#": 2, "data.0.operation": "deleted", "data.0.path": "/notes/done.md", "data.0.content_sha256": nil, "data.0.content_size_bytes": nil}},

		// Redact.
		{Name: "a secret", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/secret.md", "content": "the pin is 4711-SECRET\n"}, Save: "sec"},
		{Name: "a redaction of the current content is refused", Op: "versions.redact", Store: "$s.id", ID: "$sec.memory_version_id", Err: "conflict_error", Status: 409},
		{Name: "the secret replaced", Op: "memories.update", Store: "$s.id", ID: "$sec.id", Params: map[string]any{"content": "ask the vault\n"}, Save: "sec2"},
		{Name: "an agent token cannot redact", Token: "agent", Op: "versions.redact", Store: "$s.id", ID: "$sec.memory_version_id", Err: "permission_error", Status: 403},
		{Name: "redact the old version", Op: "versions.redact", Store: "$s.id", ID: "$sec.memory_version_id",
			Want: map[string]any{"id": "$sec.memory_version_id", "content": nil, "path": nil, "content_sha256": nil, "content_size_bytes": nil, "redacted_at": "*",
				"redacted_by": map[string]any{"type": "api_actor", "api_key_id": "ops"}, "created_by": map[string]any{"type": "api_actor", "api_key_id": "ops"}}},
		{Name: "the content is in no git object", Local: func(t *testing.T, h *msHarness) {
			out := gittest.Git(t, filepath.Join(h.stores, h.str("$s.id")), "cat-file", "--batch-all-objects", "--batch")
			if strings.Contains(out, "4711-SECRET") {
				t.Error("a git object still holds the redacted content")
			}
		}},
		{Name: "a redacted version stays, without content", Op: "versions.retrieve", Store: "$s.id", ID: "$sec.memory_version_id",
			Want: map[string]any{"content": nil, "path": nil, "redacted_at": "*", "operation": "created"}},
		{Name: "the memory is as it was", Op: "memories.retrieve", Store: "$s.id", ID: "$sec.id", Want: map[string]any{"content": "ask the vault\n", "memory_version_id": "$sec2.memory_version_id"}},
		{Name: "other versions keep their ids", Op: "versions.retrieve", Store: "$s.id", ID: "$m1.memory_version_id", Want: map[string]any{"content": "buy milk\n"}},

		// Tokens.
		{Name: "a read-only token reads", Token: "reader", Op: "memories.retrieve", Store: "$s.id", ID: "$m1.id", Want: map[string]any{"content": oat}},
		{Name: "a read-only token cannot write", Token: "reader", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/r.md", "content": "r"}, Err: "permission_error", Status: 403},
		{Name: "a read-only operator cannot change a store", Token: "auditor", Op: "stores.update", ID: "$s.id", Params: map[string]any{"name": "x"}, Err: "permission_error", Status: 403},
		{Name: "an agent token writes memories", Token: "agent", Op: "memories.update", Store: "$s.id", ID: "$m1.id", Params: map[string]any{"content": oat + "and bread\n"},
			Want: map[string]any{"content_size_bytes": len(oat) + len("and bread\n")}},
		{Name: "an agent token cannot make stores", Token: "agent", Op: "stores.create", Params: map[string]any{"name": "nope"}, Err: "permission_error", Status: 403},
		{Name: "a token scoped to one store cannot see another", Token: "legacy-only", Op: "stores.retrieve", ID: "$s.id", Err: "permission_error", Status: 403},
		{Name: "nor its memories", Token: "legacy-only", Op: "memories.retrieve", Store: "$s.id", ID: "$m1.id", Err: "permission_error", Status: 403},
		{Name: "it lists its own store only", Token: "legacy-only", Op: "stores.listAll", Want: map[string]any{"data.#": 1, "data.0.id": "legacy"}},
		{Name: "it writes its store", Token: "legacy-only", Op: "memories.create", Store: "legacy", Params: map[string]any{"path": "/hello.md", "content": "hi"}},
		{Name: "an unknown key", Token: "nobody", Op: "stores.listAll", Err: "authentication_error", Status: 401},
		{Name: "the key as an auth token", Auth: "token", Op: "stores.retrieve", ID: "$s.id", Want: map[string]any{"id": "$s.id"}},
		{Name: "the key in X-Api-Key", Auth: "x-api-key", Op: "stores.retrieve", ID: "$s.id", Want: map[string]any{"id": "$s.id"}},

		// Bad input: the SDK's typed error, nothing changed.
		mark("bad input", "$s.id"),
		{Name: "a path without /", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "notes/x.md", "content": "x"}, Err: "invalid_request_error", Status: 400},
		{Name: "a .. segment", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/a/../b.md", "content": "x"}, Err: "invalid_request_error", Status: 400},
		{Name: "a path not in NFC", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/e\u0301.md", "content": "x"}, Err: "invalid_request_error", Status: 400},
		{Name: "a path of 21 segments", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": strings.Repeat("/a", 21), "content": "x"}, Err: "invalid_request_error", Status: 400},
		{Name: "a control character", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/a\x07.md", "content": "x"}, Err: "invalid_request_error", Status: 400},
		{Name: "content over 102,400 bytes", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/big.md", "content": strings.Repeat("x", 102401)}, Err: "invalid_request_error", Status: 400},
		{Name: "no content", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/none.md"}, Err: "invalid_request_error", Status: 400},
		{Name: "content of another type", Op: "memories.create", Store: "$s.id", Params: map[string]any{"path": "/n.md", "content": "x"}, Extra: map[string]any{"content": 42}, Err: "invalid_request_error", Status: 400},
		{Name: "an unknown field", Op: "memories.update", Store: "$s.id", ID: "$m1.id", Extra: map[string]any{"colour": "red"}, Err: "invalid_request_error", Status: 400},
		{Name: "a precondition that is no hash", Op: "memories.update", Store: "$s.id", ID: "$m1.id", Params: map[string]any{"content": "y", "precondition": map[string]any{"type": "content_sha256", "content_sha256": "abc"}}, Err: "invalid_request_error", Status: 400},
		{Name: "a precondition of another type", Op: "memories.update", Store: "$s.id", ID: "$m1.id", Params: map[string]any{"content": "y"}, Extra: map[string]any{"precondition": map[string]any{"type": "etag", "content_sha256": sha(oat)}}, Err: "invalid_request_error", Status: 400},
		{Name: "a bad expected hash", Op: "memories.delete", Store: "$s.id", ID: "$m1.id", Params: map[string]any{"expected_content_sha256": "zz"}, Err: "invalid_request_error", Status: 400},
		{Name: "an unknown memory id", Op: "memories.update", Store: "$s.id", ID: "mem_nope", Params: map[string]any{"content": "y"}, Err: "not_found_error", Status: 404},
		{Name: "an id that is a path", Op: "memories.retrieve", Store: "$s.id", ID: "../../etc/passwd", Err: "not_found_error", Status: 404},
		{Name: "an unknown version", Op: "versions.retrieve", Store: "$s.id", ID: "memver_nope", Err: "not_found_error", Status: 404},
		{Name: "an unknown store", Op: "memories.list", Store: "memstore_nope", Err: "not_found_error", Status: 404},
		{Name: "a store id that is no name", Op: "stores.retrieve", ID: "../stores", Err: "not_found_error", Status: 404},
		{Name: "a limit of 0", Op: "memories.list", Store: "$s.id", Params: map[string]any{"limit": 0}, Err: "invalid_request_error", Status: 400},
		{Name: "a limit of 101", Op: "versions.list", Store: "$s.id", Params: map[string]any{"limit": 101}, Err: "invalid_request_error", Status: 400},
		{Name: "an unknown view", Op: "memories.retrieve", Store: "$s.id", ID: "$m1.id", Params: map[string]any{"view": "huge"}, Err: "invalid_request_error", Status: 400},
		{Name: "a prefix without its /", Op: "memories.list", Store: "$s.id", Params: map[string]any{"path_prefix": "/notes"}, Err: "invalid_request_error", Status: 400},
		{Name: "a depth below 0", Op: "memories.list", Store: "$s.id", Params: map[string]any{"depth": -1}, Err: "invalid_request_error", Status: 400},
		{Name: "a cursor of nothing", Op: "versions.list", Store: "$s.id", Params: map[string]any{"page": "memver_nope"}, Err: "invalid_request_error", Status: 400},
		{Name: "an unknown operation", Op: "versions.list", Store: "$s.id", Params: map[string]any{"operation": "renamed"}, Err: "invalid_request_error", Status: 400},
		{Name: "a store name of 256 characters", Op: "stores.create", Params: map[string]any{"name": strings.Repeat("n", 256)}, Err: "invalid_request_error", Status: 400},
		{Name: "an empty store name", Op: "stores.update", ID: "$s.id", Params: map[string]any{"name": ""}, Err: "invalid_request_error", Status: 400},
		{Name: "17 metadata pairs", Op: "stores.update", ID: "$s.id", Params: map[string]any{"metadata": seventeen()}, Err: "invalid_request_error", Status: 400},
		since("bad input", "$s.id", 0),

		// Archive.
		{Name: "a memory in the second store", Op: "memories.create", Store: "$s2.id", Params: map[string]any{"path": "/keep.md", "content": "k"}, Save: "k"},
		{Name: "archive it", Op: "stores.archive", ID: "$s2.id", Want: map[string]any{"archived_at": "*", "id": "$s2.id"}},
		{Name: "archive again", Op: "stores.archive", ID: "$s2.id", Want: map[string]any{"archived_at": "*"}},
		mark("archived", "$s2.id"),
		{Name: "an archived store takes no new memory", Op: "memories.create", Store: "$s2.id", Params: map[string]any{"path": "/new.md", "content": "n"}, Err: "invalid_request_error", Status: 400},
		{Name: "nor an update", Op: "memories.update", Store: "$s2.id", ID: "$k.id", Params: map[string]any{"content": "n"}, Err: "invalid_request_error", Status: 400},
		{Name: "nor a change of the store", Op: "stores.update", ID: "$s2.id", Params: map[string]any{"name": "Bobby"}, Err: "invalid_request_error", Status: 400},
		since("archived", "$s2.id", 0),
		{Name: "its memories are read", Op: "memories.retrieve", Store: "$s2.id", ID: "$k.id", Want: map[string]any{"content": "k"}},
		{Name: "lists leave it out", Op: "stores.listAll", Want: map[string]any{"data.#": 2}},
		{Name: "unless asked", Op: "stores.listAll", Params: map[string]any{"include_archived": true}, Want: map[string]any{"data.#": 3}},
		{Name: "its memories can be deleted", Op: "memories.delete", Store: "$s2.id", ID: "$k.id", Want: map[string]any{"type": "memory_deleted"}},
		{Name: "delete the store", Op: "stores.delete", ID: "$s2.id", Want: map[string]any{"id": "$s2.id", "type": "memory_store_deleted"}},
		{Name: "it is gone", Op: "stores.retrieve", ID: "$s2.id", Err: "not_found_error", Status: 404},

		// A store that cannot be opened: the SDK's InternalServerError at
		// once (x-should-retry: false; a retry does not mend it).
		{Name: "a store to damage", Op: "stores.create", Params: map[string]any{"name": "Damaged"}, Save: "d"},
		{Name: "its branch file damaged", Local: func(t *testing.T, h *msHarness) {
			dir := filepath.Join(h.stores, h.str("$d.id"))
			if err := os.WriteFile(filepath.Join(dir, ".git", "refs", "heads", "main"), []byte("garbage\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			gittest.Damaged(t, dir, "a store damaged on purpose")
		}},
		{Name: "its memories cannot be listed", Op: "memories.list", Store: "$d.id", Err: "api_error", Status: 500},
		{Name: "nor made", Op: "memories.create", Store: "$d.id", Params: map[string]any{"path": "/a.md", "content": "a"}, Err: "api_error", Status: 500},
		{Name: "nor the store retrieved", Op: "stores.retrieve", ID: "$d.id", Err: "api_error", Status: 500},
	}
}

func seventeen() map[string]any {
	m := map[string]any{}
	for i := range 17 {
		m[fmt.Sprintf("k%d", i)] = "v"
	}
	return m
}

// tsSDK runs calls through the TypeScript SDK: driver.mjs in node,
// one call per line.
func tsSDK(t *testing.T, dir, base string) func(sdkCall) sdkResult {
	cmd := exec.Command("node", filepath.Join(dir, "driver.mjs"))
	cmd.Env = append(os.Environ(), "GITMEM_URL="+base, "ANTHROPIC_API_KEY=", "ANTHROPIC_AUTH_TOKEN=")
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	out := bufio.NewReader(outPipe)
	return func(c sdkCall) sdkResult {
		data, _ := json.Marshal(c)
		if _, err := in.Write(append(data, '\n')); err != nil {
			t.Fatal(err)
		}
		line, err := out.ReadBytes('\n')
		if err != nil {
			t.Fatalf("the TypeScript driver: %v", err)
		}
		var r sdkResult
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("the TypeScript driver said %s", line)
		}
		return r
	}
}

// goSDKCall runs calls through the Go SDK in this process.
func goSDKCall(base string) func(sdkCall) sdkResult {
	return func(c sdkCall) sdkResult {
		requests := 0
		opts := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithBaseURL(base), option.WithMaxRetries(2),
			option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
				requests++
				return next(r)
			})}
		switch c.Auth {
		case "x-api-key":
			opts = append(opts, option.WithHeader("X-Api-Key", c.Secret))
		case "token":
			opts = append(opts, option.WithAuthToken(c.Secret))
		default:
			opts = append(opts, option.WithAPIKey(c.Secret))
		}
		for k, v := range c.Args.Extra {
			opts = append(opts, option.WithJSONSet(k, v))
		}
		ms := anthropic.NewClient(opts...).Beta.MemoryStores
		raw, err := goSDKDo(ms, c)
		res := sdkResult{OK: err == nil, Requests: requests}
		if err == nil {
			res.Value = json.RawMessage(raw)
			return res
		}
		var ae *anthropic.Error
		if !errors.As(err, &ae) {
			res.Message = err.Error()
			return res
		}
		res.Status, res.Type, res.Message, res.RequestID = ae.StatusCode, string(ae.Type()), ae.Message, ae.RequestID
		res.Error = json.RawMessage(ae.RawJSON())
		return res
	}
}

// goParams takes the table's params as the Go SDK's types, failing on a
// name it does not know (a typo in the table).
type goParams struct {
	m    map[string]any
	used map[string]bool
}

func (p *goParams) get(k string) (any, bool) {
	v, ok := p.m[k]
	if ok {
		p.used[k] = true
	}
	return v, ok
}

func (p *goParams) str(k string) string {
	v, _ := p.get(k)
	s, _ := v.(string)
	return s
}

func (p *goParams) optStr(k string) param.Opt[string] {
	if v, ok := p.get(k); ok {
		s, _ := v.(string)
		return anthropic.String(s)
	}
	return param.Opt[string]{}
}

func (p *goParams) optInt(k string) param.Opt[int64] {
	if v, ok := p.get(k); ok {
		f, _ := v.(float64)
		return anthropic.Int(int64(f))
	}
	return param.Opt[int64]{}
}

func (p *goParams) optTime(k string) param.Opt[time.Time] {
	if v, ok := p.get(k); ok {
		tm, err := time.Parse(time.RFC3339, v.(string))
		if err != nil {
			panic(err)
		}
		return anthropic.Time(tm)
	}
	return param.Opt[time.Time]{}
}

func (p *goParams) strMap(k string) map[string]string {
	v, ok := p.get(k)
	if !ok {
		return nil
	}
	out := map[string]string{}
	for key, val := range v.(map[string]any) {
		out[key] = val.(string)
	}
	return out
}

func (p *goParams) view() anthropic.BetaManagedAgentsMemoryView {
	return anthropic.BetaManagedAgentsMemoryView(p.str("view"))
}

func (p *goParams) unknown() error {
	for k := range p.m {
		if !p.used[k] {
			return fmt.Errorf("the Go driver does not know param %q", k)
		}
	}
	return nil
}

type rawJSON interface{ RawJSON() string }

func rawOf[T rawJSON](v T, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return v.RawJSON(), nil
}

// all collects every item of an auto-paging listing as {"data": [...]}.
func all[T rawJSON](pager interface {
	Next() bool
	Current() T
	Err() error
}) (string, error) {
	var items []json.RawMessage
	for pager.Next() {
		items = append(items, json.RawMessage(pager.Current().RawJSON()))
	}
	if err := pager.Err(); err != nil {
		return "", err
	}
	if items == nil {
		items = []json.RawMessage{}
	}
	data, _ := json.Marshal(map[string]any{"data": items})
	return string(data), nil
}

func goSDKDo(ms anthropic.BetaMemoryStoreService, c sdkCall) (string, error) {
	ctx := context.Background()
	p := &goParams{m: c.Args.Params, used: map[string]bool{}}
	a := c.Args
	var raw string
	var err error
	switch c.Op {
	case "stores.create":
		raw, err = rawOf(ms.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: p.str("name"), Description: p.optStr("description"), Metadata: p.strMap("metadata")}))
	case "stores.retrieve":
		raw, err = rawOf(ms.Get(ctx, a.ID, anthropic.BetaMemoryStoreGetParams{}))
	case "stores.update":
		raw, err = rawOf(ms.Update(ctx, a.ID, anthropic.BetaMemoryStoreUpdateParams{Name: p.optStr("name"), Description: p.optStr("description"), Metadata: p.strMap("metadata")}))
	case "stores.list", "stores.listAll":
		lp := anthropic.BetaMemoryStoreListParams{Limit: p.optInt("limit"), Page: p.optStr("page"), CreatedAtGte: p.optTime("created_at[gte]"), CreatedAtLte: p.optTime("created_at[lte]")}
		if v, ok := p.get("include_archived"); ok {
			lp.IncludeArchived = anthropic.Bool(v.(bool))
		}
		if c.Op == "stores.list" {
			raw, err = rawOf(ms.List(ctx, lp))
		} else {
			raw, err = all(ms.ListAutoPaging(ctx, lp))
		}
	case "stores.delete":
		raw, err = rawOf(ms.Delete(ctx, a.ID, anthropic.BetaMemoryStoreDeleteParams{}))
	case "stores.archive":
		raw, err = rawOf(ms.Archive(ctx, a.ID, anthropic.BetaMemoryStoreArchiveParams{}))
	case "memories.create":
		raw, err = rawOf(ms.Memories.New(ctx, a.Store, anthropic.BetaMemoryStoreMemoryNewParams{Path: p.str("path"), Content: p.optStr("content"), View: p.view()}))
	case "memories.retrieve":
		raw, err = rawOf(ms.Memories.Get(ctx, a.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: a.Store, View: p.view()}))
	case "memories.update":
		up := anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: a.Store, Content: p.optStr("content"), Path: p.optStr("path"), View: p.view()}
		if v, ok := p.get("precondition"); ok {
			up.Precondition = anthropic.BetaManagedAgentsPreconditionParam{ContentSha256: anthropic.String(v.(map[string]any)["content_sha256"].(string))}
		}
		raw, err = rawOf(ms.Memories.Update(ctx, a.ID, up))
	case "memories.delete":
		raw, err = rawOf(ms.Memories.Delete(ctx, a.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: a.Store, ExpectedContentSha256: p.optStr("expected_content_sha256")}))
	case "memories.list", "memories.listAll":
		lp := anthropic.BetaMemoryStoreMemoryListParams{Depth: p.optInt("depth"), Limit: p.optInt("limit"), Page: p.optStr("page"), PathPrefix: p.optStr("path_prefix"), View: p.view()}
		if c.Op == "memories.list" {
			raw, err = rawOf(ms.Memories.List(ctx, a.Store, lp))
		} else {
			raw, err = all(ms.Memories.ListAutoPaging(ctx, a.Store, lp))
		}
	case "versions.retrieve":
		raw, err = rawOf(ms.MemoryVersions.Get(ctx, a.ID, anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: a.Store, View: p.view()}))
	case "versions.list", "versions.listAll":
		lp := anthropic.BetaMemoryStoreMemoryVersionListParams{MemoryID: p.optStr("memory_id"), SessionID: p.optStr("session_id"), APIKeyID: p.optStr("api_key_id"),
			Operation: anthropic.BetaManagedAgentsMemoryVersionOperation(p.str("operation")), Limit: p.optInt("limit"), Page: p.optStr("page"),
			CreatedAtGte: p.optTime("created_at[gte]"), CreatedAtLte: p.optTime("created_at[lte]"), View: p.view()}
		if c.Op == "versions.list" {
			raw, err = rawOf(ms.MemoryVersions.List(ctx, a.Store, lp))
		} else {
			raw, err = all(ms.MemoryVersions.ListAutoPaging(ctx, a.Store, lp))
		}
	case "versions.redact":
		raw, err = rawOf(ms.MemoryVersions.Redact(ctx, a.ID, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: a.Store}))
	default:
		return "", fmt.Errorf("unknown op %s", c.Op)
	}
	if uerr := p.unknown(); uerr != nil {
		return "", uerr
	}
	return raw, err
}
