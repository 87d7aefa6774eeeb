package storesapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/operator"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
	"github.com/gitmem-dev/gitmem/storesapi"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// testLog logs to the test's output.
func testLog(t testing.TB) *slog.Logger { return slog.New(slog.NewTextHandler(t.Output(), nil)) }

// storesAPI is a real multi-store server on loopback with its token file,
// and a client that checks every request it sends and every response it
// gets against docs/openapi.yaml, with kin-openapi (getkin/kin-openapi:
// the maintained, widely used OpenAPI 3 validator for Go; its
// openapi3filter checks requests and responses, and IncludeResponseStatus
// makes an undocumented status an error).
type storesAPI struct {
	t      *testing.T
	base   string
	dir    *stores.Dir
	tokens *storesapi.Tokens
	file   string
	router routers.Router
	clock  *time.Time
	header http.Header // of the last response
}

// The tokens of the tests: the secret is "secret-" + the name.
var testTokens = []policy.Token{
	{Name: "alice-bot", Stores: []string{"alice"}, Access: policy.ReadWrite, Role: policy.Agent},
	{Name: "reader", Stores: []string{"alice", "bob"}, Access: policy.ReadOnly, Role: policy.Agent},
	{Name: "ops", Stores: []string{"*"}, Access: policy.ReadWrite, Role: policy.Operator},
	{Name: "auditor", Stores: []string{"*"}, Access: policy.ReadOnly, Role: policy.Operator},
	{Name: "team-ops", Stores: []string{"team-*"}, Access: policy.ReadWrite, Role: policy.Operator},
}

