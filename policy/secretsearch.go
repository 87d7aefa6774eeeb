package policy

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
)

// Go's regexp has no DFA: a gitleaks rule such as generic-api-key,
// (?i)[\w.-]{0,50}?(?:access|auth|...|token)...(secret)..., costs about a
// microsecond per byte of text when run over a whole note. search runs
// the same rules where a match can be, with the same findings:
//
//   - A leading part that can match nothing and no newline ([\w.-]{0,50}?,
//     the prefix of about a hundred gitleaks rules) only widens a match
//     to the left; it decides neither whether nor where the rest matches.
//     The rule is searched without it, and the whole match (which the
//     "match" allowlists read) is recovered, for the few candidates only,
//     by running the full regex on the line where the match starts.
//   - When every match of what remains starts with one of the rule's
//     keywords (the keywords of most rules are the literals the regex
//     starts with), it is tried anchored at each keyword occurrence, on
//     a window of text after it: small anchored inputs are what Go's
//     regexp is fast at.
//   - Other rules run on the lines within contextLines of each keyword,
//     or, when they can span any number of lines (a private key), on the
//     whole text.
type search struct {
	stripped  *regexp.Regexp // re without its optional leading part (nil: none)
	anchored  *regexp.Regexp // ^stripped (or ^re), when every match starts with a keyword
	boundary  bool           // anchored matches must start at a word boundary (a leading \b)
	wholeText bool           // re can span any number of lines
}

// contextLines is how many lines either side of a keyword a windowed rule
// sees; windowLines how many lines after a keyword an anchored one does,
// past anchoredBytes.
const (
	contextLines  = 3
	anchoredBytes = 1024
	windowLines   = 8
)

func lowerAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strings.ToLower(x)
	}
	return out
}

// compileSearch prepares how the rule's regex (src, already compiled as
// r.re) is run. keywords are the rule's, in lower case.
func (r *secretRule) compileSearch(src string, keywords []string) error {
	parsed, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return err
	}
	r.wholeText = len(keywords) == 0 || spansLines(parsed)
	rest := parsed
	if parsed.Op == syntax.OpConcat && len(parsed.Sub) > 1 {
		if first := parsed.Sub[0]; canBeEmpty(first) && !matchesNewline(first) && !hasCapture(first) {
			rest = &syntax.Regexp{Op: syntax.OpConcat, Flags: parsed.Flags, Sub: parsed.Sub[1:]}
			if r.stripped, err = regexp.Compile(rest.String()); err != nil {
				return err
			}
		}
	}
	// A leading \b looks at the text before the match, which an anchored
	// run cannot see: it is checked by hand instead.
	if rest.Op == syntax.OpConcat && len(rest.Sub) > 1 && rest.Sub[0].Op == syntax.OpWordBoundary {
		rest = &syntax.Regexp{Op: syntax.OpConcat, Flags: rest.Flags, Sub: rest.Sub[1:]}
		r.boundary = true
	}
	if len(keywords) > 0 && !r.wholeText && startsWithKeyword(rest, keywords) {
		if r.anchored, err = regexp.Compile(`^(?:` + rest.String() + `)`); err != nil {
			return err
		}
	}
	return nil
}

// wordBoundary reports whether \b holds at offset i of text (ASCII word
// characters, as Go's regexp has them).
func wordBoundary(text string, i int) bool {
	word := func(j int) bool {
		if j < 0 || j >= len(text) {
			return false
		}
		c := text[j]
		return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	return word(i-1) != word(i)
}

// canBeEmpty reports whether a leading part can match empty text: x{0,n},
// x*, x?, lazy or not.
func canBeEmpty(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpStar, syntax.OpQuest:
		return true
	case syntax.OpRepeat:
		return re.Min == 0
	}
	return false
}

func hasCapture(re *syntax.Regexp) bool {
	return re.Op == syntax.OpCapture || slices.ContainsFunc(re.Sub, hasCapture)
}

