package handler_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

// agentOptions are the options of the memory of the agent name: a fixed
// clock, name as its author.
func agentOptions(t *testing.T, name string) gitmem.Options {
	return gitmem.Options{Now: func() time.Time { return epoch }, Logf: t.Logf, Author: gitmem.Signature{Name: name, Email: name + "@example.com"},
		Operator: gitmem.Signature{Name: "op", Email: "op@example.com"}}
}

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
	opt := func(name string) gitmem.Options { return agentOptions(t, name) }
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

// Two agents each made a str_replace with the same tool_use id on the same
// file (other old_str and new_str), and syncs merged their histories: the
// id has two commits of one command and one path (so for a create and an
// insert). A retry, on either agent, while it runs and after a restart,
// is answered from the commit whose change is what the call does to its
// parent's version (its own snippet), and commits nothing; a call of the
// id that made neither change is refused. Before, after a restart each agent's retry was
// answered from the other agent's commit (the one its history index kept
// last).
func TestRetryOfTwoCallsOfOneIDOnOnePath(t *testing.T) {
	t.Parallel()
	const snippet, inserted = "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n", "The file /memories/s.md has been edited."
	// Each id: ann's call, bob's, and one that made neither change, with
	// the answer of each.
	retryOfTwoCalls(t, policy.ScreenOff, "alpha\nmiddle\nomega\n", []retryCall{
		{"toolu_q", `{"command":"str_replace","path":"/memories/s.md","old_str":"alpha","new_str":"ANN WAS HERE"}`, snippet + "     1\tANN WAS HERE\n     2\tmiddle\n     3\tomega"},
		{"toolu_q", `{"command":"str_replace","path":"/memories/s.md","old_str":"omega","new_str":"BOB WAS HERE"}`, snippet + "     1\talpha\n     2\tmiddle\n     3\tBOB WAS HERE\n     4\t"},
		{"toolu_q", `{"command":"str_replace","path":"/memories/s.md","old_str":"middle","new_str":"CAROL"}`, refused("toolu_q", "str_replace", "/memories/s.md")},
		{"toolu_c", `{"command":"create","path":"/memories/n.md","file_text":"ann\n"}`, "File created successfully at: /memories/n.md"},
		{"toolu_c", `{"command":"create","path":"/memories/n.md","file_text":"bob\n"}`, "File created successfully at: /memories/n.md"},
		{"toolu_c", `{"command":"create","path":"/memories/n.md","file_text":"carol\n"}`, refused("toolu_c", "create", "/memories/n.md")},
		{"toolu_i", `{"command":"insert","path":"/memories/s.md","insert_line":1,"insert_text":"from ann"}`, inserted},
		{"toolu_i", `{"command":"insert","path":"/memories/s.md","insert_line":2,"insert_text":"from bob\n"}`, inserted},
		{"toolu_i", `{"command":"insert","path":"/memories/s.md","insert_line":0,"insert_text":"carol"}`, refused("toolu_i", "insert", "/memories/s.md")},
	})
}

// The same with --secret-screening mask, each agent's call writing a
// secret (the commit holds the placeholder): each retry gets its call's
// first answer (the note of what was masked included), and commits
// nothing. Before, a retry was compared with the call's unmasked text,
// neither commit matched, and both agents' retries were refused as
// "already used for another command".
func TestRetryOfTwoMaskedCallsOfOneIDOnOnePath(t *testing.T) {
	t.Parallel()
	const ann, bob, carol = "AKIAZ3MHQ7XKP2LVN4RT", "AKIAQW3RT5YU7IOZPA2S", "AKIAMN6BV6CX4ZL2KJ3H"
	// A want of "": the answer the call got when it was made.
	retryOfTwoCalls(t, policy.ScreenMask, "alpha\nmiddle\nomega\nseen AKIAQW3RT5-YU7IOZPA2S\n", []retryCall{
		{"toolu_q", `{"command":"str_replace","path":"/memories/s.md","old_str":"alpha","new_str":"ann ` + ann + `"}`, ""},
		// A secret whose pieces in the file the edit joins (FindEdit).
		{"toolu_q", `{"command":"str_replace","path":"/memories/s.md","old_str":"5-Y","new_str":"5Y"}`, ""},
		{"toolu_q", `{"command":"str_replace","path":"/memories/s.md","old_str":"middle","new_str":"carol ` + carol + `"}`, refused("toolu_q", "str_replace", "/memories/s.md")},
		{"toolu_c", `{"command":"create","path":"/memories/n.md","file_text":"ann ` + ann + `\n"}`, ""},
		{"toolu_c", `{"command":"create","path":"/memories/n.md","file_text":"bob ` + bob + `\n"}`, ""},
		{"toolu_c", `{"command":"create","path":"/memories/n.md","file_text":"carol ` + carol + `\n"}`, refused("toolu_c", "create", "/memories/n.md")},
		{"toolu_i", `{"command":"insert","path":"/memories/s.md","insert_line":1,"insert_text":"from ann ` + ann + `"}`, ""},
		{"toolu_i", `{"command":"insert","path":"/memories/s.md","insert_line":2,"insert_text":"from bob ` + bob + `\n"}`, ""},
		{"toolu_i", `{"command":"insert","path":"/memories/s.md","insert_line":0,"insert_text":"carol ` + carol + `"}`, refused("toolu_i", "insert", "/memories/s.md")},
	})
}

