package policy

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCommitText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 900<<10) // 1.8 MB
	for _, tc := range []struct{ in, want string }{
		{"support-bot", "support-bot"},
		{"  planner  ", "planner"},
		{"a\nb\r\nc", "a b c"},
		{"nul\x00in\x7fside\u0085x", "nul in side x"},
		{"tab\tand   spaces", "tab and spaces"},
		{"line\u2028sep", "line sep"},
		{"bad \xff utf8", "bad \uFFFD utf8"},
		{"Alice <alice@corp>", "Alice <alice@corp>"}, // a trailer may hold angle brackets
		{"", ""},
		{"\n\n", ""},
		{long, strings.Repeat("é", 126) + "…"},
	} {
		got := CommitText(tc.in, MaxCallerBytes)
		if got != tc.want {
			t.Errorf("CommitText(%.40q) = %.80q, want %.80q", tc.in, got, tc.want)
		}
		if len(got) > MaxCallerBytes || !utf8.ValidString(got) {
			t.Errorf("CommitText(%.40q): %d bytes, valid=%v", tc.in, len(got), utf8.ValidString(got))
		}
	}
}

func TestCommitIdent(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Alice <alice@corp>": "Alice alice@corp",
		"evil> <x":           "evil x",
		"<>":                 "",
		"a\x00b":             "a b",
		"Zoë":                "Zoë",
	} {
		if got := CommitIdent(in); got != want {
			t.Errorf("CommitIdent(%q) = %q, want %q", in, got, want)
		}
	}
}

// An agent's name is cleaned first, then cut: a name over MaxCallerBytes
// that fits once its '<', '>' and runs of white space are gone is whole,
// and one that does not is cut to the limit, never shorter, never ending
// in a half-cleaned run ("a …"). Its callers hand it the name as given
// (handler's commitMeta cut it for the Agent trailer first: 300 bytes of
// "<bot>" became 50 "bot"s, "bo" and "…", not 60 whole).
func TestAgentIdentCleansThenCuts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, ident, email string }{
		{strings.Repeat("<bot>", 60), strings.Repeat("bot", 60), strings.Repeat("bot", 60)},
		{strings.Repeat("a  \n", 100), strings.TrimSpace(strings.Repeat("a ", 100)), strings.Repeat("a-", 99) + "a"},
		{strings.Repeat("<<x>>", 100), strings.Repeat("x", 100), strings.Repeat("x", 100)},
		{strings.Repeat("x", 300), strings.Repeat("x", 253) + "…", strings.Repeat("x", 253) + "-"},
		{strings.Repeat("<", 300) + strings.Repeat("y", 300), strings.Repeat("y", 253) + "…", strings.Repeat("y", 253) + "-"},
	} {
		ident, email := AgentIdent(tc.in)
		if ident != tc.ident || email != tc.email+"@gitmem.invalid" {
			t.Errorf("AgentIdent(%.30q...) = %q, %q; want %q, %q", tc.in, ident, email, tc.ident, tc.email+"@gitmem.invalid")
		}
		if len(ident) > MaxCallerBytes {
			t.Errorf("AgentIdent(%.30q...) is %d bytes, over %d", tc.in, len(ident), MaxCallerBytes)
		}
		// What a caller cut for a trailer is no name to make one from.
		if cut, _ := AgentIdent(CommitText(tc.in, MaxCallerBytes)); len(cut) > len(ident) {
			t.Errorf("AgentIdent of the cut name is longer than of the whole")
		}
	}
}

func TestCheckToolUseID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"toolu_01D5E6F7G8H9":       "",
		"id with spaces":           "",
		strings.Repeat("x", 256):   "",
		strings.Repeat("x", 257):   "The tool_use id is 257 bytes long, the limit is 256",
		"toolu\n2":                 `The tool_use id "toolu\n2" contains a control character`,
		"toolu\x00":                `The tool_use id "toolu\x00" contains a control character`,
		"toolu\xff":                `The tool_use id "toolu\xff" is not valid UTF-8`,
		strings.Repeat("x", 9<<20): "The tool_use id is 9,437,184 bytes long, the limit is 256",
	} {
		got := ""
		if err := CheckToolUseID(id); err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("CheckToolUseID(%.40q) = %q, want %q", id, got, want)
		}
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789", 10, "0123456789"},
		{"0123456789a", 10, "0123456789 [... 1 more bytes]"},
		{"ééé", 3, "é [... 4 more bytes]"}, // cut at a character
		{strings.Repeat("x", 900000), 4, "xxxx [... 899,996 more bytes]"},
	} {
		if got := Clip(tc.in, tc.max); got != tc.want {
			t.Errorf("Clip(%.20q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

func TestQuoteAndClipName(t *testing.T) {
	t.Parallel()
	x80, x81 := strings.Repeat("x", 80), strings.Repeat("x", 81)
	for _, tc := range []struct{ in, quote, clip string }{
		{"memstore_1", `"memstore_1"`, "memstore_1"},
		{x80, `"` + x80 + `"`, x80},
		{x81, `"` + x80 + `"...`, `"` + x80 + `"...`},
		{strings.Repeat("x", 79) + "é", `"` + strings.Repeat("x", 79) + `"...`, `"` + strings.Repeat("x", 79) + `"...`}, // cut at a character
		{"a\nb", `"a\nb"`, `"a\nb"`},
		{"a\x7fb", `"a\x7fb"`, `"a\x7fb"`},
		{"txt\u202eexe", `"txt\u202eexe"`, `"txt\u202eexe"`}, // a bidirectional control
	} {
		if got := QuoteName(tc.in); got != tc.quote {
			t.Errorf("QuoteName(%.20q) = %q, want %q", tc.in, got, tc.quote)
		}
		if got := ClipName(tc.in); got != tc.clip {
			t.Errorf("ClipName(%.20q) = %q, want %q", tc.in, got, tc.clip)
		}
	}
}

// Printable quotes only a value that holds a control character, and
// never clips.
func TestPrintable(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 300)
	for in, want := range map[string]string{"/srv/memory.git": "/srv/memory.git", long: long, "/x\ny": `"/x\ny"`, "o\x1b[31m": `"o\x1b[31m"`, "a\u0085b": `"a\u0085b"`, "a\u2067b": `"a\u2067b"`} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%.20q) = %q, want %q", in, got, want)
		}
	}
}

func TestLineList(t *testing.T) {
	t.Parallel()
	if got := LineList([]int{1, 4, 9}, 3); got != "1, 4, 9" {
		t.Errorf("got %q", got)
	}
	if got := LineList([]int{1, 2, 3, 4, 5}, 2); got != "1, 2 [... 3 more lines]" {
		t.Errorf("got %q", got)
	}
}