// spansLines reports whether a regex can match any number of newlines
// (a repetition without bound over something that matches one).
func spansLines(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpStar, syntax.OpPlus:
		if matchesNewline(re.Sub[0]) {
			return true
		}
	case syntax.OpRepeat:
		if re.Max == -1 && matchesNewline(re.Sub[0]) {
			return true
		}
	}
	return slices.ContainsFunc(re.Sub, spansLines)
}

func matchesNewline(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpAnyChar:
		return true
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] <= '\n' && '\n' <= re.Rune[i+1] {
				return true
			}
		}
		return false
	case syntax.OpLiteral:
		return slices.Contains(re.Rune, '\n')
	}
	return slices.ContainsFunc(re.Sub, matchesNewline)
}

// startsWithKeyword reports whether every match of re begins with one of
// the keywords: each way re's beginning can be spelled (expanded from its
// literals, small classes, alternations and optional parts) starts with a
// keyword, in any case.
func startsWithKeyword(re *syntax.Regexp, keywords []string) bool {
	prefixes, ok := spellings(re, 64)
	if !ok || len(prefixes) == 0 {
		return false
	}
	for _, p := range prefixes {
		p = strings.ToLower(p)
		if !slices.ContainsFunc(keywords, func(k string) bool { return k != "" && strings.HasPrefix(p, k) }) {
			return false
		}
	}
	return true
}

// spellings expands the beginning of re into the strings it can start
// with (literals, small classes, alternations, optional parts, in lower
// case), each as long as it can be known (at most limit ways); ok is
// false when there are more.
func spellings(re *syntax.Regexp, limit int) (out []string, ok bool) {
	ps, ok := expandSpellings(re, []spelling{{}}, limit)
	if !ok {
		return nil, false
	}
	for _, p := range ps {
		out = append(out, p.s)
	}
	return out, true
}

// spelling is a beginning a regular expression's match can have.
type spelling struct {
	s      string
	closed bool // the literal beginning ended: nothing more is known
}

// expandSpellings extends each of ps that is not closed by what re can
// match next (at most limit ways in all; ok is false when there are
// more).
func expandSpellings(re *syntax.Regexp, ps []spelling, limit int) ([]spelling, bool) {
	if !slices.ContainsFunc(ps, func(p spelling) bool { return !p.closed }) {
		return ps, true // nothing more can be known
	}
	switch re.Op {
	case syntax.OpLiteral:
		return growSpellings(ps, []string{strings.ToLower(string(re.Rune))}, limit)
	case syntax.OpCharClass:
		alts, ok := classSpellings(re)
		if !ok {
			return nil, false
		}
		return growSpellings(ps, alts, limit)
	case syntax.OpCapture:
		return expandSpellings(re.Sub[0], ps, limit)
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			var ok bool
			if ps, ok = expandSpellings(sub, ps, limit); !ok {
				return nil, false
			}
		}
		return ps, true
	case syntax.OpAlternate:
		var all []spelling
		for _, sub := range re.Sub {
			got, ok := expandSpellings(sub, ps, limit)
			if !ok {
				return nil, false
			}
			all = append(all, got...)
		}
		return all, len(all) <= limit
	case syntax.OpQuest:
		with, ok := expandSpellings(re.Sub[0], ps, limit)
		if !ok {
			return nil, false
		}
		all := append(slices.Clone(ps), with...)
		return all, len(all) <= limit
	case syntax.OpEmptyMatch:
		return ps, true
	}
	// Anything else (a repetition, an assertion) ends what is known.
	closed := make([]spelling, len(ps))
	for i, p := range ps {
		closed[i] = spelling{p.s, true}
	}
	return closed, true
}

// growSpellings extends each of ps that is not closed by each of alts
// (ok is false when that makes more than limit).
func growSpellings(ps []spelling, alts []string, limit int) ([]spelling, bool) {
	var next []spelling
	for _, p := range ps {
		if p.closed {
			next = append(next, p)
			continue
		}
		for _, a := range alts {
			next = append(next, spelling{s: p.s + a})
		}
	}
	return next, len(next) <= limit
}

