package handler_test

import (
	"context"
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/policy"
)

// stdio: one result per non-blank line, in order; a malformed or
// over-long line gets an error result and the loop goes on.
//
// Every line answered is a call the log and OnCall see, those that did
// not parse too (N11: over stdio they left no trace).
func TestStdioFraming(t *testing.T) {
	t.Parallel()
	_, repo := newHandler(t, policy.DefaultLimits)
	var calls []handler.Call
	h := handler.New(repo, handler.Options{Limits: policy.DefaultLimits, Logger: testLog(t), OnCall: func(c handler.Call) { calls = append(calls, c) }})
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
	if len(calls) != len(want) {
		t.Fatalf("%d calls observed, want one per result (%d): %+v", len(calls), len(want), calls)
	}
	for i, w := range want {
		outcome := handler.OutcomeOK
		if w.isError {
			outcome = handler.OutcomeError
		}
		if c := calls[i]; c.ID != w.id || c.Outcome != outcome {
			t.Errorf("call %d: %+v, want id %q, outcome %s", i, c, w.id, outcome)
		}
	}
}

// stdio takes an assistant message's content as HTTP does: one line in,
// one line with the array of results out.
func TestStdioArray(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t, policy.DefaultLimits)
	blocks := make([]string, 101)
	for i := range blocks {
		blocks[i] = `{"type":"text","text":"hi"}`
	}
	in := `[{"type":"text","text":"noted"},{"type":"tool_use","id":"toolu_a","name":"memory","input":{"command":"create","path":"/memories/a.md","file_text":"x"}},` +
		`{"type":"tool_use","id":"toolu_b","name":"memory","input":{"command":"view","path":"/memories/a.md"}}]` + "\n" +
		"[" + strings.Join(blocks, ",") + "]\n[1,\n"
	var out strings.Builder
	if err := h.ServeStdio(context.Background(), strings.NewReader(in), &out, handler.Caller{}); err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"tool_result","tool_use_id":"toolu_a","content":"File created successfully at: /memories/a.md"},` +
		`{"type":"tool_result","tool_use_id":"toolu_b","content":"Here's the content of /memories/a.md with line numbers:\n     1\tx"}]` + "\n" +
		`{"type":"tool_result","tool_use_id":"","content":"Error: The array holds 101 content blocks, the limit is 100 per request; none was run","is_error":true}` + "\n" +
		`{"type":"tool_result","tool_use_id":"","content":"Error: Invalid content array: not a JSON array of content blocks","is_error":true}` + "\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// stdio answers a line on the goroutine that read it: handing each line
// to another goroutine woke a second thread for every call (0.1 ms of a
// rename's 0.45 ms over stdio, measured). Fails when the reads and the
// writes are made on different goroutines.
func TestStdioAnswersOnTheReadingGoroutine(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t, policy.DefaultLimits)
	in := &goroutineReader{r: strings.NewReader(
		`{"type":"tool_use","id":"toolu_1","name":"memory","input":{"command":"create","path":"/memories/a.md","file_text":"a"}}` + "\n" +
			`{"type":"tool_use","id":"toolu_2","name":"memory","input":{"command":"rename","old_path":"/memories/a.md","new_path":"/memories/b.md"}}` + "\n")}
	out := &goroutineWriter{}
	if err := h.ServeStdio(context.Background(), in, out, handler.Caller{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.b.String(), "Successfully renamed") {
		t.Fatalf("no rename answered:\n%s", out.b.String())
	}
	if len(in.ids) == 0 || len(out.ids) != 2 {
		t.Fatalf("%d reads and %d writes, want some and 2", len(in.ids), len(out.ids))
	}
	for _, id := range append(in.ids, out.ids...) {
		if id != in.ids[0] {
			t.Fatalf("reads on goroutines %v, answers written on %v: a handoff for each line", in.ids, out.ids)
		}
	}
}

// goroutineReader records the goroutine of each Read.
type goroutineReader struct {
	r   io.Reader
	ids []string
}

func (g *goroutineReader) Read(p []byte) (int, error) {
	g.ids = append(g.ids, goroutineID())
	return g.r.Read(p)
}

// goroutineWriter records the goroutine of each Write.
type goroutineWriter struct {
	b   strings.Builder
	ids []string
}

func (g *goroutineWriter) Write(p []byte) (int, error) {
	g.ids = append(g.ids, goroutineID())
	return g.b.Write(p)
}

// goroutineID is the calling goroutine's number, as its stack trace
// names it ("goroutine 7 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	return id
}
