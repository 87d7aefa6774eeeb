package main

import "strings"

const (
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	cyan   = "\x1b[36m"
	bold   = "\x1b[1m"
	reset  = "\x1b[0m"
)

func paint(on bool, color, s string) string {
	if !on {
		return s
	}
	return color + s + reset
}

// colorDiff colors a unified diff for a terminal, as git does.
func colorDiff(d string, on bool) string {
	if !on || d == "" {
		return d
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(d, "\n") {
		body := strings.TrimSuffix(line, "\n")
		nl := line[len(body):]
		switch {
		case strings.HasPrefix(body, "diff --git"), strings.HasPrefix(body, "--- "), strings.HasPrefix(body, "+++ "),
			strings.HasPrefix(body, "new file"), strings.HasPrefix(body, "deleted file"):
			b.WriteString(paint(true, bold, body) + nl)
		case strings.HasPrefix(body, "@@"):
			b.WriteString(paint(true, cyan, body) + nl)
		case strings.HasPrefix(body, "+"):
			b.WriteString(paint(true, green, body) + nl)
		case strings.HasPrefix(body, "-"):
			b.WriteString(paint(true, red, body) + nl)
		default:
			b.WriteString(line)
		}
	}
	return b.String()
}
