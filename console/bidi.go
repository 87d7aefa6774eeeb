package console

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// isBidi reports whether r is one of Unicode's bidirectional controls:
// invisible, they reorder the text around them, so a name the model wrote
// as "notes\u202edm.terces" reads "notessecret.md" ("Trojan Source").
func isBidi(r rune) bool {
	return r == '\u061c' || r == '\u200e' || r == '\u200f' ||
		'\u202a' <= r && r <= '\u202e' || '\u2066' <= r && r <= '\u2069'
}

// showBidi returns a rendered page with every bidirectional control in its
// text shown as what it is, "<U+202E>", instead of acting on the text
// around it. Attribute values (the links and forms that must name a file
// as it is) and the contents of a textarea (a form's value) are left as
// they are. The templates escape every '<' and '>' of memory content, so
// a raw '<' always opens a tag and a raw '>' closes it.
func showBidi(page string) string {
	if !strings.ContainsFunc(page, isBidi) {
		return page
	}
	var b strings.Builder
	b.Grow(len(page) + 64)
	inTag, inTextarea := false, false
	for i := 0; i < len(page); {
		r, size := utf8.DecodeRuneInString(page[i:])
		next := page[i : i+size]
		i += size
		switch {
		case inTag:
			inTag = r != '>'
		case r == '<':
			inTag = true
			rest := page[i-size:]
			if hasPrefixFold(rest, "<textarea") {
				inTextarea = true
			} else if hasPrefixFold(rest, "</textarea") {
				inTextarea = false
			}
		case isBidi(r) && !inTextarea:
			fmt.Fprintf(&b, "&lt;U+%04X&gt;", r)
			continue
		}
		b.WriteString(next)
	}
	return b.String()
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
