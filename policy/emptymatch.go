package policy

import (
	"regexp"
	"regexp/syntax"
)

// MatchesEmpty reports whether re can match empty text anywhere: at the
// start of empty input, as `a*` or `^` do, or between two characters of a
// longer text, as `\b` does. Such a pattern would put a redaction's
// placeholder where there is nothing to redact.
func MatchesEmpty(re *regexp.Regexp) bool {
	if re.MatchString("") {
		return true
	}
	p, err := syntax.Parse(re.String(), syntax.Perl) // as regexp.Compile parses it
	if err != nil {
		return false
	}
	return nullable(p.Simplify())
}

// nullable reports whether p matches a text of no characters when its
// assertions (^, $, \b, \B, \A, \z) hold, as some place of some text
// makes them.
func nullable(p *syntax.Regexp) bool {
	switch p.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpStar, syntax.OpQuest:
		return true
	case syntax.OpLiteral:
		return len(p.Rune) == 0
	case syntax.OpPlus, syntax.OpCapture:
		return nullable(p.Sub[0])
	case syntax.OpRepeat:
		return p.Min == 0 || nullable(p.Sub[0])
	case syntax.OpConcat:
		for _, s := range p.Sub {
			if !nullable(s) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		for _, s := range p.Sub {
			if nullable(s) {
				return true
			}
		}
		return false
	}
	return false // a character, a class, no match
}
