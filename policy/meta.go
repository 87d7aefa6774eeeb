package policy

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds on what a caller can put into a commit. A caller names itself
// (agent, session) in HTTP headers or flags; those values are cut to
// MaxCallerBytes. A tool_use id is the idempotency key, so it is refused,
// not cut, when longer than MaxToolUseIDBytes.
const (
	MaxCallerBytes    = 256
	MaxToolUseIDBytes = 256
)

// CommitText makes a caller's value safe to stand in a commit header or a
// trailer: invalid UTF-8 becomes U+FFFD, control characters (newlines, NUL,
// C1) and Unicode line separators become spaces, runs of white space one
// space, leading and trailing space is dropped, and the result is at most
// max bytes (cut at a character, ending in "…" when cut).
func CommitText(s string, max int) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if isControl(r) || r == '\u2028' || r == '\u2029' || unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
		if b.Len() > max {
			break
		}
	}
	out := b.String()
	if len(out) > max {
		out = strings.TrimRight(Prefix(out, max-len("…")), " ") + "…"
	}
	return out
}

// CommitIdent is CommitText for a name or an email in a commit's author
// line, bounded by MaxCallerBytes: '<' and '>' are dropped too, as git
// drops them, because they delimit the email ("Alice <a@corp>" as an agent
// name must not become a second email).
func CommitIdent(s string) string {
	return CommitText(angles.Replace(s), MaxCallerBytes)
}

// AgentIdent is the commit author, name and email, of a caller known by
// a name alone: an agent (serve --agent, the Gitmem-Agent header, an MCP
// client's name) or a token of serve --stores. The name is CommitIdent's;
// the email is that name at gitmem.invalid, each character an email's
// local part does not take as is (all but ASCII letters, digits and
// "._+-") made '-': "support-bot <support-bot@gitmem.invalid>". One rule
// for every transport: an agent's commits carry one identity over stdio,
// HTTP, MCP and under serve --stores (over stdio they carried --author's
// email, under --stores the token's own).
//
// A name that is nothing once cleaned ("<>", "< >") is "unknown", name and
// email: an empty name would be filled with --author's by the committer,
// a mix of two identities ("Claude <unknown@gitmem.invalid>").
func AgentIdent(name string) (ident, email string) {
	ident = CommitIdent(name)
	if ident == "" {
		ident = "unknown"
	}
	local := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._+-", r) {
			return r
		}
		return '-'
	}, ident)
	return ident, local + "@gitmem.invalid"
}

// angles drops '<' and '>' (CommitIdent). Made once: a Replacer of single
// bytes builds a 256-entry table, which per call was 2.6% of the CPU of a
// tool call under serve --stores (a handler is made per call).
var angles = strings.NewReplacer("<", "", ">", "")

// CheckToolUseID refuses a tool_use id that cannot be a commit trailer as
// is: over MaxToolUseIDBytes, invalid UTF-8, or holding a control
// character. Such an id could not be found again on a retry.
func CheckToolUseID(id string) error {
	switch {
	case len(id) > MaxToolUseIDBytes:
		return fmt.Errorf("The tool_use id is %s bytes long, the limit is %d", Thousands(int64(len(id))), MaxToolUseIDBytes)
	case !utf8.ValidString(id):
		return fmt.Errorf("The tool_use id %s is not valid UTF-8", strconv.Quote(id))
	case strings.IndexFunc(id, isControl) >= 0:
		return fmt.Errorf("The tool_use id %s contains a control character", strconv.Quote(id))
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// unsafeToShow reports whether r, printed to a terminal, would act on
// the text rather than be read: a control character, or a bidirectional
// control (which reorders the text around it; strconv.Quote escapes it).
func unsafeToShow(r rune) bool { return isControl(r) || unicode.Is(unicode.Bidi_Control, r) }

// Bounds on what an error result echoes back: a value (old_str, an
// unknown command) is cut after MaxEchoBytes, a list of line numbers after
// MaxEchoLines numbers.
const (
	MaxEchoBytes = 1024
	MaxEchoLines = 100
)

// Clip bounds a value echoed in a result: at most max bytes of s (cut at a
// character), followed by " [... N more bytes]" when anything was cut.
func Clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	p := Prefix(s, max)
	return p + " [... " + Thousands(int64(len(s)-len(p))) + " more bytes]"
}

// MaxNameEcho is how much of a name or id a user gave (a revision, a
// store's id, a query value) an error message quotes.
const MaxNameEcho = 80

// QuoteName is a name or id a user gave as an error message quotes it:
// quoted, at most its first MaxNameEcho bytes (cut at a character), then
// "..." when it was cut.
func QuoteName(s string) string {
	if p := Prefix(s, MaxNameEcho); len(p) < len(s) {
		return strconv.Quote(p) + "..."
	}
	return strconv.Quote(s)
}

// ClipName is QuoteName for a message that names a short plain name as it
// is: a name of at most MaxNameEcho bytes without a control character is
// not quoted.
func ClipName(s string) string {
	if len(s) > MaxNameEcho || strings.ContainsFunc(s, unsafeToShow) {
		return QuoteName(s)
	}
	return s
}

// Printable is s as it is, or quoted (strconv.Quote) when it holds a
// control character or a bidirectional control: a value printed whole (a
// remote's URL set by hand, in a listing) writes no escape sequence or
// line break to a terminal, nor reorders the text around it.
func Printable(s string) string {
	if strings.ContainsFunc(s, unsafeToShow) {
		return strconv.Quote(s)
	}
	return s
}

// LineList joins ascending line numbers with ", " for an error result; past
// max numbers it ends with " [... N more lines]".
func LineList(lines []int, max int) string {
	var b strings.Builder
	for i, n := range lines {
		if i == max {
			fmt.Fprintf(&b, " [... %s more lines]", Thousands(int64(len(lines)-max)))
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}
