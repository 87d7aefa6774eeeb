package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newHandler(t testing.TB, limits policy.Limits) (*handler.Handler, *gitmem.Repo) {
	t.Helper()
	r, _, err := gitmem.Init(context.Background(), gittest.TempDir(t), gitmem.Options{
		Now:      func() time.Time { return epoch },
		Operator: gitmem.Signature{Name: "op", Email: "op@example.com"},
		Logf:     t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return handler.New(r, handler.Options{Limits: limits, Logger: testLog(t)}), r
}

// block is a memory tool_use block with input (JSON).
func block(id, input string) []byte {
	return []byte(fmt.Sprintf(`{"type":"tool_use","id":%q,"name":"memory","input":%s}`, id, input))
}

func call(h *handler.Handler, id, input string) handler.Result {
	return h.HandleJSON(context.Background(), handler.Caller{}, block(id, input))
}

type step struct {
	input string
	want  string
	isErr bool
	id    string // default toolu_{index}
}

// caller makes one call over some transport (transports_test.go).
type caller func(id, input string) handler.Result

// run executes steps in order on one handler and checks every result byte
// for byte.
func run(t *testing.T, h *handler.Handler, steps []step) {
	t.Helper()
	runOn(t, func(id, input string) handler.Result { return call(h, id, input) }, steps)
}

// runOn is run over any transport.
func runOn(t *testing.T, call caller, steps []step) {
	t.Helper()
	for i, s := range steps {
		id := s.id
		if id == "" {
			id = fmt.Sprintf("toolu_%03d", i)
		}
		res := call(id, s.input)
		if res.Content != s.want || res.IsError != s.isErr {
			t.Errorf("step %d %s:\n got (is_error=%v) %q\nwant (is_error=%v) %q", i, s.input, res.IsError, res.Content, s.isErr, s.want)
		}
		if res.ToolUseID != id || res.Type != "tool_result" {
			t.Errorf("step %d: envelope %+v", i, res)
		}
	}
}

func ok(input, want string) step  { return step{input: input, want: want} }
func bad(input, want string) step { return step{input: input, want: "Error: " + want, isErr: true} }

// as gives a step the tool_use id id.
func as(id string, s step) step { s.id = id; return s }

// script is a session of calls on a fresh memory, each with its exact
// result. The tests of this file run them in process, and
// TestTransportsAgree over every transport.
type script struct {
	name   string
	limits policy.Limits
	steps  []step
}

var scripts = []script{commandsScript, malformedScript, limitsScript, paginationScript, pathsScript(), retriesScript,
	{"utf-8", policy.DefaultLimits, slices.Concat(invalidUTF8Steps, validEscapeSteps)},
	{"bounded errors", policy.DefaultLimits, boundedErrorSteps()},
}

const dirHeader = "Here're the files and directories up to 2 levels deep in %s, excluding hidden items and node_modules:\n"

func TestCommandsExactResults(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t, commandsScript.limits)
	run(t, h, commandsScript.steps)
}

var commandsScript = script{"commands", policy.DefaultLimits, []step{
	ok(`{"command":"view","path":"/memories"}`, fmt.Sprintf(dirHeader, "/memories")+"0B\t/memories"),
	ok(`{"command":"create","path":"/memories/notes.txt","file_text":"Hello World\nThis is line two\n"}`,
		"File created successfully at: /memories/notes.txt"),
	bad(`{"command":"create","path":"/memories/notes.txt","file_text":"x"}`, "File /memories/notes.txt already exists"),
	ok(`{"command":"view","path":"/memories/notes.txt"}`,
		"Here's the content of /memories/notes.txt with line numbers:\n     1\tHello World\n     2\tThis is line two\n     3\t"),
	ok(`{"command":"view","path":"/memories/notes.txt","view_range":[2,2]}`,
		"Here's the content of /memories/notes.txt with line numbers:\n     2\tThis is line two"),
	ok(`{"command":"view","path":"/memories/notes.txt","view_range":[2,-1]}`,
		"Here's the content of /memories/notes.txt with line numbers:\n     2\tThis is line two\n     3\t"),
	ok(`{"command":"create","path":"/memories/a/b/c/deep.md","file_text":"`+strings.Repeat("x", 1536)+`"}`,
		"File created successfully at: /memories/a/b/c/deep.md"),
	ok(`{"command":"create","path":"/memories/.hidden","file_text":"h"}`, "File created successfully at: /memories/.hidden"),
	ok(`{"command":"create","path":"/memories/node_modules/x","file_text":"h"}`, "File created successfully at: /memories/node_modules/x"),
	ok(`{"command":"view","path":"/memories"}`, fmt.Sprintf(dirHeader, "/memories")+
		"1.5K\t/memories\n1.5K\t/memories/a/\n1.5K\t/memories/a/b/\n29B\t/memories/notes.txt"),
	ok(`{"command":"str_replace","path":"/memories/notes.txt","old_str":"line two","new_str":"line 2"}`,
		"The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tHello World\n     2\tThis is line 2\n     3\t"),
	bad(`{"command":"str_replace","path":"/memories/notes.txt","old_str":"absent","new_str":"x"}`,
		"No replacement was performed, old_str `absent` did not appear verbatim in /memories/notes.txt."),
	bad(`{"command":"str_replace","path":"/memories/notes.txt","old_str":"i","new_str":"x"}`,
		"No replacement was performed. Multiple occurrences of old_str `i` in lines: 2. Please ensure it is unique"),
	bad(`{"command":"str_replace","path":"/memories/notes.txt","old_str":"l","new_str":"x"}`,
		"No replacement was performed. Multiple occurrences of old_str `l` in lines: 1, 2. Please ensure it is unique"),
	bad(`{"command":"str_replace","path":"/memories/missing.txt","old_str":"a","new_str":"b"}`,
		"The path /memories/missing.txt does not exist. Please provide a valid path."),
	bad(`{"command":"str_replace","path":"/memories/a","old_str":"a","new_str":"b"}`,
		"The path /memories/a does not exist. Please provide a valid path."),
	bad(`{"command":"str_replace","path":"/memories/notes.txt","old_str":"","new_str":"b"}`,
		`Parameter "old_str" must not be empty: give the exact text to replace`),
	ok(`{"command":"str_replace","path":"/memories/notes.txt","old_str":"World\nThis","new_str":"$& $$ World\nThat"}`,
		"The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tHello $& $$ World\n     2\tThat is line 2\n     3\t"),
	ok(`{"command":"insert","path":"/memories/notes.txt","insert_line":0,"insert_text":"top\n"}`, "The file /memories/notes.txt has been edited."),
	ok(`{"command":"insert","path":"/memories/notes.txt","insert_line":3,"insert_text":"end"}`, "The file /memories/notes.txt has been edited."),
	bad(`{"command":"insert","path":"/memories/notes.txt","insert_line":5,"insert_text":"x"}`,
		"Invalid `insert_line` parameter: 5. It should be within the range of lines of the file: [0, 4]"),
	bad(`{"command":"insert","path":"/memories/notes.txt","insert_line":-1,"insert_text":"x"}`,
		"Invalid `insert_line` parameter: -1. It should be within the range of lines of the file: [0, 4]"),
	ok(`{"command":"view","path":"/memories/notes.txt"}`,
		"Here's the content of /memories/notes.txt with line numbers:\n     1\ttop\n     2\tHello $& $$ World\n     3\tThat is line 2\n     4\tend\n     5\t"),
	bad(`{"command":"insert","path":"/memories/nope","insert_line":0,"insert_text":"x"}`, "The path /memories/nope does not exist"),
	bad(`{"command":"insert","path":"/memories/a","insert_line":0,"insert_text":"x"}`, "The path /memories/a does not exist"),
	ok(`{"command":"create","path":"/memories/empty","file_text":""}`, "File created successfully at: /memories/empty"),
	bad(`{"command":"insert","path":"/memories/empty","insert_line":1,"insert_text":"x"}`,
		"Invalid `insert_line` parameter: 1. It should be within the range of lines of the file: [0, 0]"),
	ok(`{"command":"insert","path":"/memories/empty","insert_line":0,"insert_text":"x"}`, "The file /memories/empty has been edited."),
	ok(`{"command":"view","path":"/memories/empty"}`, "Here's the content of /memories/empty with line numbers:\n     1\tx\n     2\t"),
	bad(`{"command":"rename","old_path":"/memories/notes.txt","new_path":"/memories/empty"}`, "The destination /memories/empty already exists"),
	bad(`{"command":"rename","old_path":"/memories/nope","new_path":"/memories/new"}`, "The path /memories/nope does not exist"),
	bad(`{"command":"rename","old_path":"/memories/a","new_path":"/memories/a/b/inside"}`,
		"Cannot rename /memories/a to /memories/a/b/inside: a folder cannot be moved into itself"),
	// A file below itself: its parent would be the file.
	bad(`{"command":"rename","old_path":"/memories/notes.txt","new_path":"/memories/notes.txt/inside"}`,
		"Cannot rename /memories/notes.txt to /memories/notes.txt/inside: one of its parent folders is a file"),
	bad(`{"command":"rename","old_path":"/memories/","new_path":"/memories/x"}`, "Cannot rename the /memories directory itself"),
	bad(`{"command":"rename","old_path":"/memories/empty","new_path":"/memories/notes.txt/under"}`,
		"Cannot rename /memories/empty to /memories/notes.txt/under: one of its parent folders is a file"),
	bad(`{"command":"create","path":"/memories/notes.txt/child","file_text":"x"}`,
		"Cannot create /memories/notes.txt/child: one of its parent folders is a file"),
	ok(`{"command":"rename","old_path":"/memories/a","new_path":"/memories/z/moved"}`, "Successfully renamed /memories/a to /memories/z/moved"),
	ok(`{"command":"view","path":"/memories/z"}`, fmt.Sprintf(dirHeader, "/memories/z")+
		"1.5K\t/memories/z\n1.5K\t/memories/z/moved/\n1.5K\t/memories/z/moved/b/"),
	ok(`{"command":"delete","path":"/memories/z/moved/b/c/deep.md"}`, "Successfully deleted /memories/z/moved/b/c/deep.md"),
	bad(`{"command":"view","path":"/memories/z"}`, "The path /memories/z does not exist. Please provide a valid path."),
	bad(`{"command":"delete","path":"/memories/z"}`, "The path /memories/z does not exist"),
	ok(`{"command":"delete","path":"/memories/node_modules"}`, "Successfully deleted /memories/node_modules"),
	bad(`{"command":"delete","path":"/memories"}`, "Cannot delete the /memories directory itself"),
	ok(`{"command":"view","path":"/memories"}`, fmt.Sprintf(dirHeader, "/memories")+
		"44B\t/memories\n2B\t/memories/empty\n41B\t/memories/notes.txt"),
}}

// The reference SDKs wipe the whole store on these; gitmem treats every
// spelling of the root as the root, or refuses the path.
func TestRootSpellingsNeverWipe(t *testing.T) {
	t.Parallel()
	h, r := newHandler(t, policy.DefaultLimits)
	run(t, h, []step{ok(`{"command":"create","path":"/memories/keep.md","file_text":"k"}`, "File created successfully at: /memories/keep.md")})
	for _, p := range []string{"/memories", "/memories/", "/memories//", "/memories/.", "/memories/a/..", "/memories/./", "/memories/a/../"} {
		for _, in := range []string{
			fmt.Sprintf(`{"command":"delete","path":%q}`, p),
			fmt.Sprintf(`{"command":"rename","old_path":%q,"new_path":"/memories/elsewhere"}`, p),
		} {
			if res := call(h, "toolu_wipe", in); !res.IsError {
				t.Errorf("%s succeeded: %q", in, res.Content)
			}
		}
	}
	snap, _ := r.Snapshot(context.Background())
	if _, err := snap.Stat("keep.md"); err != nil {
		t.Fatalf("keep.md is gone: %v", err)
	}
}

func TestPathRefusals(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t, policy.DefaultLimits)
	run(t, h, pathsScript().steps)
}

