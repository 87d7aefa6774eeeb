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
// they are; a form field a user sees (an input that is not hidden, a
// textarea) whose value holds a control gets a note after it (bidiNote)
// that says so and shows the value so. The templates escape every '<'
// and '>' of memory content, in text and in attributes, so a raw '<'
// always opens a tag and a raw '>' closes it; they write tags and
// attributes in lower case, with values in double quotes.
func showBidi(page string) string {
	if !strings.ContainsFunc(page, isBidi) {
		return page
	}
	var b strings.Builder
	b.Grow(len(page) + 64)
	for page != "" {
		lt := strings.IndexByte(page, '<')
		if lt < 0 {
			break
		}
		writeShown(&b, page[:lt])
		page = page[lt:]
		end := strings.IndexByte(page, '>')
		if end < 0 {
			break
		}
		tag := page[:end+1]
		page = page[end+1:]
		b.WriteString(tag)
		switch {
		case hasPrefixFold(tag, "<textarea"):
			content := page
			if i := strings.Index(page, "</textarea"); i >= 0 {
				content = page[:i]
			}
			b.WriteString(content)
			page = page[len(content):]
			if close := strings.IndexByte(page, '>'); close >= 0 {
				b.WriteString(page[:close+1])
				page = page[close+1:]
			}
			bidiNote(&b, content)
		case hasPrefixFold(tag, "<input") && !strings.Contains(tag, ` type="hidden"`):
			bidiNote(&b, attrValue(tag, "value"))
		}
	}
	writeShown(&b, page)
	return b.String()
}

// writeShown writes text (between tags) with its controls shown, and
// every other byte as it is.
func writeShown(b *strings.Builder, text string) {
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if isBidi(r) {
			fmt.Fprintf(b, "&lt;U+%04X&gt;", r)
		} else {
			b.WriteString(text[i : i+size])
		}
		i += size
	}
}

// bidiNote writes, after a form field whose value (as the page holds it,
// escaped) holds a control, a note that says so and shows the value
// with its controls shown: the field keeps them, so that the value
// submitted names the file (the agent, the session) as it is, and shows
// the text reordered.
func bidiNote(b *strings.Builder, value string) {
	if !strings.ContainsFunc(value, isBidi) {
		return
	}
	b.WriteString(`<span class="bidi-note" role="note">This field holds invisible text-direction characters, which reorder how it reads; they are sent as they are. It holds: `)
	writeShown(b, value)
	b.WriteString(`</span>`)
}

// attrValue is the value of the double-quoted attribute name in tag ("":
// none).
func attrValue(tag, name string) string {
	i := strings.Index(tag, " "+name+`="`)
	if i < 0 {
		return ""
	}
	v := tag[i+len(name)+3:]
	if j := strings.IndexByte(v, '"'); j >= 0 {
		return v[:j]
	}
	return ""
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
