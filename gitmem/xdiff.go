package gitmem

import "bytes"

// git's line diff, as git blame runs it: xdiff's Myers algorithm with its
// heuristics and the indent heuristic (git 2.39: xdiff/xprepare.c,
// xdiff/xdiffi.c, xdiff-interface.c's trim_common_tail), ported so that
// Blame matches a version's lines to its parent's exactly where git
// does. Where a diff could match a line more than one way (a repeated
// line, lines in another order after a criss-cross merge), any other
// diff, however minimal, may hand it to another commit than git blame
// names. TestGitDiffMatchesGit checks it against git diff -U0.

const (
	xdlMaxEqLimit       = 1024
	xdlSimScanWindow    = 100
	xdlKpDisRun         = 4
	xdlMaxCostMin       = 256
	xdlHeurMinCost      = 256
	xdlSnakeCnt         = 20
	xdlKHeur            = 4
	xdlLineMax          = int(^uint(0) >> 1)
	maxIndent           = 200
	maxBlanks           = 20
	indentHeuristicMax  = 100
	indentWeight        = 60
	startOfFilePenalty  = 1
	endOfFilePenalty    = 21
	totalBlankWeight    = -30
	postBlankWeight     = 6
	relIndentPenalty    = -4
	relIndentBlankPen   = 10
	relOutdentPenalty   = 24
	relOutdentBlankPen  = 17
	relDedentPenalty    = 23
	relDedentBlankPen   = 17
	trimCommonTailBlock = 1024
)

// xdfile is one side of a diff: its records (lines, as equivalence
// classes), which are changed, and the records the algorithm works on.
type xdfile struct {
	lines   []string
	class   []int
	changed []bool // len(lines)+2; changed[i+1] is line i's (a false guard at each end)
	rindex  []int  // the records kept for the algorithm (their lines)
	ha      []int  // their classes
	dstart  int
	dend    int
}

func (x *xdfile) chg(i int) bool       { return x.changed[i+1] }
func (x *xdfile) setChg(i int, v bool) { x.changed[i+1] = v }

// gitMatch diffs a (the parent's version) against b as git blame does and
// returns, for each line of b, the line of a it is the same as (-1: b
// changed it). a and b are lines that keep their "\n" (splitKeep).
func gitMatch(a, b []string) []int {
	// trim_common_tail: git drops a common tail of whole 1 KiB blocks,
	// given back up to the first line end within them, before diffing
	// without context (blame's diff; git diff -U3 diffs it all).
	return xdlMatch(a, b, commonTailLines(a, b))
}

// xdlMatch is gitMatch with the last tail lines of a and b taken as the
// same without diffing them.
func xdlMatch(a, b []string, tail int) []int {
	out := make([]int, len(b))
	na, nb := len(a), len(b)
	if tail > 0 {
		na, nb = na-tail, nb-tail
		for i := range tail {
			out[nb+i] = na + i
		}
	}
	x1, x2 := xdlPrepare(a[:na], b[:nb])
	x1.recsCmp(x2)
	x1.changeCompact(x2)
	x2.changeCompact(x1)
	i1 := 0
	for i2 := range nb {
		if x2.chg(i2) {
			out[i2] = -1
			continue
		}
		for x1.chg(i1) {
			i1++
		}
		out[i2] = i1
		i1++
	}
	return out
}

// commonTailLines is the number of lines trim_common_tail takes off the
// end of both a and b.
func commonTailLines(a, b []string) int {
	sa, sb := []byte(joinLines(a)), []byte(joinLines(b))
	smaller := min(len(sa), len(sb))
	trimmed := 0
	for trimCommonTailBlock+trimmed <= smaller &&
		bytes.Equal(sa[len(sa)-trimmed-trimCommonTailBlock:len(sa)-trimmed], sb[len(sb)-trimmed-trimCommonTailBlock:len(sb)-trimmed]) {
		trimmed += trimCommonTailBlock
	}
	if trimmed == 0 {
		return 0
	}
	// Given back: up to and including the first line end of the trimmed
	// part; the rest is whole lines.
	rest := sa[len(sa)-trimmed:]
	i := bytes.IndexByte(rest, '\n')
	if i < 0 {
		return 0
	}
	rest = rest[i+1:]
	if len(rest) == 0 {
		return 0
	}
	n := bytes.Count(rest, []byte{'\n'})
	if rest[len(rest)-1] != '\n' {
		n++
	}
	return n
}

