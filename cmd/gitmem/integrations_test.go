package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/fakeapi"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/internal/nodetest"
)

// These tests run the real CLI (this test binary, which TestMain puts on
// PATH as gitmem) against real client libraries driven by node.

// testEnv is the environment of the processes a test starts: a fixed
// clock and git identity, so commits are reproducible.
func testEnv(t *testing.T) []string {
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = Olive Operator\n\temail = olive@example.com\n"), 0o600)
	return append(os.Environ(), "GITMEM_NOW=2026-03-01T09:00:00Z", "GIT_CONFIG_NOSYSTEM=1", "HOME="+home)
}

// behindClone makes, under dir, a bare repository shared.git, a memory a
// that pushed to it, and b, a gitmem clone of it that lacks the ahead
// commits a pushed after (b's origin is shared.git). It runs the code of
// gitmem init, remote add, push and clone in this process, at testEnv's
// clock and identity: a gitmem process for each was a quarter second of
// CPU (-race).
func behindClone(t *testing.T, dir string, ahead int) {
	t.Helper()
	gittest.Git(t, dir, "init", "-q", "--bare", "--initial-branch=main", "shared.git")
	ctx, shared := context.Background(), filepath.Join(dir, "shared.git")
	opt := gitmem.Options{Now: func() time.Time { return time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC) },
		Operator: gitmem.Signature{Name: "Olive Operator", Email: "olive@example.com"}, Logf: t.Logf}
	a, _, err := gitmem.Init(ctx, filepath.Join(dir, "a"), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.AddRemote("origin", shared); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Push(ctx, "origin", gitmem.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	b, _, err := gitmem.Clone(ctx, shared, filepath.Join(dir, "b"), opt, gitmem.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range ahead {
		f := fmt.Sprintf("%c.md", 'x'+i)
		if _, err := a.Update(ctx, gitmem.Meta{Subject: "memory: create /memories/" + f}, func(tx *gitmem.Tx) error { return tx.WriteFile(f, []byte("note\n")) }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Push(ctx, "origin", gitmem.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// waitForInGit waits until git's branch in repo is at the commit of the
// tool call id (the server writes git's files in the background).
func waitForInGit(t *testing.T, repo, id string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		out, err := gittest.Command(t, repo, "log", "-1", "--format=%(trailers:key=Tool-Use-Id,valueonly)").Output()
		if err == nil && strings.TrimSpace(string(out)) == id {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not in git's files: %s", id, out)
		}
	}
}

// serveHTTPProcess starts "gitmem --repo REPO serve FLAG ADDR ARGS..." on a
// free loopback port and waits until it answers /healthz. stop ends it
// with SIGTERM and waits for it.
func serveHTTPProcess(t *testing.T, env []string, repo, flag string, args ...string) (base string, stop func()) {
	t.Helper()
	base, _, stop = startHTTPProcess(t, env, repo, flag, args...)
	return base, stop
}

// startHTTPProcess is serveHTTPProcess that also gives the process.
func startHTTPProcess(t *testing.T, env []string, repo, flag string, args ...string) (base string, proc *os.Process, stop func()) {
	t.Helper()
	return startHTTPProcessTo(t, os.Stderr, env, repo, flag, args...)
}

// startHTTPProcessTo is startHTTPProcess with serve's log going to
// stderr.
func startHTTPProcessTo(t *testing.T, stderr io.Writer, env []string, repo, flag string, args ...string) (base string, proc *os.Process, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command("gitmem", append([]string{"--repo", repo, "serve", flag, addr}, args...)...)
	cmd.Env = env
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			if _, sent := terminated.Load(cmd.Process); !sent {
				cmd.Process.Signal(syscall.SIGTERM)
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("gitmem serve: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	base = "http://" + addr
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		req, _ := http.NewRequest("GET", base+"/healthz", nil)
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--token" {
				req.Header.Set("Authorization", "Bearer "+args[i+1])
			}
		}
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return base, cmd.Process, stop
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("gitmem serve %s %s did not start", flag, addr)
		}
	}
}

// terminated holds the serve processes a test sent SIGTERM itself
// (terminate): their stop waits for them to exit, and sends no second
// one, which would find serve past its handler, about to exit, and end
// it ("signal: terminated").
var terminated sync.Map

// terminate sends SIGTERM to a serve process startHTTPProcess started.
func terminate(p *os.Process) {
	terminated.Store(p, true)
	p.Signal(syscall.SIGTERM)
}

// gitLog is the history of repo by the git CLI, newest first, one line a
// commit: the tool_use id, command, path, session, agent and author name.
func gitLog(t *testing.T, repo string) []string {
	t.Helper()
	format := "%(trailers:key=Tool-Use-Id,valueonly,separator=)|%(trailers:key=Memory-Command,valueonly,separator=)|" +
		"%(trailers:key=Memory-Path,valueonly,separator=)|%(trailers:key=Session,valueonly,separator=)|" +
		"%(trailers:key=Agent,valueonly,separator=)|%an"
	return strings.Split(strings.TrimSuffix(gittest.Git(t, repo, "log", "--format="+format), "\n"), "\n")
}

// mcpCall is one call for testdata/mcp-client/client.mjs.
type mcpCall struct {
	Arguments json.RawMessage `json:"arguments"`
	Meta      map[string]any  `json:"meta,omitempty"`
}

type mcpRun struct {
	Instructions string
	Tools        []struct {
		Name        string
		InputSchema struct {
			Properties map[string]struct{ Enum []string }
		}
	}
	Results []struct {
		Content []struct{ Type, Text string }
		IsError bool
		Meta    map[string]any `json:"_meta"`
	}
}

// When gitmem cannot be reached, or refuses the token, the TypeScript
// module's failure reaches the developer: the toolRunner throws a
// GitmemError (its middleware stops the request that would carry the
// failure to the model), and nothing is committed. Only the memory's own
// errors go to the model (TestTypeScriptToolRunner).
func TestTypeScriptServerFailureReachesTheDeveloper(t *testing.T) {
	t.Parallel()
	dir := nodetest.Harness(t, "../../typescript/test", "@anthropic-ai/sdk")
	env := testEnv(t)
	repo := filepath.Join(gittest.TempDir(t), "memory")
	base, stop := serveHTTPProcess(t, env, repo, "--http", "--token", "s3cret")
	defer stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/v1/tool_use"
	ln.Close() // nothing listens there
	for _, tc := range []struct {
		name, url, token, message string
		status                    int
	}{
		{"wrong token", base + "/v1/tool_use", "nope", "gitmem answered 401: missing or wrong bearer token", 401},
		{"server down", down, "s3cret", "gitmem could not be reached at " + down + ": fetch failed", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := fakeapi.New(t,
				`[{"type":"tool_use","id":"toolu_01","name":"memory","input":{"command":"create","path":"/memories/prefs.md","file_text":"likes tea\n"}}]`,
				`[{"type":"text","text":"Sorry, my memory is not working."}]`,
			)
			cmd := exec.Command("node", filepath.Join(dir, "run.mjs"))
			cmd.Env = append(env, "FAKE_API_URL="+api.URL, "GITMEM_URL="+tc.url, "GITMEM_TOKEN="+tc.token)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node run.mjs: %v", err)
			}
			var run struct {
				Error *struct {
					Name, Message string
					Status        int
				}
			}
			json.Unmarshal(out, &run)
			if run.Error == nil {
				t.Fatalf("the run finished as if nothing was wrong: %s", out)
			}
			if run.Error.Name != "GitmemError" || run.Error.Message != tc.message || run.Error.Status != tc.status {
				t.Errorf("the run threw %+v", *run.Error)
			}
			// The failure never reached the model.
			if n := len(api.Requests()); n != 1 {
				t.Errorf("%d requests to the Messages API, want 1 (none carrying the failure)", n)
			}
		})
	}
	stop()
	if got := gitLog(t, repo); len(got) != 1 {
		t.Errorf("history: %v", got)
	}
	gittest.Fsck(t, repo)
}

// An MCP session with the official TypeScript MCP SDK's client, over
// stdio (the client spawns gitmem serve --mcp, as Claude Code and Claude
// Desktop do) and over streamable HTTP: the tool list, exact results, and
// commits whose trailers carry the ids from _meta and the client's name.
func TestMCPWithTypeScriptSDK(t *testing.T) {
	t.Parallel()
	dir := nodetest.Harness(t, "testdata/mcp-client", "@modelcontextprotocol/sdk")
	calls := []mcpCall{
		{json.RawMessage(`{"command":"view","path":"/memories"}`), map[string]any{"claudecode/toolUseId": "toolu_01"}},
		{json.RawMessage(`{"command":"create","path":"/memories/prefs.md","file_text":"likes tea\n"}`), map[string]any{"claudecode/toolUseId": "toolu_02"}},
		{json.RawMessage(`{"command":"str_replace","path":"/memories/prefs.md","old_str":"coffee","new_str":"x"}`), map[string]any{"claudecode/toolUseId": "toolu_03"}},
		{json.RawMessage(`{"command":"str_replace","path":"/memories/prefs.md","old_str":"tea","new_str":"green tea"}`), map[string]any{"tool_use_id": "toolu_04"}},
		{json.RawMessage(`{"command":"str_replace","path":"/memories/prefs.md","old_str":"tea","new_str":"green tea"}`), map[string]any{"tool_use_id": "toolu_04"}}, // a retry
		{json.RawMessage(`{"command":"rename","old_path":"/memories/prefs.md","new_path":"/memories/user/prefs.md"}`), nil},
	}
	want := []struct {
		id, text string
		isError  bool
	}{
		{"toolu_01", "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories", false},
		{"toolu_02", "File created successfully at: /memories/prefs.md", false},
		{"toolu_03", "Error: No replacement was performed, old_str `coffee` did not appear verbatim in /memories/prefs.md.", true},
		{"toolu_04", "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tlikes green tea\n     2\t", false},
		{"toolu_04", "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tlikes green tea\n     2\t", false},
		{"", "Successfully renamed /memories/prefs.md to /memories/user/prefs.md", false},
	}
	input, _ := json.Marshal(calls)
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			env := testEnv(t)
			repo := filepath.Join(gittest.TempDir(t), "memory")
			var args []string
			stop := func() {}
			if transport == "stdio" {
				args = []string{"stdio", "gitmem", "--repo", repo, "serve", "--mcp", "--session", "s-7"}
			} else {
				var base string
				base, stop = serveHTTPProcess(t, env, repo, "--mcp-http", "--token", "s3cret")
				args = []string{"http", base + handler.MCPPath, "Authorization=Bearer s3cret", handler.HeaderSession + "=s-7"}
			}
			cmd := exec.Command("node", append([]string{filepath.Join(dir, "client.mjs")}, args...)...)
			cmd.Env, cmd.Stdin, cmd.Stderr = env, bytes.NewReader(input), os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node client.mjs: %v", err)
			}
			stop()
			var run mcpRun
			if err := json.Unmarshal(out, &run); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if run.Instructions != handler.MemoryProtocol {
				t.Errorf("instructions %q", run.Instructions)
			}
			if len(run.Tools) != 1 || run.Tools[0].Name != "memory" ||
				!slices.Equal(run.Tools[0].InputSchema.Properties["command"].Enum, []string{"view", "create", "str_replace", "insert", "delete", "rename"}) {
				t.Errorf("tools %+v", run.Tools)
			}
			if len(run.Results) != len(want) {
				t.Fatalf("%d results", len(run.Results))
			}
			generated := ""
			for i, w := range want {
				r := run.Results[i]
				id, _ := r.Meta[handler.MetaToolUseID].(string)
				if w.id == "" && regexp.MustCompile(`^mcp_[0-9a-f]{24}$`).MatchString(id) {
					generated, w.id = id, id
				}
				if len(r.Content) != 1 || r.Content[0].Type != "text" || r.Content[0].Text != w.text || r.IsError != w.isError || id != w.id {
					t.Errorf("call %d: %+v\nwant %+v", i, r, w)
				}
			}
			agent := "gitmem-test-client/1.0.0"
			wantLog := []string{
				fmt.Sprintf("%s|rename|/memories/prefs.md|s-7|%s|%s", generated, agent, agent),
				fmt.Sprintf("toolu_04|str_replace|/memories/prefs.md|s-7|%s|%s", agent, agent),
				fmt.Sprintf("toolu_02|create|/memories/prefs.md|s-7|%s|%s", agent, agent),
				"|init||||Olive Operator",
			}
			if got := gitLog(t, repo); !slices.Equal(got, wantLog) {
				t.Errorf("history:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantLog, "\n"))
			}
		})
	}
}