// pathsScript creates a file at each refused path.
func pathsScript() script {
	var steps []step
	for _, tc := range []struct{ path, want string }{
		{"/etc/passwd", "Path must start with /memories, got: /etc/passwd"},
		{"memories/x", "Path must start with /memories, got: memories/x"},
		{"/memoriesX/a", "Path must start with /memories, got: /memoriesX/a"},
		{"/memories/../etc", "Path /memories/../etc would escape /memories directory"},
		{"/memories/a/../../x", "Path /memories/a/../../x would escape /memories directory"},
		{"/memories/./x", "Path /memories/./x contains a '.' segment; name the folder directly"},
		{`/memories/a\\b`, `Path /memories/a\b contains a backslash; use / to separate folders`},
		{"/memories/a\\u0000b", `Path "/memories/a\x00b" contains a control character`},
		{"/memories/a\\nb", `Path "/memories/a\nb" contains a control character`},
		{"/memories/%2e%2e%2fetc", "Path /memories/%2e%2e%2fetc contains a percent-encoded character (%2e); write the character itself"},
		{"/memories/.git/config", "Path /memories/.git/config uses the reserved name .git"},
		{"/memories/x/.GitIgnore", "Path /memories/x/.GitIgnore uses the reserved name .GitIgnore"},
		{"/memories/.gitattributes", "Path /memories/.gitattributes uses the reserved name .gitattributes"},
		{"/memories/.gitmodules", "Path /memories/.gitmodules uses the reserved name .gitmodules"},
		{"/memories/" + strings.Repeat("n", 256), "Path /memories/" + strings.Repeat("n", 256) + " has a name of 256 bytes, the limit is 255"},
	} {
		steps = append(steps, bad(fmt.Sprintf(`{"command":"create","path":"%s","file_text":"x"}`, tc.path), tc.want))
	}
	return script{"paths", policy.DefaultLimits, steps}
}

