package transfer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/memstore"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
	"github.com/gitmem-dev/gitmem/storesapi"
	"github.com/gitmem-dev/gitmem/transfer"
)

var ctx = context.Background()

// server is a gitmem Memory Stores API (package storesapi over a folder
// of stores, the server gitmem serve --stores runs) on loopback, with a
// clock the test moves, behind a proxy that can fail requests.
type server struct {
	t     *testing.T
	root  string
	dir   *stores.Dir
	url   string // the proxy's
	clock atomic.Int64
	// fault, when set, answers a request instead of the server (n counts
	// the requests the proxy got, from 1); ok false lets it through.
	mu    sync.Mutex
	fault func(r *http.Request, n int) (status int, body string, ok bool)
	// filter, when set, rewrites a response's body.
	filter func(r *http.Request, body []byte) []byte
	n      int
}

var tokens = []policy.Token{
	{Name: "ops", Stores: []string{"*"}, Access: policy.ReadWrite, Role: policy.Operator},
	{Name: "agent", Stores: []string{"*"}, Access: policy.ReadWrite, Role: policy.Agent},
}

func newServer(t *testing.T) *server {
	t.Helper()
	s := &server{t: t, root: gittest.TempDir(t)}
	s.clock.Store(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC).Unix())
	now := func() time.Time { return time.Unix(s.clock.Load(), 0).UTC() }
	d, err := stores.Open(s.root, stores.Options{Repo: gitmem.Options{Now: now, Logf: t.Logf, Operator: gitmem.Signature{Name: "Olive Operator", Email: "olive@example.com"}}, IdleClose: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s.dir = d
	file := filepath.Join(t.TempDir(), "tokens.json")
	f := policy.TokenFile{}
	for _, tok := range tokens {
		tok.SHA256 = storesapi.HashToken("secret-" + tok.Name)
		f.Tokens = append(f.Tokens, tok)
	}
	data, _ := json.Marshal(f)
	os.WriteFile(file, data, 0o600)
	toks, err := storesapi.LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(storesapi.New(d, storesapi.Options{Limits: policy.DefaultLimits, Tokens: toks, Now: now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(api.Close)
	target, _ := url.Parse(api.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(res *http.Response) error {
		s.mu.Lock()
		filter := s.filter
		s.mu.Unlock()
		if filter == nil || res.StatusCode != 200 {
			return nil
		}
		body, _ := io.ReadAll(res.Body)
		body = filter(res.Request, body)
		res.Body = io.NopCloser(bytes.NewReader(body))
		res.ContentLength = int64(len(body))
		res.Header.Del("Content-Length")
		return nil
	}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.n++
		n, fault := s.n, s.fault
		s.mu.Unlock()
		if fault != nil {
			if status, body, ok := fault(r, n); ok {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After-Ms", "1")
				w.WriteHeader(status)
				io.WriteString(w, body)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	s.url = proxy.URL
	return s
}

func (s *server) setFault(f func(r *http.Request, n int) (int, string, bool)) {
	s.mu.Lock()
	s.fault, s.n = f, 0
	s.mu.Unlock()
}

func (s *server) tick() { s.clock.Add(1) }

// expire leaves the versions ids out of the version listings, as a
// service that no longer keeps them.
func (s *server) expire(ids map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.filter = func(r *http.Request, body []byte) []byte {
		if !strings.HasSuffix(r.URL.Path, "/memory_versions") {
			return body
		}
		var page struct {
			Data     []json.RawMessage `json:"data"`
			NextPage *string           `json:"next_page"`
		}
		json.Unmarshal(body, &page)
		kept := []json.RawMessage{}
		for _, d := range page.Data {
			var v struct{ ID string }
			json.Unmarshal(d, &v)
			if !ids[v.ID] {
				kept = append(kept, d)
			}
		}
		page.Data = kept
		out, _ := json.Marshal(page)
		return out
	}
}

func (s *server) client(token string, opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{option.WithBaseURL(s.url), option.WithAPIKey("secret-" + token), option.WithMaxRetries(0)}, opts...)...)
}

func (s *server) remote() transfer.Remote {
	return transfer.Remote{BaseURL: s.url, APIKey: "secret-ops", MaxRetries: 2}
}

// tool makes a memory tool call on a store, as an agent with a session.
func (s *server) tool(store, session, input string) {
	s.t.Helper()
	body := `{"type":"tool_use","id":"toolu_` + session + `","name":"memory","input":` + input + `}`
	req, _ := http.NewRequest("POST", s.url+"/v1/stores/"+store+"/tool_use", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer secret-agent")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Gitmem-Session", session)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || strings.Contains(string(out), `"is_error":true`) {
		s.t.Fatalf("tool call %s: %d %s", input, res.StatusCode, out)
	}
}

// must is v, or a panic (failing the test) on err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// fill makes a store with a history of every kind: creates (more than a
// page of versions), updates by another token and with a session, a
// rename through the API and a folder's through the memory tool (two
// versions in one commit), a conditional delete, a redacted version, a
// change of the store's metadata.
func fill(t *testing.T, s *server) string {
	t.Helper()
	ops, agent := s.client("ops"), s.client("agent", option.WithHeader("Gitmem-Session", "sesn_42"))
	st := must(ops.Beta.MemoryStores.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "Alice's memory",
		Description: param.NewOpt("What Alice told the assistant."), Metadata: map[string]string{"user": "alice"}}))
	mem := func(c anthropic.Client, path, content string) *anthropic.BetaManagedAgentsMemory {
		s.tick()
		return must(c.Beta.MemoryStores.Memories.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: path, Content: param.NewOpt(content)}))
	}
	update := func(c anthropic.Client, id string, p anthropic.BetaMemoryStoreMemoryUpdateParams) *anthropic.BetaManagedAgentsMemory {
		s.tick()
		p.MemoryStoreID = st.ID
		return must(c.Beta.MemoryStores.Memories.Update(ctx, id, p))
	}
	todo := mem(ops, "/notes/todo.md", "buy milk\n")
	prefs := mem(agent, "/prefs.md", "green tea\n")
	secret := mem(ops, "/secret.md", "pin 1234\n")
	for i := range 12 {
		mem(ops, "/bulk/m"+string(rune('a'+i))+".md", strings.Repeat("x", i)+"\n")
	}
	update(agent, todo.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{Content: param.NewOpt("buy oat milk\n")})
	update(ops, prefs.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{Path: param.NewOpt("/profile/prefs.md")})
	update(ops, secret.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{Content: param.NewOpt("nothing to see\n")})
	s.tick()
	s.tool(st.ID, "sesn_7", `{"command":"create","path":"/memories/tool/a.md","file_text":"a\n"}`)
	s.tick()
	s.tool(st.ID, "sesn_8", `{"command":"create","path":"/memories/tool/b.md","file_text":"b\n"}`)
	s.tick()
	s.tool(st.ID, "sesn_9", `{"command":"rename","old_path":"/memories/tool","new_path":"/memories/tooling"}`)
	gone := mem(ops, "/gone.md", "soon gone\n")
	s.tick()
	if _, err := ops.Beta.MemoryStores.Memories.Delete(ctx, gone.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: st.ID,
		ExpectedContentSha256: param.NewOpt(gone.ContentSha256)}); err != nil {
		t.Fatal(err)
	}
	s.tick()
	if _, err := ops.Beta.MemoryStores.MemoryVersions.Redact(ctx, secret.MemoryVersionID, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: st.ID}); err != nil {
		t.Fatal(err)
	}
	s.tick()
	must(ops.Beta.MemoryStores.Update(ctx, st.ID, anthropic.BetaMemoryStoreUpdateParams{Metadata: map[string]string{"plan": "pro"}}))
	s.tick()
	return st.ID
}

