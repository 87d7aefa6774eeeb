package handler_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/policy"
)

// A transport connects to a handler as caller c and returns a way to call
// it. Every transport of the handler is here.
type transport struct {
	name    string
	connect func(t testing.TB, h *handler.Handler, c handler.Caller) caller
}

var transports = []transport{
	{"in-process", func(t testing.TB, h *handler.Handler, c handler.Caller) caller {
		return func(id, input string) handler.Result { return h.HandleJSON(context.Background(), c, block(id, input)) }
	}},
	{"stdio", stdioCaller},
	{"http", httpCaller},
	{"mcp-stdio", func(t testing.TB, h *handler.Handler, c handler.Caller) caller {
		return mcpCaller(t, mcpStdio(t, h, c))
	}},
	{"mcp-http", func(t testing.TB, h *handler.Handler, c handler.Caller) caller {
		return mcpCaller(t, mcpHTTP(t, h, handler.HTTPOptions{}, http.Header{handler.HeaderSession: {c.Session}, handler.HeaderAgent: {c.Agent}}))
	}},
}

// stdioCaller writes one block per line to ServeStdio and reads its line.
func stdioCaller(t testing.TB, h *handler.Handler, c handler.Caller) caller {
	toServer, fromServer := pipes(t, func(in io.Reader, out io.Writer) error {
		return h.ServeStdio(context.Background(), in, out, c)
	})
	lines := bufio.NewScanner(fromServer)
	lines.Buffer(nil, 64<<20)
	return func(id, input string) handler.Result {
		if _, err := toServer.Write(append(block(id, input), '\n')); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() {
			t.Fatalf("stdio ended: %v", lines.Err())
		}
		var res handler.Result
		if err := json.Unmarshal(lines.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
}

// httpCaller posts each block to POST /v1/tool_use on a loopback server.
func httpCaller(t testing.TB, h *handler.Handler, c handler.Caller) caller {
	srv := httptest.NewServer(h.HTTP(handler.HTTPOptions{}))
	t.Cleanup(srv.Close)
	return func(id, input string) handler.Result {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/tool_use", bytes.NewReader(block(id, input)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(handler.HeaderSession, c.Session)
		req.Header.Set(handler.HeaderAgent, c.Agent)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var r handler.Result
		if err := json.NewDecoder(res.Body).Decode(&r); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("HTTP %d: %v", res.StatusCode, err)
		}
		return r
	}
}

// mcpCaller calls the memory tool with the id in _meta.
func mcpCaller(t testing.TB, cs *mcp.ClientSession) caller {
	return func(id, input string) handler.Result {
		return mcpCall(t, cs, input, mcp.Meta{handler.MetaToolUseID: id})
	}
}

// One conformance suite, every transport: each script's calls get the same
// exact results in process, over stdio, HTTP, MCP stdio and MCP HTTP, and
// leave the same history. With a fixed clock and the same caller the
// commits are byte-identical, so the suite compares HEAD hashes: a
// transport that changed an id, a trailer, an author or any content would
// show there.
func TestTransportsAgree(t *testing.T) {
	t.Parallel()
	c := handler.Caller{Session: "conformance", Agent: "conformance-agent"}
	for _, s := range scripts {
		t.Run(s.name, func(t *testing.T) {
			heads := map[string]string{}
			for _, tr := range transports {
				t.Run(tr.name, func(t *testing.T) {
					h, repo := newHandler(t, s.limits)
					runOn(t, tr.connect(t, h, c), s.steps)
					head, err := repo.Commit(context.Background(), "HEAD")
					if err != nil {
						t.Fatal(err)
					}
					heads[tr.name] = head.Hash
				})
			}
			for _, tr := range transports[1:] {
				if heads[tr.name] != heads[transports[0].name] {
					t.Errorf("history over %s (HEAD %s) differs from %s (HEAD %s)",
						tr.name, heads[tr.name], transports[0].name, heads[transports[0].name])
				}
			}
		})
	}
}

// The cost of each transport per call, against the same handler work: a
// view of a small file (no commit) and a create (one commit). Numbers:
// docs/performance.md.
func BenchmarkTransports(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr.name+"/view", func(b *testing.B) {
			h, _ := newHandler(b, policy.DefaultLimits)
			call := tr.connect(b, h, handler.Caller{})
			call("toolu_setup", `{"command":"create","path":"/memories/notes.md","file_text":"one\ntwo\n"}`)
			for i := 0; b.Loop(); i++ {
				if res := call(fmt.Sprint("toolu_", i), `{"command":"view","path":"/memories/notes.md"}`); res.IsError {
					b.Fatal(res.Content)
				}
			}
		})
		b.Run(tr.name+"/create", func(b *testing.B) {
			h, _ := newHandler(b, policy.DefaultLimits)
			call := tr.connect(b, h, handler.Caller{})
			for i := 0; b.Loop(); i++ {
				if res := call(fmt.Sprint("toolu_", i), fmt.Sprintf(`{"command":"create","path":"/memories/n%d.md","file_text":"x"}`, i)); res.IsError {
					b.Fatal(res.Content)
				}
			}
		})
	}
}
