// Package fakeapi is a scripted stand-in for the Anthropic Messages API,
// for tests of agent loops that must run without a key: each POST
// /v1/messages is answered with the next scripted assistant message, and
// every request is recorded for the test to check.
package fakeapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Server answers POST /v1/messages from a script.
type Server struct {
	// URL is the base URL to give the SDK client (its base URL option).
	URL string

	t        testing.TB
	mu       sync.Mutex
	replies  []string
	requests []Request
}

// Request is one request the server received.
type Request struct {
	Header http.Header
	Body   json.RawMessage
}

// New starts a server that answers the n-th request with replies[n]: the
// JSON array of an assistant message's content blocks. The stop reason is
// tool_use when the content has a tool_use block, else end_turn. A request
// beyond the script fails the test. The server stops when the test ends.
func New(t testing.TB, replies ...string) *Server {
	s := &Server{t: t, replies: replies}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		s.t.Errorf("fakeapi: unexpected %s %s", r.Method, r.URL.Path)
		apiError(w, http.StatusNotFound, "not_found_error", "fakeapi serves POST /v1/messages only")
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Stream {
		s.t.Errorf("fakeapi: a request it cannot answer (streaming, or not JSON): %s", body)
		apiError(w, http.StatusBadRequest, "invalid_request_error", "fakeapi answers non-streaming JSON requests only")
		return
	}
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, Request{Header: r.Header.Clone(), Body: body})
	s.mu.Unlock()
	if n >= len(s.replies) {
		s.t.Errorf("fakeapi: request %d is beyond the script of %d replies: %s", n+1, len(s.replies), body)
		apiError(w, http.StatusBadRequest, "invalid_request_error", "no more scripted replies")
		return
	}
	content := json.RawMessage(s.replies[n])
	var blocks []struct{ Type string }
	if err := json.Unmarshal(content, &blocks); err != nil {
		s.t.Errorf("fakeapi: reply %d is not a JSON array of content blocks: %v", n+1, err)
	}
	stop := "end_turn"
	for _, b := range blocks {
		if b.Type == "tool_use" {
			stop = "tool_use"
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", fmt.Sprintf("req_fake_%d", n+1))
	json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("msg_fake_%d", n+1), "type": "message", "role": "assistant", "model": req.Model,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": 100, "output_tokens": 10},
	})
}

func apiError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ToolResult is a tool_result block a request carried, its content as
// text.
type ToolResult struct {
	ToolUseID string
	Content   string
	IsError   bool
}

// ToolResults returns the tool_result blocks of the request's last
// message: the answers to the previous reply's tool calls. Content given
// as a string or as text blocks reads the same.
func (r Request) ToolResults() ([]ToolResult, error) {
	var body struct {
		Messages []struct {
			Role    string
			Content json.RawMessage
		}
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || len(body.Messages) == 0 {
		return nil, fmt.Errorf("no messages in %s", r.Body)
	}
	last := body.Messages[len(body.Messages)-1]
	var blocks []struct {
		Type      string          `json:"type"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
	}
	if json.Unmarshal(last.Content, &blocks) != nil {
		return nil, nil // a plain string: no tool results
	}
	var out []ToolResult
	for _, b := range blocks {
		if b.Type != "tool_result" {
			continue
		}
		text, err := contentText(b.Content)
		if err != nil {
			return nil, fmt.Errorf("tool_result %s: %v", b.ToolUseID, err)
		}
		out = append(out, ToolResult{ToolUseID: b.ToolUseID, Content: text, IsError: b.IsError})
	}
	return out, nil
}

func contentText(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []struct{ Type, Text string }
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, blk := range blocks {
		if blk.Type != "text" {
			return "", fmt.Errorf("a %s block in a tool result", blk.Type)
		}
		b.WriteString(blk.Text)
	}
	return b.String(), nil
}

// OK is a successful tool result.
func OK(id, content string) ToolResult { return ToolResult{ToolUseID: id, Content: content} }

// Failed is an error tool result (is_error).
func Failed(id, content string) ToolResult {
	return ToolResult{ToolUseID: id, Content: content, IsError: true}
}

// CheckToolResults checks that the server got one request per entry of
// want, the n-th carrying the tool results want[n] (nil: none), and
// returns the requests.
func (s *Server) CheckToolResults(t testing.TB, want [][]ToolResult) []Request {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) != len(want) {
		t.Fatalf("%d requests to the Messages API, want %d", len(reqs), len(want))
	}
	for i, r := range reqs {
		got, err := r.ToolResults()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want[i]) {
			t.Errorf("request %d's tool results:\n got %+v\nwant %+v", i+1, got, want[i])
		}
	}
	return reqs
}
