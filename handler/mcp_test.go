package handler_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/policy"
)

var testClient = &mcp.Implementation{Name: "test-client", Version: "1.2.3"}

// pipes runs serve on a pair of pipes, as a process's stdin and stdout:
// it returns the server's input and output. When the test ends the input is
// closed, and serve must return nil.
func pipes(t testing.TB, serve func(in io.Reader, out io.Writer) error) (*io.PipeWriter, *io.PipeReader) {
	in, toServer := io.Pipe()
	fromServer, out := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serve(in, out)
		out.Close()
	}()
	t.Cleanup(func() {
		toServer.Close()
		if err := <-done; err != nil {
			t.Errorf("the server over stdio: %v", err)
		}
	})
	return toServer, fromServer
}

// mcpStdio connects the Go SDK's client to h.ServeMCP over pipes: the
// stdio transport without a process.
func mcpStdio(t testing.TB, h *handler.Handler, c handler.Caller) *mcp.ClientSession {
	t.Helper()
	toServer, fromServer := pipes(t, func(in io.Reader, out io.Writer) error {
		return h.ServeMCP(context.Background(), in, out, c, handler.MCPOptions{})
	})
	cs, err := mcp.NewClient(testClient, nil).Connect(context.Background(), &mcp.IOTransport{Reader: fromServer, Writer: toServer}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// headers adds fixed headers to every request.
type headers struct {
	h    http.Header
	next http.RoundTripper
}

func (hd headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range hd.h {
		r.Header[k] = v
	}
	return hd.next.RoundTrip(r)
}

// mcpHTTP connects the Go SDK's client to h.MCPHTTP on a loopback server,
// sending hdr with every request.
func mcpHTTP(t testing.TB, h *handler.Handler, opt handler.HTTPOptions, hdr http.Header) *mcp.ClientSession {
	t.Helper()
	srv := httptest.NewServer(h.MCPHTTP(opt, handler.MCPOptions{}))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: headers{hdr, http.DefaultTransport}}
	cs, err := mcp.NewClient(testClient, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL + handler.MCPPath, HTTPClient: client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpCall calls the memory tool with input (a JSON object) and meta, and
// returns the result as a tool_result: the text, isError, and the id from
// the result's _meta.
func mcpCall(t testing.TB, cs *mcp.ClientSession, input string, meta mcp.Meta) handler.Result {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Meta: meta, Name: "memory", Arguments: json.RawMessage(input)})
	if err != nil {
		t.Fatalf("%s: %v", input, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content blocks", input, len(res.Content))
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("%s: content %T", input, res.Content[0])
	}
	id, _ := res.Meta[handler.MetaToolUseID].(string)
	return handler.Result{Type: "tool_result", ToolUseID: id, Content: text.Text, IsError: res.IsError}
}

func TestMCPListsOneMemoryTool(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t, policy.DefaultLimits)
	for name, cs := range map[string]*mcp.ClientSession{
		"stdio": mcpStdio(t, h, handler.Caller{}),
		"http":  mcpHTTP(t, h, handler.HTTPOptions{}, nil),
	} {
		t.Run(name, func(t *testing.T) {
			if got := cs.InitializeResult().Instructions; got != handler.MemoryProtocol {
				t.Errorf("instructions %q", got)
			}
			list, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Tools) != 1 || list.Tools[0].Name != "memory" {
				t.Fatalf("tools %+v", list.Tools)
			}
			var schema struct {
				Type       string
				Required   []string
				Properties map[string]struct {
					Type string
					Enum []string
				}
			}
			raw, _ := json.Marshal(list.Tools[0].InputSchema)
			json.Unmarshal(raw, &schema)
			want := []string{"view", "create", "str_replace", "insert", "delete", "rename"}
			if schema.Type != "object" || !slices.Equal(schema.Required, []string{"command"}) || !slices.Equal(schema.Properties["command"].Enum, want) {
				t.Errorf("schema %s", raw)
			}
			for _, p := range []string{"path", "view_range", "file_text", "old_str", "new_str", "insert_line", "insert_text", "old_path", "new_path"} {
				if _, ok := schema.Properties[p]; !ok {
					t.Errorf("schema has no %s: %s", p, raw)
				}
			}
		})
	}
}