var malformedScript = script{"malformed calls", policy.DefaultLimits, []step{
	bad(`{"command":"explode","path":"/memories"}`, `Unknown command "explode". The memory tool's commands are: view, create, str_replace, insert, delete, rename`),
	bad(`{"path":"/memories"}`, `Missing required parameter "command"`),
	bad(`{"command":7}`, `Parameter "command" must be a string`),
	bad(`"view"`, `Invalid input: expected a JSON object with a "command" field`),
	bad(`{"command":"create","path":"/memories/x"}`, `Missing required parameter "file_text" for command "create"`),
	bad(`{"command":"create","path":"/memories/x","file_text":3}`, `Parameter "file_text" must be a string`),
	bad(`{"command":"insert","path":"/memories/x","insert_line":1.5,"insert_text":"a"}`, `Parameter "insert_line" must be an integer`),
	bad(`{"command":"insert","path":"/memories/x","insert_line":"1","insert_text":"a"}`, `Parameter "insert_line" must be an integer`),
	bad(`{"command":"view","path":"/memories","view_range":[1]}`, `Parameter "view_range" must be an array of two integers, [start_line, end_line]`),
	bad(`{"command":"rename","old_path":"/memories/x"}`, `Missing required parameter "new_path" for command "rename"`),
	bad(`{"command":"view"}`, `Missing required parameter "path" for command "view"`),
}}

