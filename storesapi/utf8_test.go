package storesapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/memstore"
	"github.com/gitmem-dev/gitmem/operator"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
)

// A string that is not valid UTF-8 as sent (raw bytes, or an escaped lone
// surrogate) is refused by both JSON APIs, naming the field, as the memory
// tool refuses it: encoding/json alone would store U+FFFD in its place.
func TestAPIsRefuseStringsThatAreNotUTF8(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	a.createStores("alice")

	// The operator API.
	put := "/v1/stores/alice/memory?path=/memories/p.md"
	for _, tc := range []struct{ body, field string }{
		{`{"content":"\ud800"}`, "content"},
		{"{\"content\":\"a\xffb\"}", "content"},
		{`{"content":"ok\udc00\ud800"}`, "content"},
		{`{"content":"x","precondition":{"type":"content_sha256\ud800","content_sha256":"` + strings.Repeat("a", 64) + `"}}`, "precondition.type"},
	} {
		var e apiError
		code := a.callBad("ops", "PUT", put, tc.body, &e)
		if code != http.StatusBadRequest || e.Error != tc.field+" is not valid UTF-8 (nor is an escaped lone surrogate); nothing was changed" {
			t.Errorf("PUT %q: %d %q", tc.body, code, e.Error)
		}
	}
	var e apiError
	if code := a.callBad("ops", "GET", put, nil, &e); code != http.StatusNotFound {
		t.Errorf("a refused PUT wrote the memory: %d %q", code, e.Error)
	}

	// The Memory Stores API: a store's fields, a memory's path and content.
	for _, tc := range []struct{ body, field string }{
		{`{"name":"A\ud800"}`, "name"},
		{`{"name":"A","metadata":{"k":"v\udfff"}}`, "metadata.k"},
		{"{\"name\":\"A\",\"metadata\":{\"k\xff\":\"v\"}}", "a member name in metadata"},
	} {
		var me msError
		code := a.callBad("ops", "POST", "/v1/memory_stores", tc.body, &me)
		a.refused(tc.body, code, me, 400, "invalid_request_error", "false")
		if me.Error.Message != tc.field+" is not valid UTF-8 (nor is an escaped lone surrogate); nothing was changed" {
			t.Errorf("create store %q: %q", tc.body, me.Error.Message)
		}
	}
	var st msObject
	a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": "A"}, &st)
	mems := "/v1/memory_stores/" + st.str("id") + "/memories"
	var m msObject
	if code := a.call("ops", "POST", mems, map[string]any{"path": "/a.md", "content": "a\n"}, &m); code != 200 {
		t.Fatalf("create: %d %v", code, m)
	}
	for _, tc := range []struct{ path, body, field string }{
		{mems, `{"path":"/sur\ud800.md","content":"ab"}`, "path"},
		{mems, "{\"path\":\"/inv.md\",\"content\":\"a\xffb\"}", "content"},
		{mems + "/" + m.str("id"), `{"content":"\udc00"}`, "content"},
		{mems + "/" + m.str("id"), `{"path":"/b\ud800.md"}`, "path"},
	} {
		var me msError
		code := a.callBad("ops", "POST", tc.path, tc.body, &me)
		a.refused(tc.body, code, me, 400, "invalid_request_error", "false")
		if me.Error.Message != tc.field+" is not valid UTF-8 (nor is an escaped lone surrogate); nothing was changed" {
			t.Errorf("%q: %q", tc.body, me.Error.Message)
		}
	}
	var page struct{ Data []msObject }
	a.call("ops", "GET", mems+"?view=full", nil, &page)
	if len(page.Data) != 1 || page.Data[0].str("path") != "/a.md" || page.Data[0].str("content") != "a\n" {
		t.Errorf("refused writes changed the store: %v", page.Data)
	}
	var stores struct{ Data []msObject }
	if a.call("ops", "GET", "/v1/memory_stores", nil, &stores); len(stores.Data) != 2 { // alice and A
		t.Errorf("refused creates made stores: %v", stores.Data)
	}
}