// The official TypeScript MCP SDK's client sends its calls all at once
// (Promise.all, each without waiting for the answers before it) to gitmem
// serve --mcp: each is answered in the order sent, so every view sees the
// writes sent before it.
func TestMCPPipelinedWithTypeScriptSDK(t *testing.T) {
	t.Parallel()
	dir := nodetest.Harness(t, "testdata/mcp-client", "@modelcontextprotocol/sdk")
	const n = 15
	var calls []mcpCall
	for i := range n {
		calls = append(calls,
			mcpCall{json.RawMessage(fmt.Sprintf(`{"command":"create","path":"/memories/f%d.md","file_text":"one\n"}`, i)), nil},
			mcpCall{json.RawMessage(fmt.Sprintf(`{"command":"str_replace","path":"/memories/f%d.md","old_str":"one","new_str":"two"}`, i)), nil},
			mcpCall{json.RawMessage(fmt.Sprintf(`{"command":"view","path":"/memories/f%d.md"}`, i)), nil})
	}
	input, _ := json.Marshal(calls)
	env := testEnv(t)
	repo := filepath.Join(gittest.TempDir(t), "memory")
	cmd := exec.Command("node", filepath.Join(dir, "client.mjs"), "stdio", "gitmem", "--repo", repo, "serve", "--mcp")
	cmd.Env, cmd.Stdin, cmd.Stderr = append(env, "MCP_PIPELINE=1"), bytes.NewReader(input), os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v", err)
	}
	var run mcpRun
	if err := json.Unmarshal(out, &run); err != nil || len(run.Results) != 3*n {
		t.Fatalf("%v: %s", err, out)
	}
	wrong := 0
	for i := range n {
		r := run.Results[3*i+2]
		want := fmt.Sprintf("Here's the content of /memories/f%d.md with line numbers:\n     1\ttwo\n     2\t", i)
		if len(r.Content) != 1 || r.Content[0].Text != want || r.IsError {
			wrong++
			t.Errorf("view %d: %+v", i, r)
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d views did not see the writes sent before them", wrong, n)
	}
	if got := len(gitLog(t, repo)); got != 1+2*n {
		t.Errorf("%d commits, want %d", got, 1+2*n)
	}
	gittest.Fsck(t, repo)
}