// classSpellings is the characters of the class re, in lower case,
// sorted and distinct; ok is false when there are more than 8.
func classSpellings(re *syntax.Regexp) ([]string, bool) {
	var alts []string
	for i := 0; i+1 < len(re.Rune); i += 2 {
		for c := re.Rune[i]; c <= re.Rune[i+1]; c++ {
			if alts = append(alts, strings.ToLower(string(c))); len(alts) > 8 {
				return nil, false
			}
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(alts))), true
}

// lineIndex finds line starts in a text, computed on first use.
type lineIndex struct {
	text   string
	starts []int
}

func (l *lineIndex) get() []int {
	if l.starts == nil {
		l.starts = append(l.starts, 0)
		for j := 0; j < len(l.text); j++ {
			if l.text[j] == '\n' {
				l.starts = append(l.starts, j+1)
			}
		}
	}
	return l.starts
}

// lineOf is the index of the line holding offset i.
func (l *lineIndex) lineOf(i int) int {
	n, _ := slices.BinarySearch(l.get(), i+1)
	return n - 1
}

// lineEnd is the offset just after the line with index n (its newline
// included), or the end of the text.
func (l *lineIndex) lineEnd(n int) int {
	if s := l.get(); n+1 < len(s) {
		return s[n+1]
	}
	return len(l.text)
}

// matches returns the submatch offsets of the rule's (search) regex in
// text, in order, given the sorted offsets where its keywords occur.
func (r *secretRule) matches(text string, hits []int, lines *lineIndex) [][]int {
	search := r.re
	if r.stripped != nil {
		search = r.stripped
	}
	if r.anchored != nil {
		var out [][]int
		pos := 0
		for _, h := range hits {
			if h < pos || r.boundary && !wordBoundary(text, h) {
				continue
			}
			end := lines.lineEnd(min(lines.lineOf(min(h+anchoredBytes, len(text)-1))+windowLines, len(lines.get())-1))
			m := r.anchored.FindStringSubmatchIndex(text[h:end])
			if m == nil {
				continue
			}
			for j := range m {
				if m[j] >= 0 {
					m[j] += h
				}
			}
			out = append(out, m)
			pos = max(m[1], h+1)
		}
		return out
	}
	if r.wholeText {
		return search.FindAllStringSubmatchIndex(text, -1)
	}
	var out [][]int
	for _, seg := range r.windows(hits, lines) {
		for _, m := range search.FindAllStringSubmatchIndex(text[seg[0]:seg[1]], -1) {
			for j := range m {
				if m[j] >= 0 {
					m[j] += seg[0]
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// windows are the byte ranges of the lines within contextLines of a
// keyword at each offset in hits, merged, in order.
func (r *secretRule) windows(hits []int, lines *lineIndex) [][2]int {
	var out [][2]int
	last := len(lines.get()) - 1
	for _, h := range hits {
		line := lines.lineOf(h)
		start, end := lines.get()[max(0, line-contextLines)], lines.lineEnd(min(last, line+contextLines))
		if len(out) > 0 && start <= out[len(out)-1][1] {
			out[len(out)-1][1] = max(out[len(out)-1][1], end)
			continue
		}
		out = append(out, [2]int{start, end})
	}
	return out
}

// fullMatch turns a match of the stripped regex into the rule's own
// match, with the leading part the stripped regex left out: the full
// regex's match on the line where m starts that holds the same groups.
func (r *secretRule) fullMatch(text string, m []int, lines *lineIndex) []int {
	if r.stripped == nil {
		return m
	}
	from := lines.get()[lines.lineOf(m[0])]
	for _, f := range r.re.FindAllStringSubmatchIndex(text[from:m[1]], -1) {
		for j := range f {
			if f[j] >= 0 {
				f[j] += from
			}
		}
		if slices.Equal(f[2:], m[2:]) && f[1] == m[1] {
			return f
		}
	}
	return m
}
