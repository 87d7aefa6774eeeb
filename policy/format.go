package policy

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
)

// MaxLines is the largest file a view will number.
const MaxLines = 999999

// HumanSize prints a size as the reference SDK does: 1024-based units B, K,
// M, G; a whole number when exact, else one decimal rounded half up
// (JavaScript's toFixed): 0B, 17B, 1.5K, 4K, 1.2M.
func HumanSize(n int64) string {
	if n <= 0 {
		return "0B"
	}
	units := []string{"B", "K", "M", "G"}
	i, unit := 0, int64(1)
	for i < len(units)-1 && unit*1024 <= n {
		unit *= 1024
		i++
	}
	if n%unit == 0 {
		return strconv.FormatInt(n/unit, 10) + units[i]
	}
	tenths := (n*20 + unit) / (2 * unit) // round(n*10/unit), halves up
	return fmt.Sprintf("%d.%d%s", tenths/10, tenths%10, units[i])
}

// NumberLine formats one line of a view: the number right-aligned in six
// columns, a tab, the text.
func NumberLine(n int, text string) string {
	return fmt.Sprintf("%6d\t%s", n, text)
}

// SplitLines splits file content on "\n" as the reference does: a trailing
// newline yields a final empty line, and empty content is one empty line.
func SplitLines(content string) []string { return strings.Split(content, "\n") }

// CountLines counts the real lines of content: a trailing newline does not
// start a new line, and empty content has none.
func CountLines(content string) int {
	if content == "" {
		return 0
	}
	n := strings.Count(content, "\n")
	if !strings.HasSuffix(content, "\n") {
		n++
	}
	return n
}

// ViewRange resolves a view_range [a, b] over n lines as the reference
// does: 1-based and inclusive, a below 1 counts as 1, b = -1 means the last
// line, a b below -1 counts from the end as JavaScript's slice does ([1,
// -2]: all but the last two lines), out-of-range bounds are clipped
// (possibly to nothing). It returns the 0-based half-open interval
// [from, to).
func ViewRange(a, b, n int) (from, to int) {
	from = max(1, a) - 1
	to = b
	switch {
	case b == -1:
		to = n
	case b < 0:
		to = max(0, n+b)
	}
	to = min(to, n)
	from = min(from, n)
	if to < from {
		to = from
	}
	return from, to
}

// Page renders a numbered view as the reference does: the header, a
// newline, then lines[from:to] numbered from from+1 and joined by newlines
// (so an empty range leaves the header and a newline). When the result
// would exceed maxBytes (0: no limit) it keeps the lines that fit and ends
// with a line naming the view_range to ask for next. At least one line is
// always shown, so paging always advances.
func Page(header string, lines []string, from, to, maxBytes int) string {
	numbered := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		numbered = append(numbered, NumberLine(i+1, lines[i]))
	}
	return fit(header, numbered, maxBytes, func(shown int) string {
		return moreLine(from+1, from+shown, to, len(lines), maxBytes)
	})
}

// fit joins the header and lines with newlines. Past maxBytes (0: no
// limit) it keeps the first lines that fit, at least one, and ends with
// more(number shown).
func fit(header string, lines []string, maxBytes int, more func(shown int) string) string {
	all := header + "\n" + strings.Join(lines, "\n")
	if maxBytes <= 0 || len(all) <= maxBytes {
		return all
	}
	var b strings.Builder
	b.WriteString(header)
	b.WriteByte('\n')
	for i, line := range lines {
		if i > 0 {
			m := more(i)
			if b.Len()+1+len(line)+len(m) > maxBytes {
				b.WriteString(m)
				return b.String()
			}
			b.WriteByte('\n')
		}
		b.WriteString(line)
	}
	return b.String()
}

// moreLine is the last line of a truncated view: lines first..last were
// shown out of a request that ran to line `to` of n.
func moreLine(first, last, to, n, maxBytes int) string {
	end := strconv.Itoa(to)
	if to == n {
		end = "-1"
	}
	return fmt.Sprintf("\n[Output truncated at %s bytes: showed lines %d-%d. Use view_range [%d, %s] to see more.]",
		Thousands(int64(maxBytes)), first, last, last+1, end)
}

// Less orders names as JavaScript's default sort does (by UTF-16 code
// units), which is the reference's listing order.
func Less(a, b string) bool {
	// UTF-8 byte order is code point order; it differs from UTF-16 order
	// only between U+E000..U+FFFF (lead bytes 0xEE, 0xEF) and U+10000 and
	// above (lead bytes 0xF0..). Without those, compare bytes.
	if !hasHighPlane(a) || !hasHighPlane(b) {
		return a < b
	}
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

func hasHighPlane(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0xEE {
			return true
		}
	}
	return false
}

// PageListing renders a folder listing: the header and one line per entry.
// When the result would exceed maxBytes (0: no limit) it keeps the entries
// that fit and ends with a line saying how many were left out.
func PageListing(header string, lines []string, maxBytes int) string {
	return fit(header, lines, maxBytes, func(shown int) string {
		return fmt.Sprintf("\n[Output truncated at %s bytes: showed %d of %d entries. View a subfolder to see the rest.]",
			Thousands(int64(maxBytes)), shown, len(lines))
	})
}
