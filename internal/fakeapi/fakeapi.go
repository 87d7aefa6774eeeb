// Package fakeapi is a scripted stand-in for the Anthropic Messages API,
// for tests of agent loops that must run without a key: each POST
// /v1/messages is answered with the next scripted assistant message, and
// every request is recorded for the test to check.
//
// It also applies context editing's clear_tool_uses_20250919 as the API
// documents it, counting a token per 4 bytes of the request: once the
// request passes the trigger (default 100,000 input tokens), the results
// of all tool uses but the last keep (default 3) are cleared, except
// those of exclude_tools, and the answer's context_management lists the
// applied edit (cleared_tool_uses, cleared_input_tokens).
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
	// AppliedEdits is the context_management.applied_edits of the answer
	// (nil when the request asked for no context management).
	AppliedEdits []AppliedEdit
}

// AppliedEdit is a context edit the server applied to a request.
type AppliedEdit struct {
	Type               string `json:"type"`
	ClearedToolUses    int    `json:"cleared_tool_uses"`
	ClearedInputTokens int    `json:"cleared_input_tokens"`
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
	edits, cleared, err := contextEdits(body)
	if err != nil {
		s.t.Errorf("fakeapi: %v: %s", err, body)
		apiError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, Request{Header: r.Header.Clone(), Body: body, AppliedEdits: edits})
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
	reply := map[string]any{
		"id": fmt.Sprintf("msg_fake_%d", n+1), "type": "message", "role": "assistant", "model": req.Model,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": len(body)/4 - cleared, "output_tokens": 10},
	}
	if edits != nil {
		reply["context_management"] = map[string]any{"applied_edits": edits}
	}
	json.NewEncoder(w).Encode(reply)
}

// contextEdits applies a request's clear_tool_uses_20250919 edits: the
// edits applied (empty, not nil, when the request asked for context
// management and nothing was cleared) and the tokens they cleared.
func contextEdits(body []byte) (edits []AppliedEdit, cleared int, err error) {
	var req struct {
		ContextManagement *struct {
			Edits []struct {
				Type    string
				Trigger *struct {
					Type  string
					Value int
				}
				Keep *struct {
					Type  string
					Value int
				}
				ExcludeTools []string `json:"exclude_tools"`
			}
		} `json:"context_management"`
		Messages []struct {
			Content json.RawMessage
		}
	}
	if err := json.Unmarshal(body, &req); err != nil || req.ContextManagement == nil {
		return nil, 0, nil
	}
	// The tool uses in order, with the size of each one's result.
	type use struct {
		name   string
		result int
	}
	var uses []use
	at := map[string]int{}
	for _, m := range req.Messages {
		var blocks []struct {
			Type      string
			ID        string
			Name      string
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		}
		json.Unmarshal(m.Content, &blocks) // a plain string holds no tool use
		for _, b := range blocks {
			switch b.Type {
			case "tool_use":
				at[b.ID] = len(uses)
				uses = append(uses, use{name: b.Name})
			case "tool_result":
				if i, ok := at[b.ToolUseID]; ok {
					uses[i].result = len(b.Content)
				}
			}
		}
	}
	edits = []AppliedEdit{}
	for _, e := range req.ContextManagement.Edits {
		if e.Type != "clear_tool_uses_20250919" {
			return nil, 0, fmt.Errorf("fakeapi applies only clear_tool_uses_20250919, not %q", e.Type)
		}
		trigger, keep := 100000, 3
		if e.Trigger != nil {
			if e.Trigger.Type != "input_tokens" {
				return nil, 0, fmt.Errorf("fakeapi triggers only on input_tokens, not %q", e.Trigger.Type)
			}
			trigger = e.Trigger.Value
		}
		if e.Keep != nil {
			keep = e.Keep.Value
		}
		if len(body)/4-cleared <= trigger {
			continue
		}
		edit := AppliedEdit{Type: e.Type}
		for i := 0; i < len(uses)-keep; i++ {
			if uses[i].result > 0 && !slices.Contains(e.ExcludeTools, uses[i].name) {
				edit.ClearedToolUses++
				edit.ClearedInputTokens += uses[i].result / 4
				uses[i].result = 0
			}
		}
		if edit.ClearedToolUses > 0 {
			edits = append(edits, edit)
			cleared += edit.ClearedInputTokens
		}
	}
	return edits, cleared, nil
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