func TestMalformedCalls(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t, malformedScript.limits)
	run(t, h, malformedScript.steps)
	// Blocks that are not memory calls: only the block transports have them.
	for _, tc := range []struct{ raw, id, want string }{
		{`{"type":"tool_use","id":"t9","name":"bash","input":{}}`, "t9", "Error: Tool 'bash' is not handled here: gitmem serves only the 'memory' tool"},
		{`{"type":"text","id":"t8","name":"memory"}`, "t8", `Error: Expected a tool_use block, got type "text"`},
		{`{"type":"tool_use","name":"memory","input":{}}`, "", "Error: The tool_use block has no id"},
		{`{"id":"t7", "input": [}`, "t7", "Error: Invalid tool_use block: not a JSON object with type, id, name and input"},
		{`{"id":"t6","type":"tool_use","name":"memory","input":3}`, "t6", `Error: Invalid input: expected a JSON object with a "command" field`},
	} {
		res := h.HandleJSON(context.Background(), handler.Caller{}, []byte(tc.raw))
		if res.Content != tc.want || !res.IsError || res.ToolUseID != tc.id {
			t.Errorf("%s: got %+v", tc.raw, res)
		}
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	for _, s := range []script{limitsScript, oneScript, oneByteScript, paginationScript} {
		h, _ := newHandler(t, s.limits)
		run(t, h, s.steps)
	}
}

