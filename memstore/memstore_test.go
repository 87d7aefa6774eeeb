package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/memstore"
	"github.com/gitmem-dev/gitmem/policy"
)

var ctx = context.Background()

var alice = memstore.Caller{APIKey: "alice-key", Author: gitmem.Signature{Name: "alice-key", Email: "alice-key@gitmem.invalid"}}

func newRepo(t *testing.T) (*gitmem.Repo, string) {
	t.Helper()
	dir := gittest.TempDir(t)
	r, _, err := gitmem.Init(context.Background(), dir, gitmem.Options{Logf: t.Logf, Operator: gitmem.Signature{Name: "op", Email: "op@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, dir
}

func create(t *testing.T, ix *memstore.Index, r *gitmem.Repo, path, content string) memstore.Memory {
	t.Helper()
	rel, err := memstore.ParsePath(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ix.Create(ctx, r, memstore.CreateRequest{Path: rel, Content: []byte(content), By: alice, Limits: policy.DefaultLimits})
	if err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	return m
}

// tool makes a memory tool call on the repository, as the memory tool's
// HTTP endpoint does.
func tool(t *testing.T, r *gitmem.Repo, session, id, input string) string {
	t.Helper()
	h := handler.New(r, handler.Options{Limits: policy.DefaultLimits, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	res := h.HandleJSON(ctx, handler.Caller{Session: session}, []byte(`{"type":"tool_use","id":"`+id+`","name":"memory","input":`+input+`}`))
	if res.IsError {
		t.Fatalf("tool call %s: %s", input, res.Content)
	}
	return res.Content
}

// commits counts the commits in git's files, once they hold every
// acknowledged change.
func commits(t *testing.T, r *gitmem.Repo, dir string) int {
	t.Helper()
	flush(t, r)
	n := 0
	fmt.Sscan(gittest.Git(t, dir, "rev-list", "--count", "HEAD"), &n)
	return n
}

func flush(t *testing.T, r *gitmem.Repo) {
	t.Helper()
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The life of a memory through the API: each change one commit with its
// trailers, an update that changes nothing no commit, ids that survive a
// rename, versions for each change.
func TestMemoryLifecycle(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	ix := memstore.NewIndex()
	m := create(t, ix, r, "/notes/todo.md", "buy milk\n")
	if !strings.HasPrefix(m.ID, "mem_") || !strings.HasPrefix(m.VersionID, "memver_") || m.SHA256 != memstore.SHA256([]byte("buy milk\n")) || m.Size != 9 {
		t.Fatalf("created %+v", m)
	}
	got, err := ix.Get(ctx, r, m.ID, true)
	if err != nil || got.Path != "/notes/todo.md" || string(got.Content) != "buy milk\n" || got.VersionID != m.VersionID || !got.Created.Equal(m.Created) {
		t.Fatalf("get %+v %v", got, err)
	}
	n := commits(t, r, dir)

	// No change: no commit, the same version, whatever the precondition.
	same, changed, err := ix.Update(ctx, r, m.ID, memstore.UpdateRequest{Content: []byte("buy milk\n"), SetContent: true, Expect: strings.Repeat("0", 64), By: alice})
	if err != nil || changed || same.VersionID != m.VersionID {
		t.Fatalf("no-op update: %+v %v %v", same, changed, err)
	}
	// A failed precondition changes nothing.
	if _, _, err := ix.Update(ctx, r, m.ID, memstore.UpdateRequest{Content: []byte("x"), SetContent: true, Expect: strings.Repeat("0", 64), By: alice}); !errors.Is(err, memstore.ErrPrecondition) {
		t.Fatalf("precondition: %v", err)
	}
	up, changed, err := ix.Update(ctx, r, m.ID, memstore.UpdateRequest{Content: []byte("buy oat milk\n"), SetContent: true, Path: "notes/shopping.md", Expect: m.SHA256, By: alice})
	if err != nil || !changed || up.ID != m.ID || up.Path != "/notes/shopping.md" || up.VersionID == m.VersionID {
		t.Fatalf("update: %+v %v %v", up, changed, err)
	}
	flush(t, r)
	if got := commits(t, r, dir); got != n+1 {
		t.Fatalf("%d commits after the update, want %d", got, n+1)
	}
	msg := gittest.Git(t, dir, "log", "-1", "--format=%s%n%b")
	for _, want := range []string{"memory: update /memories/notes/todo.md -> /memories/notes/shopping.md", "Memory-Command: update",
		"Memory-Path: /memories/notes/todo.md", "Memory-New-Path: /memories/notes/shopping.md", "Memory-Id: " + m.ID,
		"Memory-Version: " + up.VersionID, "Api-Key-Id: alice-key"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the commit lacks %q:\n%s", want, msg)
		}
	}
	if err := ix.Delete(ctx, r, m.ID, strings.Repeat("0", 64), alice); !errors.Is(err, memstore.ErrPrecondition) {
		t.Fatalf("delete with a wrong hash: %v", err)
	}
	if err := ix.Delete(ctx, r, m.ID, up.SHA256, alice); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Get(ctx, r, m.ID, false); !errors.Is(err, memstore.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	vs, next, err := ix.Versions(ctx, r, memstore.VersionFilter{MemoryID: m.ID}, "", 10, true)
	if err != nil || next != "" || len(vs) != 3 {
		t.Fatalf("versions: %+v %q %v", vs, next, err)
	}
	for i, want := range []struct{ op, path, content string }{{"deleted", "/notes/shopping.md", ""}, {"modified", "/notes/shopping.md", "buy oat milk\n"}, {"created", "/notes/todo.md", "buy milk\n"}} {
		v := vs[i]
		if v.Operation != want.op || v.Path != want.path || string(v.Content) != want.content || v.By != (memstore.Actor{Type: "api_actor", ID: "alice-key"}) {
			t.Errorf("version %d: %+v", i, v)
		}
		if (want.content == "") != (v.SHA256 == "") {
			t.Errorf("version %d sha %q", i, v.SHA256)
		}
	}
	if vs[2].ID != m.VersionID || vs[1].ID != up.VersionID {
		t.Errorf("version ids %s %s, the writes said %s %s", vs[2].ID, vs[1].ID, m.VersionID, up.VersionID)
	}
	flush(t, r)
	gittest.Fsck(t, dir)
}

// Memories made and renamed through the memory tool get ids (derived from
// their commits, the same for a fresh index), keep them across a rename,
// and their versions say the session; what the API writes, the tool
// reads, one commit each way.
func TestMemoryToolAndAPIShareTheStore(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	ix := memstore.NewIndex()
	tool(t, r, "sesn_1", "toolu_1", `{"command":"create","path":"/memories/a/one.md","file_text":"one\n"}`)
	tool(t, r, "sesn_1", "toolu_2", `{"command":"create","path":"/memories/a/two.md","file_text":"two\n"}`)
	items, _, err := ix.List(ctx, r, memstore.ListOptions{Limit: 10})
	if err != nil || len(items) != 2 {
		t.Fatalf("list: %+v %v", items, err)
	}
	ids := map[string]string{}
	for _, it := range items {
		ids[it.Path] = it.ID
	}
	tool(t, r, "sesn_2", "toolu_3", `{"command":"rename","old_path":"/memories/a","new_path":"/memories/b"}`)
	n := commits(t, r, dir)
	api := create(t, ix, r, "/b/three.md", "three\n")
	if got := commits(t, r, dir); got != n+1 {
		t.Errorf("the API's create made %d commits", got-n)
	}
	if out := tool(t, r, "", "toolu_4", `{"command":"view","path":"/memories/b/three.md"}`); !strings.Contains(out, "three") {
		t.Errorf("the tool reads %q", out)
	}
	tool(t, r, "sesn_3", "toolu_5", `{"command":"str_replace","path":"/memories/b/three.md","old_str":"three","new_str":"3"}`)
	got, err := ix.Get(ctx, r, api.ID, true)
	if err != nil || string(got.Content) != "3\n" || got.VersionID == api.VersionID {
		t.Fatalf("after the tool's edit: %+v %v", got, err)
	}
	for _, fresh := range []*memstore.Index{ix, memstore.NewIndex()} {
		for old, id := range ids {
			m, err := fresh.Get(ctx, r, id, false)
			if want := strings.Replace(old, "/a/", "/b/", 1); err != nil || m.Path != want {
				t.Errorf("%s after the rename: %+v %v", old, m, err)
			}
		}
		vs, _, err := fresh.Versions(ctx, r, memstore.VersionFilter{SessionID: "sesn_2"}, "", 10, false)
		if err != nil || len(vs) != 2 || vs[0].Operation != "modified" || vs[0].By != (memstore.Actor{Type: "session_actor", ID: "sesn_2"}) {
			t.Errorf("the rename's versions: %+v %v", vs, err)
		}
		vs, _, err = fresh.Versions(ctx, r, memstore.VersionFilter{MemoryID: api.ID}, "", 10, false)
		if err != nil || len(vs) != 2 || vs[1].ID != api.VersionID || vs[0].By.ID != "sesn_3" {
			t.Errorf("the API memory's versions: %+v %v", vs, err)
		}
	}
	flush(t, r)
	gittest.Fsck(t, dir)
}

// Listing: depth rolls deeper memories up, a page holds limit items
// (roll-ups count), and the pages together hold each item once.
func TestListDepthAndPages(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	ix := memstore.NewIndex()
	for _, p := range []string{"/a.md", "/b/x.md", "/b/y/z.md", "/b/y/w.md", "/b.md", "/c/d/e/f.md", "/c/g.md"} {
		create(t, ix, r, p, p)
	}
	list := func(prefix string, depth, limit int) []string {
		var out []string
		for page := ""; ; {
			items, next, err := ix.List(ctx, r, memstore.ListOptions{Prefix: prefix, Depth: depth, After: page, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			if len(items) > limit {
				t.Fatalf("%d items in a page of %d", len(items), limit)
			}
			for _, it := range items {
				if it.Prefix != "" {
					out = append(out, it.Prefix)
				} else {
					out = append(out, it.Path)
				}
			}
			if page = next; page == "" {
				return out
			}
		}
	}
	for _, tc := range []struct {
		prefix       string
		depth, limit int
		want         string
	}{
		{"", 0, 2, "/a.md /b.md /b/x.md /b/y/w.md /b/y/z.md /c/d/e/f.md /c/g.md"},
		{"", 1, 1, "/a.md /b.md /b/ /c/"},
		{"", 2, 2, "/a.md /b.md /b/x.md /b/y/ /c/d/ /c/g.md"},
		{"b/", 1, 1, "/b/x.md /b/y/"},
		{"b/y/", 0, 5, "/b/y/w.md /b/y/z.md"},
		{"nothing/", 0, 5, ""},
	} {
		if got := strings.Join(list(tc.prefix, tc.depth, tc.limit), " "); got != tc.want {
			t.Errorf("prefix %q depth %d limit %d: %s\nwant %s", tc.prefix, tc.depth, tc.limit, got, tc.want)
		}
	}
}

// A cursor is taken by the listing it was made for alone.
func TestCursorIsItsListings(t *testing.T) {
	c := memstore.Cursor("/v1/x?depth=1", "b/")
	if v, err := memstore.FromCursor("/v1/x?depth=1", c); v != "b/" || err != nil {
		t.Errorf("its own listing: %q %v", v, err)
	}
	for _, tc := range []struct{ listing, page string }{
		{"/v1/x?depth=1", "!!"},
		{"/v1/x?depth=1", "YS5tZA"}, // "a.md" in base64
		{"/v1/x?depth=2", c},
		{"/v1/y?depth=1", c},
		{"", c},
	} {
		if _, err := memstore.FromCursor(tc.listing, tc.page); !isInvalid(err) {
			t.Errorf("%q on %q: %v", tc.page, tc.listing, err)
		}
	}
}

func isInvalid(err error) bool {
	var ie *memstore.InvalidError
	return errors.As(err, &ie)
}

// Paths: the API's rules and the memory tool's, each refused with a
// message that names the rule.
func TestParsePath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"/notes/todo.md", "notes/todo.md"},
		{"/a b/é.md", "a b/é.md"},
		{"/.anthropic-memory-store", ".anthropic-memory-store"},
		{"notes", "must start with"},
		{"/", "names the store's root"},
		{"/a//b", "empty segment"},
		{"/a/", "empty segment"},
		{"/a/./b", `"." segment`},
		{"/a/../b", `".." segment`},
		{"/a\x01", "control or format character (U+0001)"},
		{"/a\u200bb", "control or format character (U+200B)"},
		{"/a\u2028", "U+2028"},
		{"/e\u0301.md", "Normalization Form C"},
		{"/" + strings.Repeat("a/", 20) + "b", "21 segments"},
		{"/" + strings.Repeat("x", 1015), "the limit is 1,015"},
		{"/" + strings.Repeat("x", 256), "segment of 256 bytes"},
		{"/a/.git/b", "reserved name"},
		{`/a\b`, "backslash"},
		{"/100%41", "percent-encoded"},
		{"/bad\xff", "not valid UTF-8"},
	} {
		got, err := memstore.ParsePath(tc.in)
		if err != nil {
			got = err.Error()
			if !isInvalid(err) {
				t.Errorf("%q: %T", tc.in, err)
			}
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
		if len(got) > 300 {
			t.Errorf("%q: a message of %d bytes", tc.in, len(got))
		}
	}
	for _, tc := range []struct{ in, want string }{{"/", ""}, {"/notes/", "notes/"}, {"/notes", "must start and end"}, {"notes/", "must start and end"}, {"/a//", "empty segment"}} {
		got, err := memstore.ParsePrefix(tc.in)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tc.want) || (tc.want == "" && got != "") {
			t.Errorf("prefix %q: %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A path held or overlapped is a conflict naming the memory; a rename
// onto the memory's own ancestor or descendant is not; the store's
// memory limit holds.
func TestConflictsAndLimits(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	ix := memstore.NewIndex()
	a := create(t, ix, r, "/a/b.md", "x")
	n := commits(t, r, dir)
	for _, p := range []string{"/a/b.md", "/a", "/a/b.md/c"} {
		rel, _ := memstore.ParsePath(p)
		_, err := ix.Create(ctx, r, memstore.CreateRequest{Path: rel, Content: []byte("y"), By: alice})
		var pc *memstore.PathConflictError
		if !errors.As(err, &pc) || pc.MemoryID != a.ID || pc.Path != "a/b.md" {
			t.Errorf("create %s: %v", p, err)
		}
	}
	// Its own descendant, then its own ancestor.
	for _, to := range []string{"a/b.md/c.md", "a"} {
		m, changed, err := ix.Update(ctx, r, a.ID, memstore.UpdateRequest{Path: to, By: alice})
		if err != nil || !changed || m.Path != "/"+to || m.ID != a.ID {
			t.Errorf("rename to %s: %+v %v", to, m, err)
		}
	}
	b := create(t, ix, r, "/b.md", "b")
	_, _, err := ix.Update(ctx, r, b.ID, memstore.UpdateRequest{Path: "a/x.md", By: alice})
	var pc *memstore.PathConflictError
	if !errors.As(err, &pc) || pc.MemoryID != a.ID {
		t.Errorf("rename under a file: %v", err)
	}
	limits := policy.Limits{MaxFiles: 2}
	if _, err := ix.Create(ctx, r, memstore.CreateRequest{Path: "c.md", Content: []byte("c"), By: alice, Limits: limits}); err == nil || !strings.Contains(err.Error(), "limit is 2") {
		t.Errorf("a third memory in a store of two: %v", err)
	}
	big := make([]byte, memstore.MaxContentBytes+1)
	if _, err := ix.Create(ctx, r, memstore.CreateRequest{Path: "c.md", Content: big, By: alice}); !isInvalid(err) {
		t.Errorf("content too large: %v", err)
	}
	if got := commits(t, r, dir); got != n+3 { // two renames and b
		t.Errorf("%d commits, want %d", got, n+3)
	}
}

// A create with an idempotency key, sent again, makes nothing and answers
// the memory the first made; the key with another path is a conflict.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	ix := memstore.NewIndex()
	req := memstore.CreateRequest{Path: "k.md", Content: []byte("once"), By: alice, IdempotencyKey: "key-1"}
	first, err := ix.Create(ctx, r, req)
	if err != nil {
		t.Fatal(err)
	}
	n := commits(t, r, dir)
	for _, fresh := range []*memstore.Index{ix, memstore.NewIndex()} {
		again, err := fresh.Create(ctx, r, req)
		var re *memstore.ReplayError
		if !errors.As(err, &re) || again.ID != first.ID || again.VersionID != first.VersionID {
			t.Errorf("again: %+v %v", again, err)
		}
	}
	req.Path = "other.md"
	var ce *memstore.ConflictError
	if _, err := ix.Create(ctx, r, req); !errors.As(err, &ce) {
		t.Errorf("the key for another path: %v", err)
	}
	other := alice
	other.APIKey = "bob-key" // keys are the caller's own
	if _, err := ix.Create(ctx, r, memstore.CreateRequest{Path: "bob.md", Content: []byte("b"), By: other, IdempotencyKey: "key-1"}); err != nil {
		t.Errorf("another key's key-1: %v", err)
	}
	flush(t, r)
	if got := commits(t, r, dir); got != n+1 {
		t.Errorf("%d commits, want %d", got, n+1)
	}
}

// Redacting a version removes its content from every object, keeps every
// id (versions and memories, for this index and a fresh one), redacts the
// versions that held the same bytes, records who and when, and refuses
// content a memory holds now.
func TestRedact(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	ix := memstore.NewIndex()
	m := create(t, ix, r, "/creds.md", "password hunter2-secret\n")
	tool(t, r, "sesn_9", "toolu_1", `{"command":"create","path":"/memories/copy.md","file_text":"password hunter2-secret\n"}`)
	up, _, err := ix.Update(ctx, r, m.ID, memstore.UpdateRequest{Content: []byte("ask the vault\n"), SetContent: true, By: alice})
	if err != nil {
		t.Fatal(err)
	}
	before, _, err := ix.Versions(ctx, r, memstore.VersionFilter{}, "", 100, false)
	if err != nil {
		t.Fatal(err)
	}
	// copy.md still holds it: refused, nothing changed.
	var ce *memstore.ConflictError
	if _, err := ix.Redact(ctx, r, m.VersionID, alice); !errors.As(err, &ce) || !strings.Contains(ce.Msg, "/copy.md") {
		t.Fatalf("redact content a memory holds now: %v", err)
	}
	tool(t, r, "sesn_9", "toolu_2", `{"command":"delete","path":"/memories/copy.md"}`)
	v, err := ix.Redact(ctx, r, m.VersionID, memstore.Caller{APIKey: "ops", Author: gitmem.Signature{Name: "ops", Email: "ops@gitmem.invalid"}})
	if err != nil {
		t.Fatal(err)
	}
	if v.Path != "" || v.SHA256 != "" || v.Content != nil || v.RedactedAt.IsZero() || v.RedactedBy != (memstore.Actor{Type: "api_actor", ID: "ops"}) || v.By.ID != "alice-key" {
		t.Fatalf("redacted %+v", v)
	}
	flush(t, r)
	if out := gittest.Git(t, dir, "cat-file", "--batch-all-objects", "--batch"); strings.Contains(out, "hunter2") {
		t.Fatal("an object still holds the redacted content")
	}
	for _, fresh := range []*memstore.Index{ix, memstore.NewIndex()} {
		after, _, err := fresh.Versions(ctx, r, memstore.VersionFilter{}, "", 100, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before)+1 { // the tool's delete
			t.Fatalf("%d versions after, %d before", len(after), len(before))
		}
		redacted := 0
		for i, a := range after[1:] {
			b := before[i]
			if a.ID != b.ID || a.MemoryID != b.MemoryID || a.Operation != b.Operation {
				t.Errorf("version %d was %+v, is %+v", i, b, a)
			}
			if !a.RedactedAt.IsZero() {
				redacted++
				if a.Path != "" || a.SHA256 != "" {
					t.Errorf("redacted version %+v", a)
				}
			} else if a.Path != b.Path || a.SHA256 != b.SHA256 {
				t.Errorf("version %s changed: %+v -> %+v", a.ID, b, a)
			}
		}
		if redacted != 2 { // the API's create and the tool's copy
			t.Errorf("%d versions redacted", redacted)
		}
		if got, err := fresh.Get(ctx, r, m.ID, true); err != nil || string(got.Content) != "ask the vault\n" || got.VersionID != up.VersionID {
			t.Errorf("the memory after: %+v %v", got, err)
		}
	}
	// Again: as it is.
	if again, err := ix.Redact(ctx, r, m.VersionID, alice); err != nil || !again.RedactedAt.Equal(v.RedactedAt) {
		t.Errorf("redact again: %+v %v", again, err)
	}
	// The current version cannot be redacted.
	if _, err := ix.Redact(ctx, r, up.VersionID, alice); !errors.As(err, &ce) || !strings.Contains(ce.Msg, m.ID) {
		t.Errorf("redact the current version: %v", err)
	}
	gittest.Fsck(t, dir)
}

// Ids are derived from the history: a clone's fresh index gives the same.
func TestIdsAreTheSameInAClone(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	ix := memstore.NewIndex()
	tool(t, r, "s", "toolu_1", `{"command":"create","path":"/memories/a.md","file_text":"a\n"}`)
	create(t, ix, r, "/b.md", "b")
	flush(t, r)
	clone := filepath.Join(gittest.TempDir(t), "clone")
	gittest.Git(t, filepath.Dir(clone), "clone", "-q", dir, clone)
	c, err := gitmem.Open(context.Background(), clone, gitmem.Options{Logf: t.Logf, Adopt: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want, _, err := ix.Versions(ctx, r, memstore.VersionFilter{}, "", 10, false)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := memstore.NewIndex().Versions(ctx, c, memstore.VersionFilter{}, "", 10, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) != 2 {
		t.Fatalf("%d versions in the clone, %d here", len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].MemoryID != want[i].MemoryID {
			t.Errorf("version %d: %+v in the clone, %+v here", i, got[i], want[i])
		}
	}
}

// Writes in flight together (and tool calls beside them) each commit once;
// the index they leave is the one a fresh index reads from the history.
func TestConcurrentWrites(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	ix := memstore.NewIndex()
	var wg sync.WaitGroup
	ids := make([]string, 64)
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := ix.Create(ctx, r, memstore.CreateRequest{Path: fmt.Sprintf("m%02d.md", i), Content: []byte{byte(i)}, By: alice})
			if err != nil {
				errs <- err
				return
			}
			ids[i] = m.ID
			if i%4 == 0 {
				if _, _, err := ix.Update(ctx, r, m.ID, memstore.UpdateRequest{Path: fmt.Sprintf("moved/m%02d.md", i), By: alice}); err != nil {
					errs <- err
				}
			}
		}()
		if i%16 == 0 {
			tool(t, r, "", fmt.Sprintf("toolu_%d", i), fmt.Sprintf(`{"command":"create","path":"/memories/t%d.md","file_text":"t"}`, i))
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	flush(t, r)
	if got := commits(t, r, dir); got != 1+64+16+4 {
		t.Errorf("%d commits", got)
	}
	list := func(ix *memstore.Index) []string {
		items, _, err := ix.List(ctx, r, memstore.ListOptions{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range items {
			out = append(out, it.Path+"="+it.ID+"@"+it.VersionID)
		}
		return out
	}
	live, fresh := list(ix), list(memstore.NewIndex())
	if len(live) != 68 || !slices.Equal(live, fresh) {
		t.Errorf("the index after concurrent writes:\n%v\na fresh one:\n%v", live, fresh)
	}
	for i, id := range ids {
		if m, err := ix.Get(ctx, r, id, false); err != nil || (i%4 == 0) != strings.HasPrefix(m.Path, "/moved/") {
			t.Errorf("memory %d: %+v %v", i, m, err)
		}
	}
	gittest.Fsck(t, dir)
}
