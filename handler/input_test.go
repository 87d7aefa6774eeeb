package handler_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/policy"
)

// A tool_use id is the retry key and a trailer: one that cannot be stored
// as is gets an error result and makes no commit.
func TestUnusableToolUseIDsAreRefused(t *testing.T) {
	t.Parallel()
	h, repo := newHandler(t, policy.DefaultLimits)
	head, _ := repo.Commit(context.Background(), "HEAD")
	for id, want := range map[string]string{
		strings.Repeat("x", 300): "Error: The tool_use id is 300 bytes long, the limit is 256",
		"toolu\n1":               `Error: The tool_use id "toolu\n1" contains a control character`,
	} {
		res := h.Handle(context.Background(), handler.Caller{}, handler.Block{Type: "tool_use", ID: id, Name: "memory",
			Input: []byte(`{"command":"create","path":"/memories/a.md","file_text":"x"}`)})
		if res.Content != want || !res.IsError || res.ToolUseID != id {
			t.Errorf("id %.20q: %+v", id, res)
		}
	}
	if now, _ := repo.Commit(context.Background(), "HEAD"); now.Hash != head.Hash {
		t.Error("a refused id made a commit")
	}
}

// Invalid UTF-8 in a path or a file is refused, never replaced with U+FFFD
// on its way in; a valid surrogate pair is decoded.
func TestInvalidUTF8IsRefused(t *testing.T) {
	t.Parallel()
	h, repo := newHandler(t, policy.DefaultLimits)
	head, _ := repo.Commit(context.Background(), "HEAD")
	run(t, h, invalidUTF8Steps)
	if now, _ := repo.Commit(context.Background(), "HEAD"); now.Hash != head.Hash {
		t.Fatal("a refused call made a commit")
	}
	run(t, h, validEscapeSteps)
}

var invalidUTF8Steps = []step{
	bad("{\"command\":\"create\",\"path\":\"/memories/a\xff.md\",\"file_text\":\"x\"}", `Path "/memories/a\xff.md" is not valid UTF-8`),
	bad(`{"command":"create","path":"/memories/a\udc00.md","file_text":"x"}`, `Path "/memories/a\xed\xb0\x80.md" is not valid UTF-8`),
	bad("{\"command\":\"create\",\"path\":\"/memories/a.md\",\"file_text\":\"caf\xe9\"}", `Parameter "file_text" is not valid UTF-8`),
	bad(`{"command":"create","path":"/memories/a.md","file_text":"\ud800\u0041"}`, `Parameter "file_text" is not valid UTF-8`),
	bad("{\"command\":\"str_replace\",\"path\":\"/memories/a.md\",\"old_str\":\"\xc0\",\"new_str\":\"y\"}", `Parameter "old_str" is not valid UTF-8`),
	bad("{\"command\":\"rename\",\"old_path\":\"/memories/a.md\",\"new_path\":\"/memories/\xfe\"}", `Path "/memories/\xfe" is not valid UTF-8`),
}

var validEscapeSteps = []step{
	ok(`{"command":"create","path":"/memories/\ud83d\ude00.md","file_text":"tab\there \"q\" \\ \/ \u00e9\n"}`, "File created successfully at: /memories/😀.md"),
	ok(`{"command":"view","path":"/memories/😀.md"}`, "Here's the content of /memories/😀.md with line numbers:\n     1\ttab\there \"q\" \\ / é\n     2\t"),
}

// Error results echo bounded values: a huge old_str or a long list of
// lines is cut with a marker saying how much was left out.
func TestErrorResultsAreBounded(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t, policy.DefaultLimits)
	run(t, h, boundedErrorSteps())
}

func boundedErrorSteps() []step {
	// Anything over 1,024 bytes is cut alike; 96 KiB is over bufio's
	// default line of 64 KiB, so a transport reading calls with a
	// default Scanner fails here too. (900 KiB took 12 s of the 20 of
	// TestTransportsAgree under -race, for the same results.)
	big := strings.Repeat("z", 96<<10)
	return []step{
		ok(`{"command":"create","path":"/memories/x.md","file_text":"`+strings.Repeat(`x\n`, 200)+`"}`, "File created successfully at: /memories/x.md"),
		bad(`{"command":"str_replace","path":"/memories/x.md","old_str":"`+big+`","new_str":""}`,
			"No replacement was performed, old_str `"+strings.Repeat("z", 1024)+" [... 97,280 more bytes]` did not appear verbatim in /memories/x.md."),
		bad(`{"command":"str_replace","path":"/memories/x.md","old_str":"x","new_str":""}`,
			"No replacement was performed. Multiple occurrences of old_str `x` in lines: "+lineNumbers(1, 100)+" [... 100 more lines]. Please ensure it is unique"),
		bad(`{"command":"`+big+`"}`, `Unknown command "`+strings.Repeat("z", 1024)+` [... 97,280 more bytes]". The memory tool's commands are: view, create, str_replace, insert, delete, rename`),
		bad(`{"command":"view","path":"`+big+`"}`, `Path `+strings.Repeat("z", 64)+`... is too long: 98304 bytes, the limit is 1024`),
	}
}

func lineNumbers(from, to int) string {
	var s []string
	for i := from; i <= to; i++ {
		s = append(s, strconv.Itoa(i))
	}
	return strings.Join(s, ", ")
}