func joinLines(l []string) string {
	var b bytes.Buffer
	for _, s := range l {
		b.WriteString(s)
	}
	return b.String()
}

// xdlPrepare is xdl_prepare_env: the lines as classes, the common ends
// trimmed, and the lines that cannot help (no match on the other side, or
// too many in a run of such) set aside as changed.
func xdlPrepare(a, b []string) (*xdfile, *xdfile) {
	classes := map[string]int{}
	mk := func(lines []string) *xdfile {
		x := &xdfile{lines: lines, class: make([]int, len(lines)), changed: make([]bool, len(lines)+2)}
		for i, l := range lines {
			c, ok := classes[l]
			if !ok {
				c = len(classes)
				classes[l] = c
			}
			x.class[i] = c
		}
		return x
	}
	x1, x2 := mk(a), mk(b)
	// xdl_trim_ends
	lim := min(len(a), len(b))
	i := 0
	for i < lim && x1.class[i] == x2.class[i] {
		i++
	}
	x1.dstart, x2.dstart = i, i
	lim -= i
	j := 0
	for j < lim && x1.class[len(a)-1-j] == x2.class[len(b)-1-j] {
		j++
	}
	x1.dend, x2.dend = len(a)-j-1, len(b)-j-1
	// xdl_cleanup_records
	count := func(x *xdfile) map[int]int {
		m := map[int]int{}
		for _, c := range x.class {
			m[c]++
		}
		return m
	}
	in1, in2 := count(x1), count(x2)
	cleanup := func(x *xdfile, other map[int]int) {
		mlim := min(bogosqrt(len(x.lines)), xdlMaxEqLimit)
		dis := make([]byte, len(x.lines)+1)
		for i := x.dstart; i <= x.dend; i++ {
			switch nm := other[x.class[i]]; {
			case nm == 0:
				dis[i] = 0
			case nm >= mlim:
				dis[i] = 2
			default:
				dis[i] = 1
			}
		}
		for i := x.dstart; i <= x.dend; i++ {
			if dis[i] == 1 || dis[i] == 2 && !cleanMmatch(dis, i, x.dstart, x.dend) {
				x.rindex = append(x.rindex, i)
				x.ha = append(x.ha, x.class[i])
			} else {
				x.setChg(i, true)
			}
		}
	}
	cleanup(x1, in2)
	cleanup(x2, in1)
	return x1, x2
}

func bogosqrt(n int) int {
	i := 1
	for ; n > 0; n >>= 2 {
		i <<= 1
	}
	return i
}

// cleanMmatch is xdl_clean_mmatch: whether a line with many matches sits
// in a run of lines with none (then it is set aside too).
func cleanMmatch(dis []byte, i, s, e int) bool {
	if i-s > xdlSimScanWindow {
		s = i - xdlSimScanWindow
	}
	if e-i > xdlSimScanWindow {
		e = i + xdlSimScanWindow
	}
	rdis0, rpdis0 := 0, 1
	for r := 1; i-r >= s; r++ {
		if dis[i-r] == 0 {
			rdis0++
		} else if dis[i-r] == 2 {
			rpdis0++
		} else {
			break
		}
	}
	if rdis0 == 0 {
		return false
	}
	rdis1, rpdis1 := 0, 1
	for r := 1; i+r <= e; r++ {
		if dis[i+r] == 0 {
			rdis1++
		} else if dis[i+r] == 2 {
			rpdis1++
		} else {
			break
		}
	}
	if rdis1 == 0 {
		return false
	}
	rdis1 += rdis0
	rpdis1 += rpdis0
	return rpdis1*xdlKpDisRun < rpdis1+rdis1
}

// xdalgo holds xdl_do_diff's vectors and limits.
type xdalgo struct {
	x1, x2           *xdfile
	kvdf, kvdb       []int // indexed by diagonal + off
	off              int
	mxcost           int
	snakeCnt, heurMn int
}

func (a *xdalgo) f(d int) *int { return &a.kvdf[d+a.off] }
func (a *xdalgo) b(d int) *int { return &a.kvdb[d+a.off] }