// An MCP session: ids from _meta (each accepted spelling) or generated,
// exact results, errors as isError, retries not applied twice, and the
// client's name/version as Agent.
func TestMCPSessionCommits(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			h, repo := newHandler(t, policy.DefaultLimits)
			var cs *mcp.ClientSession
			if transport == "stdio" {
				cs = mcpStdio(t, h, handler.Caller{Session: "s-1"})
			} else {
				cs = mcpHTTP(t, h, handler.HTTPOptions{}, http.Header{handler.HeaderSession: {"s-1"}})
			}
			create := `{"command":"create","path":"/memories/prefs.md","file_text":"tea\n"}`
			for _, tc := range []struct {
				input string
				meta  mcp.Meta
				want  handler.Result
			}{
				{create, mcp.Meta{"claudecode/toolUseId": "toolu_A"},
					handler.Result{Type: "tool_result", ToolUseID: "toolu_A", Content: "File created successfully at: /memories/prefs.md"}},
				{`{"command":"str_replace","path":"/memories/prefs.md","old_str":"coffee","new_str":"x"}`, mcp.Meta{"tool_use_id": "toolu_B"},
					handler.Result{Type: "tool_result", ToolUseID: "toolu_B", IsError: true,
						Content: "Error: No replacement was performed, old_str `coffee` did not appear verbatim in /memories/prefs.md."}},
				{`{"command":"str_replace","path":"/memories/prefs.md","old_str":"tea","new_str":"green tea"}`, mcp.Meta{"toolUseId": "toolu_B"},
					handler.Result{Type: "tool_result", ToolUseID: "toolu_B",
						Content: "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tgreen tea\n     2\t"}},
				// A retry of toolu_A: the first result again, no commit.
				{create, mcp.Meta{"claudecode/toolUseId": "toolu_A"},
					handler.Result{Type: "tool_result", ToolUseID: "toolu_A", Content: "File created successfully at: /memories/prefs.md"}},
				{`{"command":"create","path":"/memories/x","file_text":"x"}`, mcp.Meta{"tool_use_id": 7},
					handler.Result{Type: "tool_result", IsError: true, Content: `Error: _meta "tool_use_id" must be a non-empty string, the call's tool_use id`}},
				{`{"command":"view"}`, mcp.Meta{"tool_use_id": "toolu_C"},
					handler.Result{Type: "tool_result", ToolUseID: "toolu_C", IsError: true, Content: `Error: Missing required parameter "path" for command "view"`}},
			} {
				if got := mcpCall(t, cs, tc.input, tc.meta); got != tc.want {
					t.Errorf("%s %v:\n got %+v\nwant %+v", tc.input, tc.meta, got, tc.want)
				}
			}
			head, _ := repo.Commit(context.Background(), "HEAD")
			// No id in _meta: one is generated, returned and committed.
			res := mcpCall(t, cs, `{"command":"insert","path":"/memories/prefs.md","insert_line":0,"insert_text":"# Prefs"}`, nil)
			if !regexp.MustCompile(`^mcp_[0-9a-f]{24}$`).MatchString(res.ToolUseID) || res.Content != "The file /memories/prefs.md has been edited." {
				t.Errorf("generated id: %+v", res)
			}
			commits := commitsSince(t, repo, head.Hash)
			if len(commits) != 1 || commits[0].Trailer("Tool-Use-Id") != res.ToolUseID {
				t.Fatalf("commits after the retry: %+v", commits)
			}
			log := commitsSince(t, repo, "")
			var got []string
			for _, c := range log {
				got = append(got, c.Trailer("Tool-Use-Id")+" "+c.Trailer("Memory-Command")+" "+c.Trailer("Session")+" "+c.Trailer("Agent")+" "+c.Author.Name)
			}
			want := []string{
				res.ToolUseID + " insert s-1 test-client/1.2.3 test-client/1.2.3",
				"toolu_B str_replace s-1 test-client/1.2.3 test-client/1.2.3",
				"toolu_A create s-1 test-client/1.2.3 test-client/1.2.3",
				" init   op",
			}
			if !slices.Equal(got, want) {
				t.Errorf("history:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// commitsSince lists the first-parent history from HEAD back to (not
// including) stop, newest first; all of it when stop is empty.
func commitsSince(t *testing.T, repo *gitmem.Repo, stop string) []gitmem.Commit {
	t.Helper()
	var out []gitmem.Commit
	for rev := "HEAD"; ; {
		c, err := repo.Commit(context.Background(), rev)
		if err != nil {
			t.Fatal(err)
		}
		if c.Hash == stop {
			return out
		}
		out = append(out, c)
		if len(c.Parents) == 0 {
			return out
		}
		rev = c.Parents[0]
	}
}

// The caller named by the transport wins over the client's name.
func TestMCPAgentNamedByCaller(t *testing.T) {
	t.Parallel()
	h, repo := newHandler(t, policy.DefaultLimits)
	for i, cs := range []*mcp.ClientSession{
		mcpStdio(t, h, handler.Caller{Agent: "planner"}),
		mcpHTTP(t, h, handler.HTTPOptions{}, http.Header{handler.HeaderAgent: {"planner"}}),
	} {
		path := []string{"/memories/a", "/memories/b"}[i]
		mcpCall(t, cs, `{"command":"create","path":"`+path+`","file_text":""}`, nil)
		head, _ := repo.Commit(context.Background(), "HEAD")
		if head.Trailer("Agent") != "planner" || head.Trailer("Memory-Path") != path {
			t.Errorf("%s: Agent %q", path, head.Trailer("Agent"))
		}
	}
}

func TestMCPHTTPGuards(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t, policy.DefaultLimits)
	srv := httptest.NewServer(h.MCPHTTP(handler.HTTPOptions{Token: "s3cret", MaxBodyBytes: 4096}, handler.MCPOptions{}))
	defer srv.Close()
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	big := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`
	for _, tc := range []struct {
		name, method, body, token, host, origin string
		want                                    int
	}{
		{"no token", "POST", initialize, "", "", "", http.StatusUnauthorized},
		{"wrong token", "POST", initialize, "nope", "", "", http.StatusUnauthorized},
		{"token", "POST", initialize, "s3cret", "", "", http.StatusOK},
		{"DNS rebinding", "POST", initialize, "s3cret", "evil.example:80", "", http.StatusForbidden},
		{"cross-origin browser", "POST", initialize, "s3cret", "", "https://evil.example", http.StatusForbidden},
		{"no stream to GET", "GET", "", "s3cret", "", "", http.StatusMethodNotAllowed},
		{"body too large", "POST", big, "s3cret", "", "", http.StatusRequestEntityTooLarge},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+handler.MCPPath, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
			req.Header.Set("Sec-Fetch-Site", "cross-site")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, res.StatusCode, tc.want)
		}
	}
}

// Over stdio, a line that is not a JSON-RPC message (not JSON, not a
// message, over 16 MiB) gets a JSON-RPC error and the session goes on.
func TestMCPStdioBadLines(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t, policy.DefaultLimits)
	toServer, fromServer := pipes(t, func(in io.Reader, out io.Writer) error {
		return h.ServeMCP(context.Background(), in, out, handler.Caller{}, handler.MCPOptions{})
	})
	lines := bufio.NewScanner(fromServer)
	lines.Buffer(nil, 1<<20)
	for _, tc := range []struct{ send, want string }{
		{"not json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is not JSON"}}`},
		{`{"id":"a","cut short`, `{"jsonrpc":"2.0","id":"a","error":{"code":-32700,"message":"Parse error: the line is not JSON"}}`},
		{`{}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the line is not a JSON-RPC 2.0 message"}}`},
		{`[]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the line is not a JSON-RPC 2.0 message"}}`},
		{`"x"`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the line is not a JSON-RPC 2.0 message"}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory","arguments":{"file_text":"` + strings.Repeat("a", handler.MaxLineBytes) + `"}}}`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the message is longer than 16 MiB; it was skipped"}}`},
		{`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
			`{"jsonrpc":"2.0","id":2,"result":{`},
	} {
		if _, err := io.WriteString(toServer, tc.send+"\n"); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() {
			t.Fatalf("%.40s: the session ended: %v", tc.send, lines.Err())
		}
		if got := lines.Text(); got != tc.want && !(strings.HasSuffix(tc.want, "{") && strings.HasPrefix(got, tc.want)) {
			t.Errorf("%.40s:\n got %s\nwant %s", tc.send, got, tc.want)
		}
	}
	// A batch, once the session's version (2025-06-18) has none, gets a
	// JSON-RPC error and the session goes on. Before, the SDK ended the
	// session at it (serve --mcp exited 1) and the lines after it were
	// never run nor answered.
	noBatch := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: JSON-RPC batching is not supported in MCP 2025-06-18 and later"}}`
	for _, tc := range []struct{ send, want string }{
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + `[{"jsonrpc":"2.0","id":9,"method":"tools/list"}]`, noBatch},
		{`[{"jsonrpc":"2.0","method":"notifications/initialized"}]`, noBatch},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, `{"jsonrpc":"2.0","id":3,"result":{`},
	} {
		if _, err := io.WriteString(toServer, tc.send+"\n"); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() {
			t.Fatalf("%.40s: the session ended: %v", tc.send, lines.Err())
		}
		if got := lines.Text(); got != tc.want && !(strings.HasSuffix(tc.want, "{") && strings.HasPrefix(got, tc.want)) {
			t.Errorf("%.40s:\n got %.200s\nwant %s", tc.send, got, tc.want)
		}
	}
}