// The TypeScript module (typescript/) under the real @anthropic-ai/sdk
// toolRunner, against a scripted Messages API and the real gitmem serve
// --http: the tool_results the runner sends back, with the model's ids,
// and the commits. Also: the shipped dist/ is what tsc makes of src/, it
// type-checks as the SDK's BetaRunnableTool, and its unit tests pass.
func TestTypeScriptToolRunner(t *testing.T) {
	t.Parallel()
	dir := nodetest.Harness(t, "../../typescript/test", "@anthropic-ai/sdk")
	module := filepath.Dir(dir)
	tsc := filepath.Join(dir, "node_modules", ".bin", "tsc")
	out := t.TempDir()
	if b, err := exec.Command(tsc, "-p", module, "--outDir", out).CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, b)
	}
	for _, f := range []string{"index.js", "index.d.ts"} {
		built, _ := os.ReadFile(filepath.Join(out, f))
		shipped, _ := os.ReadFile(filepath.Join(module, "dist", f))
		if !bytes.Equal(built, shipped) {
			t.Errorf("typescript/dist/%s is not what tsc makes of src/: rebuild with tsc -p typescript", f)
		}
	}
	if b, err := exec.Command(tsc, "-p", dir).CombinedOutput(); err != nil {
		t.Errorf("type check against the SDK: %v\n%s", err, b)
	}
	if b, err := exec.Command("node", "--test", filepath.Join(dir, "unit.test.mjs")).CombinedOutput(); err != nil {
		t.Errorf("the module's unit tests: %v\n%s", err, b)
	}

	api := fakeapi.New(t,
		`[{"type":"text","text":"Let me check my memory."},
		  {"type":"tool_use","id":"toolu_01","name":"memory","input":{"command":"view","path":"/memories"}}]`,
		// Two calls in one message: the second needs the first.
		`[{"type":"tool_use","id":"toolu_02","name":"memory","input":{"command":"create","path":"/memories/prefs.md","file_text":"likes tea\n"}},
		  {"type":"tool_use","id":"toolu_03","name":"memory","input":{"command":"str_replace","path":"/memories/prefs.md","old_str":"tea","new_str":"green tea"}}]`,
		`[{"type":"tool_use","id":"toolu_04","name":"memory","input":{"command":"str_replace","path":"/memories/prefs.md","old_str":"coffee","new_str":"x"}}]`,
		`[{"type":"tool_use","id":"toolu_05","name":"memory","input":{"command":"view","path":"/memories/prefs.md"}}]`,
		`[{"type":"text","text":"Noted: you like green tea."}]`,
	)
	env := testEnv(t)
	repo := filepath.Join(gittest.TempDir(t), "memory")
	base, stop := serveHTTPProcess(t, env, repo, "--http", "--token", "s3cret")
	cmd := exec.Command("node", filepath.Join(dir, "run.mjs"))
	cmd.Env = append(env, "FAKE_API_URL="+api.URL, "GITMEM_URL="+base+"/v1/tool_use", "GITMEM_TOKEN=s3cret")
	cmd.Stderr = os.Stderr
	final, err := cmd.Output()
	if err != nil {
		t.Fatalf("node run.mjs: %v", err)
	}
	stop()
	if !strings.Contains(string(final), "Noted: you like green tea.") {
		t.Errorf("final message: %s", final)
	}
	want := [][]fakeapi.ToolResult{
		nil,
		{fakeapi.OK("toolu_01", "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories")},
		{fakeapi.OK("toolu_02", "File created successfully at: /memories/prefs.md"),
			fakeapi.OK("toolu_03", "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tlikes green tea\n     2\t")},
		{fakeapi.Failed("toolu_04", "Error: No replacement was performed, old_str `coffee` did not appear verbatim in /memories/prefs.md.")},
		{fakeapi.OK("toolu_05", "Here's the content of /memories/prefs.md with line numbers:\n     1\tlikes green tea\n     2\t")},
	}
	for i, r := range api.CheckToolResults(t, want) {
		// The first request declares the tool; the runner's later turns
		// continue the thread (its default), sending only the new message.
		if i == 0 && !strings.Contains(string(r.Body), `"tools":[{"type":"memory_20250818","name":"memory"}]`) {
			t.Errorf("request %d does not declare the memory tool: %s", i+1, r.Body)
		}
		if !strings.Contains(r.Header.Get("anthropic-beta"), "context-management-2025-06-27") {
			t.Errorf("request %d: anthropic-beta %q", i+1, r.Header.Get("anthropic-beta"))
		}
	}
	wantLog := []string{
		"toolu_03|str_replace|/memories/prefs.md|ts-session|ts-agent|ts-agent",
		"toolu_02|create|/memories/prefs.md|ts-session|ts-agent|ts-agent",
		"|init||||Olive Operator",
	}
	if got := gitLog(t, repo); !slices.Equal(got, wantLog) {
		t.Errorf("history:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantLog, "\n"))
	}
}
