// Command agent is a complete agent loop with Claude's memory tool on a
// gitmem memory, using github.com/anthropics/anthropic-sdk-go/v2: the
// Messages API (which adds the memory protocol to the system prompt when
// the memory tool is present), each memory call run in order and
// committed, and optional context editing: as the conversation grows, the
// API clears old tool results (the memory files keep what they hold; the
// model views them again when it needs them), and the agent reports each
// clearing.
//
//	export ANTHROPIC_API_KEY=...
//	go run ./examples/agent "I prefer green tea. Remember that."
//	go run ./examples/agent "What do you know about me?"     # a new session reads the memory
//	git -C memory log                                          # what it wrote, call by call
//
// Flags: -repo DIR (default ./memory, or GITMEM_REPO), -url URL to use a
// gitmem serve --http instead (with -token), -session and -agent for the
// commits' trailers, -model, -context-editing, -max-turns.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/memorytool"
)

// SystemPrompt is the memory tool documentation's advice on keeping the
// memory tidy. The memory protocol ("IMPORTANT: ALWAYS VIEW YOUR MEMORY
// DIRECTORY BEFORE DOING ANYTHING ELSE." ...) is not in it: the API adds
// that to the system prompt itself when the memory tool is present.
const SystemPrompt = "Note: when editing your memory folder, always try to keep its content up-to-date, coherent and organized. " +
	"You can rename or delete files that are no longer relevant. Do not create new files unless necessary."

// Agent runs conversations with Claude and its memory.
type Agent struct {
	Client    *anthropic.Client
	Memory    *memorytool.Tool
	Model     anthropic.Model
	MaxTokens int64
	// ContextEditing has the API clear old tool results once the context
	// grows (clear_tool_uses_20250919, with the API's defaults: past
	// 100,000 input tokens, all but the last 3 tool uses). The memory tool
	// is this agent's only tool, so its results are the ones cleared: the
	// memory files still hold what they held, and the model views them
	// again when it needs them. Each clearing is reported to Log.
	ContextEditing bool
	// MaxTurns bounds the requests of one Run.
	MaxTurns int
	// Log, when set, gets each tool call and its result.
	Log io.Writer
}

// Run sends task as a new conversation and answers the model's memory
// calls until it ends its turn; it returns the final text.
func (a *Agent) Run(ctx context.Context, task string) (string, error) {
	params := anthropic.BetaMessageNewParams{
		Model:     a.Model,
		MaxTokens: a.MaxTokens,
		System:    []anthropic.BetaTextBlockParam{{Text: SystemPrompt}},
		Tools:     []anthropic.BetaToolUnionParam{memorytool.Param()},
		Betas:     []anthropic.AnthropicBeta{memorytool.Beta},
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(task))},
	}
	if a.ContextEditing {
		// Not exclude_tools: ["memory"], which the documentation suggests
		// beside other tools; with the memory tool alone it would leave
		// nothing to clear.
		params.ContextManagement = anthropic.BetaContextManagementConfigParam{
			Edits: []anthropic.BetaContextManagementConfigEditUnionParam{{
				OfClearToolUses20250919: &anthropic.BetaClearToolUses20250919EditParam{},
			}},
		}
	}
	for range a.MaxTurns {
		msg, err := a.Client.Beta.Messages.New(ctx, params)
		if err != nil {
			return "", err
		}
		a.logEdits(msg)
		// The whole history goes on: the API applies its edits to each
		// request, the client keeps what it sent.
		params.Messages = append(params.Messages, msg.ToParam())
		if msg.StopReason != anthropic.BetaStopReasonToolUse {
			return text(msg), nil
		}
		results, err := a.Memory.Run(ctx, msg)
		if err != nil {
			return "", err
		}
		// Only the memory tool is offered; any other call gets an error
		// the model can read, so every tool_use has its result.
		for _, b := range msg.Content {
			if b.Type == "tool_use" && b.Name != handler.ToolName {
				results = append(results, anthropic.NewBetaToolResultBlock(b.ID, "Error: there is no tool named "+b.Name, true))
			}
		}
		a.log(msg, results)
		params.Messages = append(params.Messages, anthropic.NewBetaUserMessage(results...))
	}
	return "", fmt.Errorf("no final answer after %d requests", a.MaxTurns)
}

