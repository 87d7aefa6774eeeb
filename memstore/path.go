package memstore

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/gitmem-dev/gitmem/policy"
)

// Limits of a memory, as the Memory Stores API states them. A path is
// also a memory tool path, /memories + path, which must fit the tool's
// policy.MaxPathBytes: so at most MaxPathBytes bytes.
const (
	MaxContentBytes = 102400
	MaxPathBytes    = policy.MaxPathBytes - len(policy.Root)
	MaxSegments     = 20
)

// InvalidError is a request this package refuses as malformed (a path, a
// prefix, a content too large); nothing was changed. The message names
// what is wrong, quoting at most a bounded part of the input.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

func invalid(format string, args ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, args...)}
}

// quote is s for a message: quoted, at most 100 bytes of it.
func quote(s string) string {
	if len(s) > 100 {
		n := 100
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		return strconv.Quote(s[:n]) + "..."
	}
	return strconv.Quote(s)
}

// ParsePath checks a memory path as the API gives it ("/notes/todo.md")
// and returns it relative to the memory tool's /memories ("notes/todo.md").
// The API's rules: it starts with "/", has 1 to 20 segments, none empty,
// "." or "..", no control or format character (Cc, Cf), no U+2028 or
// U+2029, is in Unicode Normalization Form C. And the memory tool's, as
// /memories + path is one of its paths: at most MaxPathBytes bytes, no
// segment over 255 bytes, no backslash, no percent-encoded byte, none of
// git's reserved names (.git, .gitignore, .gitattributes, .gitmodules).
func ParsePath(p string) (string, error) {
	if err := checkText("path", p); err != nil {
		return "", err
	}
	if !strings.HasPrefix(p, "/") {
		return "", invalid("path %s must start with \"/\"", quote(p))
	}
	rest := p[1:]
	if rest == "" {
		return "", invalid("path \"/\" names the store's root; a memory path names a file, such as \"/notes/todo.md\"")
	}
	if err := checkSegments("path", p, strings.Split(rest, "/")); err != nil {
		return "", err
	}
	return rest, nil
}

// ParseToolPath checks a memory path as this API shows a memory that the
// memory tool may hold ("/notes/todo.md"), and returns it relative to
// /memories: the memory tool's rules (policy.ParsePath of /memories +
// path), written as the API writes them (one "/" between segments, none
// at the end). It takes what ParsePath's own rules refuse and the tool
// writes: a name not in Unicode Normalization Form C, a format
// character, more than MaxSegments segments. For what is written into a
// gitmem store, not sent to an API (package transfer's import).
func ParseToolPath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", invalid("path %s must start with \"/\"", quote(p))
	}
	rel, err := policy.ParsePath(policy.Root + p)
	switch {
	case err != nil:
		return "", invalid("path %s is not a memory path: %s", quote(p), strings.TrimPrefix(err.Error(), "Path "))
	case rel == "":
		return "", invalid("path %s names the store's root, not a memory", quote(p))
	case apiPath(rel) != p:
		return "", invalid("path %s is not a memory path as this API writes it (%s)", quote(p), quote(apiPath(rel)))
	}
	return rel, nil
}

// ParsePrefix checks a path_prefix: "/" (the whole store) or a path that
// ends with "/" ("/notes/"); it returns it relative to /memories, with its
// "/" ("" or "notes/").
func ParsePrefix(p string) (string, error) {
	if err := checkText("path_prefix", p); err != nil {
		return "", err
	}
	if !strings.HasPrefix(p, "/") || !strings.HasSuffix(p, "/") {
		return "", invalid("path_prefix %s must start and end with \"/\", such as \"/notes/\"", quote(p))
	}
	rest := p[1:]
	if rest == "" {
		return "", nil
	}
	if err := checkSegments("path_prefix", p, strings.Split(strings.TrimSuffix(rest, "/"), "/")); err != nil {
		return "", err
	}
	return rest, nil
}

func checkText(what, p string) error {
	if len(p) > MaxPathBytes {
		return invalid("%s is %s bytes; the limit is %s (the memory tool's /memories + path must fit %s)",
			what, policy.Thousands(int64(len(p))), policy.Thousands(int64(MaxPathBytes)), policy.Thousands(int64(policy.MaxPathBytes)))
	}
	if !utf8.ValidString(p) {
		return invalid("%s is not valid UTF-8", what)
	}
	for _, r := range p {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			return invalid("%s %s contains a control or format character (%U)", what, quote(p), r)
		}
	}
	if !norm.NFC.IsNormalString(p) {
		return invalid("%s %s is not in Unicode Normalization Form C", what, quote(p))
	}
	return nil
}

func checkSegments(what, p string, segs []string) error {
	if len(segs) > MaxSegments {
		return invalid("%s %s has %d segments; the limit is %d", what, quote(p), len(segs), MaxSegments)
	}
	for _, s := range segs {
		switch {
		case s == "":
			return invalid("%s %s has an empty segment", what, quote(p))
		case s == "." || s == "..":
			return invalid("%s %s has a %q segment", what, quote(p), s)
		case len(s) > policy.MaxSegmentBytes:
			return invalid("%s %s has a segment of %d bytes; the limit is %d", what, quote(p), len(s), policy.MaxSegmentBytes)
		case policy.IsReservedName(s):
			return invalid("%s %s uses the reserved name %s (git's own files)", what, quote(p), quote(s))
		}
	}
	// The memory tool's other rules (a backslash, a percent-encoded
	// byte), worded for this API.
	if _, err := policy.ParsePath(policy.Root + "/" + strings.Join(segs, "/")); err != nil {
		switch {
		case strings.Contains(p, `\`):
			return invalid("%s %s contains a backslash; use / to separate folders", what, quote(p))
		case strings.Contains(err.Error(), "percent-encoded"):
			return invalid("%s %s contains a percent-encoded character (%%XX); write the character itself", what, quote(p))
		}
		return invalid("%s %s is not a memory path: %s", what, quote(p), strings.TrimPrefix(err.Error(), "Path "))
	}
	return nil
}

// apiPath is a path relative to /memories as the API shows it.
func apiPath(rel string) string { return "/" + rel }