func writeTokens(t *testing.T, path string, toks []policy.Token) {
	t.Helper()
	f := policy.TokenFile{}
	for _, tok := range toks {
		tok.SHA256 = storesapi.HashToken("secret-" + tok.Name)
		f.Tokens = append(f.Tokens, tok)
	}
	data, _ := json.Marshal(f)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func newStoresAPI(t *testing.T, screen policy.ScreenMode) *storesAPI {
	t.Helper()
	return newStoresAPIWith(t, storesapi.Options{Screen: screen}, true)
}

// newStoresAPIWith is newStoresAPI with more options, and the test
// tokens or none (a loopback server).
func newStoresAPIWith(t *testing.T, opt storesapi.Options, tokens bool) *storesAPI {
	t.Helper()
	return newStoresAPIRepo(t, opt, tokens, gitmem.Options{})
}

// newStoresAPIRepo is newStoresAPIWith whose stores are opened with
// repo's options too (its clock, log and operator are the test's).
func newStoresAPIRepo(t *testing.T, opt storesapi.Options, tokens bool, repo gitmem.Options) *storesAPI {
	t.Helper()
	clock := epoch
	now := func() time.Time { return clock }
	repo.Now, repo.Logf, repo.Operator = now, t.Logf, gitmem.Signature{Name: "op", Email: "op@example.com"}
	d, err := stores.Open(gittest.TempDir(t), stores.Options{Repo: repo, IdleClose: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	file := filepath.Join(t.TempDir(), "tokens.json")
	writeTokens(t, file, testTokens)
	toks, err := storesapi.LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	opt.Limits, opt.Logger, opt.Now = policy.DefaultLimits, testLog(t), now
	if tokens {
		opt.Tokens = toks
	}
	srv := httptest.NewServer(storesapi.New(d, opt))
	t.Cleanup(srv.Close)

	doc, err := openapi3.NewLoader().LoadFromFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("docs/openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: srv.URL}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &storesAPI{t: t, base: srv.URL, dir: d, tokens: toks, file: file, router: router, clock: &clock}
}

// call sends a request as the token (by name; "" for none) and returns the
// status and the body decoded into out (when not nil). Both are checked
// against the OpenAPI document; the request too unless it is meant to be
// malformed (badRequest).
func (a *storesAPI) call(token, method, path string, body any, out any, header ...string) int {
	a.t.Helper()
	return a.send(token, method, path, body, out, false, header...)
}

func (a *storesAPI) callBad(token, method, path string, body any, out any) int {
	a.t.Helper()
	return a.send(token, method, path, body, out, true)
}

func (a *storesAPI) send(token, method, path string, body any, out any, badRequest bool, header ...string) int {
	a.t.Helper()
	var data []byte
	switch b := body.(type) {
	case nil:
	case string:
		data = []byte(b)
	default:
		data, _ = json.Marshal(b)
	}
	newReq := func() *http.Request {
		req, err := http.NewRequest(method, a.base+path, bytes.NewReader(data))
		if err != nil {
			a.t.Fatal(err)
		}
		if body != nil || method == "POST" || method == "PUT" || method == "PATCH" {
			req.Header.Set("Content-Type", "application/json") // also a POST without a body: the guard wants it
		}
		if body == nil && method == "POST" && strings.HasPrefix(path, "/v1/memory_stores/") {
			req.Header.Del("Content-Type") // as the SDKs send archive and redact
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer secret-"+token)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		return req
	}
	res, err := http.DefaultClient.Do(newReq())
	if err != nil {
		a.t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	a.header = res.Header

	req := newReq()
	route, params, err := a.router.FindRoute(req)
	if err != nil {
		a.t.Fatalf("%s %s: not in docs/openapi.yaml: %v", method, path, err)
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	if !badRequest && token != "" {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			a.t.Errorf("%s %s: the request does not match docs/openapi.yaml: %v", method, path, err)
		}
	}
	rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.StatusCode, Header: res.Header, Options: opts}
	rin.SetBodyBytes(got)
	if err := openapi3filter.ValidateResponse(context.Background(), rin); err != nil {
		a.t.Errorf("%s %s: the response (%d %s) does not match docs/openapi.yaml: %v", method, path, res.StatusCode, got, err)
	}
	if out != nil {
		if err := json.Unmarshal(got, out); err != nil {
			a.t.Fatalf("%s %s: %d %s: %v", method, path, res.StatusCode, got, err)
		}
	}
	return res.StatusCode
}

// tool sends one memory tool call to a store as a token.
func (a *storesAPI) tool(token, store, id, input string, header ...string) (int, handler.Result) {
	a.t.Helper()
	var res handler.Result
	code := a.call(token, "POST", "/v1/stores/"+store+"/tool_use",
		fmt.Sprintf(`{"type":"tool_use","id":%q,"name":"memory","input":%s}`, id, input), &res, header...)
	return code, res
}

type apiError struct {
	Error         string           `json:"error"`
	ContentSHA256 string           `json:"content_sha256"`
	Conflicts     []map[string]any `json:"conflicts"`
}

func (a *storesAPI) createStores(names ...string) {
	a.t.Helper()
	for _, n := range names {
		if code := a.call("ops", "POST", "/v1/stores", map[string]any{"name": n, "description": "Memory of " + n}, nil); code != http.StatusCreated {
			a.t.Fatalf("create %s: %d", n, code)
		}
	}
}

func TestStoresAuthAndScopes(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	a.createStores("alice", "bob")
	create := `{"command":"create","path":"/memories/a.md","file_text":"one\n"}`

	// 401: no token, an unknown one, a malformed header.
	var e apiError
	if code := a.callBad("", "GET", "/v1/stores", nil, &e); code != http.StatusUnauthorized || e.Error != "missing or unknown bearer token" {
		t.Errorf("no token: %d %q", code, e.Error)
	}
	if code := a.callBad("nobody", "POST", "/v1/stores/alice/tool_use", `{}`, nil); code != http.StatusUnauthorized {
		t.Errorf("unknown token: %d", code)
	}
	req, _ := http.NewRequest("GET", a.base+"/healthz", nil)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("healthz without a token: %v %v", res, err)
	}

	// 403: a store outside the scope, the operator API with an agent token.
	if code := a.call("alice-bot", "POST", "/v1/stores/bob/tool_use", `{"type":"tool_use","id":"t","name":"memory","input":{"command":"view","path":"/memories"}}`, &e); code != http.StatusForbidden ||
		e.Error != "token alice-bot may not use store bob" {
		t.Errorf("out of scope: %d %q", code, e.Error)
	}
	for _, path := range []string{"/v1/stores", "/v1/stores/alice", "/v1/stores/alice/versions", "/v1/stores/alice/memories"} {
		if code := a.call("alice-bot", "GET", path, nil, &e); code != http.StatusForbidden ||
			e.Error != "token alice-bot is an agent token; the operator API needs an operator token" {
			t.Errorf("agent token on %s: %d %q", path, code, e.Error)
		}
	}
	if code := a.call("team-ops", "GET", "/v1/stores/alice", nil, &e); code != http.StatusForbidden {
		t.Errorf("operator out of scope: %d", code)
	}
	if code := a.call("team-ops", "POST", "/v1/stores", map[string]any{"name": "alice2"}, &e); code != http.StatusForbidden {
		t.Errorf("create out of scope: %d", code)
	}
	var list struct {
		Data []stores.StoreJSON `json:"data"`
	}
	a.call("team-ops", "GET", "/v1/stores", nil, &list)
	if len(list.Data) != 0 {
		t.Errorf("team-ops sees %+v", list.Data)
	}
	// 404 only within the scope.
	if code := a.call("ops", "POST", "/v1/stores/nobody/tool_use", `{"type":"tool_use","id":"t","name":"memory","input":{"command":"view","path":"/memories"}}`, &e); code != http.StatusNotFound ||
		e.Error != "there is no store nobody" {
		t.Errorf("unknown store: %d %q", code, e.Error)
	}
	// An id that is not a store name names no store: 404 whatever the token
	// (docs/memory-stores.md), before its scope or role is looked at.
	for _, tok := range []string{"ops", "team-ops", "alice-bot", "reader"} {
		for _, path := range []string{"/v1/stores/..%2Fx", "/v1/stores/..%2Fx/memories", "/v1/stores/Alice/versions"} {
			if code := a.callBad(tok, "GET", path, nil, &e); code != http.StatusNotFound || !strings.HasPrefix(e.Error, "there is no store ") {
				t.Errorf("%s %s: %d %q", tok, path, code, e.Error)
			}
		}
		if code := a.callBad(tok, "POST", "/v1/stores/..%2Fx/tool_use", `{"type":"tool_use","id":"t","name":"memory","input":{"command":"view","path":"/memories"}}`, &e); code != http.StatusNotFound ||
			e.Error != "there is no store ../x" {
			t.Errorf("%s tool_use on ../x: %d %q", tok, code, e.Error)
		}
	}

	// A read-only token: views work, changes are a tool error the model reads.
	if code, res := a.tool("reader", "alice", "toolu_r1", create); code != 200 || !res.IsError ||
		res.Content != "Error: This memory is read-only for you: view works, but create is not allowed; nothing was changed" {
		t.Errorf("read-only create: %d %+v", code, res)
	}
	if _, res := a.tool("reader", "bob", "toolu_r2", `{"command":"view","path":"/memories"}`); res.IsError {
		t.Errorf("read-only view: %+v", res)
	}
	if code := a.call("auditor", "PUT", "/v1/stores/alice/memory?path=/memories/x.md", map[string]any{"content": "x"}, &e); code != http.StatusForbidden ||
		e.Error != "token auditor is read-only" {
		t.Errorf("read-only operator put: %d %q", code, e.Error)
	}

	// Attribution: the token is the author; the Agent trailer is the
	// request's agent, else the token's name.
	if _, res := a.tool("alice-bot", "alice", "toolu_1", create); res.IsError {
		t.Fatal(res.Content)
	}
	if _, res := a.tool("alice-bot", "alice", "toolu_2", `{"command":"insert","path":"/memories/a.md","insert_line":1,"insert_text":"two"}`,
		handler.HeaderAgent, "planner", handler.HeaderSession, "s-7"); res.IsError {
		t.Fatal(res.Content)
	}
	var versions struct {
		Data []operator.CommitJSON `json:"data"`
	}
	a.call("auditor", "GET", "/v1/stores/alice/versions?limit=2", nil, &versions)
	if len(versions.Data) != 2 {
		t.Fatalf("versions %+v", versions)
	}
	v2, v1 := versions.Data[0], versions.Data[1]
	if v1.Author["name"] != "alice-bot" || v1.Agent != "alice-bot" || v2.Author["name"] != "alice-bot" || v2.Agent != "planner" || v2.Session != "s-7" {
		t.Errorf("attribution: %+v / %+v", v1, v2)
	}

	// The token file is read again on Reload (SIGHUP): a removed token is
	// 401 at once, a new one works.
	writeTokens(t, a.file, append([]policy.Token{{Name: "carol-bot", Stores: []string{"alice"}, Access: policy.ReadWrite, Role: policy.Agent}}, testTokens[1:]...))
	if err := a.tokens.Reload(); err != nil {
		t.Fatal(err)
	}
	if code, _ := a.tool("carol-bot", "alice", "toolu_3", `{"command":"view","path":"/memories"}`); code != 200 {
		t.Errorf("new token: %d", code)
	}
	if code := a.callBad("alice-bot", "POST", "/v1/stores/alice/tool_use", `{}`, nil); code != http.StatusUnauthorized {
		t.Errorf("removed token: %d", code)
	}
	os.WriteFile(a.file, []byte("not json"), 0o600)
	if err := a.tokens.Reload(); err == nil {
		t.Error("a broken token file was accepted")
	}
	if code, _ := a.tool("carol-bot", "alice", "toolu_4", `{"command":"view","path":"/memories"}`); code != 200 {
		t.Errorf("the tokens were lost on a failed reload: %d", code)
	}
	// A file others can read or write is refused as ssh refuses such a
	// key (not on Windows, which has no such modes); the old tokens stay.
	if runtime.GOOS != "windows" {
		writeTokens(t, a.file, testTokens)
		os.Chmod(a.file, 0o644)
		if err := a.tokens.Reload(); err == nil || !strings.Contains(err.Error(), "chmod 600 "+a.file) {
			t.Errorf("a token file others can read: %v", err)
		}
		if code, _ := a.tool("carol-bot", "alice", "toolu_5", `{"command":"view","path":"/memories"}`); code != 200 {
			t.Errorf("the tokens were lost on a refused reload: %d", code)
		}
	}
}

func TestStoresLifecycleAPI(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	var s stores.StoreJSON
	if code := a.call("ops", "POST", "/v1/stores", map[string]any{"name": "alice", "description": "Alice's preferences.",
		"metadata": map[string]string{"user": "alice"}, "secret_screening": "mask"}, &s); code != http.StatusCreated ||
		s.Name != "alice" || s.Metadata["user"] != "alice" || s.SecretScreening != "mask" || s.ArchivedAt != nil || s.CreatedAt != "2026-01-02T03:04:05Z" {
		t.Errorf("create: %d %+v", code, s)
	}
	var e apiError
	if code := a.call("ops", "POST", "/v1/stores", map[string]any{"name": "alice"}, &e); code != http.StatusConflict || e.Error != "store alice already exists" {
		t.Errorf("create twice: %d %q", code, e.Error)
	}
	if code := a.callBad("ops", "POST", "/v1/stores", map[string]any{"name": "Alice"}, &e); code != http.StatusBadRequest ||
		!strings.HasPrefix(e.Error, "store names are 1 to 63 characters") {
		t.Errorf("bad name: %d %q", code, e.Error)
	}
	if code := a.callBad("ops", "POST", "/v1/stores", map[string]any{"name": "x", "bogus": 1}, &e); code != http.StatusBadRequest {
		t.Errorf("unknown field: %d", code)
	}
	s = stores.StoreJSON{}
	if code := a.call("ops", "PATCH", "/v1/stores/alice", map[string]any{"description": "Alice.", "metadata": map[string]any{"user": nil, "tier": "gold"},
		"secret_screening": ""}, &s); code != 200 || s.Description != "Alice." || len(s.Metadata) != 1 || s.Metadata["tier"] != "gold" || s.SecretScreening != "" {
		t.Errorf("update: %d %+v", code, s)
	}

	// Archived: the model can view, not change; the API cannot update it.
	if _, res := a.tool("ops", "alice", "toolu_1", `{"command":"create","path":"/memories/a.md","file_text":"x"}`); res.IsError {
		t.Fatal(res.Content)
	}
	if code := a.call("ops", "POST", "/v1/stores/alice/archive", nil, &s); code != 200 || s.ArchivedAt == nil {
		t.Errorf("archive: %d %+v", code, s)
	}
	if _, res := a.tool("ops", "alice", "toolu_2", `{"command":"delete","path":"/memories/a.md"}`); res.Content != "Error: This memory is archived: view works, but delete is not allowed; nothing was changed" {
		t.Errorf("archived delete: %+v", res)
	}
	if _, res := a.tool("ops", "alice", "toolu_3", `{"command":"view","path":"/memories/a.md"}`); res.IsError {
		t.Errorf("archived view: %+v", res)
	}
	if code := a.call("ops", "PATCH", "/v1/stores/alice", map[string]any{"description": "x"}, &e); code != http.StatusConflict ||
		e.Error != "store alice is archived; unarchive it to change it" {
		t.Errorf("update archived: %d %q", code, e.Error)
	}
	if code := a.call("ops", "PUT", "/v1/stores/alice/memory?path=/memories/b.md", map[string]any{"content": "x"}, &e); code != http.StatusConflict {
		t.Errorf("put into archived: %d", code)
	}
	var list struct {
		Data     []stores.StoreJSON `json:"data"`
		NextPage *string            `json:"next_page"`
	}
	a.createStores("bob", "carol")
	a.call("ops", "GET", "/v1/stores", nil, &list)
	if len(list.Data) != 2 || list.Data[0].Name != "bob" {
		t.Errorf("list without archived: %+v", list)
	}
	a.call("ops", "GET", "/v1/stores?include_archived=true&limit=2", nil, &list)
	if len(list.Data) != 2 || list.Data[0].Name != "alice" || list.NextPage == nil {
		t.Fatalf("list page 1: %+v", list)
	}
	cursor := *list.NextPage
	a.call("ops", "GET", "/v1/stores?include_archived=true&limit=2&page="+cursor, nil, &list)
	if len(list.Data) != 1 || list.Data[0].Name != "carol" || list.NextPage != nil {
		t.Errorf("list page 2: %+v", list)
	}
	// A cursor is one this listing made: not a store's name, nor its
	// cursor with other filters.
	for _, q := range []string{"include_archived=true&page=bob", "page=" + cursor, "include_archived=true&page=garbage"} {
		var e apiError
		if code := a.call("ops", "GET", "/v1/stores?"+q, nil, &e); code != http.StatusBadRequest || !strings.HasSuffix(e.Error, "is not a cursor of this listing") {
			t.Errorf("list %s: %d %q", q, code, e.Error)
		}
	}
	if code := a.call("ops", "POST", "/v1/stores/alice/unarchive", nil, &s); code != 200 || s.ArchivedAt != nil {
		t.Errorf("unarchive: %d %+v", code, s)
	}
	if _, res := a.tool("ops", "alice", "toolu_2", `{"command":"delete","path":"/memories/a.md"}`); res.IsError {
		t.Errorf("delete after unarchive: %+v", res)
	}

	var del map[string]any
	if code := a.call("ops", "DELETE", "/v1/stores/bob", nil, &del); code != 200 || del["deleted"] != true {
		t.Errorf("delete: %d %v", code, del)
	}
	if code := a.call("ops", "GET", "/v1/stores/bob", nil, &e); code != http.StatusNotFound {
		t.Errorf("get deleted: %d", code)
	}
	if code, _ := a.tool("ops", "bob", "toolu_9", `{"command":"view","path":"/memories"}`); code != http.StatusNotFound {
		t.Errorf("tool call on a deleted store: %d", code)
	}

	// A store that cannot be read is listed as such; the others still are.
	erin := filepath.Join(a.dir.Root(), "erin")
	r, _, err := gitmem.Init(context.Background(), erin, gitmem.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := os.WriteFile(filepath.Join(erin, ".git", "HEAD"), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Damaged(t, erin, "its HEAD holds garbage: the store that cannot be read")
	var mixed struct {
		Data []map[string]any `json:"data"`
	}
	if code := a.call("ops", "GET", "/v1/stores", nil, &mixed); code != 200 || len(mixed.Data) != 3 ||
		mixed.Data[0]["name"] != "alice" || mixed.Data[1]["name"] != "carol" || mixed.Data[2]["name"] != "erin" ||
		mixed.Data[2]["error"] != "store erin is damaged: HEAD does not name a branch (it is detached or damaged); nothing was changed. "+
			"Retrying does not help: an operator repairs it on the server, where gitmem --repo STORES/erin fsck says how (STORES is the server's --stores folder)" || mixed.Data[1]["error"] != nil {
		t.Errorf("list with an unreadable store: %d %v", code, mixed.Data)
	}
}

func TestStoresSecretScreening(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenRefuse) // the server refuses...
	a.createStores("alice", "bob", "carol")
	// ...alice masks, carol does not screen.
	a.call("ops", "PATCH", "/v1/stores/alice", map[string]any{"secret_screening": "mask"}, nil)
	a.call("ops", "PATCH", "/v1/stores/carol", map[string]any{"secret_screening": "off"}, nil)
	note := `{"command":"create","path":"/memories/keys.md","file_text":"aws AKIAZ3MHQ7XKP2LVN4RT\n"}`
	if _, res := a.tool("ops", "alice", "toolu_1", note); res.IsError ||
		res.Content != "File created successfully at: /memories/keys.md\n\nPossible secrets were masked before saving; the file holds a placeholder instead of each: line 1 [REDACTED:aws-access-token]" {
		t.Errorf("mask: %+v", res)
	}
	if _, res := a.tool("ops", "bob", "toolu_1", note); !res.IsError || !strings.Contains(res.Content, "(aws-access-token) on line 1 of /memories/keys.md; nothing was written") {
		t.Errorf("refuse: %+v", res)
	}
	if _, res := a.tool("ops", "carol", "toolu_1", note); res.IsError || res.Content != "File created successfully at: /memories/keys.md" {
		t.Errorf("off: %+v", res)
	}
	var m operator.MemoryJSON
	a.call("ops", "GET", "/v1/stores/carol/memory?path=/memories/keys.md", nil, &m)
	if m.Content == nil || *m.Content != "aws AKIAZ3MHQ7XKP2LVN4RT\n" {
		t.Errorf("stored unscreened: %+v", m)
	}
	a.call("ops", "GET", "/v1/stores/alice/memory?path=/memories/keys.md", nil, &m)
	if m.Content == nil || *m.Content != "aws [REDACTED:aws-access-token]\n" {
		t.Errorf("stored: %+v", m)
	}
	var e apiError
	if code := a.call("ops", "GET", "/v1/stores/bob/memory?path=/memories/keys.md", nil, &e); code != http.StatusNotFound {
		t.Errorf("refused file exists: %d", code)
	}
}

func TestMemoriesAPI(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	a.createStores("alice")
	steps := []string{
		`{"command":"create","path":"/memories/prefs.md","file_text":"tea\n"}`,
		`{"command":"create","path":"/memories/projects/a.md","file_text":"alpha\n"}`,
		`{"command":"create","path":"/memories/projects/b.md","file_text":"beta\n"}`,
		`{"command":"str_replace","path":"/memories/prefs.md","old_str":"tea","new_str":"green tea"}`,
	}
	for i, s := range steps {
		if _, res := a.tool("alice-bot", "alice", fmt.Sprintf("toolu_%d", i), s, handler.HeaderAgent, "planner"); res.IsError {
			t.Fatal(res.Content)
		}
	}
	sha := func(s string) string { return operator.SHA256([]byte(s)) }

	// A request a newcomer gets wrong says what was meant.
	var bad struct{ Error string }
	if code := a.callBad("auditor", "GET", "/v1/stores/alice/memory", nil, &bad); code != http.StatusBadRequest || bad.Error != "the path parameter is required: ?path=/memories/..." {
		t.Errorf("memory without path: %d %q", code, bad.Error)
	}
	req, _ := http.NewRequest("POST", a.base+"/v1/tool_use", strings.NewReader("{}")) // a single-memory route, not in this API
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer secret-alice-bot")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		json.NewDecoder(resp.Body).Decode(&bad)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || bad.Error != "this server serves several stores: POST /v1/stores/{store}/tool_use" {
			t.Errorf("tool_use without a store: %d %q", resp.StatusCode, bad.Error)
		}
	}

	var list struct {
		Data     []operator.MemoryJSON `json:"data"`
		NextPage *string               `json:"next_page"`
	}
	a.call("auditor", "GET", "/v1/stores/alice/memories", nil, &list)
	if len(list.Data) != 3 || list.NextPage != nil {
		t.Fatalf("list: %+v", list)
	}
	p := list.Data[0] // in path order: prefs.md, projects/a.md, projects/b.md
	if p.Path != "/memories/prefs.md" || p.ContentSizeBytes != 10 || p.ContentSHA256 != sha("green tea\n") || p.ToolUseID != "toolu_3" ||
		p.Agent != "planner" || p.Command != "str_replace" || p.Author != "alice-bot" || p.Content != nil {
		t.Errorf("prefs.md: %+v", p)
	}
	a.call("auditor", "GET", "/v1/stores/alice/memories?path_prefix=/memories/projects&limit=1", nil, &list)
	if len(list.Data) != 1 || list.Data[0].Path != "/memories/projects/a.md" || list.Data[0].ToolUseID != "toolu_1" || list.NextPage == nil {
		t.Fatalf("prefix page 1: %+v", list)
	}
	cursor := *list.NextPage
	a.call("auditor", "GET", "/v1/stores/alice/memories?path_prefix=/memories/projects&limit=1&page="+cursor, nil, &list)
	if len(list.Data) != 1 || list.Data[0].Path != "/memories/projects/b.md" || list.NextPage != nil {
		t.Errorf("prefix page 2: %+v", list)
	}
	// A cursor is one this listing made: not a path, nor its cursor
	// under another prefix.
	for _, q := range []string{"path_prefix=/memories/projects&page=/memories/projects/a.md", "page=" + cursor} {
		var e apiError
		if code := a.call("auditor", "GET", "/v1/stores/alice/memories?"+q, nil, &e); code != http.StatusBadRequest || !strings.HasSuffix(e.Error, "is not a cursor of this listing") {
			t.Errorf("list %s: %d %q", q, code, e.Error)
		}
	}

	// Put with a precondition: the right hash replaces, a stale one is 409
	// and changes nothing.
	var m operator.MemoryJSON
	var e apiError
	put := func(path, content, expect string, out any) int {
		body := map[string]any{"content": content}
		if expect != "" {
			body["precondition"] = map[string]string{"type": "content_sha256", "content_sha256": expect}
		}
		if len(expect) != 64 && expect != "" {
			return a.callBad("ops", "PUT", "/v1/stores/alice/memory?path="+path, body, out)
		}
		return a.call("ops", "PUT", "/v1/stores/alice/memory?path="+path, body, out)
	}
	if code := put("/memories/prefs.md", "oolong\n", sha("green tea\n"), &m); code != 200 || m.ContentSHA256 != sha("oolong\n") || m.Command != "put" || m.Author != "ops" {
		t.Errorf("put with the right hash: %d %+v", code, m)
	}
	if code := put("/memories/prefs.md", "x", sha("green tea\n"), &e); code != http.StatusConflict ||
		e.ContentSHA256 != sha("oolong\n") || e.Error != "the memory's content_sha256 is "+sha("oolong\n")+", not the expected one; nothing was changed" {
		t.Errorf("stale hash: %d %+v", code, e)
	}
	if code := put("/memories/new.md", "x", sha("x"), &e); code != http.StatusConflict ||
		e.Error != "the memory does not exist, so it cannot have the expected content_sha256; nothing was changed" {
		t.Errorf("precondition on a new file: %d %+v", code, e)
	}
	if code := put("/memories/new.md", "fresh\n", "", &m); code != http.StatusCreated || m.Path != "/memories/new.md" {
		t.Errorf("create: %d %+v", code, m)
	}
	if code := put("/memories/x.md", "x", "bad", &e); code != http.StatusBadRequest {
		t.Errorf("a malformed precondition: %d", code)
	}
	if code := a.call("ops", "PUT", "/v1/stores/alice/memory?path=/memories/../etc", map[string]any{"content": "x"}, &e); code != http.StatusBadRequest ||
		e.Error != "Path /memories/../etc would escape /memories directory" {
		t.Errorf("bad path: %d %q", code, e.Error)
	}
	a.call("auditor", "GET", "/v1/stores/alice/memory?path=/memories/prefs.md", nil, &m)
	if m.Content == nil || *m.Content != "oolong\n" {
		t.Errorf("after the refused puts: %+v", m)
	}

	// Delete with a precondition.
	if code := a.call("ops", "DELETE", "/v1/stores/alice/memory?path=/memories/new.md&expected_content_sha256="+sha("stale"), nil, &e); code != http.StatusConflict {
		t.Errorf("delete with a stale hash: %d", code)
	}
	var del map[string]any
	if code := a.call("ops", "DELETE", "/v1/stores/alice/memory?path=/memories/new.md&expected_content_sha256="+sha("fresh\n"), nil, &del); code != 200 || del["deleted"] != true {
		t.Errorf("delete: %d %v", code, del)
	}
	if code := a.call("ops", "DELETE", "/v1/stores/alice/memory?path=/memories/new.md", nil, &e); code != http.StatusNotFound ||
		e.Error != "there is no memory file /memories/new.md" {
		t.Errorf("delete again: %d %q", code, e.Error)
	}
	if code := a.call("ops", "GET", "/v1/stores/alice/memory?path=/memories/projects", nil, &e); code != http.StatusNotFound {
		t.Errorf("get a folder: %d", code)
	}
	if code := a.call("ops", "PUT", "/v1/stores/alice/memory?path=/memories/", map[string]any{"content": "x"}, &e); code != http.StatusBadRequest ||
		e.Error != "path names the /memories folder itself; name a file in it" {
		t.Errorf("put the root: %d %q", code, e.Error)
	}

	// The operator commits, with their trailers.
	var v operator.CommitJSON
	a.call("auditor", "GET", "/v1/stores/alice/versions/HEAD", nil, &v)
	if v.Subject != "memory: delete /memories/new.md" || v.Command != "delete" || v.Path != "/memories/new.md" || v.Author["name"] != "ops" || v.ToolUseID != "" {
		t.Errorf("delete commit: %+v", v)
	}
	a.call("auditor", "GET", "/v1/stores/alice/versions/HEAD~2", nil, &v)
	if v.Subject != "memory: put /memories/prefs.md" || v.Command != "put" || !strings.Contains(v.Diff, "-green tea\n+oolong\n") {
		t.Errorf("put commit: %+v", v)
	}
}

func TestVersionsAPI(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	a.createStores("alice")
	calls := []string{
		`{"command":"create","path":"/memories/prefs.md","file_text":"color: blue\nsize: m\nshape: round\nfood: pasta\n"}`,
		`{"command":"str_replace","path":"/memories/prefs.md","old_str":"pasta","new_str":"pizza"}`,
		`{"command":"create","path":"/memories/secret.md","file_text":"pin 8642\n"}`,
		`{"command":"str_replace","path":"/memories/prefs.md","old_str":"blue","new_str":"green"}`,
		`{"command":"str_replace","path":"/memories/prefs.md","old_str":"green","new_str":"red"}`,
	}
	for i, c := range calls {
		*a.clock = epoch.Add(time.Duration(i) * time.Hour)
		if _, res := a.tool("alice-bot", "alice", fmt.Sprintf("toolu_%d", i), c, handler.HeaderSession, fmt.Sprintf("s%d", i%2)); res.IsError {
			t.Fatal(res.Content)
		}
	}
	*a.clock = epoch.Add(10 * time.Hour)

	// Every page by cursor, newest first, nothing twice.
	type page struct {
		Data     []operator.CommitJSON `json:"data"`
		NextPage *string               `json:"next_page"`
	}
	var all []string
	for cursor := ""; ; {
		var p page
		q := "/v1/stores/alice/versions?limit=2"
		if cursor != "" {
			q += "&page=" + cursor
		}
		a.call("auditor", "GET", q, nil, &p)
		for _, c := range p.Data {
			all = append(all, c.ToolUseID+"/"+c.Command)
		}
		if p.NextPage == nil {
			break
		}
		cursor = *p.NextPage
	}
	want := "toolu_4/str_replace toolu_3/str_replace toolu_2/create toolu_1/str_replace toolu_0/create /store /init"
	if strings.Join(all, " ") != want {
		t.Errorf("all pages: %s\nwant %s", strings.Join(all, " "), want)
	}
	for q, want := range map[string]string{
		"tool_use_id=toolu_2":                                 "toolu_2",
		"session=s1":                                          "toolu_3 toolu_1",
		"agent=alice-bot&command=create":                      "toolu_2 toolu_0",
		"path=/memories/secret.md":                            "toolu_2",
		"since=2026-01-02T05:00:00Z&until=8h":                 "toolu_2",
		"command=str_replace&path=/memories/prefs.md&limit=1": "toolu_4",
	} {
		var p page
		a.call("auditor", "GET", "/v1/stores/alice/versions?"+q, nil, &p)
		var ids []string
		for _, c := range p.Data {
			ids = append(ids, c.ToolUseID)
		}
		if strings.Join(ids, " ") != want {
			t.Errorf("%s: %v, want %s", q, ids, want)
		}
	}
	// A cursor is one this listing made: not a commit's hash, nor its
	// cursor with other filters.
	var p page
	if a.call("auditor", "GET", "/v1/stores/alice/versions?session=s1&limit=1", nil, &p); p.NextPage == nil {
		t.Fatalf("session s1's first page: %+v", p)
	}
	for _, q := range []string{"page=0000000000000000000000000000000000000000", "session=s1&page=" + p.Data[0].Hash, "session=s0&page=" + *p.NextPage} {
		var e apiError
		if code := a.call("auditor", "GET", "/v1/stores/alice/versions?"+q, nil, &e); code != http.StatusBadRequest || !strings.HasSuffix(e.Error, "is not a cursor of this listing") {
			t.Errorf("list %s: %d %q", q, code, e.Error)
		}
	}
	var e apiError
	if code := a.call("auditor", "GET", "/v1/stores/alice/versions?since=soonish", nil, &e); code != http.StatusBadRequest {
		t.Errorf("bad time: %d", code)
	}
	var v operator.CommitJSON
	if code := a.call("auditor", "GET", "/v1/stores/alice/versions/toolu_1", nil, &v); code != 200 || v.Command != "str_replace" ||
		!strings.Contains(v.Diff, "-food: pasta\n+food: pizza\n") {
		t.Errorf("get by tool_use id: %d %+v", code, v)
	}
	if code := a.call("auditor", "GET", "/v1/stores/alice/versions/toolu_nope", nil, &e); code != http.StatusNotFound ||
		e.Error != `"toolu_nope" is not a commit, tool_use id or revision of this memory` {
		t.Errorf("unknown version: %d %q", code, e.Error)
	}

	// Revert one tool call despite later edits; an overlapping one is 409
	// with the conflicts; forced, it goes.
	type change struct {
		DryRun  bool                 `json:"dry_run"`
		Version *operator.CommitJSON `json:"version"`
		Paths   []string             `json:"paths"`
		Diff    string               `json:"diff"`
	}
	var ch change
	if code := a.call("ops", "POST", "/v1/stores/alice/revert", map[string]any{"revisions": []string{"toolu_1"}}, &ch); code != 200 ||
		ch.Version == nil || ch.Version.Command != "revert" || ch.Version.Author["name"] != "ops" || !strings.Contains(ch.Diff, "-food: pizza\n+food: pasta\n") {
		t.Errorf("revert: %d %+v", code, ch)
	}
	if code := a.call("ops", "POST", "/v1/stores/alice/revert", map[string]any{"revisions": []string{"toolu_1"}}, &e); code != http.StatusConflict {
		t.Errorf("revert again: %d %+v", code, e)
	}
	if code := a.call("ops", "POST", "/v1/stores/alice/revert", map[string]any{"revisions": []string{"toolu_3"}}, &e); code != http.StatusConflict ||
		len(e.Conflicts) != 1 || e.Conflicts[0]["path"] != "/memories/prefs.md" {
		t.Errorf("overlapping revert: %d %+v", code, e)
	}
	if code := a.call("ops", "POST", "/v1/stores/alice/revert", map[string]any{"revisions": []string{"toolu_3"}, "strategy": "theirs", "dry_run": true}, &ch); code != 200 ||
		!ch.DryRun || ch.Version != nil || !strings.Contains(ch.Diff, "+color: blue\n") {
		t.Errorf("forced revert, dry: %d %+v", code, ch)
	}

	// Restore a path to a time.
	if code := a.call("ops", "POST", "/v1/stores/alice/restore", map[string]any{"to": "2026-01-02T04:30:00Z", "paths": []string{"/memories/prefs.md"}}, &ch); code != 200 ||
		ch.Version == nil || ch.Version.Command != "restore" || len(ch.Paths) != 1 ||
		!strings.Contains(ch.Diff, "-color: red\n+color: blue\n") || !strings.Contains(ch.Diff, "-food: pasta\n+food: pizza\n") {
		t.Errorf("restore: %d %+v", code, ch)
	}
	// A restore that would delete files names them: 409 unless "delete".
	e.Error = ""
	if code := a.call("ops", "POST", "/v1/stores/alice/restore", map[string]any{"to": "toolu_1"}, &e); code != http.StatusConflict ||
		e.Error != `/memories/secret.md did not exist then: restoring would delete it; nothing was changed ("delete": true deletes it)` {
		t.Errorf("restore deleting a file: %d %+v", code, e)
	}
	// Before the first commit (init's, empty): the memory was empty.
	if code := a.call("ops", "POST", "/v1/stores/alice/restore", map[string]any{"to": "2026-01-01T00:00:00Z"}, &e); code != http.StatusConflict ||
		e.Error != `/memories/prefs.md, /memories/secret.md did not exist then: restoring would delete them; nothing was changed ("delete": true deletes them)` {
		t.Errorf("restore before the first commit: %d %+v", code, e)
	}

	// Redact: a dry run changes nothing; then the PIN is in no version.
	var red struct {
		DryRun    bool             `json:"dry_run"`
		Rewritten []map[string]any `json:"rewritten"`
	}
	if code := a.call("ops", "POST", "/v1/stores/alice/redact", map[string]any{"match": "pin [0-9]+", "dry_run": true}, &red); code != 200 || !red.DryRun || len(red.Rewritten) == 0 {
		t.Errorf("redact dry: %d %+v", code, red)
	}
	for _, p := range []string{`x*`, `\b`} { // \b matches the empty text between two characters
		if code := a.call("ops", "POST", "/v1/stores/alice/redact", map[string]any{"match": p}, &e); code != http.StatusBadRequest ||
			e.Error != fmt.Sprintf(`match %q matches empty text; give a pattern for the secret itself`, p) {
			t.Errorf("redact empty match %s: %d %q", p, code, e.Error)
		}
	}
	// The store shares its memory through a remote: the answer names it
	// (its syncs are refused until the redaction is pushed there).
	gittest.Git(t, filepath.Join(a.dir.Root(), "alice"), "remote", "add", "origin", t.TempDir())
	var redR struct {
		DryRun  bool     `json:"dry_run"`
		Remotes []string `json:"remotes_hold_old_history"`
	}
	if code := a.call("ops", "POST", "/v1/stores/alice/redact", map[string]any{"match": "pin [0-9]+"}, &redR); code != 200 || redR.DryRun ||
		len(redR.Remotes) != 1 || redR.Remotes[0] != "origin" {
		t.Errorf("redact: %d %+v", code, redR)
	}
	a.call("auditor", "GET", "/v1/stores/alice/versions/toolu_2", nil, &v)
	if strings.Contains(v.Diff, "8642") || !strings.Contains(v.Diff, "[REDACTED]") {
		t.Errorf("after redact: %+v", v)
	}
	// The model keeps working on the rewritten history.
	if _, res := a.tool("alice-bot", "alice", "toolu_9", `{"command":"view","path":"/memories/secret.md"}`); res.IsError || strings.Contains(res.Content, "8642") {
		t.Errorf("view after redact: %+v", res)
	}
}

// A request that cannot begin because the server is stopping (its stores
// closed) is a 503 with Retry-After on every kind of route, in each
// route's error shape, and changes nothing: not a 500 logged as a store's
// failure.
func TestStoppingServerAnswersRetryLater(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	a.createStores("alice")
	var st msObject
	a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": "A"}, &st)
	if err := a.dir.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/v1/stores/alice/tool_use", `{"type":"tool_use","id":"t","name":"memory","input":{"command":"create","path":"/memories/a.md","file_text":"a"}}`, `"error":"`},
		{"GET", "/v1/stores/alice/memories", "", `"error":"`},
		{"POST", "/v1/memory_stores/" + st.str("id") + "/memories", `{"path":"/a.md","content":"a"}`, `"type":"overloaded_error"`},
	} {
		req, _ := http.NewRequest(c.method, a.base+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer secret-ops")
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), c.want) ||
			!strings.Contains(string(body), "the request ended before it began") {
			t.Errorf("%s %s on a stopping server: %d Retry-After %q %s", c.method, c.path, res.StatusCode, res.Header.Get("Retry-After"), body)
		}
	}
}

// A client that sends its body slowly holds no store meanwhile: a delete
// of the store (which waits for the calls using it) goes ahead. The store
// was acquired before the body was read, so one slow agent of a store
// held its delete, and every listing behind it, for up to the server's
// read timeout (N7 G3).
func TestASlowBodyHoldsNoStore(t *testing.T) {
	t.Parallel()
	a := newStoresAPIWith(t, storesapi.Options{}, true)
	a.call("ops", "POST", "/v1/stores", map[string]any{"name": "s"}, nil)
	if n := a.dir.OpenCount(); n != 0 { // the request below is what opens it
		t.Fatalf("%d stores open after the create", n)
	}
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", a.base+"/v1/stores/s/tool_use", pr)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer secret-ops")
	done := make(chan int, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		res.Body.Close()
		done <- res.StatusCode
	}()
	io.WriteString(pw, `{"type":"tool_use","id":"toolu_slow",`)
	for i := 0; i < 200 && a.dir.OpenCount() == 0; i++ { // the old code opened it here, before the body
		time.Sleep(10 * time.Millisecond)
	}
	deleted := make(chan int, 1)
	go func() { deleted <- a.call("ops", "DELETE", "/v1/stores/s", nil, nil) }()
	select {
	case code := <-deleted:
		if code != http.StatusOK {
			t.Errorf("the delete: %d", code)
		}
	case <-time.After(20 * time.Second):
		t.Error("the delete waited for a request whose body had not arrived")
	}
	io.WriteString(pw, `"name":"memory","input":{"command":"view","path":"/memories"}}`)
	pw.Close()
	<-done
}

