package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/memstore"
)

// clockRepo is a repository whose commit times are what the test sets.
func clockRepo(t *testing.T) (*gitmem.Repo, string, *atomic.Int64) {
	t.Helper()
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Unix())
	dir := gittest.TempDir(t)
	r, _, err := gitmem.Init(context.Background(), dir, gitmem.Options{Logf: t.Logf, Operator: gitmem.Signature{Name: "op", Email: "op@example.com"},
		Now: func() time.Time { return time.Unix(now.Load(), 0).UTC() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, dir, &now
}

// Versions of another Memory Store written as they were: every version a
// commit with its ids, time and actor (each kind, and none), a redacted
// one a redacted one whose content is nowhere, and the history that a
// store of this package reads back the same, field by field.
func TestReplay(t *testing.T) {
	t.Parallel()
	r, dir, now := clockRepo(t)
	ix := memstore.NewIndex()
	at := func(sec int) time.Time { return time.Date(2026, 1, 2, 3, 4, 5+sec, 0, time.UTC) }
	api := memstore.Actor{Type: memstore.APIActor, ID: "apikey_01"}
	want := []memstore.Version{
		{ID: "memver_a1", MemoryID: "mem_a", Operation: memstore.Created, Created: at(1), Path: "/notes/todo.md", Content: []byte("buy milk\n"), By: api},
		{ID: "memver_b1", MemoryID: "mem_b", Operation: memstore.Created, Created: at(1), Path: "/secret.md", Content: []byte("pin 1234\n"),
			By: memstore.Actor{Type: memstore.SessionActor, ID: "sesn_9"}, RedactedAt: at(9), RedactedBy: memstore.Actor{Type: memstore.UserActor, ID: "Olive Operator"}},
		{ID: "memver_a2", MemoryID: "mem_a", Operation: memstore.Modified, Created: at(2), Path: "/notes/todo.md", Content: []byte("buy oat milk\n"),
			By: memstore.Actor{Type: memstore.UserActor, ID: "Olive Operator"}},
		{ID: "memver_a3", MemoryID: "mem_a", Operation: memstore.Modified, Created: at(3), Path: "/notes/shopping.md", Content: []byte("buy oat milk\n"),
			By: memstore.Actor{Type: memstore.ServiceAccountActor, ID: "svac_7"}},
		{ID: "memver_b2", MemoryID: "mem_b", Operation: memstore.Modified, Created: at(4), Path: "/secret.md", Content: []byte("nothing here\n")},
		{ID: "memver_a4", MemoryID: "mem_a", Operation: memstore.Deleted, Created: at(5), Path: "/notes/shopping.md", By: api},
	}
	for _, v := range want {
		now.Store(v.Created.Unix())
		if err := ix.Replay(ctx, r, v); err != nil {
			t.Fatalf("replay %s: %v", v.ID, err)
		}
	}
	now.Store(at(9).Unix())
	if err := ix.ReplayRedaction(ctx, r, []string{"memver_b1"}, memstore.Actor{Type: memstore.UserActor, ID: "Olive Operator"}); err != nil {
		t.Fatal(err)
	}

	got, next, err := ix.Versions(ctx, r, memstore.VersionFilter{}, "", 100, true)
	if err != nil || next != "" {
		t.Fatalf("versions: %v %q", err, next)
	}
	if len(got) != len(want) {
		t.Fatalf("%d versions, want %d", len(got), len(want))
	}
	for i, w := range want {
		if !w.RedactedAt.IsZero() {
			w.Path, w.Content = "", nil
		} else if w.Operation != memstore.Deleted {
			w.SHA256, w.Size = memstore.SHA256(w.Content), int64(len(w.Content))
		} else {
			w.Content = nil
		}
		if g := got[len(got)-1-i]; versionLine(g) != versionLine(w) { // newest first
			t.Errorf("version %d:\n got %s\nwant %s", i, versionLine(g), versionLine(w))
		}
	}
	m, err := ix.Get(ctx, r, "mem_b", true)
	if err != nil || m.Path != "/secret.md" || string(m.Content) != "nothing here\n" || m.VersionID != "memver_b2" || !m.Created.Equal(at(1)) || !m.Updated.Equal(at(4)) {
		t.Errorf("memory mem_b: %+v %v", m, err)
	}
	if _, err := ix.Get(ctx, r, "mem_a", false); !errors.Is(err, memstore.ErrNotFound) {
		t.Errorf("the deleted memory: %v", err)
	}
	// One commit a version, one for the redaction, at their times; the
	// redacted content in no object (it was never here).
	flush(t, r)
	log := gittest.Git(t, dir, "log", "--format=%at %an <%ae> %s|%(trailers:only,unfold,separator=%x2c)")
	if want := strings.Join([]string{
		"1767323054 Olive Operator <Olive-Operator@gitmem.invalid> memory: redact memver_b1|Memory-Command: redact,Memory-Redacted: memver_b1",
		"1767323050 apikey_01 <apikey_01@gitmem.invalid> memory: delete /memories/notes/shopping.md|Memory-Command: delete,Memory-Id: mem_a,Memory-Version: memver_a4,Api-Key-Id: apikey_01,Memory-Path: /memories/notes/shopping.md",
		"1767323049 op <op@example.com> memory: update /memories/secret.md|Memory-Command: update,Memory-Id: mem_b,Memory-Version: memver_b2,Actor-Unrecorded: true,Memory-Path: /memories/secret.md",
		"1767323048 svac_7 <svac_7@gitmem.invalid> memory: update /memories/notes/todo.md -> /memories/notes/shopping.md|Memory-Command: update,Memory-Id: mem_a,Memory-Version: memver_a3,Service-Account-Id: svac_7,Memory-Path: /memories/notes/todo.md,Memory-New-Path: /memories/notes/shopping.md",
		"1767323047 Olive Operator <Olive-Operator@gitmem.invalid> memory: update /memories/notes/todo.md|Memory-Command: update,Memory-Id: mem_a,Memory-Version: memver_a2,Memory-Path: /memories/notes/todo.md",
		"1767323046 sesn_9 <sesn_9@gitmem.invalid> memory: create /memories/secret.md|Memory-Command: create,Memory-Id: mem_b,Memory-Version: memver_b1,Session: sesn_9,Memory-Path: /memories/secret.md",
		"1767323046 apikey_01 <apikey_01@gitmem.invalid> memory: create /memories/notes/todo.md|Memory-Command: create,Memory-Id: mem_a,Memory-Version: memver_a1,Api-Key-Id: apikey_01,Memory-Path: /memories/notes/todo.md",
		"1767323045 op <op@example.com> memory: init|Memory-Command: init",
	}, "\n"); strings.TrimSpace(log) != want {
		t.Errorf("history:\n%s\nwant:\n%s", log, want)
	}
	if objs := gittest.Git(t, dir, "cat-file", "--batch-all-objects", "--batch"); strings.Contains(objs, "pin 1234") {
		t.Error("the redacted content is in a git object")
	}

	// What cannot be replayed is refused, and changes nothing.
	n := commits(t, r, dir)
	for _, bad := range []memstore.Version{
		{ID: "memver_a1", MemoryID: "mem_c", Operation: memstore.Created, Path: "/c.md"},                                          // a version id again
		{ID: "memver_c1", MemoryID: "mem_b", Operation: memstore.Created, Path: "/c.md"},                                          // a memory created again
		{ID: "memver_c2", MemoryID: "mem_a", Operation: memstore.Modified, Path: "/c.md"},                                         // a deleted memory
		{ID: "memver_c3", MemoryID: "mem_x", Operation: memstore.Deleted},                                                         // an unknown one
		{ID: "memver_c4", MemoryID: "mem_c", Operation: memstore.Created, Path: "/secret.md/x"},                                   // below a memory
		{ID: "memver_c5", MemoryID: "mem_b", Operation: memstore.Modified, Path: "/secret.md", Content: []byte("nothing here\n")}, // no change
		{ID: "v1", MemoryID: "mem_c", Operation: memstore.Created, Path: "/c.md"},
		{ID: "memver_c6", MemoryID: "mem_c", Operation: "renamed", Path: "/c.md"},
		{ID: "memver_c7", MemoryID: "mem_c", Operation: memstore.Created, Path: "/a\\b.md"},
	} {
		err := ix.Replay(ctx, r, bad)
		var pc *memstore.PathConflictError
		if !isInvalid(err) && !errors.As(err, &pc) {
			t.Errorf("replay %+v: %v", bad, err)
		}
	}
	if err := ix.ReplayRedaction(ctx, r, []string{"memver_nope"}, memstore.Actor{}); !isInvalid(err) {
		t.Errorf("an unknown version redacted: %v", err)
	}
	if got := commits(t, r, dir); got != n {
		t.Errorf("%d commits after refusals, want %d", got, n)
	}
}

// versionLine is what a version shows, on one line.
func versionLine(v memstore.Version) string {
	return fmt.Sprintf("%s %s %s %s %q %q %s %d %+v %s %+v", v.ID, v.MemoryID, v.Operation, v.Created.UTC().Format(time.RFC3339), v.Path, v.Content,
		v.SHA256, v.Size, v.By, v.RedactedAt.UTC().Format(time.RFC3339), v.RedactedBy)
}
