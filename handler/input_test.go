package handler_test

import (
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/policy"
)

// A tool_use id is the retry key and a trailer: one that cannot be stored
// as is gets an error result and makes no commit.
func TestUnusableToolUseIDsAreRefused(t *testing.T) {
	h, repo := newHandler(t, policy.DefaultLimits)
	head, _ := repo.Commit("HEAD")
	for id, want := range map[string]string{
		strings.Repeat("x", 300): "Error: The tool_use id is 300 bytes long, the limit is 256",
		"toolu\n1":               `Error: The tool_use id "toolu\n1" contains a control character`,
	} {
		res := h.Handle(handler.Caller{}, handler.Block{Type: "tool_use", ID: id, Name: "memory",
			Input: []byte(`{"command":"create","path":"/memories/a.md","file_text":"x"}`)})
		if res.Content != want || !res.IsError || res.ToolUseID != id {
			t.Errorf("id %.20q: %+v", id, res)
		}
	}
	if now, _ := repo.Commit("HEAD"); now.Hash != head.Hash {
		t.Error("a refused id made a commit")
	}
}