// recsCmp is xdl_do_diff's Myers part: it marks the changed lines of x1
// and x2.
func (x1 *xdfile) recsCmp(x2 *xdfile) {
	n1, n2 := len(x1.rindex), len(x2.rindex)
	ndiags := n1 + n2 + 3
	a := &xdalgo{x1: x1, x2: x2, kvdf: make([]int, ndiags), kvdb: make([]int, ndiags), off: n2 + 1,
		mxcost: max(bogosqrt(ndiags), xdlMaxCostMin), snakeCnt: xdlSnakeCnt, heurMn: xdlHeurMinCost}
	a.recsCmp(0, n1, 0, n2, false)
}

type xdsplit struct {
	i1, i2       int
	minLo, minHi bool
}

func (a *xdalgo) recsCmp(off1, lim1, off2, lim2 int, needMin bool) {
	h1, h2 := a.x1.ha, a.x2.ha
	for off1 < lim1 && off2 < lim2 && h1[off1] == h2[off2] {
		off1++
		off2++
	}
	for off1 < lim1 && off2 < lim2 && h1[lim1-1] == h2[lim2-1] {
		lim1--
		lim2--
	}
	switch {
	case off1 == lim1:
		for ; off2 < lim2; off2++ {
			a.x2.setChg(a.x2.rindex[off2], true)
		}
	case off2 == lim2:
		for ; off1 < lim1; off1++ {
			a.x1.setChg(a.x1.rindex[off1], true)
		}
	default:
		spl := a.split(off1, lim1, off2, lim2, needMin)
		a.recsCmp(off1, spl.i1, off2, spl.i2, spl.minLo)
		a.recsCmp(spl.i1, lim1, spl.i2, lim2, spl.minHi)
	}
}

// split is xdl_split: the middle snake of the box, or, when that costs
// too much, a good enough point. It stays one function, line for line
// beside git's xdiff/xdiffi.c, because its forward pass, backward pass and
// cost cut-offs share the diagonal bounds and both k-vectors; split apart,
// it could no longer be checked against git's.
func (a *xdalgo) split(off1, lim1, off2, lim2 int, needMin bool) xdsplit {
	h1, h2 := a.x1.ha, a.x2.ha
	dmin, dmax := off1-lim2, lim1-off2
	fmid, bmid := off1-off2, lim1-lim2
	odd := (fmid-bmid)&1 != 0
	fmin, fmax := fmid, fmid
	bmin, bmax := bmid, bmid
	*a.f(fmid) = off1
	*a.b(bmid) = lim1
	var spl xdsplit
	for ec := 1; ; ec++ {
		gotSnake := false
		if fmin > dmin {
			fmin--
			*a.f(fmin - 1) = -1
		} else {
			fmin++
		}
		if fmax < dmax {
			fmax++
			*a.f(fmax + 1) = -1
		} else {
			fmax--
		}
		for d := fmax; d >= fmin; d -= 2 {
			var i1 int
			if *a.f(d - 1) >= *a.f(d + 1) {
				i1 = *a.f(d - 1) + 1
			} else {
				i1 = *a.f(d + 1)
			}
			prev1 := i1
			i2 := i1 - d
			for i1 < lim1 && i2 < lim2 && h1[i1] == h2[i2] {
				i1++
				i2++
			}
			if i1-prev1 > a.snakeCnt {
				gotSnake = true
			}
			*a.f(d) = i1
			if odd && bmin <= d && d <= bmax && *a.b(d) <= i1 {
				return xdsplit{i1: i1, i2: i2, minLo: true, minHi: true}
			}
		}
		if bmin > dmin {
			bmin--
			*a.b(bmin - 1) = xdlLineMax
		} else {
			bmin++
		}
		if bmax < dmax {
			bmax++
			*a.b(bmax + 1) = xdlLineMax
		} else {
			bmax--
		}
		for d := bmax; d >= bmin; d -= 2 {
			var i1 int
			if *a.b(d - 1) < *a.b(d + 1) {
				i1 = *a.b(d - 1)
			} else {
				i1 = *a.b(d + 1) - 1
			}
			prev1 := i1
			i2 := i1 - d
			for i1 > off1 && i2 > off2 && h1[i1-1] == h2[i2-1] {
				i1--
				i2--
			}
			if prev1-i1 > a.snakeCnt {
				gotSnake = true
			}
			*a.b(d) = i1
			if !odd && fmin <= d && d <= fmax && i1 <= *a.f(d) {
				return xdsplit{i1: i1, i2: i2, minLo: true, minHi: true}
			}
		}
		if needMin {
			continue
		}
		if gotSnake && ec > a.heurMn {
			best := 0
			for d := fmax; d >= fmin; d -= 2 {
				dd := d - fmid
				if dd < 0 {
					dd = -dd
				}
				i1 := *a.f(d)
				i2 := i1 - d
				v := (i1 - off1) + (i2 - off2) - dd
				if v > xdlKHeur*ec && v > best && off1+a.snakeCnt <= i1 && i1 < lim1 && off2+a.snakeCnt <= i2 && i2 < lim2 {
					for k := 1; h1[i1-k] == h2[i2-k]; k++ {
						if k == a.snakeCnt {
							best = v
							spl.i1, spl.i2 = i1, i2
							break
						}
					}
				}
			}
			if best > 0 {
				spl.minLo, spl.minHi = true, false
				return spl
			}
			best = 0
			for d := bmax; d >= bmin; d -= 2 {
				dd := d - bmid
				if dd < 0 {
					dd = -dd
				}
				i1 := *a.b(d)
				i2 := i1 - d
				v := (lim1 - i1) + (lim2 - i2) - dd
				if v > xdlKHeur*ec && v > best && off1 < i1 && i1 <= lim1-a.snakeCnt && off2 < i2 && i2 <= lim2-a.snakeCnt {
					for k := 0; h1[i1+k] == h2[i2+k]; k++ {
						if k == a.snakeCnt-1 {
							best = v
							spl.i1, spl.i2 = i1, i2
							break
						}
					}
				}
			}
			if best > 0 {
				spl.minLo, spl.minHi = false, true
				return spl
			}
		}
		if ec >= a.mxcost {
			fbest, fbest1 := -1, -1
			for d := fmax; d >= fmin; d -= 2 {
				i1 := min(*a.f(d), lim1)
				i2 := i1 - d
				if lim2 < i2 {
					i1 = lim2 + d
					i2 = lim2
				}
				if fbest < i1+i2 {
					fbest = i1 + i2
					fbest1 = i1
				}
			}
			bbest, bbest1 := xdlLineMax, xdlLineMax
			for d := bmax; d >= bmin; d -= 2 {
				i1 := max(off1, *a.b(d))
				i2 := i1 - d
				if i2 < off2 {
					i1 = off2 + d
					i2 = off2
				}
				if i1+i2 < bbest {
					bbest = i1 + i2
					bbest1 = i1
				}
			}
			if (lim1+lim2)-bbest < fbest-(off1+off2) {
				return xdsplit{i1: fbest1, i2: fbest - fbest1, minLo: true, minHi: false}
			}
			return xdsplit{i1: bbest1, i2: bbest - bbest1, minLo: false, minHi: true}
		}
	}
}