func text(msg *anthropic.BetaMessage) string {
	var parts []string
	for _, b := range msg.Content {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// logEdits reports the context edits the API applied to the request msg
// answers.
func (a *Agent) logEdits(msg *anthropic.BetaMessage) {
	if a.Log == nil {
		return
	}
	for _, e := range msg.ContextManagement.AppliedEdits {
		fmt.Fprintf(a.Log, "context editing (%s) cleared %d tool results, %d input tokens\n", e.Type, e.ClearedToolUses, e.ClearedInputTokens)
	}
}

func (a *Agent) log(msg *anthropic.BetaMessage, results []anthropic.BetaContentBlockParamUnion) {
	if a.Log == nil {
		return
	}
	out := map[string]string{}
	for _, r := range results {
		if tr := r.OfToolResult; tr != nil && len(tr.Content) > 0 && tr.Content[0].OfText != nil {
			out[tr.ToolUseID] = tr.Content[0].OfText.Text
		}
	}
	for _, b := range msg.Content {
		if b.Type == "tool_use" {
			fmt.Fprintf(a.Log, "> %s %s\n%s\n", b.Name, b.Input, out[b.ID])
		}
	}
}

func main() {
	log.SetFlags(0)
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	var (
		repoDir        = flag.String("repo", envOr("GITMEM_REPO", "./memory"), "the gitmem repository (created if missing)")
		url            = flag.String("url", "", "a gitmem serve --http tool_use URL to use instead of -repo, e.g. http://127.0.0.1:7077/v1/tool_use")
		token          = flag.String("token", os.Getenv("GITMEM_TOKEN"), "the token of the -url server")
		session        = flag.String("session", time.Now().UTC().Format("20060102T150405Z"), "the Session trailer of this run's commits")
		agentName      = flag.String("agent", "examples/agent", "the Agent trailer (and author) of the commits")
		model          = flag.String("model", "claude-opus-4-6", "the model")
		contextEditing = flag.Bool("context-editing", false, "have the API clear old tool results as the context grows (past 100,000 input tokens; the memory files keep what they hold)")
		maxTurns       = flag.Int("max-turns", 30, "most requests for one task")
	)
	flag.Parse()
	task := strings.Join(flag.Args(), " ")
	if task == "" {
		data, err := io.ReadAll(os.Stdin)
		if err != nil {
			return err
		}
		task = strings.TrimSpace(string(data))
	}
	if task == "" {
		return errors.New("usage: agent [flags] TASK (or the task on stdin)")
	}
	if os.Getenv("ANTHROPIC_API_KEY") == "" && os.Getenv("ANTHROPIC_AUTH_TOKEN") == "" {
		// Before the memory is made: a run that cannot start leaves nothing behind.
		return errors.New("set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) to run the agent")
	}
	var mem *memorytool.Tool
	if *url != "" {
		mem = memorytool.Remote(*url, memorytool.RemoteOptions{Token: *token, Session: *session, Agent: *agentName})
	} else {
		repo, _, err := gitmem.Init(context.Background(), *repoDir, gitmem.Options{})
		if err != nil {
			return err
		}
		defer repo.Close()
		mem = memorytool.New(handler.New(repo, handler.Options{}), handler.Caller{Session: *session, Agent: *agentName})
	}
	client := anthropic.NewClient() // ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL
	a := &Agent{Client: &client, Memory: mem, Model: anthropic.Model(*model), MaxTokens: 4096,
		ContextEditing: *contextEditing, MaxTurns: *maxTurns, Log: os.Stderr}
	answer, err := a.Run(context.Background(), task)
	if err != nil {
		return err
	}
	fmt.Println(answer)
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