var limitsScript = script{"limits", policy.Limits{MaxFileBytes: 10, MaxTotalBytes: 15, MaxFiles: 2, MaxViewBytes: 120}, []step{
	bad(`{"command":"create","path":"/memories/big","file_text":"12345678901"}`, "File /memories/big would be 11 bytes, over the limit of 10 bytes per file"),
	ok(`{"command":"create","path":"/memories/a","file_text":"1234567890"}`, "File created successfully at: /memories/a"),
	bad(`{"command":"create","path":"/memories/b","file_text":"123456"}`, "Cannot write /memories/b: the memory would hold 16 bytes, over the limit of 15 bytes in all"),
	ok(`{"command":"create","path":"/memories/b","file_text":"1\n2\n"}`, "File created successfully at: /memories/b"),
	bad(`{"command":"create","path":"/memories/c","file_text":""}`, "Cannot create /memories/c: the memory already holds 2 files, the limit is 2 files"),
	bad(`{"command":"insert","path":"/memories/a","insert_line":0,"insert_text":"x"}`, "File /memories/a would be 12 bytes, over the limit of 10 bytes per file"),
	ok(`{"command":"view","path":"/memories/b"}`, "Here's the content of /memories/b with line numbers:\n     1\t1\n     2\t2\n     3\t"),
	ok(`{"command":"str_replace","path":"/memories/b","old_str":"1\n","new_str":""}`,
		"The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\t2\n     2\t"),
}}

// oneScript: a limit of one says so in the singular.
var oneScript = script{"one", policy.Limits{MaxFileBytes: 1, MaxFiles: 1}, []step{
	bad(`{"command":"create","path":"/memories/big","file_text":"12"}`, "File /memories/big would be 2 bytes, over the limit of 1 byte per file"),
	ok(`{"command":"create","path":"/memories/a","file_text":"1"}`, "File created successfully at: /memories/a"),
	bad(`{"command":"create","path":"/memories/c","file_text":""}`, "Cannot create /memories/c: the memory already holds 1 file, the limit is 1 file"),
	ok(`{"command":"delete","path":"/memories/a"}`, "Successfully deleted /memories/a"),
	bad(`{"command":"create","path":"/memories/b","file_text":"12"}`, "File /memories/b would be 2 bytes, over the limit of 1 byte per file"),
}}

var oneByteScript = script{"one byte", policy.Limits{MaxTotalBytes: 1}, []step{
	bad(`{"command":"create","path":"/memories/a","file_text":"12"}`, "Cannot write /memories/a: the memory would hold 2 bytes, over the limit of 1 byte in all"),
	ok(`{"command":"create","path":"/memories/a","file_text":"1"}`, "File created successfully at: /memories/a"),
}}

var paginationScript = script{"pagination", policy.Limits{MaxViewBytes: 120}, []step{
	ok(`{"command":"create","path":"/memories/long","file_text":"line1\nline2\nline3\nline4\nline5\nline6\n"}`, "File created successfully at: /memories/long"),
	ok(`{"command":"view","path":"/memories/long"}`, "Here's the content of /memories/long with line numbers:\n     1\tline1\n"+
		"[Output truncated at 120 bytes: showed lines 1-1. Use view_range [2, -1] to see more.]"),
	ok(`{"command":"view","path":"/memories/long","view_range":[2,3]}`, "Here's the content of /memories/long with line numbers:\n     2\tline2\n     3\tline3"),
}}

