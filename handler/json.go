package handler

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeString decodes a JSON string literal as encoding/json does, except
// that bytes which are not valid UTF-8, and \u escapes of lone surrogates,
// are kept (the surrogates as their three-byte WTF-8 form) instead of
// being replaced by U+FFFD. The caller can then refuse them: a path or a
// file must not change silently on its way in. ok is false when raw is not
// a JSON string. raw has already passed a JSON parser.
func decodeString(raw []byte) (s string, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	raw = raw[1 : len(raw)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw), true
	}
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' || i+1 == len(raw) {
			out = append(out, c)
			continue
		}
		i++
		switch raw[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, n := hex4(raw[i+1:])
			if n == 0 {
				return "", false
			}
			i += n
			if utf16.IsSurrogate(r) {
				if r2, n2 := hex4(after(raw[i+1:], `\u`)); n2 > 0 {
					if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
						out = utf8.AppendRune(out, pair)
						i += 2 + n2
						continue
					}
				}
				// A lone surrogate: kept as WTF-8, which is not valid UTF-8.
				out = append(out, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
				continue
			}
			out = utf8.AppendRune(out, r)
		default: // \" \\ \/
			out = append(out, raw[i])
		}
	}
	return string(out), true
}

// hex4 reads four hex digits.
func hex4(b []byte) (rune, int) {
	if len(b) < 4 {
		return 0, 0
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 16)
	if err != nil {
		return 0, 0
	}
	return rune(n), 4
}

// after returns b without the prefix p, or nil when b does not start with p.
func after(b []byte, p string) []byte {
	if bytes.HasPrefix(b, []byte(p)) {
		return b[len(p):]
	}
	return nil
}

// The functions below walk JSON that has already been validated
// (json.Valid), handing out sub-slices of it instead of copies: a 30 MiB
// request is not copied once per level of json.RawMessage on its way to
// the one string it holds.

// members calls fn with the decoded key and the raw value of each member
// of a JSON object, in order. It reports false when raw is not an object.
func members(raw []byte, fn func(key string, val []byte)) bool {
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '{' {
		return false
	}
	i = skipSpace(raw, i+1)
	for i < len(raw) && raw[i] != '}' {
		end := skipValue(raw, i)
		key, _ := decodeString(raw[i:end])
		i = skipSpace(raw, end)
		i = skipSpace(raw, i+1) // ':'
		end = skipValue(raw, i)
		fn(key, raw[i:end])
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return true
}

// elements calls fn with each raw element of a JSON array, in order, and
// stops early when fn returns false. It reports false when raw is not an
// array.
func elements(raw []byte, fn func(val []byte) bool) bool {
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '[' {
		return false
	}
	i = skipSpace(raw, i+1)
	for i < len(raw) && raw[i] != ']' {
		end := skipValue(raw, i)
		if !fn(raw[i:end]) {
			return true
		}
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return true
}

func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the value that starts at raw[i].
func skipValue(raw []byte, i int) int {
	depth := 0
	for ; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '"':
			i = skipString(raw, i)
		case '{', '[':
			depth++
			continue
		case '}', ']':
			depth--
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return i
			}
			continue
		default: // a number or literal
			if depth > 0 {
				continue
			}
			for i+1 < len(raw) && !strings.ContainsRune(",]} \t\n\r", rune(raw[i+1])) {
				i++
			}
		}
		if depth == 0 {
			return i + 1
		}
	}
	return i
}

// skipString returns the index of the quote that closes the string
// opened at raw[i].
func skipString(raw []byte, i int) int {
	for i++; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return i
}

// NotUTF8 names the first string of the JSON value raw (which a JSON
// parser has already accepted) that is not valid UTF-8 as sent: bytes
// that are not UTF-8, or an escaped lone surrogate, which encoding/json
// would silently replace with U+FFFD. The name is the member's path
// ("content", "precondition.type", "metadata.k", "revisions[2]"), and
// ok is false when every string, member names included, is valid. The
// HTTP APIs that decode bodies with encoding/json call it first, so that
// they refuse what the memory tool refuses.
func NotUTF8(raw []byte) (name string, ok bool) {
	var walk func(path string, val []byte)
	walk = func(path string, val []byte) {
		i := skipSpace(val, 0)
		if i == len(val) {
			return
		}
		switch val[i] {
		case '"':
			valid := utf8.Valid(val) // without an escape, the bytes are the string: no copy
			if valid && bytes.IndexByte(val, '\\') >= 0 {
				s, _ := decodeString(val)
				valid = utf8.ValidString(s)
			}
			if !valid {
				name, ok = path, true
			}
		case '{':
			members(val, func(key string, v []byte) {
				switch {
				case ok:
				case !utf8.ValidString(key):
					name, ok = "a member name in "+orBody(path), true
				default:
					walk(memberPath(path, key), v)
				}
			})
		case '[':
			n := 0
			elements(val, func(v []byte) bool {
				walk(path+"["+strconv.Itoa(n)+"]", v)
				n++
				return !ok
			})
		}
	}
	walk("", raw)
	return name, ok
}

func memberPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orBody(path string) string {
	if path == "" {
		return "the body"
	}
	return path
}
