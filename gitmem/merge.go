package gitmem

import (
	"math"
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
	return mergeAround(base, ours, theirs, nil, fill)
}

// mergeAround is mergeFill where a conflict that meets a block of lines
// (blocks finds them in a text: [start, end) pairs, in order, apart) of
// the base or of either side takes in the whole block, and with it every
// change either side made there: a conflict block an earlier merge wrote
// is never split by a new one.
func mergeAround(base, ours, theirs []string, blocks func([]string) [][2]int, fill func(Conflict) []string) ([]string, []Conflict) {
	ho, ht := lineHunks(base, ours), lineHunks(base, theirs)
	groups := hunkGroups(ho, ht)
	if blocks != nil {
		var keep []span
		for _, b := range blocks(base) {
			keep = append(keep, span{start: b[0], end: b[1]})
		}
		for _, side := range []struct {
			lines []string
			hs    []hunk
		}{{ours, ho}, {theirs, ht}} {
			for _, b := range blocks(side.lines) {
				keep = append(keep, baseSpan(side.hs, b[0], b[1]))
			}
		}
		groups = widen(base, groups, keep)
	}
	var out []string
	var conflicts []Conflict
	pos := 0
	for _, g := range groups {
		out = append(out, base[pos:g.start]...)
		o, t, conflict := g.sides(base)
		switch {
		case len(g.gT) == 0:
			out = append(out, o...)
		case len(g.gO) == 0 || !conflict:
			out = append(out, t...)
		default:
			c := Conflict{BaseStart: g.start, BaseEnd: g.end, Ours: o, Theirs: t}
			conflicts = append(conflicts, c)
			out = append(out, fill(c)...)
		}
		pos = g.end
	}
	out = append(out, base[pos:]...)
	return out, conflicts
}

// span is base lines [start, end) that a conflict meeting them takes in
// whole. A side's block that begins (or ends) with lines the side
// inserted at start (end) is met too by a conflict that only touches it
// there: that conflict holds those lines.
type span struct {
	start, end         int
	openStart, openEnd bool
}

// meets reports whether the group's base lines meet the span's.
func (k span) meets(g hunkGroup) bool {
	return k.start < g.end && g.start < k.end ||
		g.start == g.end && k.start < g.start && g.start < k.end ||
		k.openStart && g.start <= k.start && k.start <= g.end ||
		k.openEnd && g.start <= k.end && k.end <= g.end
}

// baseSpan is the span of base lines that a side's lines [a, b) come
// from, hs being the side's hunks against the base: an unchanged line
// comes from its base line, a changed one from its hunk's base lines.
func baseSpan(hs []hunk, a, b int) span {
	k := span{start: -1}
	take := func(start, end int, changed bool) {
		if k.start < 0 {
			k.start, k.end, k.openStart = start, end, changed
		}
		k.start, k.end, k.openEnd = min(k.start, start), max(k.end, end), changed
	}
	bp, sp := 0, 0 // where the base and the side are, after the last hunk
	for _, h := range append(hs, hunk{start: math.MaxInt}) {
		n := min(h.start-bp, b-sp) // unchanged lines up to the hunk
		if lo, hi := max(a, sp), sp+n; lo < hi {
			take(bp+lo-sp, bp+hi-sp, false)
		}
		if sp += n; sp >= b {
			break
		}
		if max(a, sp) < min(b, sp+len(h.lines)) {
			take(h.start, h.end, true)
		}
		sp, bp = sp+len(h.lines), h.end
	}
	return k
}

// hunkGroup is the hunks of each side that overlap or touch, over the
// base lines [start, end).
type hunkGroup struct {
	start, end int
	gO, gT     []hunk
}

// sides is what ours and theirs make of the group's base lines, and
// whether that is a conflict (both changed them, differently).
func (g hunkGroup) sides(base []string) (o, t []string, conflict bool) {
	o, t = apply(base, g.start, g.end, g.gO), apply(base, g.start, g.end, g.gT)
	return o, t, len(g.gO) > 0 && len(g.gT) > 0 && strings.Join(o, "") != strings.Join(t, "")
}

// hunkGroups groups each side's hunks that overlap or touch, in base
// order.
func hunkGroups(ho, ht []hunk) []hunkGroup {
	var groups []hunkGroup
	for len(ho) > 0 || len(ht) > 0 {
		var g hunkGroup
		if len(ht) == 0 || len(ho) > 0 && ho[0].start <= ht[0].start {
			g.gO, ho = append(g.gO, ho[0]), ho[1:]
		} else {
			g.gT, ht = append(g.gT, ht[0]), ht[1:]
		}
		g.start = append(g.gO, g.gT...)[0].start
		g.end = append(g.gO, g.gT...)[0].end
		for {
			if len(ho) > 0 && ho[0].start <= g.end {
				g.end = max(g.end, ho[0].end)
				g.gO, ho = append(g.gO, ho[0]), ho[1:]
			} else if len(ht) > 0 && ht[0].start <= g.end {
				g.end = max(g.end, ht[0].end)
				g.gT, ht = append(g.gT, ht[0]), ht[1:]
			} else {
				break
			}
		}
		groups = append(groups, g)
	}
	return groups
}

// widen makes a conflict meeting a kept range take it in, and the groups
// it then meets; until none does.
func widen(base []string, groups []hunkGroup, keep []span) []hunkGroup {
	for widened := true; widened; {
		widened = false
		for i := 0; i < len(groups); i++ {
			g := &groups[i]
			if _, _, c := g.sides(base); !c {
				continue
			}
			for _, k := range keep {
				if k.meets(*g) && (k.start < g.start || k.end > g.end) {
					g.start, g.end, widened = min(g.start, k.start), max(g.end, k.end), true
				}
			}
			for j := i + 1; j < len(groups) && groups[j].start <= g.end; {
				g.end = max(g.end, groups[j].end)
				g.gO, g.gT = append(g.gO, groups[j].gO...), append(g.gT, groups[j].gT...)
				groups = append(groups[:j], groups[j+1:]...)
			}
			for i > 0 && groups[i-1].end >= g.start {
				p := &groups[i-1]
				p.end = max(p.end, g.end)
				p.gO, p.gT = append(p.gO, g.gO...), append(p.gT, g.gT...)
				groups = append(groups[:i], groups[i+1:]...)
				i--
				g = p
			}
		}
	}
	return groups
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
