package memorytool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/memorytool"
)

// The assistant asked for two memory calls; Run answers both, in order.
func Example() {
	dir, err := os.MkdirTemp("", "gitmem-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	repo, _, err := gitmem.Init(context.Background(), dir, gitmem.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer repo.Close()
	mem := memorytool.New(handler.New(repo, handler.Options{}), handler.Caller{Session: "example"})

	// The assistant's message, as client.Beta.Messages.New returns it.
	var msg anthropic.BetaMessage
	json.Unmarshal([]byte(`{"role":"assistant","stop_reason":"tool_use","content":[
		{"type":"text","text":"Let me check my memory first."},
		{"type":"tool_use","id":"toolu_01","name":"memory","input":{"command":"view","path":"/memories"}},
		{"type":"tool_use","id":"toolu_02","name":"memory","input":{"command":"create","path":"/memories/prefs.md","file_text":"Likes green tea.\n"}}]}`), &msg)

	results, err := mem.Run(context.Background(), &msg)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		fmt.Printf("%s: %s\n", r.OfToolResult.ToolUseID, r.OfToolResult.Content[0].OfText.Text)
	}
	// The next request: params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewBetaUserMessage(results...))
	head, _ := repo.Commit(context.Background(), "HEAD")
	fmt.Println(head.Subject, head.Trailer("Tool-Use-Id"), head.Trailer("Session"))
	// Output:
	// toolu_01: Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:
	// 0B	/memories
	// toolu_02: File created successfully at: /memories/prefs.md
	// memory: create /memories/prefs.md toolu_02 example
}

// An agent loop with the memory tool; see examples/agent for a complete one.
func Example_loop() {
	ctx := context.Background()
	repo, _, err := gitmem.Init(context.Background(), "./memory", gitmem.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer repo.Close()
	mem := memorytool.New(handler.New(repo, handler.Options{}), handler.Caller{Session: "user-42", Agent: "support-bot"})
	// Or a shared server: memorytool.Remote("http://127.0.0.1:7077/v1/tool_use", memorytool.RemoteOptions{Session: "user-42"})

	client := anthropic.NewClient() // reads ANTHROPIC_API_KEY
	params := anthropic.BetaMessageNewParams{
		Model:     "claude-opus-4-6",
		MaxTokens: 2048,
		Betas:     []anthropic.AnthropicBeta{memorytool.Beta},
		Tools:     []anthropic.BetaToolUnionParam{memorytool.Param()},
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("What tea do I like?"))},
	}
	for {
		msg, err := client.Beta.Messages.New(ctx, params)
		if err != nil {
			log.Fatal(err)
		}
		if msg.StopReason != anthropic.BetaStopReasonToolUse {
			break
		}
		results, err := mem.Run(ctx, msg)
		if err != nil {
			log.Fatal(err)
		}
		params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewBetaUserMessage(results...))
	}
}