// raw lists what a store shows through the API, as the JSON the SDK
// received: the store, then every version (newest first), then every
// memory with its content.
func raw(t *testing.T, c anthropic.Client, id string) (store string, versions, memories []string) {
	t.Helper()
	st := must(c.Beta.MemoryStores.Get(ctx, id, anthropic.BetaMemoryStoreGetParams{}))
	vp := c.Beta.MemoryStores.MemoryVersions.ListAutoPaging(ctx, id, anthropic.BetaMemoryStoreMemoryVersionListParams{View: anthropic.BetaManagedAgentsMemoryViewFull})
	for vp.Next() {
		versions = append(versions, vp.Current().RawJSON())
	}
	mp := c.Beta.MemoryStores.Memories.ListAutoPaging(ctx, id, anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewFull})
	for mp.Next() {
		memories = append(memories, mp.Current().RawJSON())
	}
	if err := errors.Join(vp.Err(), mp.Err()); err != nil {
		t.Fatal(err)
	}
	return st.RawJSON(), versions, memories
}

func sameLists(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d here, %d there", what, len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Errorf("%s %d:\n here %s\nthere %s", what, i, got[i], want[i])
		}
	}
}

// A store moves from one gitmem server to another: every version a
// commit, the two APIs answering the same JSON for the store, every
// version and every memory; the redacted content in no object of the
// copy. And back: export copies the current memories into a new store,
// and again into it changes nothing.
func TestImportThenExport(t *testing.T) {
	t.Parallel()
	a := newServer(t)
	id := fill(t, a)
	a.clock.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Unix()) // any commit of now would show

	b := newServer(t)
	var auth sync.Map // the credentials headers the far side got
	a.setFault(func(r *http.Request, n int) (int, string, bool) {
		auth.Store(r.Header.Get("Authorization")+"|"+r.Header.Get("X-Api-Key"), true)
		return 0, "", false
	})
	var calls []int
	res, err := transfer.Import(ctx, a.remote(), b.root, id, transfer.ImportOptions{Name: id, Repo: gitmem.Options{Logf: t.Logf},
		Progress: func(done, total int) { calls = append(calls, done) }})
	if err != nil {
		t.Fatal(err)
	}
	a.setFault(nil)
	var got []any
	auth.Range(func(k, _ any) bool { got = append(got, k); return true })
	if len(got) != 1 || got[0] != "Bearer secret-ops|" {
		t.Errorf("the import sent the credentials %v, want only Authorization: Bearer secret-ops", got)
	}
	wantStore, wantVersions, wantMemories := raw(t, a.client("ops"), id)
	gotStore, gotVersions, gotMemories := raw(t, b.client("ops"), id)
	if gotStore != wantStore {
		t.Errorf("store:\n here %s\nthere %s", gotStore, wantStore)
	}
	sameLists(t, "version", gotVersions, wantVersions)
	sameLists(t, "memory", gotMemories, wantMemories)
	if res.Versions != len(wantVersions) || res.Memories != len(wantMemories) || res.Redacted != 1 || res.Redactions != 1 ||
		res.Truncated+res.Unversioned+res.Skipped != 0 || len(calls) != res.Versions+res.Redactions+1 {
		t.Errorf("result %+v, progress %v", res, calls)
	}
	t.Logf("%d versions, %d memories", len(wantVersions), len(wantMemories))
	if len(wantVersions) <= 20 {
		t.Errorf("%d versions: not more than a page", len(wantVersions))
	}
	repo := filepath.Join(b.root, id)
	n := 0
	for _, l := range strings.Split(gittest.Git(t, repo, "log", "--format=%s"), "\n") {
		if l != "" {
			n++
		}
	}
	// gitmem init's, the store's create and update, a commit a version, the redaction.
	if want := 1 + 2 + len(wantVersions) + 1; n != want {
		t.Errorf("%d commits, want %d", n, want)
	}
	if objs := gittest.Git(t, repo, "cat-file", "--batch-all-objects", "--batch"); strings.Contains(objs, "pin 1234") {
		t.Error("the redacted content is in a git object of the copy")
	}
	if strings.Contains(gittest.Git(t, repo, "log", "--format=%ad", "--date=unix"), "1893456000") {
		t.Error("a commit has the import's time, not its version's")
	}
	if entries, _ := os.ReadDir(b.root); len(entries) != 1 {
		t.Errorf("the stores folder holds %v", entries)
	}
	// Again: nothing new there, no commit here.
	head := gittest.Git(t, repo, "rev-parse", "HEAD")
	if again, err := transfer.Import(ctx, a.remote(), b.root, id, transfer.ImportOptions{Name: id}); err != nil || !again.Again ||
		again.Already != len(wantVersions) || again.Versions+again.Redactions != 0 || again.Memories != len(wantMemories) {
		t.Errorf("import again: %+v %v", again, err)
	}
	if now := gittest.Git(t, repo, "rev-parse", "HEAD"); now != head {
		t.Errorf("import again made commits: HEAD %s, was %s", now, head)
	}

	// Export: a new store there with the current memories.
	out, err := transfer.Export(ctx, a.remote(), b.dir, id, transfer.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !out.New || out.Created != len(wantMemories) || out.Memories != len(wantMemories) || out.Updated+out.Unchanged+out.Others != 0 {
		t.Errorf("export: %+v", out)
	}
	ca := a.client("ops")
	exported := func(store string) map[string]string {
		got := map[string]string{}
		p := ca.Beta.MemoryStores.Memories.ListAutoPaging(ctx, store, anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewFull})
		for p.Next() {
			got[p.Current().Path] = p.Current().Content
		}
		return got
	}
	copied := exported(out.StoreID)
	for _, m := range gotMemories {
		var mem struct{ Path, Content string }
		json.Unmarshal([]byte(m), &mem)
		if copied[mem.Path] != mem.Content {
			t.Errorf("exported %s: %q, want %q", mem.Path, copied[mem.Path], mem.Content)
		}
	}
	st := must(ca.Beta.MemoryStores.Get(ctx, out.StoreID, anthropic.BetaMemoryStoreGetParams{}))
	if st.Name != "Alice's memory" || st.Description != "What Alice told the assistant." || len(st.Metadata) != 2 {
		t.Errorf("the exported store: %s", st.RawJSON())
	}
	// And the export imported: a version a memory, each as exported.
	back, err := transfer.Import(ctx, a.remote(), b.root, out.StoreID, transfer.ImportOptions{Name: "back"})
	if err != nil || back.Memories != len(wantMemories) || back.Versions != len(wantMemories) {
		t.Errorf("import of the export: %+v %v", back, err)
	}
	_, _, backMemories := raw(t, b.client("ops"), "back")
	for _, m := range backMemories {
		var mem struct{ Path, Content string }
		json.Unmarshal([]byte(m), &mem)
		if copied[mem.Path] != mem.Content {
			t.Errorf("imported back %s: %q, want %q", mem.Path, mem.Content, copied[mem.Path])
		}
	}
	if len(backMemories) != len(copied) {
		t.Errorf("imported back %d memories, exported %d", len(backMemories), len(copied))
	}
	// Again into it: nothing to do, no version made. Into the first
	// store, after a change here: one update, the rest as it is.
	_, before, _ := raw(t, a.client("ops"), out.StoreID)
	again, err := transfer.Export(ctx, a.remote(), b.dir, id, transfer.ExportOptions{To: out.StoreID})
	if _, after, _ := raw(t, a.client("ops"), out.StoreID); err != nil || again.Unchanged != len(wantMemories) || again.Created+again.Updated+again.Others != 0 || len(after) != len(before) {
		t.Errorf("export again: %+v %v; %d versions, were %d", again, err, len(after), len(before))
	}
	var todo struct{ ID, Path string }
	for _, m := range wantMemories {
		if json.Unmarshal([]byte(m), &todo); todo.Path == "/notes/todo.md" {
			break
		}
	}
	s, _ := b.dir.Acquire(context.Background(), id)
	s.Use(func(r *gitmem.Repo, _ stores.Meta) error {
		rel, _ := memstore.ParsePath("/notes/extra.md")
		_, err := memstore.NewIndex().Create(ctx, r, memstore.CreateRequest{Path: rel, Content: []byte("new here\n"), By: memstore.Caller{APIKey: "t"}, Limits: policy.DefaultLimits})
		return err
	})
	s.Release()
	must(ca.Beta.MemoryStores.Memories.New(ctx, id, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/only-there.md", Content: param.NewOpt("x")}))
	must(ca.Beta.MemoryStores.Memories.Update(ctx, todo.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: id, Content: param.NewOpt("changed there\n")}))
	into, err := transfer.Export(ctx, a.remote(), b.dir, id, transfer.ExportOptions{To: id})
	if err != nil || into.New || into.Created != 1 || into.Updated != 1 || into.Unchanged != len(wantMemories)-1 || into.Others != 1 {
		t.Errorf("export into the first store: %+v %v", into, err)
	}
}