// retriesScript repeats tool_use ids: a retry gets the first result again
// (not a second application: the str_replace would now fail), and an id
// reused for another command an error.
var retriesScript = script{"retries", policy.DefaultLimits, []step{
	as("toolu_once", ok(`{"command":"create","path":"/memories/f","file_text":"a\nb\nc\n"}`, "File created successfully at: /memories/f")),
	as("toolu_edit", ok(`{"command":"str_replace","path":"/memories/f","old_str":"b","new_str":"B"}`, retriedSnippet)),
	as("toolu_once", ok(`{"command":"create","path":"/memories/f","file_text":"a\nb\nc\n"}`, "File created successfully at: /memories/f")),
	as("toolu_edit", ok(`{"command":"str_replace","path":"/memories/f","old_str":"b","new_str":"B"}`, retriedSnippet)),
	as("toolu_once", bad(`{"command":"delete","path":"/memories/f"}`,
		"tool_use id toolu_once was already used for another command (memory: create /memories/f); nothing was changed")),
	ok(`{"command":"view","path":"/memories/f"}`, "Here's the content of /memories/f with line numbers:\n     1\ta\n     2\tB\n     3\tc\n     4\t"),
}}

const retriedSnippet = "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\ta\n     2\tB\n     3\tc\n     4\t"

// A retried tool_use id returns the first result and commits nothing new.
func TestRetriedIDIsNotAppliedTwice(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t, retriesScript.limits)
	run(t, h, retriesScript.steps)
}

func TestRetriesOfEachCommand(t *testing.T) {
	t.Parallel()
	h, r := newHandler(t, policy.DefaultLimits)
	first := call(h, "toolu_once", `{"command":"create","path":"/memories/f","file_text":"a\nb\nc\n"}`)
	edit := call(h, "toolu_edit", `{"command":"str_replace","path":"/memories/f","old_str":"b","new_str":"B"}`)
	ins := call(h, "toolu_ins", `{"command":"insert","path":"/memories/f","insert_line":1,"insert_text":"new"}`)
	head, _ := r.Commit(context.Background(), "HEAD")
	for _, tc := range []struct {
		id, input string
		want      handler.Result
	}{
		{"toolu_once", `{"command":"create","path":"/memories/f","file_text":"a\nb\nc\n"}`, first},
		{"toolu_edit", `{"command":"str_replace","path":"/memories/f","old_str":"b","new_str":"B"}`, edit},
		{"toolu_ins", `{"command":"insert","path":"/memories/f","insert_line":1,"insert_text":"new"}`, ins},
	} {
		if got := call(h, tc.id, tc.input); got != tc.want {
			t.Errorf("retry of %s: got %+v want %+v", tc.id, got, tc.want)
		}
	}
	other := call(h, "toolu_once", `{"command":"delete","path":"/memories/f"}`)
	if !other.IsError || !strings.Contains(other.Content, "already used for another command") {
		t.Errorf("reused id for another command: %+v", other)
	}
	if after, _ := r.Commit(context.Background(), "HEAD"); after.Hash != head.Hash {
		t.Errorf("a retry committed: %s -> %s", head.Hash, after.Hash)
	}
	snap, _ := r.Snapshot(context.Background())
	if data, _ := snap.ReadFile("f"); string(data) != "a\nnew\nB\nc\n" {
		t.Errorf("content after retries: %q", data)
	}
}

func TestResultJSONShape(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t, policy.DefaultLimits)
	got, _ := json.Marshal(call(h, "toolu_x", `{"command":"view","path":"/memories/none"}`))
	want := `{"type":"tool_result","tool_use_id":"toolu_x","content":"Error: The path /memories/none does not exist. Please provide a valid path.","is_error":true}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	got, _ = json.Marshal(call(h, "toolu_y", `{"command":"create","path":"/memories/y","file_text":""}`))
	if want := `{"type":"tool_result","tool_use_id":"toolu_y","content":"File created successfully at: /memories/y"}`; string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// testLog logs to the test's output.
func testLog(t testing.TB) *slog.Logger { return slog.New(slog.NewTextHandler(t.Output(), nil)) }