// A memory that is not valid UTF-8 (a hand edit, a remote, an import) is
// read with U+FFFD in its JSON content but the hash of the bytes it holds:
// a read-modify-write on the condition of that hash is refused (409), as
// it would rewrite bytes the client never saw; without a precondition the
// write replaces the file, and a delete on that condition deletes it.
func TestAPreconditionDoesNotRewriteBytesThatAreNotUTF8(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	a.createStores("alice")
	raw := []byte("ok\xff\xfeZ\n")
	sha := operator.SHA256(raw)
	var st msObject
	a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": "A"}, &st)
	use := func(store string, fn func(r *gitmem.Repo) error) {
		t.Helper()
		s, err := a.dir.Acquire(context.Background(), store)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Release()
		if err := s.Use(func(r *gitmem.Repo, _ stores.Meta) error { return fn(r) }); err != nil {
			t.Fatal(err)
		}
	}
	use("alice", func(r *gitmem.Repo) error {
		for _, p := range []string{"/memories/raw.md", "/memories/gone.md"} {
			rel, _ := policy.ParsePath(p)
			if _, _, err := operator.PutMemory(r, rel, raw, nil, policy.DefaultLimits, gitmem.Signature{}, nil); err != nil {
				return err
			}
		}
		return nil
	})
	use(st.str("id"), func(r *gitmem.Repo) error {
		return memstore.NewIndex().Replay(context.Background(), r, memstore.Version{ID: "memver_1", MemoryID: "mem_1",
			Operation: memstore.Created, Path: "/raw.md", Content: raw})
	})
	const refusal = "the memory is not valid UTF-8: read as JSON, it has U+FFFD in place of the bytes that are not, so no content read through the API is its content; nothing was changed (write it without a precondition to replace it)"

	// The operator API.
	mem := "/v1/stores/alice/memory?path=/memories/raw.md"
	var got operator.MemoryJSON
	if a.call("ops", "GET", mem, nil, &got); got.Content == nil || *got.Content != "ok\uFFFD\uFFFDZ\n" || got.ContentSHA256 != sha || got.ContentSizeBytes != 6 {
		t.Fatalf("read: %+v", got)
	}
	var e apiError
	code := a.call("ops", "PUT", mem, map[string]any{"content": *got.Content + "more\n",
		"precondition": map[string]string{"type": "content_sha256", "content_sha256": got.ContentSHA256}}, &e)
	if code != http.StatusConflict || e.Error != refusal || e.ContentSHA256 != sha {
		t.Errorf("read-modify-write: %d %+v", code, e)
	}
	if a.call("ops", "GET", mem, nil, &got); got.ContentSHA256 != sha {
		t.Errorf("a refused write changed the file: %+v", got)
	}
	if code := a.call("ops", "DELETE", "/v1/stores/alice/memory?path=/memories/gone.md&expected_content_sha256="+sha, nil, nil); code != http.StatusOK {
		t.Errorf("delete on the condition of the hash: %d", code)
	}
	if code := a.call("ops", "PUT", mem, map[string]any{"content": "fixed\n"}, &got); code != http.StatusOK || got.ContentSHA256 != operator.SHA256([]byte("fixed\n")) {
		t.Errorf("write without a precondition: %d %+v", code, got)
	}

	// The Memory Stores API.
	mems := "/v1/memory_stores/" + st.str("id") + "/memories"
	var page struct{ Data []msObject }
	a.call("ops", "GET", mems+"?view=full", nil, &page)
	if len(page.Data) != 1 || page.Data[0].str("content") != "ok\uFFFD\uFFFDZ\n" || page.Data[0].str("content_sha256") != sha {
		t.Fatalf("read: %v", page.Data)
	}
	one := mems + "/" + page.Data[0].str("id")
	var me msError
	code = a.call("ops", "POST", one, map[string]any{"content": page.Data[0].str("content") + "more\n",
		"precondition": map[string]string{"type": "content_sha256", "content_sha256": sha}}, &me)
	a.refused("read-modify-write", code, me, 409, "memory_precondition_failed_error", "false")
	if me.Error.Message != refusal {
		t.Errorf("read-modify-write: %q", me.Error.Message)
	}
	var m msObject
	if a.call("ops", "GET", one, nil, &m); m.str("content_sha256") != sha {
		t.Errorf("a refused update changed the memory: %v", m)
	}
	if code := a.call("ops", "POST", one, map[string]any{"path": "/moved.md",
		"precondition": map[string]string{"type": "content_sha256", "content_sha256": sha}}, &m); code != 200 || m.str("content_sha256") != sha {
		t.Errorf("a rename on the condition of the hash (the bytes move as they are): %d %v", code, m)
	}
	if code := a.call("ops", "POST", one, map[string]any{"content": "fixed\n"}, &m); code != 200 || m.str("content_sha256") != operator.SHA256([]byte("fixed\n")) {
		t.Errorf("update without a precondition: %d %v", code, m)
	}
}