// The operator API reads a body as the Memory Stores API does: one JSON
// object and nothing after it. It acted on '{"content":"a"} junk' (a
// file written, a store made, metadata changed: N8 F1), and a body of
// another JSON type was refused in Go's words, naming Go types (N8 F2).
func TestOperatorAPIRefusesWhatFollowsTheBody(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	a.createStores("alice")
	for _, c := range []struct{ method, path, body, want string }{
		{"PUT", "/v1/stores/alice/memory?path=/memories/p.md", `{"content":"a"} junk`, "the body holds more than one JSON value"},
		{"POST", "/v1/stores", `{"name":"junk1"} zz`, "the body holds more than one JSON value"},
		{"PATCH", "/v1/stores/alice", `{"description":"d"} zz`, "the body holds more than one JSON value"},
		{"PUT", "/v1/stores/alice/memory?path=/memories/p.md", `{"content":"a"} }]]`, "the body holds more than one JSON value"},
		{"PUT", "/v1/stores/alice/memory?path=/memories/p.md", `[]`, "the body must be a JSON object"},
	} {
		var e apiError
		if code := a.callBad("ops", c.method, c.path, c.body, &e); code != http.StatusBadRequest || e.Error != c.want {
			t.Errorf("%s %s %s: %d %q, want 400 %q", c.method, c.path, c.body, code, e.Error, c.want)
		}
	}
	dir := filepath.Join(a.dir.Root(), "alice")
	if log := gittest.Git(t, dir, "log", "--format=%s"); strings.Contains(log, "put") || strings.Contains(log, "store update") {
		t.Errorf("alice's history after the refused bodies:\n%s", log)
	}
	var e apiError
	if code := a.callBad("ops", "GET", "/v1/stores/junk1", nil, &e); code != http.StatusNotFound {
		t.Errorf("a store made from a refused body: %d", code)
	}
}
