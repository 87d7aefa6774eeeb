package console

import (
	"strconv"
	"strings"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
)

// A diff as the pages show it: gitmem's unified diff of each file
// (FileChange.Unified, the text `gitmem diff` prints), read back into
// rows, unified or side by side.

type diffFile struct {
	Path    string // as the model sees it
	Status  string // added, deleted, modified
	Binary  bool
	Adds    int
	Dels    int
	Hunks   []hunk
	Cut     bool // more rows than a page shows
	Anchor  string
	Unified bool
}

type hunk struct {
	Header string
	Rows   []diffRow   // unified
	Pairs  []splitPair // side by side
}

type diffRow struct {
	Kind     string // ctx, add, del, note
	Sign     string
	Old, New int // line numbers, 0 where the side has none
	Text     string
}

type splitPair struct {
	Left, Right *diffRow // nil: nothing on that side
}

// maxDiffRows bounds the rows of one file a page shows.
const maxDiffRows = 3000

// diffFiles reads changes as the pages show them, with at most budget
// rows in all (0: maxDiffRows per file).
func diffFiles(changes []gitmem.FileChange, unified bool, budget int) []diffFile {
	var out []diffFile
	left := budget
	for i, fc := range changes {
		limit := maxDiffRows
		if budget > 0 {
			limit = max(left, 0)
		}
		f := parseUnified(fc.Unified(), limit)
		f.Path, f.Anchor, f.Unified = policy.Display(fc.Path), "f"+strconv.Itoa(i), unified
		switch {
		case !fc.OldFile:
			f.Status = "added"
		case !fc.NewFile:
			f.Status = "deleted"
		default:
			f.Status = "modified"
		}
		for _, h := range f.Hunks {
			left -= len(h.Rows)
		}
		out = append(out, f)
	}
	return out
}

// parseUnified reads one file's unified diff: its hunks, each line with
// its numbers. A line of content never starts a hunk: it has its sign
// before it.
func parseUnified(text string, limit int) diffFile {
	var f diffFile
	var cur *hunk
	old, new := 0, 0
	rows := 0
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(l, "Binary files "):
			f.Binary = true
		case strings.HasPrefix(l, "@@ "):
			f.Hunks = append(f.Hunks, hunk{Header: l})
			cur = &f.Hunks[len(f.Hunks)-1]
			old, new = hunkStart(l)
		case cur == nil || l == "":
		case l[0] == ' ':
			cur.Rows = append(cur.Rows, diffRow{Kind: "ctx", Sign: " ", Old: old, New: new, Text: l[1:]})
			old, new = old+1, new+1
		case l[0] == '-':
			cur.Rows = append(cur.Rows, diffRow{Kind: "del", Sign: "-", Old: old, Text: l[1:]})
			old++
			f.Dels++
		case l[0] == '+':
			cur.Rows = append(cur.Rows, diffRow{Kind: "add", Sign: "+", New: new, Text: l[1:]})
			new++
			f.Adds++
		case l[0] == '\\':
			cur.Rows = append(cur.Rows, diffRow{Kind: "note", Sign: " ", Text: l[2:]})
		}
		if cur != nil && len(cur.Rows) > 0 && l != "" && !strings.HasPrefix(l, "@@ ") {
			rows++
			if rows > limit {
				cur.Rows = cur.Rows[:len(cur.Rows)-1]
				f.Cut = true
				break
			}
		}
	}
	for i := range f.Hunks {
		f.Hunks[i].Pairs = pairs(f.Hunks[i].Rows)
	}
	return f
}

// hunkStart reads "@@ -a,b +c,d @@": the first line numbers.
func hunkStart(h string) (old, new int) {
	fields := strings.Fields(h)
	num := func(s string) int {
		s, _, _ = strings.Cut(s[1:], ",")
		n, _ := strconv.Atoi(s)
		return n
	}
	if len(fields) >= 3 {
		old, new = num(fields[1]), num(fields[2])
	}
	return max(old, 1), max(new, 1)
}

// pairs sets a hunk's rows side by side: the lines it removes beside
// the lines that replace them.
func pairs(rows []diffRow) []splitPair {
	var out []splitPair
	for i := 0; i < len(rows); {
		r := &rows[i]
		if r.Kind == "ctx" || r.Kind == "note" {
			out = append(out, splitPair{r, r})
			i++
			continue
		}
		j := i
		for j < len(rows) && rows[j].Kind == "del" {
			j++
		}
		k := j
		for k < len(rows) && rows[k].Kind == "add" {
			k++
		}
		dels, adds := rows[i:j], rows[j:k]
		for n := 0; n < max(len(dels), len(adds)); n++ {
			var p splitPair
			if n < len(dels) {
				p.Left = &dels[n]
			}
			if n < len(adds) {
				p.Right = &adds[n]
			}
			out = append(out, p)
		}
		i = k
	}
	return out
}
