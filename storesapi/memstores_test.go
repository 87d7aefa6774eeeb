package storesapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/memstore"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
	"github.com/gitmem-dev/gitmem/storesapi"
)

// What the SDKs' tests of storesapi cannot send (cmd/gitmem's
// memstores_sdk_test.go runs the official SDKs): malformed bodies, the
// answers of the checks every route has in Anthropic's shape, headers,
// the memory limit, idempotency keys; every request and response checked
// against docs/openapi.yaml.

type msError struct {
	Type  string `json:"type"`
	Error struct {
		Type            string  `json:"type"`
		Message         string  `json:"message"`
		ConflictingID   *string `json:"conflicting_memory_id"`
		ConflictingPath string  `json:"conflicting_path"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

type msObject map[string]any

func (o msObject) str(k string) string { s, _ := o[k].(string); return s }

// refused checks an error answer: status, type, the request id in the
// body and the header, and x-should-retry.
func (a *storesAPI) refused(what string, code int, e msError, status int, typ, retry string) {
	a.t.Helper()
	switch {
	case code != status || e.Type != "error" || e.Error.Type != typ:
		a.t.Errorf("%s: %d %+v, want %d %s", what, code, e, status, typ)
	case e.RequestID == "" || a.header.Get("request-id") != e.RequestID:
		a.t.Errorf("%s: request id %q in the body, %q in the header", what, e.RequestID, a.header.Get("request-id"))
	case a.header.Get("x-should-retry") != retry:
		a.t.Errorf("%s: x-should-retry %q, want %q", what, a.header.Get("x-should-retry"), retry)
	case e.Error.Message == "":
		a.t.Errorf("%s: no message", what)
	}
}

func TestMemoryStoresMalformedRequests(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	var st msObject
	if code := a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": "Alice"}, &st); code != 200 || !strings.HasPrefix(st.str("id"), "memstore_") {
		t.Fatalf("create: %d %v", code, st)
	}
	if a.header.Get("request-id") == "" {
		t.Error("no request-id on a success")
	}
	id := st.str("id")
	mems := "/v1/memory_stores/" + id + "/memories"
	for _, tc := range []struct{ name, body, msg string }{
		{"not JSON", `{"path":`, "the body is not valid JSON"},
		{"an array", `[{"path":"/a.md","content":"x"}]`, "the body must be a JSON object"},
		{"empty", ``, "the body must be a JSON object"},
		{"two objects", `{"path":"/a.md","content":"x"} {}`, "more than one JSON value"},
		{"a stray brace after it", `{"path":"/a.md","content":"x"} }]`, "more than one JSON value"},
		{"a number for the content", `{"path":"/a.md","content":42}`, "content must be a string, not a JSON number"},
		{"an unknown field", `{"path":"/a.md","content":"x","mode":"append"}`, `unknown field "mode"`},
		{"a null path", `{"path":null,"content":"x"}`, "path is required"},
		{"a precondition on a create", `{"path":"/a.md","content":"x","precondition":{"type":"content_sha256","content_sha256":"` + strings.Repeat("a", 64) + `"}}`, "a create has none"},
	} {
		var e msError
		code := a.callBad("ops", "POST", mems, tc.body, &e)
		a.refused(tc.name, code, e, 400, "invalid_request_error", "false")
		if !strings.Contains(e.Error.Message, tc.msg) {
			t.Errorf("%s: %q, want %q", tc.name, e.Error.Message, tc.msg)
		}
	}
	var page struct{ Data []msObject }
	if a.call("ops", "GET", mems, nil, &page); len(page.Data) != 0 {
		t.Errorf("malformed creates made %v", page.Data)
	}

	// The refusals every route has, in Anthropic's shape.
	var e msError
	a.refused("no token", a.callBad("", "GET", "/v1/memory_stores", nil, &e), e, 401, "authentication_error", "false")
	// An unknown route (not in docs/openapi.yaml: sent as is).
	req, _ := http.NewRequest("GET", a.base+"/v1/memory_stores/"+id+"/nothing", nil)
	req.Header.Set("Authorization", "Bearer secret-ops")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	e = msError{}
	json.NewDecoder(res.Body).Decode(&e)
	res.Body.Close()
	a.header = res.Header
	a.refused("an unknown route", res.StatusCode, e, 404, "not_found_error", "false")
	e = msError{}
	a.refused("out of scope", a.call("alice-bot", "GET", "/v1/memory_stores/"+id, nil, &e), e, 403, "permission_error", "false")

	// The headers the SDKs send, old and new: accepted and ignored.
	var got msObject
	if code := a.call("ops", "GET", "/v1/memory_stores/"+id+"?beta=true", nil, &got, "anthropic-beta", "managed-agents-2026-04-01,agent-memory-2026-07-22",
		"anthropic-version", "2023-06-01", "X-Stainless-Retry-Count", "0"); code != 200 || got.str("id") != id {
		t.Errorf("with the SDKs' headers: %d %v", code, got)
	}
	// X-Api-Key, as SDKs before TypeScript 1.0 and Go v2 send the key.
	req, _ = http.NewRequest("GET", a.base+"/v1/memory_stores/"+id, nil)
	req.Header.Set("X-Api-Key", "secret-ops")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 200 {
		t.Errorf("X-Api-Key: %v %v", res, err)
	}
}

// The memory limit of a store, and creates sent again with an
// Idempotency-Key.
func TestMemoryStoresLimitAndIdempotency(t *testing.T) {
	t.Parallel()
	a := newStoresAPIWith(t, storesapi.Options{MaxMemories: 2}, true)
	var st, again msObject
	a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": "A"}, &st, "Idempotency-Key", "store-1")
	a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": "A"}, &again, "Idempotency-Key", "store-1")
	if st.str("id") == "" || again.str("id") != st.str("id") {
		t.Fatalf("a store create sent again: %v then %v", st, again)
	}
	var list struct{ Data []msObject }
	if a.call("ops", "GET", "/v1/memory_stores", nil, &list); len(list.Data) != 1 {
		t.Errorf("%d stores", len(list.Data))
	}
	// The key with another body, and the key of a store deleted since,
	// are conflicts, as a memory create's key is (they answered the first
	// store, and 404).
	var e msError
	code := a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": "B"}, &e, "Idempotency-Key", "store-1")
	a.refused("the store key with another name", code, e, 409, "conflict_error", "false")
	var gone msObject
	a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": "gone"}, &gone, "Idempotency-Key", "store-2")
	a.call("ops", "DELETE", "/v1/memory_stores/"+gone.str("id"), nil, nil)
	e = msError{}
	code = a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": "gone"}, &e, "Idempotency-Key", "store-2")
	a.refused("the key of a deleted store", code, e, 409, "conflict_error", "false")
	if !strings.Contains(e.Error.Message, "deleted since") {
		t.Errorf("the deleted store's key: %q", e.Error.Message)
	}
	mems := "/v1/memory_stores/" + st.str("id") + "/memories"
	var m1, m1again msObject
	a.call("ops", "POST", mems, map[string]any{"path": "/a.md", "content": "a"}, &m1, "Idempotency-Key", "mem-1")
	code = a.call("ops", "POST", mems, map[string]any{"path": "/a.md", "content": "a"}, &m1again, "Idempotency-Key", "mem-1")
	if code != 200 || m1again.str("id") != m1.str("id") || m1again.str("memory_version_id") != m1.str("memory_version_id") {
		t.Errorf("a memory create sent again: %d %v then %v", code, m1, m1again)
	}
	e = msError{}
	code = a.call("ops", "POST", mems, map[string]any{"path": "/b.md", "content": "b"}, &e, "Idempotency-Key", "mem-1")
	a.refused("the key for another path", code, e, 409, "conflict_error", "false")
	e = msError{}
	code = a.call("ops", "POST", mems, map[string]any{"path": "/b.md", "content": "b"}, &e, "Idempotency-Key", "two words")
	a.refused("a key with a space", code, e, 400, "invalid_request_error", "false")
	a.call("ops", "POST", mems, map[string]any{"path": "/b.md", "content": "b"}, nil)
	e = msError{}
	code = a.call("ops", "POST", mems, map[string]any{"path": "/c.md", "content": "c"}, &e)
	a.refused("a third memory in a store of two", code, e, 400, "invalid_request_error", "false")
	if !strings.Contains(e.Error.Message, "the limit is 2") {
		t.Errorf("limit: %q", e.Error.Message)
	}
	var versions struct{ Data []msObject }
	a.call("ops", "GET", "/v1/memory_stores/"+st.str("id")+"/memory_versions", nil, &versions)
	if len(versions.Data) != 2 {
		t.Errorf("%d versions, want 2 (a.md and b.md once each)", len(versions.Data))
	}
}

// On a server without a token file (loopback) every caller may do
// everything; its changes are the "anonymous" key's.
func TestMemoryStoresWithoutTokens(t *testing.T) {
	t.Parallel()
	a := newStoresAPIWith(t, storesapi.Options{}, false)
	var st, m msObject
	a.call("", "POST", "/v1/memory_stores", map[string]any{"name": "local"}, &st)
	a.call("", "POST", "/v1/memory_stores/"+st.str("id")+"/memories", map[string]any{"path": "/a.md", "content": "a"}, &m)
	var v msObject
	a.call("", "GET", "/v1/memory_stores/"+st.str("id")+"/memory_versions/"+m.str("memory_version_id"), nil, &v)
	if by, _ := v["created_by"].(map[string]any); by["type"] != "api_actor" || by["api_key_id"] != "anonymous" {
		t.Errorf("created_by %v", v["created_by"])
	}
}

// A store made through the Memory Stores API is named by its id in the
// stores API, and shows the name it was given there as display_name (it
// showed none); a store made here has none.
func TestMemoryStoreNameInTheStoresAPI(t *testing.T) {
	t.Parallel()
	a := newStoresAPIWith(t, storesapi.Options{}, false)
	var st msObject
	a.call("", "POST", "/v1/memory_stores", map[string]any{"name": "Customer 4711"}, &st)
	a.call("", "POST", "/v1/stores", map[string]any{"name": "plain"}, nil)
	var one msObject
	a.call("", "GET", "/v1/stores/"+st.str("id"), nil, &one)
	if one["name"] != st.str("id") || one["display_name"] != "Customer 4711" {
		t.Errorf("GET /v1/stores/%s: name %v, display_name %v; want the id and \"Customer 4711\"", st.str("id"), one["name"], one["display_name"])
	}
	var list struct{ Data []msObject }
	a.call("", "GET", "/v1/stores", nil, &list)
	for _, s := range list.Data {
		if want := map[string]any{"plain": nil, st.str("id"): "Customer 4711"}[s.str("name")]; s["display_name"] != want {
			t.Errorf("GET /v1/stores: %s has display_name %v, want %v", s.str("name"), s["display_name"], want)
		}
	}
	if len(list.Data) != 2 {
		t.Errorf("%d stores listed, want 2", len(list.Data))
	}
}

// A body over the server's limit is 413 request_too_large; a busy server
// 503 overloaded_error with Retry-After; both in Anthropic's shape.
func TestMemoryStoresBoundsInAnthropicsShape(t *testing.T) {
	t.Parallel()
	a := newStoresAPIWith(t, storesapi.Options{HTTP: handler.HTTPOptions{MaxBodyBytes: 1 << 10, MaxInflight: 1, QueueWait: -1}}, true)
	var st msObject
	a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": "A"}, &st)
	mems := "/v1/memory_stores/" + st.str("id") + "/memories"
	var e msError
	code := a.call("ops", "POST", mems, map[string]any{"path": "/a.md", "content": strings.Repeat("x", 2000)}, &e)
	a.refused("a body over the limit", code, e, 413, "request_too_large", "false")

	// One request holds the only place (its body comes slowly); the next
	// is turned away at once. A probe sent before the slow request reached
	// the server takes the place itself, and the slow request is the one
	// turned away: it is sent again.
	slow := func() (*io.PipeWriter, chan struct{}) {
		pr, pw := io.Pipe()
		req, _ := http.NewRequest("POST", a.base+mems, pr)
		req.Header.Set("Authorization", "Bearer secret-ops")
		req.Header.Set("Content-Type", "application/json")
		done := make(chan struct{})
		go func() {
			defer close(done)
			if res, err := http.DefaultClient.Do(req); err == nil {
				res.Body.Close()
			}
		}()
		pw.Write([]byte(`{"path":"/slow.md",`))
		return pw, done
	}
	pw, done := slow()
	var busy *http.Response
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r, _ := http.NewRequest("POST", a.base+mems, strings.NewReader(`{"path":"/b.md","content":"b"}`))
		r.Header.Set("Authorization", "Bearer secret-ops")
		r.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode == http.StatusServiceUnavailable {
			busy = res
			break
		}
		res.Body.Close()
		pw.CloseWithError(errors.New("sent again")) // it did not hold the place
		<-done
		pw, done = slow()
	}
	pw.Write([]byte(`"content":"s"}`))
	pw.Close()
	<-done
	if busy == nil {
		t.Fatal("never busy")
	}
	defer busy.Body.Close()
	json.NewDecoder(busy.Body).Decode(&e)
	if e.Error.Type != "overloaded_error" || busy.Header.Get("Retry-After") == "" || busy.Header.Get("request-id") == "" {
		t.Errorf("busy: %+v %v", e, busy.Header)
	}
}

// Every route once, each answer checked against docs/openapi.yaml.
func TestMemoryStoresRoutesMatchTheDocument(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	var st, m, m2, v msObject
	a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": "A", "description": "d", "metadata": map[string]any{"k": "v"}}, &st)
	id := st.str("id")
	base := "/v1/memory_stores/" + id
	a.call("ops", "GET", "/v1/memory_stores?limit=5&include_archived=true&created_at%5Bgte%5D=2026-01-01T00:00:00Z", nil, nil)
	a.call("ops", "GET", base, nil, nil)
	a.call("ops", "POST", base, map[string]any{"name": nil, "metadata": map[string]any{"k": nil}}, nil)
	a.call("ops", "POST", base+"/memories?view=full", map[string]any{"path": "/deep/a/b.md", "content": "secret"}, &m, "Gitmem-Session", "sesn_1")
	a.call("ops", "POST", base+"/memories", map[string]any{"path": "/top.md", "content": ""}, &m2)
	a.call("ops", "GET", base+"/memories?depth=1&view=basic", nil, nil)
	a.call("ops", "GET", base+"/memories?path_prefix=/deep/&limit=1", nil, nil)
	a.call("ops", "GET", base+"/memories/"+m.str("id")+"?view=basic", nil, nil)
	a.call("ops", "POST", base+"/memories/"+m.str("id"), map[string]any{"content": "public", "path": "/deep/c.md",
		"precondition": map[string]any{"type": "content_sha256", "content_sha256": m.str("content_sha256")}}, nil)
	a.call("ops", "GET", base+"/memory_versions?view=full&operation=created&session_id=sesn_1", nil, nil)
	a.call("ops", "POST", base+"/memory_versions/"+m.str("memory_version_id")+"/redact", nil, &v)
	if v["redacted_at"] == nil || v["path"] != nil || v["content"] != nil {
		t.Errorf("redacted %v", v)
	}
	a.call("ops", "GET", base+"/memory_versions/"+m.str("memory_version_id"), nil, nil)
	a.call("ops", "DELETE", base+"/memories/"+m2.str("id")+"?expected_content_sha256="+m2.str("content_sha256"), nil, nil)
	a.call("ops", "GET", base+"/memory_versions?memory_id="+m2.str("id")+"&limit=100", nil, nil)
	a.call("ops", "POST", base+"/archive", nil, nil)
	a.call("ops", "DELETE", base, nil, nil)
}

// A version imported from another Memory Store keeps its actor: a service
// account (listed by the service_account_id filter) or none (null).
func TestMemoryStoresImportedActors(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	var st msObject
	a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": "Imported"}, &st)
	id := st.str("id")
	s, err := a.dir.Acquire(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Use(func(r *gitmem.Repo, _ stores.Meta) error {
		ix := memstore.NewIndex()
		if err := ix.Replay(context.Background(), r, memstore.Version{ID: "memver_1", MemoryID: "mem_1", Operation: memstore.Created,
			Path: "/a.md", Content: []byte("a\n"), By: memstore.Actor{Type: memstore.ServiceAccountActor, ID: "svac_7"}}); err != nil {
			return err
		}
		return ix.Replay(context.Background(), r, memstore.Version{ID: "memver_2", MemoryID: "mem_1", Operation: memstore.Modified,
			Path: "/a.md", Content: []byte("b\n")})
	})
	s.Release()
	if err != nil {
		t.Fatal(err)
	}
	var page struct{ Data []msObject }
	a.call("ops", "GET", "/v1/memory_stores/"+id+"/memory_versions?service_account_id=svac_7", nil, &page)
	if len(page.Data) != 1 || page.Data[0].str("id") != "memver_1" {
		t.Fatalf("by the service account: %v", page.Data)
	}
	if by, _ := page.Data[0]["created_by"].(map[string]any); by["type"] != "service_account_actor" || by["service_account_id"] != "svac_7" || len(by) != 2 {
		t.Errorf("created_by %v", page.Data[0]["created_by"])
	}
	var v msObject
	a.call("ops", "GET", "/v1/memory_stores/"+id+"/memory_versions/memver_2", nil, &v)
	if by, ok := v["created_by"]; !ok || by != nil {
		t.Errorf("an unrecorded actor: created_by %v", v["created_by"])
	}
}

// The three listings take only the cursors they made: a garbage page, or
// a path or store name made to look like one, is 400, not a page that
// looks empty (or starts somewhere else).
func TestMemoryStoresListingsRefuseCursorsTheyDidNotMake(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	var st msObject
	a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": "A"}, &st)
	a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": "B"}, nil)
	mems := "/v1/memory_stores/" + st.str("id") + "/memories"
	for _, p := range []string{"/a.md", "/b.md", "/c.md"} {
		if code := a.call("ops", "POST", mems, map[string]any{"path": p, "content": p}, nil); code != 200 {
			t.Fatalf("create %s: %d", p, code)
		}
	}
	for _, list := range []string{"/v1/memory_stores", mems, "/v1/memory_stores/" + st.str("id") + "/memory_versions"} {
		// Each page of one, by its cursors: every item once.
		seen, page := 0, ""
		for {
			var got struct {
				Data     []msObject
				NextPage *string `json:"next_page"`
			}
			if code := a.call("ops", "GET", list+"?limit=1&page="+page, nil, &got); code != 200 || len(got.Data) != 1 {
				t.Fatalf("%s page %q: %d %v", list, page, code, got.Data)
			}
			seen++
			if got.NextPage == nil {
				break
			}
			page = *got.NextPage
		}
		if want := map[bool]int{true: 2, false: 3}[list == "/v1/memory_stores"]; seen != want {
			t.Errorf("%s: %d items by pages of one, want %d", list, seen, want)
		}
		for _, bad := range []string{"garbage", "L2EubWQ", "YS5tZA", st.str("id")} { // "/a.md", "a.md" in base64; a store id
			var e msError
			code := a.callBad("ops", "GET", list+"?page="+bad, nil, &e)
			a.refused(list+" page "+bad, code, e, 400, "invalid_request_error", "false")
			if e.Error.Message != `page "`+bad+`" is not a cursor of this listing` {
				t.Errorf("%s page %s: %q", list, bad, e.Error.Message)
			}
		}
	}
}

// A cursor is taken only by the listing that made it: its route, its
// store and its filters (page size and view may change). Another store's
// cursor, another listing's, or one made with other filters is 400, not a
// page of another listing that starts somewhere else.
func TestMemoryStoresCursorsBelongToTheirListing(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	ids := a.memoryStores("A", "B", "C")
	storeA, storeB := "/v1/memory_stores/"+ids[0], "/v1/memory_stores/"+ids[1]
	for _, st := range []string{storeA, storeB} {
		for _, p := range []string{"/a.md", "/b.md", "/d/c.md"} {
			if code := a.call("ops", "POST", st+"/memories", map[string]any{"path": p, "content": p}, nil); code != 200 {
				t.Fatalf("create %s: %d", p, code)
			}
		}
	}
	next := func(list string) string {
		t.Helper()
		var got struct {
			NextPage *string `json:"next_page"`
		}
		if code := a.call("ops", "GET", list, nil, &got); code != 200 || got.NextPage == nil {
			t.Fatalf("%s: %d, next page %v", list, code, got.NextPage)
		}
		return *got.NextPage
	}
	mems := next(storeA + "/memories?limit=1")
	vers := next(storeA + "/memory_versions?limit=1")
	stos := next("/v1/memory_stores?limit=1")
	for _, tc := range []struct{ list, page string }{
		{storeB + "/memories", mems},                          // another store's
		{storeA + "/memories?depth=1", mems},                  // other filters
		{storeA + "/memories?path_prefix=/d/", mems},          //
		{storeA + "/memory_versions", mems},                   // another route's
		{storeA + "/memories", stos},                          //
		{storeA + "/memories", vers},                          //
		{storeB + "/memory_versions", vers},                   // another store's
		{storeA + "/memory_versions?operation=created", vers}, // other filters
		{storeA + "/memory_versions?memory_id=x", vers},       //
		{"/v1/memory_stores?include_archived=true", stos},     //
		{"/v1/memory_stores", mems},                           // another route's
	} {
		sep := "?"
		if strings.Contains(tc.list, "?") {
			sep = "&"
		}
		var e msError
		code := a.callBad("ops", "GET", tc.list+sep+"page="+tc.page, nil, &e)
		a.refused(tc.list+" page "+tc.page, code, e, 400, "invalid_request_error", "false")
		if e.Error.Message != `page "`+tc.page+`" is not a cursor of this listing` {
			t.Errorf("%s page %s: %q", tc.list, tc.page, e.Error.Message)
		}
	}
	// Its own listing takes it, with another page size or view.
	for _, list := range []string{storeA + "/memories?limit=2&view=full&page=" + mems, storeA + "/memory_versions?view=full&page=" + vers,
		"/v1/memory_stores?limit=5&page=" + stos} {
		var got struct{ Data []msObject }
		if code := a.call("ops", "GET", list, nil, &got); code != 200 || len(got.Data) != 2 {
			t.Errorf("%s: %d, %d items", list, code, len(got.Data))
		}
	}
}

// memoryStores makes a memory store of each name through the API and
// returns their ids.
func (a *storesAPI) memoryStores(names ...string) []string {
	a.t.Helper()
	var ids []string
	for _, n := range names {
		var st msObject
		if code := a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": n}, &st); code != 200 {
			a.t.Fatalf("create memory store %s: %d", n, code)
		}
		ids = append(ids, st.str("id"))
	}
	return ids
}
