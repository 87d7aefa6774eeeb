package storesapi_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

// A store whose repository cannot be read (a garbage branch file) answers
// a tool call as the single-memory server answers a storage failure: a
// tool_result error with no host path, HTTP 200, not an HTTP 500 the SDK
// takes for a failed run (docs/protocol.md "Storage failures"): a store
// opened after the damage.
func TestStoresToolCallOnADamagedStoreIsAToolError(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	a.createStores("alice", "bob")
	if _, res := a.tool("ops", "alice", "toolu_1", `{"command":"create","path":"/memories/a.md","file_text":"a\n"}`); res.IsError {
		t.Fatal(res.Content)
	}
	for _, name := range []string{"alice", "bob"} {
		dir := filepath.Join(a.dir.Root(), name)
		if err := os.WriteFile(filepath.Join(dir, ".git", "refs", "heads", "main"), []byte("garbage\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		gittest.Damaged(t, dir, "a garbage branch file: the storage failure")
	}
	const failure = "Error: The memory store could not complete the command; nothing was changed"
	for _, tc := range []struct{ store, input, want string }{
		{"bob", `{"command":"create","path":"/memories/b.md","file_text":"b\n"}`, failure},
		{"bob", `{"command":"view","path":"/memories"}`, failure},
		// The checks that need no repository come first.
		{"bob", `{"command":"delete","path":"/memories/a.md"}`, "Error: This memory is read-only for you: view works, but delete is not allowed; nothing was changed"},
		{"bob", `{"command":"fly"}`, "Error: Unknown command \"fly\". The memory tool's commands are: view, create, str_replace, insert, delete, rename"},
	} {
		token := "ops"
		if strings.Contains(tc.input, "delete") {
			token = "reader"
		}
		code, res := a.tool(token, tc.store, "toolu_2", tc.input)
		if code != http.StatusOK || !res.IsError || res.ToolUseID != "toolu_2" || res.Content != tc.want {
			t.Errorf("%s %s: %d %+v", tc.store, tc.input, code, res)
		}
	}
	// The store open before the damage answers as the single-memory server
	// does: a view from what it holds; a change is acknowledged in the
	// write-ahead log or refused as a storage failure, as its background
	// checkpoint has met the damage or not yet (not checked here).
	if _, res := a.tool("ops", "alice", "toolu_4", `{"command":"view","path":"/memories/a.md"}`); res.IsError {
		t.Errorf("alice view: %+v", res)
	}
}

// A memory store whose repository cannot be opened (damaged, or its
// folder unreadable) answers every request on it with a final 500
// api_error (x-should-retry: false: the SDKs would retry a 500 twice,
// and no retry mends a store) whose message names the store, says it is
// damaged and that its operator runs gitmem fsck, and names no host
// path; nothing is changed. Before, a 500 "the store could not complete
// the request" that the SDKs retried.
func TestMemoryStoresDamagedStoreIsAFinal500(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	ids := a.memoryStores("branch", "lock", "wal")
	for _, tc := range []struct {
		store, damage, say string
	}{
		{ids[0], "refs/heads/main", "memory store " + ids[0] + " is damaged: the branch refs/heads/main is damaged (its file holds 8 bytes that are not a commit hash); nothing was changed. " +
			"Retrying does not help: an operator repairs it on the server, where gitmem --repo STORES/" + ids[0] + " fsck says how (STORES is the server's --stores folder)"},
		{ids[1], "gitmem", "memory store " + ids[1] + " cannot be opened: its folder or repository cannot be read; nothing was changed. " +
			"Retrying does not help: an operator repairs it on the server, where gitmem --repo STORES/" + ids[1] + " fsck says why (STORES is the server's --stores folder)"},
		// A folder at the write-ahead log's path: before, the message
		// held the open's error, and with it the server's absolute path
		// of the store's folder.
		{ids[2], "gitmem/wal/", "memory store " + ids[2] + " is damaged: the write-ahead log .git/gitmem/wal is a folder, not a file; nothing was changed. " +
			"Retrying does not help: an operator repairs it on the server, where gitmem --repo STORES/" + ids[2] + " fsck says how (STORES is the server's --stores folder)"},
	} {
		a.damage(tc.store, tc.damage)
		st := "/v1/memory_stores/" + tc.store
		for _, r := range []struct{ method, path string }{
			{"GET", st}, {"GET", st + "/memories"}, {"POST", st + "/memories"}, {"GET", st + "/memory_versions"},
			{"POST", st}, {"POST", st + "/archive"}, {"DELETE", st},
		} {
			var body any
			switch r.path {
			case st + "/memories":
				body = map[string]any{"path": "/a.md", "content": "a"}
			case st:
				body = map[string]any{"name": "renamed"}
			}
			var e msError
			code := a.call("ops", r.method, r.path, body, &e)
			a.refused(r.method+" "+r.path, code, e, 500, "api_error", "false")
			if e.Error.Message != tc.say {
				t.Errorf("%s %s: %q\nwant %q", r.method, r.path, e.Error.Message, tc.say)
			}
			if strings.Contains(e.Error.Message, a.dir.Root()) {
				t.Errorf("%s %s names a host path: %q", r.method, r.path, e.Error.Message)
			}
		}
	}
}

// The operator API gives a store that cannot be opened the Memory Stores
// API's answer in its own shape: 500 {"error": ...}, x-should-retry:
// false, naming the store, what is wrong and what its operator runs,
// with no host path; its store list says the same of it. Before, a 500
// "the store could not complete the request; nothing was changed" with
// no header, and the list "the store cannot be read; gitmem fsck on its
// folder says why" (an attacker's pass: an operator learnt least where
// they look first).
func TestOperatorAPIDamagedStoreSaysWhatToRun(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	a.createStores("branch", "cfg", "lock", "mem")
	said := map[string]string{}
	for _, tc := range []struct {
		store, damage, say string
	}{
		{"branch", "refs/heads/main", "store branch is damaged: the branch refs/heads/main is damaged (its file holds 8 bytes that are not a commit hash); nothing was changed. " +
			"Retrying does not help: an operator repairs it on the server, where gitmem --repo STORES/branch fsck says how (STORES is the server's --stores folder)"},
		{"lock", "gitmem", "store lock cannot be opened: its folder or repository cannot be read; nothing was changed. " +
			"Retrying does not help: an operator repairs it on the server, where gitmem --repo STORES/lock fsck says why (STORES is the server's --stores folder)"},
		// Before, a .git/config that does not parse was served, and
		// written, but versions/HEAD gave a bare 500.
		{"cfg", "config", "store cfg is damaged: .git/config does not parse (1:1: expected section header); nothing was changed. " +
			"Retrying does not help: an operator repairs it on the server, where gitmem --repo STORES/cfg fsck says how (STORES is the server's --stores folder)"},
		// Its memories a file (a damage beside .git): before, "cannot be
		// opened: its folder or repository cannot be read", and fsck
		// found nothing.
		{"mem", "../memories", "store mem is damaged: memories is a file, not the folder of the memory files; nothing was changed. " +
			"Retrying does not help: an operator repairs it on the server, where gitmem --repo STORES/mem fsck says how (STORES is the server's --stores folder)"},
	} {
		a.damage(tc.store, tc.damage)
		said[tc.store] = tc.say
		st := "/v1/stores/" + tc.store
		for _, r := range []struct {
			method, path string
			body         any
		}{
			{"GET", st, nil}, {"PATCH", st, map[string]any{"description": "d"}}, {"POST", st + "/archive", nil}, {"POST", st + "/unarchive", nil},
			{"GET", st + "/memories", nil}, {"GET", st + "/memory?path=/memories/a.md", nil},
			{"PUT", st + "/memory?path=/memories/a.md", map[string]any{"content": "a\n"}}, {"DELETE", st + "/memory?path=/memories/a.md", nil},
			{"GET", st + "/versions", nil}, {"GET", st + "/versions/HEAD", nil},
			{"POST", st + "/revert", map[string]any{"revisions": []string{"HEAD"}}}, {"POST", st + "/restore", map[string]any{"to": "HEAD"}},
			{"POST", st + "/redact", map[string]any{"match": "x"}}, {"DELETE", st, nil},
		} {
			var e struct{ Error string }
			code := a.call("ops", r.method, r.path, r.body, &e)
			if code != 500 || e.Error != tc.say || a.header.Get("x-should-retry") != "false" {
				t.Errorf("%s %s: %d x-should-retry %q %q\nwant 500 false %q", r.method, r.path, code, a.header.Get("x-should-retry"), e.Error, tc.say)
			}
			if strings.Contains(e.Error, a.dir.Root()) {
				t.Errorf("%s %s names a host path: %q", r.method, r.path, e.Error)
			}
		}
	}
	var list struct{ Data []map[string]any }
	if code := a.call("ops", "GET", "/v1/stores", nil, &list); code != 200 || len(list.Data) != 4 {
		t.Fatalf("the list: %d %v", code, list)
	}
	// The list says what a request says of each (before, mem, its
	// memories a file, was listed as sound; and lock, its .git/gitmem a
	// file, as the list read a store's metadata only).
	for i, name := range []string{"branch", "cfg", "lock", "mem"} {
		if s := list.Data[i]; s["name"] != name || s["error"] != said[name] {
			t.Errorf("the list says of %s: %v\nwant %q", name, s, said[name])
		}
	}
}

// damage puts garbage in place of the file (or folder) of store's .git
// named by damage (../memories: the store's memories folder), or an
// empty folder when damage ends in a slash.
func (a *storesAPI) damage(store, damage string) {
	a.t.Helper()
	dir := filepath.Join(a.dir.Root(), store)
	p := filepath.Join(dir, ".git", filepath.FromSlash(damage))
	if err := os.RemoveAll(p); err != nil {
		a.t.Fatal(err)
	}
	if strings.HasSuffix(damage, "/") {
		if err := os.Mkdir(p, 0o755); err != nil {
			a.t.Fatal(err)
		}
	} else if err := os.WriteFile(p, []byte("garbage\n"), 0o644); err != nil {
		a.t.Fatal(err)
	}
	gittest.Damaged(a.t, dir, "a store damaged on purpose: "+damage)
}