// xdlgroup is a run of changed lines [start, end) (empty: end == start).
type xdlgroup struct{ start, end int }

func (x *xdfile) groupInit() xdlgroup {
	g := xdlgroup{}
	for x.chg(g.end) {
		g.end++
	}
	return g
}

func (x *xdfile) groupNext(g *xdlgroup) bool {
	if g.end == len(x.lines) {
		return false
	}
	g.start = g.end + 1
	for g.end = g.start; x.chg(g.end); g.end++ {
	}
	return true
}

func (x *xdfile) groupPrevious(g *xdlgroup) bool {
	if g.start == 0 {
		return false
	}
	g.end = g.start - 1
	for g.start = g.end; x.chg(g.start - 1); g.start-- {
	}
	return true
}

func (x *xdfile) slideDown(g *xdlgroup) bool {
	if g.end < len(x.lines) && x.class[g.start] == x.class[g.end] {
		x.setChg(g.start, false)
		g.start++
		x.setChg(g.end, true)
		g.end++
		for x.chg(g.end) {
			g.end++
		}
		return true
	}
	return false
}

func (x *xdfile) slideUp(g *xdlgroup) bool {
	if g.start > 0 && x.class[g.start-1] == x.class[g.end-1] {
		g.start--
		x.setChg(g.start, true)
		g.end--
		x.setChg(g.end, false)
		for x.chg(g.start - 1) {
			g.start--
		}
		return true
	}
	return false
}