// A far side that fails: a request answered 503 now and then is retried
// (the SDK's rules, Retry-After-Ms); one that keeps failing half-way
// through the listing fails the import, which then leaves nothing; run
// again, it imports the store.
func TestImportFailsCleanly(t *testing.T) {
	t.Parallel()
	a := newServer(t)
	id := fill(t, a)
	b := newServer(t)
	var flaky atomic.Int64
	a.setFault(func(r *http.Request, n int) (int, string, bool) {
		if n%3 == 0 && r.Header.Get("X-Stainless-Retry-Count") == "0" {
			flaky.Add(1)
			return 503, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`, true
		}
		return 0, "", false
	})
	if _, err := transfer.Import(ctx, a.remote(), b.root, id, transfer.ImportOptions{Name: "flaky"}); err != nil || flaky.Load() == 0 {
		t.Fatalf("with retries: %v (%d answered 503)", err, flaky.Load())
	}
	a.setFault(func(r *http.Request, n int) (int, string, bool) {
		if strings.HasSuffix(r.URL.Path, "/memory_versions") && r.URL.Query().Get("page") != "" {
			return 500, `{"type":"error","error":{"type":"api_error","message":"the disk is on fire"}}`, true
		}
		return 0, "", false
	})
	_, err := transfer.Import(ctx, a.remote(), b.root, id, transfer.ImportOptions{Name: "again"})
	var re *transfer.RemoteError
	if !errors.As(err, &re) || re.Status != 500 || re.Type != "api_error" || re.Message != "the disk is on fire" || re.Method != "GET" ||
		!strings.HasSuffix(re.URL, "/v1/memory_stores/"+id+"/memory_versions") {
		t.Fatalf("a page that fails: %#v", err)
	}
	if entries, _ := os.ReadDir(b.root); len(entries) != 1 || entries[0].Name() != "flaky" {
		t.Errorf("after a failed import the stores folder holds %v", entries)
	}
	a.setFault(nil)
	if _, err := transfer.Import(ctx, a.remote(), b.root, id, transfer.ImportOptions{Name: "again"}); err != nil {
		t.Fatal(err)
	}
}

// An export that fails half-way keeps what it copied and says so; run
// again into the store it made, it copies the rest: one version of each
// memory there, none twice.
func TestExportResumes(t *testing.T) {
	t.Parallel()
	a := newServer(t)
	id := fill(t, a)
	if _, err := transfer.Import(ctx, a.remote(), a.root, id, transfer.ImportOptions{Name: "copy"}); err != nil {
		t.Fatal(err)
	}
	var creates atomic.Int64
	a.setFault(func(r *http.Request, n int) (int, string, bool) {
		if r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/memories") && creates.Add(1) > 5 {
			return 500, `{"type":"error","error":{"type":"api_error","message":"down"}}`, true
		}
		return 0, "", false
	})
	res, err := transfer.Export(ctx, a.remote(), a.dir, "copy", transfer.ExportOptions{Parallel: 1})
	var re *transfer.RemoteError
	if !errors.As(err, &re) || re.Status != 500 || !res.New || res.StoreID == "" || res.Created != 5 || res.Memories != 17 {
		t.Fatalf("export that fails: %+v %v", res, err)
	}
	a.setFault(nil)
	again, err := transfer.Export(ctx, a.remote(), a.dir, "copy", transfer.ExportOptions{To: res.StoreID})
	if err != nil || again.New || again.Created != 12 || again.Unchanged != 5 || again.Updated+again.Others != 0 {
		t.Fatalf("run again: %+v %v", again, err)
	}
	_, versions, memories := raw(t, a.client("ops"), res.StoreID)
	if len(versions) != 17 || len(memories) != 17 {
		t.Errorf("%d versions of %d memories there", len(versions), len(memories))
	}
}

// An export that fails with requests in flight counts what they made.
// The first failure cancelled the requests still in flight: the server
// made their memories, and the export said it had made none ("0 created,
// ... of 8 memories" while the store there held 3: N6 F8). The requests
// in flight now finish; only no new one starts.
func TestExportCountsWhatWasInFlight(t *testing.T) {
	t.Parallel()
	a := newServer(t)
	id := fill(t, a)
	if _, err := transfer.Import(ctx, a.remote(), a.root, id, transfer.ImportOptions{Name: "copy"}); err != nil {
		t.Fatal(err)
	}
	isCreate := func(r *http.Request) bool { return r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/memories") }
	var creates, made atomic.Int64
	allMade, failed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a.setFault(func(r *http.Request, n int) (int, string, bool) {
		if isCreate(r) && creates.Add(1) > 3 { // once the first three are made there
			<-allMade
			once.Do(func() { close(failed) })
			return 500, `{"type":"error","error":{"type":"api_error","message":"down"}}`, true
		}
		return 0, "", false
	})
	a.mu.Lock()
	a.filter = func(r *http.Request, body []byte) []byte {
		if isCreate(r) { // made there: answered once a create failed and the client had time to give up
			if made.Add(1) == 3 {
				close(allMade)
			}
			<-failed
			select {
			case <-r.Context().Done():
			case <-time.After(time.Second):
			}
		}
		return body
	}
	a.mu.Unlock()
	res, err := transfer.Export(ctx, a.remote(), a.dir, "copy", transfer.ExportOptions{Parallel: 8})
	var re *transfer.RemoteError
	if !errors.As(err, &re) || re.Status != 500 || res.StoreID == "" {
		t.Fatalf("export that fails: %+v %v", res, err)
	}
	_, _, memories := raw(t, a.client("ops"), res.StoreID)
	if res.Created != len(memories) || res.Created != 3 {
		t.Fatalf("the export says it created %d memories; the store there holds %d", res.Created, len(memories))
	}
}

// A memory the API would refuse by its path (the memory tool takes a name
// not in NFC, or with a format character such as U+202E; the API does
// not) stops the export before anything is sent, naming it. Before, the
// export stopped half-way at it with a 400, and every run again at the
// same memory: the rest never went.
func TestExportRefusesAPathTheAPIRefusesFirst(t *testing.T) {
	t.Parallel()
	a := newServer(t)
	if _, err := a.dir.Create("alice", stores.Meta{}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	a.tool("alice", "s1", `{"command":"create","path":"/memories/a.md","file_text":"a\n"}`)
	a.tool("alice", "s2", `{"command":"create","path":"/memories/cafe\u0301.md","file_text":"b\n"}`)
	var requests atomic.Int64
	a.setFault(func(r *http.Request, n int) (int, string, bool) {
		requests.Add(1)
		return 0, "", false
	})
	res, err := transfer.Export(ctx, a.remote(), a.dir, "alice", transfer.ExportOptions{})
	var ee *transfer.ExportError
	if !errors.As(err, &ee) || ee.Path != "/cafe\u0301.md" || !strings.Contains(err.Error(), "is not in Unicode Normalization Form C") {
		t.Fatalf("export of a path the API refuses: %+v, %v", res, err)
	}
	if n := requests.Load(); n != 0 || res.StoreID != "" {
		t.Fatalf("%d requests sent, store %q made, before the refusal", n, res.StoreID)
	}
}

// A service that no longer keeps a memory's first versions (the hosted
// one keeps them 30 days), as a proxy that leaves versions out of the
// listing: the first kept version becomes the memory's creation, a memory
// with no version left one version of its current content, a deletion of
// a memory with nothing before it is left out; the rest is as there.
func TestImportWithoutOldVersions(t *testing.T) {
	t.Parallel()
	a := newServer(t)
	id := fill(t, a)
	ops := a.client("ops")
	_, all, memories := raw(t, ops, id)
	type ver struct {
		ID, MemoryID, Operation, Path string
	}
	var vs []ver
	for _, v := range all {
		var x ver
		json.Unmarshal([]byte(v), &x)
		vs = append(vs, x)
	}
	expired := map[string]bool{}
	for _, v := range vs {
		switch {
		case v.Path == "/notes/todo.md" && v.Operation == "created", // then modified: truncated
			v.Path == "/bulk/ma.md",                          // its only version: unversioned
			v.Path == "/gone.md" && v.Operation == "created": // then deleted: skipped
			expired[v.ID] = true
		}
	}
	a.expire(expired)
	b := newServer(t)
	res, err := transfer.Import(ctx, a.remote(), b.root, id, transfer.ImportOptions{Name: id})
	if err != nil {
		t.Fatal(err)
	}
	// Three versions no longer listed, the deletion after one left out,
	// one made for the memory that has none.
	if res.Truncated != 1 || res.Unversioned != 1 || res.Skipped != 1 || res.Versions != len(vs)-3-1+1 {
		t.Errorf("result %+v", res)
	}
	_, gotVersions, gotMemories := raw(t, b.client("ops"), id)
	if len(gotVersions) != len(vs)-3-1+1 {
		t.Errorf("%d versions here", len(gotVersions))
	}
	sameLists(t, "memory", dropCreated(gotMemories), dropCreated(memories))
}

// dropCreated is memories without their created_at, which a memory whose
// creation is no longer listed cannot have.
func dropCreated(ms []string) []string {
	var out []string
	for _, m := range ms {
		var x map[string]any
		json.Unmarshal([]byte(m), &x)
		delete(x, "created_at")
		data, _ := json.Marshal(x)
		out = append(out, string(data))
	}
	return out
}

// What the far side says when the URL, the key or the store is wrong,
// as a RemoteError: its status and the API's error, or why there was no
// answer.
func TestRemoteErrors(t *testing.T) {
	t.Parallel()
	a := newServer(t)
	id := fill(t, a)
	root := gittest.TempDir(t)
	notAPI := httptest.NewServer(http.NotFoundHandler())
	defer notAPI.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for _, tc := range []struct {
		name   string
		remote transfer.Remote
		id     string
		status int
		typ    string
	}{
		{"a wrong key", transfer.Remote{BaseURL: a.url, APIKey: "wrong"}, id, 401, "authentication_error"},
		{"no such store", a.remote(), "memstore_nope", 404, "not_found_error"},
		{"no Memory Stores API", transfer.Remote{BaseURL: notAPI.URL, APIKey: "k"}, id, 404, ""},
		{"nothing there", transfer.Remote{BaseURL: down.URL, APIKey: "k"}, id, 0, ""},
	} {
		_, err := transfer.Import(ctx, tc.remote, root, tc.id, transfer.ImportOptions{Name: "x"})
		var re *transfer.RemoteError
		if !errors.As(err, &re) || re.Status != tc.status || re.Type != tc.typ || (re.Status == 0) != (re.Err != nil) || re.URL == "" {
			t.Errorf("%s: %#v", tc.name, err)
		}
		_, err = transfer.Export(ctx, tc.remote, a.dir, id, transfer.ExportOptions{To: tc.id})
		if !errors.As(err, &re) || re.Status != tc.status {
			t.Errorf("%s, export: %#v", tc.name, err)
		}
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("the stores folder holds %v", entries)
	}
}

// A store imported before gets, from a second import, what is new there
// and nothing else: the versions made since (a redaction and a change of
// the store's metadata included), each a commit, after those it has. Up
// to date, it gets no commit. A store changed here since, one made
// otherwise, or one whose imported version was redacted there since, is
// refused and left as it was.
func TestImportAgain(t *testing.T) {
	t.Parallel()
	a := newServer(t)
	id := fill(t, a)
	b := newServer(t)
	if _, err := transfer.Import(ctx, a.remote(), b.root, id, transfer.ImportOptions{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(b.root, "alice")
	commits := func() int { return len(strings.Fields(gittest.Git(t, repo, "rev-list", "HEAD"))) }
	before := commits()

	// New there: a memory, a change, a deletion, a redacted version, the
	// store's description.
	ops := a.client("ops")
	_, _, mems := raw(t, ops, id)
	memID := map[string]string{}
	for _, m := range mems {
		var x struct{ ID, Path string }
		json.Unmarshal([]byte(m), &x)
		memID[x.Path] = x.ID
	}
	a.tick()
	fresh := must(ops.Beta.MemoryStores.Memories.New(ctx, id, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/new.md", Content: param.NewOpt("new\n")}))
	a.tick()
	must(ops.Beta.MemoryStores.Memories.Update(ctx, memID["/notes/todo.md"], anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: id,
		Content: param.NewOpt("buy soy milk\n")}))
	a.tick()
	must(ops.Beta.MemoryStores.Memories.Delete(ctx, memID["/bulk/mb.md"], anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: id}))
	a.tick()
	must(ops.Beta.MemoryStores.Memories.Update(ctx, fresh.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: id,
		Content: param.NewOpt("newer\n")}))
	a.tick()
	must(ops.Beta.MemoryStores.MemoryVersions.Redact(ctx, fresh.MemoryVersionID, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: id}))
	a.tick()
	must(ops.Beta.MemoryStores.Update(ctx, id, anthropic.BetaMemoryStoreUpdateParams{Description: param.NewOpt("Alice, since May.")}))
	a.tick()

	res, err := transfer.Import(ctx, a.remote(), b.root, id, transfer.ImportOptions{Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Again || res.Versions != 4 || res.Redacted != 1 || res.Redactions != 1 {
		t.Errorf("import again: %+v", res)
	}
	// Four versions, the redaction's record, the store's update.
	if n := commits(); n != before+4+1+1 {
		t.Errorf("%d commits, were %d", n, before)
	}
	wantStore, wantVersions, wantMemories := raw(t, ops, id)
	gotStore, gotVersions, gotMemories := raw(t, b.client("ops"), "alice")
	if strings.Replace(gotStore, `"id":"alice"`, `"id":"`+id+`"`, 1) != wantStore {
		t.Errorf("store:\n here %s\nthere %s", gotStore, wantStore)
	}
	fix := func(l []string) []string {
		for i := range l {
			l[i] = strings.ReplaceAll(l[i], `"memory_store_id":"alice"`, `"memory_store_id":"`+id+`"`)
		}
		return l
	}
	sameLists(t, "version", fix(gotVersions), wantVersions)
	sameLists(t, "memory", fix(gotMemories), wantMemories)
	if objs := gittest.Git(t, repo, "cat-file", "--batch-all-objects", "--batch"); strings.Contains(objs, "new\n") && !strings.Contains(objs, "newer") {
		t.Error("the redacted content is in a git object")
	}

	head := gittest.Git(t, repo, "rev-parse", "HEAD")
	unchanged := func(what string) {
		t.Helper()
		if now := gittest.Git(t, repo, "rev-parse", "HEAD"); now != head {
			t.Errorf("%s: HEAD %s, was %s", what, now, head)
		}
	}
	if res, err := transfer.Import(ctx, a.remote(), b.root, id, transfer.ImportOptions{Name: "alice"}); err != nil || res.Versions+res.Redactions != 0 {
		t.Errorf("up to date: %+v %v", res, err)
	}
	unchanged("up to date")

	// Redacted there after its import: refused.
	a.tick()
	old := versionOf(t, ops, id, "/bulk/mc.md")
	must(ops.Beta.MemoryStores.Memories.Update(ctx, memID["/bulk/mc.md"], anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: id,
		Content: param.NewOpt("changed\n")}))
	a.tick()
	must(ops.Beta.MemoryStores.MemoryVersions.Redact(ctx, old, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: id}))
	var ie *transfer.ImportError
	if _, err := transfer.Import(ctx, a.remote(), b.root, id, transfer.ImportOptions{Name: "alice"}); !errors.As(err, &ie) ||
		!strings.Contains(ie.Msg, "redacted there after it was imported") {
		t.Errorf("redacted there since: %v", err)
	}
	unchanged("redacted there since")

	// Changed here since: refused.
	b.tool("alice", "sesn_1", `{"command":"create","path":"/memories/local.md","file_text":"here\n"}`)
	st, _ := b.dir.Acquire(context.Background(), "alice")
	st.Use(func(r *gitmem.Repo, _ stores.Meta) error { return r.Flush(context.Background()) }) // git's files have the commit
	st.Release()
	head = gittest.Git(t, repo, "rev-parse", "HEAD")
	if _, err := transfer.Import(ctx, a.remote(), b.root, id, transfer.ImportOptions{Name: "alice"}); !errors.Is(err, transfer.ErrNotImport) {
		t.Errorf("changed here: %v", err)
	}
	unchanged("changed here")

	// Another store of that name: refused.
	b.tick()
	if _, err := b.dir.Create("other", stores.Meta{}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	if _, err := transfer.Import(ctx, a.remote(), b.root, id, transfer.ImportOptions{Name: "other"}); !errors.Is(err, transfer.ErrNotImport) {
		t.Errorf("another store: %v", err)
	}
	if n := len(strings.Fields(gittest.Git(t, filepath.Join(b.root, "other"), "rev-list", "HEAD"))); n != 2 {
		t.Errorf("the other store has %d commits", n)
	}
}

// versionOf is the current version of the memory at path.
func versionOf(t *testing.T, c anthropic.Client, store, path string) string {
	t.Helper()
	p := c.Beta.MemoryStores.Memories.ListAutoPaging(ctx, store, anthropic.BetaMemoryStoreMemoryListParams{})
	for p.Next() {
		if p.Current().Path == path {
			return p.Current().MemoryVersionID
		}
	}
	t.Fatalf("no memory at %s", path)
	return ""
}

// A store renamed and archived there in the same second after its import
// (its updated_at is its archived_at): a second import renames and
// archives the store here, in that order.
func TestImportAgainArchived(t *testing.T) {
	t.Parallel()
	a := newServer(t)
	ops := a.client("ops")
	st := must(ops.Beta.MemoryStores.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "Bob"}))
	a.tick()
	must(ops.Beta.MemoryStores.Memories.New(ctx, st.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/a.md", Content: param.NewOpt("a\n")}))
	b := newServer(t)
	if _, err := transfer.Import(ctx, a.remote(), b.root, st.ID, transfer.ImportOptions{Name: "bob"}); err != nil {
		t.Fatal(err)
	}
	a.tick()
	must(ops.Beta.MemoryStores.Update(ctx, st.ID, anthropic.BetaMemoryStoreUpdateParams{Name: param.NewOpt("Robert")}))
	must(ops.Beta.MemoryStores.Archive(ctx, st.ID, anthropic.BetaMemoryStoreArchiveParams{}))
	res, err := transfer.Import(ctx, a.remote(), b.root, st.ID, transfer.ImportOptions{Name: "bob"})
	if err != nil || !res.Changed || res.Versions != 0 || res.Store.DisplayName != "Robert" || !res.Store.IsArchived() {
		t.Fatalf("import again: %+v %v", res, err)
	}
	want, _, _ := raw(t, ops, st.ID)
	got, _, _ := raw(t, b.client("ops"), "bob")
	if strings.Replace(got, `"id":"bob"`, `"id":"`+st.ID+`"`, 1) != want {
		t.Errorf("store:\n here %s\nthere %s", got, want)
	}
}

// Imported every day from a service that keeps versions for a while: the
// versions imported before are no longer listed there, and a second
// import adds the new ones after them.
func TestImportAgainAfterExpiry(t *testing.T) {
	t.Parallel()
	a := newServer(t)
	id := fill(t, a)
	ops := a.client("ops")
	b := newServer(t)
	if _, err := transfer.Import(ctx, a.remote(), b.root, id, transfer.ImportOptions{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	_, old, _ := raw(t, ops, id)
	a.tick()
	m := must(ops.Beta.MemoryStores.Memories.New(ctx, id, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/later.md", Content: param.NewOpt("later\n")}))
	a.tick()
	must(ops.Beta.MemoryStores.Memories.Update(ctx, m.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: id, Content: param.NewOpt("later on\n")}))
	// All but the newest two versions of before expire.
	expired := map[string]bool{}
	for _, v := range old[2:] {
		var x struct{ ID string }
		json.Unmarshal([]byte(v), &x)
		expired[x.ID] = true
	}
	a.expire(expired)
	res, err := transfer.Import(ctx, a.remote(), b.root, id, transfer.ImportOptions{Name: "alice"})
	if err != nil || res.Versions != 2 || res.Already != len(old) || res.Truncated+res.Unversioned+res.Skipped != 0 {
		t.Fatalf("import again: %+v %v", res, err)
	}
	_, versions, memories := raw(t, b.client("ops"), "alice")
	_, _, wantMemories := raw(t, ops, id)
	if len(versions) != len(old)+2 {
		t.Errorf("%d versions here, want %d", len(versions), len(old)+2)
	}
	for i := range memories {
		memories[i] = strings.ReplaceAll(memories[i], `"memory_store_id":"alice"`, `"memory_store_id":"`+id+`"`)
	}
	sameLists(t, "memory", memories, wantMemories)
}

// A far side that answers as the hosted service does, where a gitmem
// server does not: ids with capitals, times with fractions of a second,
// API keys, a service account and no actor recorded. The copy has the
// same ids, operations, paths, contents and actors, the times to the
// second.
func TestImportHostedShapes(t *testing.T) {
	t.Parallel()
	const (
		store = hostedStore
		notes = "mem_011CZkZb2cQ7y9WmRkFhT3Ls"
		other = "mem_011CZkZcUe8x1AbVnPq4Rs9T"
	)
	sha := func(s string) string { return memstore.SHA256([]byte(s)) }
	version := versionJSON
	answers := map[string]string{
		"/v1/memory_stores/" + store: `{"id":"` + store + `","type":"memory_store","name":"Support bot","description":"","metadata":{},` +
			`"archived_at":null,"created_at":"2026-04-01T10:00:00.123456Z","updated_at":"2026-04-01T10:00:00.123456Z"}`,
		"/v1/memory_stores/" + store + "/memory_versions": `{"data":[` +
			version("memver_011CZkZf3", notes, "modified", "2026-04-01T10:05:00.5Z", "/notes.md", "b\n", `{"type":"service_account_actor","service_account_id":"svac_01Xy"}`) + `,` +
			version("memver_011CZkZe2", other, "created", "2026-04-01T10:03:00.25Z", "/other.md", "x\n", `null`) + `,` +
			version("memver_011CZkZd1", notes, "created", "2026-04-01T10:01:00.999Z", "/notes.md", "a\n", `{"type":"api_actor","api_key_id":"apikey_01Ab"}`) +
			`],"next_page":null}`,
		"/v1/memory_stores/" + store + "/memories": `{"data":[` +
			`{"id":"` + notes + `","type":"memory","memory_store_id":"` + store + `","path":"/notes.md","content":null,"content_sha256":"` + sha("b\n") +
			`","content_size_bytes":2,"memory_version_id":"memver_011CZkZf3","created_at":"2026-04-01T10:01:00.999Z","updated_at":"2026-04-01T10:05:00.5Z"},` +
			`{"id":"` + other + `","type":"memory","memory_store_id":"` + store + `","path":"/other.md","content":null,"content_sha256":"` + sha("x\n") +
			`","content_size_bytes":2,"memory_version_id":"memver_011CZkZe2","created_at":"2026-04-01T10:03:00.25Z","updated_at":"2026-04-01T10:03:00.25Z"}` +
			`],"next_page":null}`,
	}
	hosted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_011CZ")
		body, ok := answers[r.URL.Path]
		if r.Header.Get("Authorization") != "Bearer sk-ant-test" {
			w.WriteHeader(401)
			body = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`
		} else if !ok || r.Method != "GET" {
			w.WriteHeader(404)
			body = `{"type":"error","error":{"type":"not_found_error","message":"not found"}}`
		}
		io.WriteString(w, body)
	}))
	defer hosted.Close()
	b := newServer(t)
	res, err := transfer.Import(ctx, transfer.Remote{BaseURL: hosted.URL, APIKey: "sk-ant-test"}, b.root, store, transfer.ImportOptions{Name: "support"})
	if err != nil || res.Versions != 3 || res.Memories != 2 {
		t.Fatalf("import: %+v %v", res, err)
	}
	_, versions, memories := raw(t, b.client("ops"), "support")
	want := []string{
		`memver_011CZkZf3 mem_011CZkZb2cQ7y9WmRkFhT3Ls modified 2026-04-01T10:05:00Z /notes.md "b\n" {"type":"service_account_actor","service_account_id":"svac_01Xy"}`,
		`memver_011CZkZe2 mem_011CZkZcUe8x1AbVnPq4Rs9T created 2026-04-01T10:03:00Z /other.md "x\n" null`,
		`memver_011CZkZd1 mem_011CZkZb2cQ7y9WmRkFhT3Ls created 2026-04-01T10:01:00Z /notes.md "a\n" {"type":"api_actor","api_key_id":"apikey_01Ab"}`,
	}
	var got []string
	for _, v := range versions {
		var x struct {
			ID, Operation, Path, Content string
			MemoryID                     string          `json:"memory_id"`
			CreatedAt                    string          `json:"created_at"`
			CreatedBy                    json.RawMessage `json:"created_by"`
		}
		json.Unmarshal([]byte(v), &x)
		got = append(got, fmt.Sprintf("%s %s %s %s %s %q %s", x.ID, x.MemoryID, x.Operation, x.CreatedAt, x.Path, x.Content, x.CreatedBy))
	}
	sameLists(t, "version", got, want)
	if len(memories) != 2 || !strings.Contains(memories[0], `"id":"`+notes+`"`) || !strings.Contains(memories[0], `"created_at":"2026-04-01T10:01:00Z"`) {
		t.Errorf("memories: %v", memories)
	}
	// Again: nothing new.
	if res, err := transfer.Import(ctx, transfer.Remote{BaseURL: hosted.URL, APIKey: "sk-ant-test"}, b.root, store, transfer.ImportOptions{Name: "support"}); err != nil || !res.Again || res.Versions != 0 {
		t.Errorf("import again: %+v %v", res, err)
	}
}

// A store whose memory tool wrote names the API refuses (not in Unicode
// Normalization Form C, a format character, more than 20 folders deep)
// is imported from a gitmem server whole: the import writes into a
// gitmem store, so it takes what the memory tool takes. It refused the
// whole store, even with such a memory deleted since, saying the path
// "cannot be a gitmem memory's" (an attacker's pass). Export keeps the
// API's rules (TestExportRefusesAPathTheAPIRefusesFirst).
func TestImportTakesTheMemoryToolsNames(t *testing.T) {
	t.Parallel()
	a := newServer(t)
	ops := a.client("ops")
	st := must(ops.Beta.MemoryStores.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "tool names"}))
	deep := strings.Repeat("d/", 24) + "deep.md"
	for i, p := range []string{"cafe\u0301.md", "rtl\u202etxt.md", deep, "gone\u0301.md"} {
		a.tick()
		a.tool(st.ID, "s"+string(rune('a'+i)), `{"command":"create","path":"/memories/`+p+`","file_text":"`+string(rune('a'+i))+`\n"}`)
	}
	a.tick()
	a.tool(st.ID, "se", `{"command":"delete","path":"/memories/gone\u0301.md"}`)
	a.tick()
	b := newServer(t)
	res, err := transfer.Import(ctx, a.remote(), b.root, st.ID, transfer.ImportOptions{Name: st.ID, Repo: gitmem.Options{Logf: t.Logf}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Versions != 5 || res.Memories != 3 {
		t.Errorf("result %+v", res)
	}
	_, wantVersions, wantMemories := raw(t, a.client("ops"), st.ID)
	_, gotVersions, gotMemories := raw(t, b.client("ops"), st.ID)
	sameLists(t, "version", gotVersions, wantVersions)
	sameLists(t, "memory", gotMemories, wantMemories)
	repo := filepath.Join(b.root, st.ID)
	if got, want := gittest.Git(t, repo, "-c", "core.quotePath=false", "ls-tree", "-r", "--name-only", "HEAD", "memories/"), "memories/cafe\u0301.md\nmemories/"+deep+"\nmemories/rtl\u202etxt.md\n"; got != want {
		t.Errorf("the copy holds:\n%s\nwant:\n%s", got, want)
	}
}
