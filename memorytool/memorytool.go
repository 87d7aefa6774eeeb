// Package memorytool runs Claude's memory tool (memory_20250818) for Go
// programs that use github.com/anthropics/anthropic-sdk-go/v2, on a gitmem
// memory: in process (a *handler.Handler) or remote (gitmem serve --http).
//
// The SDK declares the memory tool but has no executor for it, and its
// tool runner runs a message's tools in parallel without their tool_use
// ids. Tool.Run is the missing step: given the assistant's BetaMessage, it
// runs its memory tool_use blocks one after another, in order, and returns
// their tool_result blocks, each with its tool_use id:
//
//	mem := memorytool.New(h, handler.Caller{Session: "user-42"})
//	params.Tools = append(params.Tools, memorytool.Param())
//	msg, err := client.Beta.Messages.New(ctx, params)
//	results, err := mem.Run(ctx, msg)
//	params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewBetaUserMessage(results...))
//
// Every successful change is one git commit carrying the tool_use id, so
// calling Run again for the same message (after a network error, say) is
// safe: a call already applied is answered from its commit, not applied
// twice.
package memorytool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/gitmem-dev/gitmem/handler"
)

// Param is the memory tool, for a request's Tools. Requests that use it
// need the beta "context-management-2025-06-27".
func Param() anthropic.BetaToolUnionParam {
	return anthropic.BetaToolUnionParam{OfMemoryTool20250818: &anthropic.BetaMemoryTool20250818Param{}}
}

// Beta is the beta the memory tool needs, for the request's Betas.
const Beta = anthropic.AnthropicBetaContextManagement2025_06_27

// Tool runs memory tool calls against one memory.
type Tool struct {
	run func(ctx context.Context, blocks []handler.Block) ([]handler.Result, error)
}

// New runs the calls in process, with h; c names the Session and Agent
// trailers of the commits.
func New(h *handler.Handler, c handler.Caller) *Tool {
	return &Tool{run: func(ctx context.Context, blocks []handler.Block) ([]handler.Result, error) {
		results := make([]handler.Result, 0, len(blocks))
		for _, b := range blocks {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			results = append(results, h.Handle(ctx, c, b))
		}
		return results, nil
	}}
}

// RemoteOptions configure a Tool that calls gitmem serve --http.
type RemoteOptions struct {
	// Token is the server's bearer token (--token), if it has one.
	Token string
	// Session and Agent become the commits' trailers.
	Session, Agent string
	// Client makes the requests (default http.DefaultClient).
	Client *http.Client
}

// Remote sends the calls to a gitmem HTTP server: endpoint is the URL of
// its tool_use route, e.g. "http://127.0.0.1:7077/v1/tool_use". All of a
// message's calls go in one request, and the server runs them in order.
func Remote(endpoint string, o RemoteOptions) *Tool {
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	return &Tool{run: func(ctx context.Context, blocks []handler.Block) ([]handler.Result, error) {
		body, err := json.Marshal(blocks)
		if err != nil {
			return nil, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if o.Token != "" {
			req.Header.Set("Authorization", "Bearer "+o.Token)
		}
		if o.Session != "" {
			req.Header.Set(handler.HeaderSession, o.Session)
		}
		if o.Agent != "" {
			req.Header.Set(handler.HeaderAgent, o.Agent)
		}
		res, err := o.Client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("gitmem: %w", err)
		}
		defer res.Body.Close()
		data, err := io.ReadAll(res.Body)
		if err != nil {
			return nil, fmt.Errorf("gitmem: %w", err)
		}
		if res.StatusCode != http.StatusOK {
			var e struct{ Error string }
			if json.Unmarshal(data, &e) != nil || e.Error == "" {
				e.Error = string(bytes.TrimSpace(data))
			}
			return nil, fmt.Errorf("gitmem: %s: %s", res.Status, e.Error)
		}
		var results []handler.Result
		if err := json.Unmarshal(data, &results); err != nil {
			return nil, fmt.Errorf("gitmem: the server's answer is not an array of tool_results: %w", err)
		}
		return results, nil
	}}
}

// Run runs msg's memory tool_use blocks in order and returns their
// tool_result blocks, in the same order and each with its tool_use id, to
// append to the next user message. Other blocks, including other tools'
// tool_use blocks, are not its business: their results are the caller's.
// A message without memory calls gives no results. On an error (remote
// only: the server could not be reached or refused the request) no results
// are returned, and Run can be called again for the same message.
func (t *Tool) Run(ctx context.Context, msg *anthropic.BetaMessage) ([]anthropic.BetaContentBlockParamUnion, error) {
	var blocks []handler.Block
	for _, c := range msg.Content {
		if c.Type == "tool_use" && c.Name == handler.ToolName {
			blocks = append(blocks, handler.Block{Type: c.Type, ID: c.ID, Name: c.Name, Input: c.Input})
		}
	}
	if len(blocks) == 0 {
		return nil, nil
	}
	results, err := t.run(ctx, blocks)
	if err != nil {
		return nil, err
	}
	if len(results) != len(blocks) {
		return nil, fmt.Errorf("gitmem: %d results for %d memory calls", len(results), len(blocks))
	}
	out := make([]anthropic.BetaContentBlockParamUnion, len(results))
	for i, r := range results {
		if r.ToolUseID != blocks[i].ID {
			return nil, fmt.Errorf("gitmem: result %d answers tool_use %q, not %q", i, r.ToolUseID, blocks[i].ID)
		}
		p := anthropic.BetaToolResultBlockParam{
			ToolUseID: r.ToolUseID,
			Content:   []anthropic.BetaToolResultBlockParamContentUnion{{OfText: &anthropic.BetaTextBlockParam{Text: r.Content}}},
		}
		if r.IsError {
			p.IsError = anthropic.Bool(true)
		}
		out[i] = anthropic.BetaContentBlockParamUnion{OfToolResult: &p}
	}
	return out, nil
}
