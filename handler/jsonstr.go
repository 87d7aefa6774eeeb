package handler

import (
	"bytes"
	"strconv"
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
