package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/fakeapi"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/memorytool"
)

func newRepo(t *testing.T) *gitmem.Repo {
	t.Helper()
	repo, _, err := gitmem.Init(context.Background(), gittest.TempDir(t), gitmem.Options{
		Now:      func() time.Time { return time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC) },
		Operator: gitmem.Signature{Name: "op", Email: "op@example.com"},
		Logf:     t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	return repo
}

// Two sessions against a scripted Messages API: the first views its
// memory, creates a file, edits it, makes a failing insert and retries it;
// the second, a new conversation, reads what the first wrote. The test
// checks every request (system prompt, tool, beta, context editing, the
// tool_results with their ids) and the commits. (Too short for the API to
// clear anything: TestAgentContextEditingClearsOldResults.)
func TestAgentLoop(t *testing.T) {
	t.Parallel()
	api := fakeapi.New(t,
		// Session 1.
		`[{"type":"text","text":"I'll check my memory first."},
		  {"type":"tool_use","id":"toolu_s1_1","name":"memory","input":{"command":"view","path":"/memories"}}]`,
		`[{"type":"tool_use","id":"toolu_s1_2","name":"memory","input":{"command":"create","path":"/memories/user.md","file_text":"# User\n- prefers tea\n"}}]`,
		`[{"type":"tool_use","id":"toolu_s1_3","name":"memory","input":{"command":"str_replace","path":"/memories/user.md","old_str":"prefers tea","new_str":"prefers green tea"}}]`,
		`[{"type":"tool_use","id":"toolu_s1_4","name":"memory","input":{"command":"insert","path":"/memories/user.md","insert_line":5,"insert_text":"- cat: Miso"}}]`,
		`[{"type":"text","text":"Line 5 is past the end; the file has 2 lines."},
		  {"type":"tool_use","id":"toolu_s1_5","name":"memory","input":{"command":"insert","path":"/memories/user.md","insert_line":2,"insert_text":"- cat: Miso"}}]`,
		`[{"type":"text","text":"Noted: green tea, and Miso the cat."}]`,
		// Session 2.
		`[{"type":"tool_use","id":"toolu_s2_1","name":"memory","input":{"command":"view","path":"/memories"}}]`,
		`[{"type":"tool_use","id":"toolu_s2_2","name":"memory","input":{"command":"view","path":"/memories/user.md"}}]`,
		`[{"type":"text","text":"You prefer green tea and your cat is called Miso."}]`,
	)
	client := anthropic.NewClient(option.WithBaseURL(api.URL), option.WithAPIKey("test-key"), option.WithMaxRetries(0))
	repo := newRepo(t)
	h := handler.New(repo, handler.Options{})
	var logged bytes.Buffer
	run := func(session, task string) string {
		a := &Agent{Client: &client, Memory: memorytool.New(h, handler.Caller{Session: session, Agent: "examples/agent"}),
			Model: "claude-opus-4-6", MaxTokens: 1024, ContextEditing: true, MaxTurns: 10, Log: &logged}
		answer, err := a.Run(context.Background(), task)
		if err != nil {
			t.Fatal(err)
		}
		return answer
	}
	if got := run("s1", "I prefer green tea, and my cat is called Miso. Remember that."); got != "Noted: green tea, and Miso the cat." {
		t.Errorf("session 1 answered %q", got)
	}
	if got := run("s2", "What do you know about me?"); got != "You prefer green tea and your cat is called Miso." {
		t.Errorf("session 2 answered %q", got)
	}

	snippet := "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\t# User\n     2\t- prefers green tea\n     3\t"
	want := [][]fakeapi.ToolResult{
		nil,
		{fakeapi.OK("toolu_s1_1", "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories")},
		{fakeapi.OK("toolu_s1_2", "File created successfully at: /memories/user.md")},
		{fakeapi.OK("toolu_s1_3", snippet)},
		{fakeapi.Failed("toolu_s1_4", "Error: Invalid `insert_line` parameter: 5. It should be within the range of lines of the file: [0, 2]")},
		{fakeapi.OK("toolu_s1_5", "The file /memories/user.md has been edited.")},
		nil,
		{fakeapi.OK("toolu_s2_1", "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n39B\t/memories\n39B\t/memories/user.md")},
		// The second session reads what the first wrote.
		{fakeapi.OK("toolu_s2_2", "Here's the content of /memories/user.md with line numbers:\n     1\t# User\n     2\t- prefers green tea\n     3\t- cat: Miso\n     4\t")},
	}
	for i, r := range api.CheckToolResults(t, want) {
		var body struct {
			System            []struct{ Text string }
			Tools             []map[string]any
			ContextManagement json.RawMessage `json:"context_management"`
			Messages          []json.RawMessage
		}
		json.Unmarshal(r.Body, &body)
		// The API adds the memory protocol itself: the agent does not send it again.
		if len(body.System) != 1 || body.System[0].Text != SystemPrompt || strings.Contains(string(r.Body), "MEMORY PROTOCOL") {
			t.Errorf("request %d: system %+v", i+1, body.System)
		}
		if len(body.Tools) != 1 || body.Tools[0]["type"] != "memory_20250818" || body.Tools[0]["name"] != "memory" {
			t.Errorf("request %d: tools %+v", i+1, body.Tools)
		}
		if got := string(body.ContextManagement); got != `{"edits":[{"type":"clear_tool_uses_20250919"}]}` {
			t.Errorf("request %d: context_management %s", i+1, got)
		}
		// The SDK (v2) sends the API key as a bearer token, and only so.
		if !strings.Contains(r.Header.Get("anthropic-beta"), "context-management-2025-06-27") || r.Header.Get("Authorization") != "Bearer test-key" ||
			r.Header.Get("X-Api-Key") != "" {
			t.Errorf("request %d: headers %v", i+1, r.Header)
		}
		// Each session is its own conversation (the second starts at request
		// 7): its history grows by two messages a turn.
		first := 0
		if i >= 6 {
			first = 6
		}
		if n := len(body.Messages); n != 1+2*(i-first) {
			t.Errorf("request %d carries %d messages", i+1, n)
		}
	}

	var history []string
	for c, _ := repo.Commit(context.Background(), "HEAD"); ; {
		history = append(history, c.Trailer("Tool-Use-Id")+" "+c.Subject+" "+c.Trailer("Session")+" "+c.Trailer("Agent"))
		if len(c.Parents) == 0 {
			break
		}
		c, _ = repo.Commit(context.Background(), c.Parents[0])
	}
	wantHistory := []string{
		"toolu_s1_5 memory: insert /memories/user.md s1 examples/agent",
		"toolu_s1_3 memory: str_replace /memories/user.md s1 examples/agent",
		"toolu_s1_2 memory: create /memories/user.md s1 examples/agent",
		" memory: init  ",
	}
	if !slices.Equal(history, wantHistory) {
		t.Errorf("commits:\n%s\nwant\n%s", strings.Join(history, "\n"), strings.Join(wantHistory, "\n"))
	}
	if !strings.Contains(logged.String(), `> memory {"command":"view","path":"/memories/user.md"}`) {
		t.Errorf("log:\n%s", logged.String())
	}
}

// With ANTHROPIC_API_KEY set, two sessions with the real API: the model
// writes something to its memory in the first, and the second finds it.
func TestAgentLoopLiveAPI(t *testing.T) {
	t.Parallel()
	if os.Getenv("ANTHROPIC_API_KEY") == "" {
		t.Skip("ANTHROPIC_API_KEY is not set")
	}
	client := anthropic.NewClient()
	repo := newRepo(t)
	h := handler.New(repo, handler.Options{})
	var logged bytes.Buffer
	run := func(session, task string) string {
		a := &Agent{Client: &client, Memory: memorytool.New(h, handler.Caller{Session: session, Agent: "examples/agent"}),
			Model: "claude-opus-4-6", MaxTokens: 2048, ContextEditing: true, MaxTurns: 20, Log: &logged}
		answer, err := a.Run(context.Background(), task)
		if err != nil {
			t.Fatal(err)
		}
		return answer
	}
	run("live-1", "My favourite tea is genmaicha. Remember it for our next conversation.")
	head, _ := repo.Commit(context.Background(), "HEAD")
	if head.Trailer("Session") != "live-1" {
		t.Fatalf("the first session committed nothing; log:\n%s", logged.String())
	}
	if answer := run("live-2", "What is my favourite tea? Answer with its name."); !strings.Contains(strings.ToLower(answer), "genmaicha") {
		t.Errorf("the second session answered %q; log:\n%s", answer, logged.String())
	}
}

// With -context-editing, a long session gets its old tool results
// cleared by the API once the context passes the trigger (here the
// memory tool's: it is the only tool), and the agent reports each edit
// the API applied. The fake API clears as the API documents it.
func TestAgentContextEditingClearsOldResults(t *testing.T) {
	t.Parallel()
	var notes strings.Builder
	for i := range 800 {
		fmt.Fprintf(&notes, "- note %d: something worth remembering about the task\n", i)
	}
	file, _ := json.Marshal(notes.String())
	replies := []string{`[{"type":"tool_use","id":"toolu_c","name":"memory","input":{"command":"create","path":"/memories/notes.md","file_text":` + string(file) + `}}]`}
	const views = 12
	for i := range views {
		replies = append(replies, fmt.Sprintf(`[{"type":"tool_use","id":"toolu_v%d","name":"memory","input":{"command":"view","path":"/memories/notes.md"}}]`, i))
	}
	replies = append(replies, `[{"type":"text","text":"Done."}]`)
	api := fakeapi.New(t, replies...)
	client := anthropic.NewClient(option.WithBaseURL(api.URL), option.WithAPIKey("test-key"), option.WithMaxRetries(0))
	var logged bytes.Buffer
	a := &Agent{Client: &client, Memory: memorytool.New(handler.New(newRepo(t), handler.Options{}), handler.Caller{Session: "long"}),
		Model: "claude-opus-4-6", MaxTokens: 1024, ContextEditing: true, MaxTurns: views + 2, Log: &logged}
	if answer, err := a.Run(context.Background(), "Review your notes again and again."); err != nil || answer != "Done." {
		t.Fatalf("%q, %v", answer, err)
	}
	var reported []string
	for _, r := range api.Requests() {
		for _, e := range r.AppliedEdits {
			reported = append(reported, fmt.Sprintf("context editing (%s) cleared %d tool results, %d input tokens", e.Type, e.ClearedToolUses, e.ClearedInputTokens))
		}
	}
	if len(reported) == 0 {
		t.Fatalf("in %d requests the API never cleared anything", len(api.Requests()))
	}
	for _, line := range reported {
		if !strings.Contains(logged.String(), line+"\n") {
			t.Errorf("the agent did not report %q; log:\n%.2000s", line, logged.String())
		}
	}
}
