package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

// oneCall is one tool_use block sent over a transport, in a context the
// test ends.
type oneCall struct {
	// send sends the block and returns once the transport has taken it
	// in (over HTTP: the request arrived; over stdio: the line was read).
	send func(block []byte)
	// cancel ends the call's context (serve stops; over HTTP also: the
	// client goes away).
	cancel func()
	// answer waits for the call's answer.
	answer func() handler.Result
}

// wait waits for ch, failing the test if it never comes (a hang guard,
// not a timing assertion).
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("%s never happened", what)
	}
}

// httpOneCall sends the block to POST /v1/tool_use of a loopback server
// whose requests' contexts end at cancel, as serve's do when it stops
// (BaseContext) and as net/http ends one whose client goes away.
func httpOneCall(t *testing.T, h *handler.Handler) *oneCall {
	base, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	arrived := make(chan struct{})
	routes := h.HTTP(handler.HTTPOptions{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		routes.ServeHTTP(w, r)
	}))
	srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	srv.Start()
	t.Cleanup(srv.Close)
	answered := make(chan []byte, 1)
	return &oneCall{
		send: func(block []byte) {
			go func() {
				var body []byte
				res, err := http.Post(srv.URL+"/v1/tool_use", "application/json", bytes.NewReader(block))
				if err == nil {
					body, err = io.ReadAll(res.Body)
					res.Body.Close()
				}
				if err != nil {
					t.Error(err)
				}
				answered <- body
			}()
			wait(t, arrived, "the request's arrival")
		},
		// Every context derived from base is done once cancel returns.
		cancel: cancel,
		answer: func() handler.Result {
			var body []byte
			select {
			case body = <-answered:
			case <-time.After(time.Minute):
				t.Fatal("no answer")
			}
			var res handler.Result
			if err := json.Unmarshal(body, &res); err != nil || res.Type == "" {
				t.Fatalf("the answer %q: %v", body, err)
			}
			return res
		},
	}
}

// stdioOneCall sends the block as a line to ServeStdio, whose context
// (serve's) ends at cancel.
func stdioOneCall(t *testing.T, h *handler.Handler) *oneCall {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	in, feed := io.Pipe()
	t.Cleanup(func() { feed.Close() })
	var out bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := h.ServeStdio(ctx, in, &out, handler.Caller{}); err != nil {
			t.Error(err)
		}
	}()
	return &oneCall{
		send: func(block []byte) {
			feed.Write(append(block, '\n'))
			// The server reads the next line only once it answered this
			// one: the block is in hand when a goroutine of ServeStdio
			// runs the call.
			gittest.WaitForStack(t, "handler.(*Handler).stdioLoop", "gitmem.(*Repo).Update")
		},
		cancel: cancel,
		answer: func() handler.Result {
			wait(t, done, "the end of ServeStdio")
			var res handler.Result
			if err := json.Unmarshal(out.Bytes(), &res); err != nil {
				t.Fatalf("the answer %q: %v", out.String(), err)
			}
			return res
		},
	}
}

// A single tool_use block over HTTP and over stdio runs in its request's
// context (over HTTP it ends when the client goes away or the server
// stops; over stdio it is serve's), as arrays and MCP calls do. Cancelled before the call's commit point (it waits for
// the writer lock meanwhile), the call makes no commit and its answer
// says nothing was changed; cancelled after it (in OnCall, once the
// commit is made), the change is kept.
func TestSingleCallRunsInItsRequestContext(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(*testing.T, *handler.Handler) *oneCall{"http": httpOneCall, "stdio": stdioOneCall} {
		for _, late := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/before", true: "/after"}[late], func(t *testing.T) {
				_, repo := newHandler(t, policy.DefaultLimits)
				var oc *oneCall
				h := handler.New(repo, handler.Options{Limits: policy.DefaultLimits, Logger: testLog(t), OnCall: func(handler.Call) {
					if late {
						oc.cancel()
					}
				}})
				oc = open(t, h)
				head, _ := repo.Commit(context.Background(), "HEAD")
				release := holdWriter(t, repo)
				oc.send(block("toolu_ctx", `{"command":"create","path":"/memories/note.md","file_text":"kept?\n"}`))
				if !late {
					oc.cancel()
				}
				release()
				res := oc.answer()
				commits := commitsSince(t, repo, head.Hash)
				if !late {
					if res.Content != "Error: The call was cancelled before its change was saved; nothing was changed" || !res.IsError {
						t.Errorf("a call cancelled before its commit point answered %+v", res)
					}
					if len(commits) != 0 {
						t.Errorf("a call cancelled before its commit point committed: %+v", commits)
					}
					return
				}
				if res.Content != "File created successfully at: /memories/note.md" || res.IsError {
					t.Errorf("a call cancelled after its commit point answered %+v", res)
				}
				if len(commits) != 1 || commits[0].Trailer(gitmem.TrailerToolUseID) != "toolu_ctx" {
					t.Errorf("a call cancelled after its commit point: commits %+v, want its one", commits)
				}
				// The repository's git fsck --strict: at the end (newHandler).
			})
		}
	}
}
