package handler_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/policy"
)

// stdio: one result per non-blank line, in order; a malformed or
// over-long line gets an error result and the loop goes on.
func TestStdioFraming(t *testing.T) {
	h, _ := newHandler(t, policy.DefaultLimits)
	long := `{"type":"tool_use","id":"toolu_long","name":"memory","input":{"command":"create","path":"/memories/x","file_text":"` +
		strings.Repeat("a", handler.MaxLineBytes) + `"}}`
	in := strings.Join([]string{
		`{"type":"tool_use","id":"toolu_1","name":"memory","input":{"command":"view","path":"/memories"}}`,
		``,
		`   `,
		`{"type":"tool_use","id":"toolu_2",`,
		long,
		`{"type":"tool_use","id":"toolu_3","name":"memory","input":{"command":"create","path":"/memories/y","file_text":"y"}}`,
	}, "\n") // no newline after the last line: it still counts
	var out strings.Builder
	if err := h.ServeStdio(context.Background(), strings.NewReader(in), &out, handler.Caller{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []struct {
		id      string
		isError bool
		prefix  string
	}{
		{"toolu_1", false, "Here're the files"},
		{"toolu_2", true, "Error: Invalid tool_use block"},
		{"", true, "Error: Input line is longer than 16 MiB; it was skipped"},
		{"toolu_3", false, "File created successfully at: /memories/y"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d results, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		var r handler.Result
		if err := json.Unmarshal([]byte(lines[i]), &r); err != nil {
			t.Fatal(err)
		}
		if r.ToolUseID != w.id || r.IsError != w.isError || !strings.HasPrefix(r.Content, w.prefix) {
			t.Errorf("result %d: %+v", i, r)
		}
	}
}