// Over stdio, every call the client sent before closing its end is
// answered and committed (a script that pipes its calls in and ends: the
// SDK alone would end the session at end of input, dropping them).
func TestMCPStdioAnswersCallsBeforeEndOfInput(t *testing.T) {
	t.Parallel()
	h, r := newHandler(t, policy.DefaultLimits)
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory","arguments":{"command":"create","path":"/memories/a.md","file_text":"one\n"},"_meta":{"tool_use_id":"toolu_eof1"}}}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory","arguments":{"command":"create","path":"/memories/b.md","file_text":"two\n"},"_meta":{"tool_use_id":"toolu_eof2"}}}
`)
	var out strings.Builder
	if err := h.ServeMCP(context.Background(), in, &out, handler.Caller{}, handler.MCPOptions{}); err != nil {
		t.Fatal(err)
	}
	// A call the client cancelled, which may get no answer, does not hold
	// the end of the session.
	cancelled := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}
{"jsonrpc":"2.0","id":7,"method":"sampling/unknown"}
{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}
`)
	if err := h.ServeMCP(context.Background(), cancelled, io.Discard, handler.Caller{}, handler.MCPOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"id":1,"result"`, `{"jsonrpc":"2.0","id":2,"result":{"_meta":{"tool_use_id":"toolu_eof1"},"content":[{"type":"text","text":"File created successfully at: /memories/a.md"}]}}` + "\n",
		`{"jsonrpc":"2.0","id":3,"result":{"_meta":{"tool_use_id":"toolu_eof2"},"content":[{"type":"text","text":"File created successfully at: /memories/b.md"}]}}` + "\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %s in:\n%s", want, out.String())
		}
	}
	for _, id := range []string{"toolu_eof1", "toolu_eof2"} {
		if _, err := r.Resolve(context.Background(), id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}
