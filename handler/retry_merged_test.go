package handler_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// Two agents each made a call with the same tool_use id, and a sync
// merged their histories: the id has two commits. A retry of either
// call, on either agent, is answered from the commit of the same command
// and path, and commits nothing; the id with another command is still
// refused. Before, a retry was compared with one of the two only (the
// agent's own while it ran, the other's once it restarted) and refused
// as "already used for another command".
func TestRetryOfACallTwoAgentsMadeWithTheSameID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	remote := filepath.Join(gittest.TempDir(t), "shared.git")
	gittest.Git(t, "", "init", "-q", "--bare", "--initial-branch=main", remote)
	opt := func(name string) gitmem.Options {
		return gitmem.Options{Now: func() time.Time { return epoch }, Logf: t.Logf, Author: gitmem.Signature{Name: name, Email: name + "@example.com"},
			Operator: gitmem.Signature{Name: "op", Email: "op@example.com"}}
	}
	ann, _, err := gitmem.Init(ctx, gittest.TempDir(t), opt("ann"))
	if err != nil {
		t.Fatal(err)
	}
	defer ann.Close()
	if err := ann.AddRemote("origin", remote); err != nil {
		t.Fatal(err)
	}
	if _, err := ann.Push(ctx, "origin", gitmem.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	bobDir := filepath.Join(gittest.TempDir(t), "bob")
	bob, _, err := gitmem.Clone(ctx, remote, bobDir, opt("bob"), gitmem.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const annCall, bobCall, other = `{"command":"create","path":"/memories/ann.md","file_text":"from ann\n"}`,
		`{"command":"create","path":"/memories/bob.md","file_text":"from bob\n"}`,
		`{"command":"delete","path":"/memories/ann.md"}`
	if res := call(handler.New(ann, handler.Options{Logger: testLog(t)}), "toolu_same", annCall); res.IsError {
		t.Fatal(res.Content)
	}
	hb := handler.New(bob, handler.Options{Logger: testLog(t)})
	if res := call(hb, "toolu_same", bobCall); res.IsError {
		t.Fatal(res.Content)
	}
	if _, err := ann.Push(ctx, "origin", gitmem.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Sync(ctx, "origin", gitmem.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	check := func(when string, h *handler.Handler, r *gitmem.Repo) {
		t.Helper()
		head, _ := r.Commit(ctx, "HEAD")
		for input, want := range map[string]string{annCall: "File created successfully at: /memories/ann.md", bobCall: "File created successfully at: /memories/bob.md",
			other: "Error: tool_use id toolu_same was already used for another command (memory: create /memories/"} {
			if res := call(h, "toolu_same", input); len(res.Content) < len(want) || res.Content[:len(want)] != want {
				t.Errorf("%s: the retry of %s: %+v, want %q", when, input, res, want)
			}
		}
		if after, _ := r.Commit(ctx, "HEAD"); after.Hash != head.Hash {
			t.Errorf("%s: a retry committed %s", when, after.Subject)
		}
	}
	check("while bob runs", hb, bob)
	if err := bob.Close(); err != nil {
		t.Fatal(err)
	}
	bob, err = gitmem.Open(ctx, bobDir, opt("bob"))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	check("after a restart", handler.New(bob, handler.Options{Logger: testLog(t)}), bob)
}
