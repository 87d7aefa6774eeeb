package gitmem

import (
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// A three-way line merge (diff3), used by revert. go-diff's patch
// functions report success while corrupting files in three-way use, so
// only its line diff is used here; the merge is built on that and checked
// against `git merge-file` (merge_test.go).

// hunk replaces base lines [start, end) with lines.
type hunk struct {
	start, end int
	lines      []string
}

// lineHunks returns the changes that turn base into x, in base order.
func lineHunks(base, x []string) []hunk {
	dmp := diffmatchpatch.New()
	a, b, table := dmp.DiffLinesToChars(strings.Join(base, ""), strings.Join(x, ""))
	diffs := dmp.DiffCharsToLines(dmp.DiffMain(a, b, false), table)
	var out []hunk
	pos := 0
	var cur *hunk
	for _, d := range diffs {
		lines := splitKeep(d.Text)
		switch d.Type {
		case diffmatchpatch.DiffEqual:
			if cur != nil {
				out = append(out, *cur)
				cur = nil
			}
			pos += len(lines)
		case diffmatchpatch.DiffDelete:
			if cur == nil {
				cur = &hunk{start: pos, end: pos}
			}
			pos += len(lines)
			cur.end = pos
		case diffmatchpatch.DiffInsert:
			if cur == nil {
				cur = &hunk{start: pos, end: pos}
			}
			cur.lines = append(cur.lines, lines...)
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out
}

// Conflict is a region both sides changed differently: base lines
// [BaseStart, BaseEnd) (0-based) became Ours on one side, Theirs on the other.
type Conflict struct {
	BaseStart, BaseEnd int
	Ours, Theirs       []string
}

// merge3 merges the changes base→ours and base→theirs. Changes that
// overlap or touch conflict unless they are the same (as git does); the
// result keeps ours in a conflict.
func merge3(base, ours, theirs []string) ([]string, []Conflict) {
	return merge(base, ours, theirs, false)
}

// merge is merge3 with the side that fills a conflict chosen.
func merge(base, ours, theirs []string, theirsWins bool) ([]string, []Conflict) {
	return mergeFill(base, ours, theirs, func(c Conflict) []string {
		if theirsWins {
			return c.Theirs
		}
		return c.Ours
	})
}

// mergeFill is merge3 with what fills a conflict's place chosen by fill
// (a pull writes both sides between conflict markers).
func mergeFill(base, ours, theirs []string, fill func(Conflict) []string) ([]string, []Conflict) {
	ho, ht := lineHunks(base, ours), lineHunks(base, theirs)
	var out []string
	var conflicts []Conflict
	pos := 0
	for len(ho) > 0 || len(ht) > 0 {
		// Start a group with the earliest hunk, then take in every hunk
		// of either side that overlaps or touches the group.
		var gO, gT []hunk
		if len(ht) == 0 || len(ho) > 0 && ho[0].start <= ht[0].start {
			gO, ho = append(gO, ho[0]), ho[1:]
		} else {
			gT, ht = append(gT, ht[0]), ht[1:]
		}
		start := append(gO, gT...)[0].start
		end := append(gO, gT...)[0].end
		for {
			if len(ho) > 0 && ho[0].start <= end {
				end = max(end, ho[0].end)
				gO, ho = append(gO, ho[0]), ho[1:]
			} else if len(ht) > 0 && ht[0].start <= end {
				end = max(end, ht[0].end)
				gT, ht = append(gT, ht[0]), ht[1:]
			} else {
				break
			}
		}
		out = append(out, base[pos:start]...)
		switch {
		case len(gT) == 0:
			out = append(out, apply(base, start, end, gO)...)
		case len(gO) == 0:
			out = append(out, apply(base, start, end, gT)...)
		default:
			o, t := apply(base, start, end, gO), apply(base, start, end, gT)
			if strings.Join(o, "") == strings.Join(t, "") {
				out = append(out, o...)
			} else {
				c := Conflict{BaseStart: start, BaseEnd: end, Ours: o, Theirs: t}
				conflicts = append(conflicts, c)
				out = append(out, fill(c)...)
			}
		}
		pos = end
	}
	out = append(out, base[pos:]...)
	return out, conflicts
}

// apply returns base[start:end] with the hunks (all within it) applied.
func apply(base []string, start, end int, hs []hunk) []string {
	var out []string
	pos := start
	for _, h := range hs {
		out = append(out, base[pos:h.start]...)
		out = append(out, h.lines...)
		pos = h.end
	}
	return append(out, base[pos:end]...)
}
