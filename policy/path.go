package policy

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Root is the virtual directory the model sees.
const Root = "/memories"

// Limits on the shape of a path. A path longer than MaxPathBytes or with a
// segment longer than MaxSegmentBytes is refused before it reaches the disk.
const (
	MaxPathBytes    = 1024
	MaxSegmentBytes = 255
)

// PathError is a refused path. Its message is the exact text the model sees
// (after the "Error: " prefix the handler adds).
type PathError struct{ Msg string }

func (e *PathError) Error() string { return e.Msg }

func pathErr(format string, args ...any) error {
	return &PathError{Msg: fmt.Sprintf(format, args...)}
}

// ParsePath validates a path as the model wrote it and returns the path
// relative to /memories, with single slashes and no trailing slash: "" for
// the root itself, "notes/todo.md" for /memories/notes/todo.md.
//
// Every spelling of the root (/memories, /memories/, /memories//) yields "".
// Refused: anything not under /memories (including /memoriesX), "." and ".."
// segments, backslashes, NUL and other control characters, invalid UTF-8,
// percent-encoded bytes, over-long paths and segments, and git's reserved
// names (.git, .gitignore, .gitattributes, .gitmodules) as git reads
// them on any file system.
func ParsePath(p string) (string, error) { return parsePath(p, true) }

// ParseHeldPath is ParsePath that takes git's reserved names: a path a
// repository may hold from before gitmem refused them all (git~1 was
// taken until 2026-11-29) or from plain git, for an operator removing it
// from the history (redact), which git fsck --strict then passes.
func ParseHeldPath(p string) (string, error) { return parsePath(p, false) }

// IsPlainRel reports whether rel, a path relative to /memories, is one
// ParsePath takes as it is (ParsePath(Display(rel)) returns rel, no
// error), by a look at its bytes that allocates nothing: ASCII letters,
// digits, '-', '_' and '.', names of at most MaxSegmentBytes separated
// by single slashes, none empty or beginning with '.' (so no "." or
// "..", and none of git's names: each begins with '.' or holds a '~'),
// the whole path within MaxPathBytes. false says nothing: ParsePath
// decides. For a look at every file of a memory (a start's), where
// nearly every path is such.
func IsPlainRel(rel string) bool {
	if rel == "" || len(Root)+1+len(rel) > MaxPathBytes {
		return false
	}
	seg := 0 // bytes of the current name so far
	for i := 0; i < len(rel); i++ {
		switch c := rel[i]; {
		case c == '/':
			if seg == 0 {
				return false
			}
			seg = 0
			continue
		case c == '.':
			if seg == 0 {
				return false
			}
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
		if seg++; seg > MaxSegmentBytes {
			return false
		}
	}
	return seg > 0
}

func parsePath(p string, refuseReserved bool) (string, error) {
	// Length and encoding come first: every later message echoes the path.
	if len(p) > MaxPathBytes {
		return "", pathErr("Path %s... is too long: %d bytes, the limit is %d", strings.ToValidUTF8(Prefix(p, 64), "\uFFFD"), len(p), MaxPathBytes)
	}
	if !utf8.ValidString(p) {
		return "", pathErr("Path %s is not valid UTF-8", strconv.Quote(p))
	}
	if !strings.HasPrefix(p, Root) {
		return "", pathErr("Path must start with %s, got: %s", Root, p)
	}
	rest := p[len(Root):]
	if rest != "" && rest[0] != '/' {
		return "", pathErr("Path must start with %s, got: %s", Root, p)
	}
	for _, r := range p {
		switch {
		case isControl(r):
			return "", pathErr("Path %s contains a control character", strconv.Quote(p))
		case r == '\\':
			return "", pathErr("Path %s contains a backslash; use / to separate folders", p)
		}
	}
	if i := percentEscape(p); i >= 0 {
		return "", pathErr("Path %s contains a percent-encoded character (%s); write the character itself", p, p[i:i+3])
	}
	var segs []string
	for _, s := range strings.Split(rest, "/") {
		switch {
		case s == "":
			continue
		case s == "..":
			return "", pathErr("Path %s would escape /memories directory", p)
		case s == ".":
			return "", pathErr("Path %s contains a '.' segment; name the folder directly", p)
		case len(s) > MaxSegmentBytes:
			return "", pathErr("Path %s has a name of %d bytes, the limit is %d", p, len(s), MaxSegmentBytes)
		case refuseReserved && isReserved(s):
			return "", pathErr("Path %s uses the reserved name %s", p, s)
		}
		segs = append(segs, s)
	}
	return strings.Join(segs, "/"), nil
}

// Display is the model-facing path of a store path: Display("a/b") is
// "/memories/a/b", Display("") is "/memories".
func Display(rel string) string {
	if rel == "" {
		return Root
	}
	return Root + "/" + rel
}

// percentEscape returns the index of the first %XX escape in p, or -1.
func percentEscape(p string) int {
	for i := 0; i+2 < len(p); i++ {
		if p[i] == '%' && isHex(p[i+1]) && isHex(p[i+2]) {
			return i
		}
	}
	return -1
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// isReserved reports whether a segment names one of git's control files,
// as git reads a tree on any file system (isGitName).
func isReserved(seg string) bool { return isGitName(seg) }

// IsReservedName reports whether a file or folder name found on disk is one
// gitmem never tracks (git's control files).
func IsReservedName(name string) bool { return isReserved(name) }

// Prefix returns at most n bytes of s, cut at a rune boundary: what a
// message quotes of a name or path that may be of any length.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