// changeCompact is xdl_change_compact with the indent heuristic: each
// group of changed lines slid, as far as its lines allow, to line up with
// a change on the other side, else to where the indentation suggests.
func (x *xdfile) changeCompact(o *xdfile) {
	g, gO := x.groupInit(), o.groupInit()
	for {
		if g.end != g.start {
			var groupsize, earliestEnd int
			endMatchingOther := -1
			for {
				groupsize = g.end - g.start
				endMatchingOther = -1
				for x.slideUp(&g) {
					o.groupPrevious(&gO)
				}
				earliestEnd = g.end
				if gO.end > gO.start {
					endMatchingOther = g.end
				}
				for x.slideDown(&g) {
					o.groupNext(&gO)
					if gO.end > gO.start {
						endMatchingOther = g.end
					}
				}
				if groupsize == g.end-g.start {
					break
				}
			}
			switch {
			case g.end == earliestEnd:
			case endMatchingOther != -1:
				for gO.end == gO.start {
					x.slideUp(&g)
					o.groupPrevious(&gO)
				}
			default:
				shift := earliestEnd
				if g.end-groupsize-1 > shift {
					shift = g.end - groupsize - 1
				}
				if g.end-indentHeuristicMax > shift {
					shift = g.end - indentHeuristicMax
				}
				bestShift := -1
				var best splitScore
				for ; shift <= g.end; shift++ {
					var s splitScore
					x.measureSplit(shift).addTo(&s)
					x.measureSplit(shift - groupsize).addTo(&s)
					if bestShift == -1 || s.cmp(best) <= 0 {
						best, bestShift = s, shift
					}
				}
				for g.end > bestShift {
					x.slideUp(&g)
					o.groupPrevious(&gO)
				}
			}
		}
		if !x.groupNext(&g) {
			break
		}
		o.groupNext(&gO)
	}
}

func getIndent(l string) int {
	ret := 0
	for i := 0; i < len(l); i++ {
		switch c := l[i]; c {
		case ' ':
			ret++
		case '\t':
			ret += 8 - ret%8
		case '\n', '\r': // other space (git's isspace: \t, \n, \r and ' ')
		default:
			return ret
		}
		if ret >= maxIndent {
			return maxIndent
		}
	}
	return -1
}

type splitMeasurement struct {
	endOfFile                                          bool
	indent, preBlank, preIndent, postBlank, postIndent int
}

type splitScore struct{ effectiveIndent, penalty int }

func (x *xdfile) measureSplit(split int) splitMeasurement {
	var m splitMeasurement
	if split >= len(x.lines) {
		m.endOfFile, m.indent = true, -1
	} else {
		m.indent = getIndent(x.lines[split])
	}
	m.preIndent = -1
	for i := split - 1; i >= 0; i-- {
		if m.preIndent = getIndent(x.lines[i]); m.preIndent != -1 {
			break
		}
		if m.preBlank++; m.preBlank == maxBlanks {
			m.preIndent = 0
			break
		}
	}
	m.postIndent = -1
	for i := split + 1; i < len(x.lines); i++ {
		if m.postIndent = getIndent(x.lines[i]); m.postIndent != -1 {
			break
		}
		if m.postBlank++; m.postBlank == maxBlanks {
			m.postIndent = 0
			break
		}
	}
	return m
}

func (m splitMeasurement) addTo(s *splitScore) {
	if m.preIndent == -1 && m.preBlank == 0 {
		s.penalty += startOfFilePenalty
	}
	if m.endOfFile {
		s.penalty += endOfFilePenalty
	}
	postBlank := 0
	if m.indent == -1 {
		postBlank = 1 + m.postBlank
	}
	totalBlank := m.preBlank + postBlank
	s.penalty += totalBlankWeight * totalBlank
	s.penalty += postBlankWeight * postBlank
	indent := m.indent
	if indent == -1 {
		indent = m.postIndent
	}
	anyBlanks := totalBlank != 0
	s.effectiveIndent += indent
	pick := func(blank, plain int) int {
		if anyBlanks {
			return blank
		}
		return plain
	}
	switch {
	case indent == -1, m.preIndent == -1, indent == m.preIndent:
	case indent > m.preIndent:
		s.penalty += pick(relIndentBlankPen, relIndentPenalty)
	case m.postIndent != -1 && m.postIndent > indent:
		s.penalty += pick(relOutdentBlankPen, relOutdentPenalty)
	default:
		s.penalty += pick(relDedentBlankPen, relDedentPenalty)
	}
}

func (s splitScore) cmp(o splitScore) int {
	c := 0
	if s.effectiveIndent > o.effectiveIndent {
		c = 1
	} else if s.effectiveIndent < o.effectiveIndent {
		c = -1
	}
	return indentWeight*c + (s.penalty - o.penalty)
}