// retryCall is a call of retryOfTwoCalls and its answer.
type retryCall struct{ id, input, want string }

// refused is the answer to a call of an id whose commits made another
// change.
func refused(id, command, path string) string {
	return "Error: tool_use id " + id + " was already used for another command (memory: " + command + " " + path + "); nothing was changed"
}

// retryOfTwoCalls has ann and bob, with the screening screen, make
// calls[i] and calls[i+1] (i = 0, 3, ...: one id each) on clones of one
// memory holding s.md (base), syncs them, and checks that each call retried on
// either agent, while it runs and after a restart, is answered want (""
// the answer of the call when made) and commits nothing.
func retryOfTwoCalls(t *testing.T, screen policy.ScreenMode, base string, calls []retryCall) {
	ctx := context.Background()
	remote := filepath.Join(gittest.TempDir(t), "srv.git")
	gittest.Git(t, "", "init", "-q", "--bare", "--initial-branch=main", remote)
	opt := func(name string) gitmem.Options { return agentOptions(t, name) }
	annDir, bobDir := filepath.Join(gittest.TempDir(t), "A"), filepath.Join(gittest.TempDir(t), "B")
	ann, _, err := gitmem.Init(ctx, annDir, opt("ann"))
	if err != nil {
		t.Fatal(err)
	}
	ha := handler.New(ann, handler.Options{Logger: testLog(t), Screen: screen})
	if res := call(ha, "c0", `{"command":"create","path":"/memories/s.md","file_text":`+strconv.Quote(base)+`}`); res.IsError {
		t.Fatal(res.Content)
	}
	if err := ann.AddRemote("origin", remote); err != nil {
		t.Fatal(err)
	}
	if _, err := ann.Push(ctx, "origin", gitmem.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	bob, _, err := gitmem.Clone(ctx, remote, bobDir, opt("bob"), gitmem.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hb := handler.New(bob, handler.Options{Logger: testLog(t), Screen: screen})
	for i := 0; i < len(calls); i += 3 {
		for _, made := range []struct {
			h *handler.Handler
			c int
		}{{ha, i}, {hb, i + 1}} {
			c := &calls[made.c]
			res := call(made.h, c.id, c.input)
			if c.want == "" && !res.IsError {
				c.want = res.Content
			}
			if res.IsError || res.Content != c.want {
				t.Fatalf("%s: %+v", c.input, res)
			}
		}
	}
	for _, r := range []*gitmem.Repo{ann, bob, ann} {
		if _, err := r.Sync(ctx, "origin", gitmem.SyncOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, h *handler.Handler, r *gitmem.Repo) {
		t.Helper()
		head, _ := r.Commit(ctx, "HEAD")
		for _, c := range calls {
			if res := call(h, c.id, c.input); res.Content != c.want {
				t.Errorf("%s: the retry of %s: %q, want %q", when, c.input, res.Content, c.want)
			}
		}
		if after, _ := r.Commit(ctx, "HEAD"); after.Hash != head.Hash {
			t.Errorf("%s: a retry committed %s", when, after.Subject)
		}
	}
	check("ann, while she runs", ha, ann)
	check("bob, while he runs", hb, bob)
	for _, m := range []struct {
		name string
		dir  string
		r    **gitmem.Repo
	}{{"ann", annDir, &ann}, {"bob", bobDir, &bob}} {
		if err := (*m.r).Close(); err != nil {
			t.Fatal(err)
		}
		r, err := gitmem.Open(ctx, m.dir, opt(m.name))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		check(m.name+", after a restart", handler.New(r, handler.Options{Logger: testLog(t), Screen: screen}), r)
	}
	if a, b := gittest.Git(t, annDir, "rev-parse", "HEAD"), gittest.Git(t, bobDir, "rev-parse", "HEAD"); a != b {
		t.Errorf("ann is at %s, bob at %s: one history expected", a, b)
	}
}
