package policy

import (
	_ "embed"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
)

// The secret rules are gitleaks' default rule set (MIT, vendored in
// rules/, see rules/README.md), plus gitmem's own few in the same format
// for what gitleaks leaves out (a password in a URL).
var (
	//go:embed rules/gitleaks.toml
	gitleaksRules []byte
	//go:embed rules/gitmem.toml
	gitmemRules []byte
)

// ScreenMode says what happens to a secret in content the model writes.
type ScreenMode string

const (
	ScreenOff    ScreenMode = "off"    // write it as it is
	ScreenRefuse ScreenMode = "refuse" // refuse the command; nothing is written
	ScreenMask   ScreenMode = "mask"   // write [REDACTED:rule] in its place
)

// ParseScreenMode reads off, refuse or mask.
func ParseScreenMode(s string) (ScreenMode, error) {
	switch m := ScreenMode(s); m {
	case ScreenOff, ScreenRefuse, ScreenMask:
		return m, nil
	}
	return "", fmt.Errorf("secret screening is off, refuse or mask, not %q", s)
}

// Finding is a secret found in a text.
type Finding struct {
	Rule       string // the rule's id, e.g. "github-pat"
	Line       int    // 1-based line of the text where the secret starts
	Start, End int    // byte offsets of the secret in the text
}

// Mask returns the placeholder that replaces a secret: [REDACTED:rule].
func (f Finding) Mask() string { return "[REDACTED:" + f.Rule + "]" }

// SecretRules is a compiled rule set. It is safe for concurrent use.
type SecretRules struct {
	rules    []secretRule
	allow    []allowlist // global
	keywords *keywordMatcher
	// Skipped counts the rules that cannot apply to memory files: those
	// that match file names only (a .p12 file) rather than content.
	Skipped int
}

type secretRule struct {
	id          string
	re          *regexp.Regexp
	path        *regexp.Regexp // the rule applies only to matching file paths
	secretGroup int
	entropy     float64
	keywords    []int // ids in SecretRules.keywords; one must occur for the regex to run
	allow       []allowlist
	search      // how the regex is run fast
}

type allowlist struct {
	and       bool
	target    string // "" (the secret), "match" or "line"
	regexes   []*regexp.Regexp
	stopwords []string // lower case
	paths     []*regexp.Regexp
	commits   bool // the list names commits: never true for content being written
}

// The TOML layout of a gitleaks configuration (the parts gitmem reads).
type tomlAllowlist struct {
	Condition   string   `toml:"condition"`
	RegexTarget string   `toml:"regexTarget"`
	Regexes     []string `toml:"regexes"`
	StopWords   []string `toml:"stopwords"`
	Paths       []string `toml:"paths"`
	Commits     []string `toml:"commits"`
}

type tomlConfig struct {
	Allowlist  *tomlAllowlist  `toml:"allowlist"`
	Allowlists []tomlAllowlist `toml:"allowlists"`
	Rules      []struct {
		ID          string          `toml:"id"`
		Regex       string          `toml:"regex"`
		Path        string          `toml:"path"`
		SecretGroup int             `toml:"secretGroup"`
		Entropy     float64         `toml:"entropy"`
		Keywords    []string        `toml:"keywords"`
		Allowlists  []tomlAllowlist `toml:"allowlists"`
		Required    []any           `toml:"required"`
		SkipReport  bool            `toml:"skipReport"`
	} `toml:"rules"`
}

// ParseSecretRules compiles rule sets in gitleaks' configuration format
// (v8): each rule's regex, secretGroup, entropy, keywords, path and
// allowlists (regexes with their regexTarget, stopwords, paths, and the
// AND condition), and the global allowlists. Rules that match file names
// only, and composite rules (required), are skipped and counted.
func ParseSecretRules(configs ...[]byte) (*SecretRules, error) {
	s := &SecretRules{}
	seen := map[string]bool{}
	var words []string
	wordID := map[string]int{}
	for _, data := range configs {
		var c tomlConfig
		if _, err := toml.Decode(string(data), &c); err != nil {
			return nil, fmt.Errorf("secret rules: %w", err)
		}
		if c.Allowlist != nil {
			c.Allowlists = append(c.Allowlists, *c.Allowlist)
		}
		for _, a := range c.Allowlists {
			al, err := compileAllowlist(a)
			if err != nil {
				return nil, fmt.Errorf("secret rules: global allowlist: %w", err)
			}
			s.allow = append(s.allow, al)
		}
		for _, r := range c.Rules {
			if r.ID == "" || seen[r.ID] {
				return nil, fmt.Errorf("secret rules: a rule without an id, or %q twice", r.ID)
			}
			seen[r.ID] = true
			if r.Regex == "" || len(r.Required) > 0 || r.SkipReport {
				s.Skipped++
				continue
			}
			re, err := regexp.Compile(r.Regex)
			if err != nil {
				return nil, fmt.Errorf("secret rules: %s: %w", r.ID, err)
			}
			if r.SecretGroup > re.NumSubexp() {
				return nil, fmt.Errorf("secret rules: %s: secretGroup %d, but the regex has %d groups", r.ID, r.SecretGroup, re.NumSubexp())
			}
			rule := secretRule{id: r.ID, re: re, secretGroup: r.SecretGroup, entropy: r.Entropy}
			if r.Path != "" {
				if rule.path, err = regexp.Compile(r.Path); err != nil {
					return nil, fmt.Errorf("secret rules: %s: path: %w", r.ID, err)
				}
			}
			for _, k := range r.Keywords {
				k = strings.ToLower(k)
				id, ok := wordID[k]
				if !ok {
					id = len(words)
					wordID[k] = id
					words = append(words, k)
				}
				rule.keywords = append(rule.keywords, id)
			}
			if err := rule.compileSearch(r.Regex, lowerAll(r.Keywords)); err != nil {
				return nil, fmt.Errorf("secret rules: %s: %w", r.ID, err)
			}
			for _, a := range r.Allowlists {
				al, err := compileAllowlist(a)
				if err != nil {
					return nil, fmt.Errorf("secret rules: %s: %w", r.ID, err)
				}
				rule.allow = append(rule.allow, al)
			}
			s.rules = append(s.rules, rule)
		}
	}
	s.keywords = newKeywordMatcher(words)
	return s, nil
}

func compileAllowlist(a tomlAllowlist) (allowlist, error) {
	al := allowlist{and: strings.EqualFold(a.Condition, "AND"), target: a.RegexTarget, commits: len(a.Commits) > 0}
	switch a.RegexTarget {
	case "", "secret", "match", "line":
	default:
		return al, fmt.Errorf("unknown regexTarget %q", a.RegexTarget)
	}
	for _, list := range []struct {
		src []string
		dst *[]*regexp.Regexp
	}{{a.Regexes, &al.regexes}, {a.Paths, &al.paths}} {
		for _, src := range list.src {
			re, err := regexp.Compile(src)
			if err != nil {
				return al, err
			}
			*list.dst = append(*list.dst, re)
		}
	}
	for _, w := range a.StopWords {
		al.stopwords = append(al.stopwords, strings.ToLower(w))
	}
	return al, nil
}

// DefaultSecretRules is the vendored gitleaks rule set plus gitmem's own,
// compiled on first use (about 0.1 s). The rules are compiled into the
// binary and TestVendoredSecretRulesParse checks them, so a failure here
// is a build defect, like a bad regexp.MustCompile constant: it panics.
var DefaultSecretRules = sync.OnceValue(func() *SecretRules {
	s, err := ParseSecretRules(gitleaksRules, gitmemRules)
	if err != nil {
		panic(err)
	}
	return s
})

// Len is the number of rules that can match content.
func (s *SecretRules) Len() int { return len(s.rules) }

// Find returns the secrets in text, ordered by position, without overlaps.
// path is the memory file's path (relative to /memories), for the rules
// and allowlists that depend on it.
//
// As in gitleaks, a rule's regex runs only when one of its keywords occurs
// in the text; and it runs only where a match can be (see search), which
// finds what running every regex on the whole text finds, many times
// faster (TestFastFindMatchesWholeText).
func (s *SecretRules) Find(path, text string) []Finding {
	return s.find(path, text, true)
}

func (s *SecretRules) find(path, text string, fast bool) []Finding {
	// Where each keyword occurs, in order.
	at := make([][]int, s.keywords.nwords)
	s.keywords.find(text, func(w, i int) { at[w] = append(at[w], i) })
	lines := &lineIndex{text: text}
	var out []Finding
	for i := range s.rules {
		r := &s.rules[i]
		var hits []int
		for _, k := range r.keywords {
			hits = append(hits, at[k]...)
		}
		if len(r.keywords) > 0 && len(hits) == 0 {
			continue
		}
		if r.path != nil && !r.path.MatchString(path) {
			continue
		}
		slices.Sort(hits)
		var ms [][]int
		if fast {
			ms = r.matches(text, hits, lines)
		} else {
			ms = r.re.FindAllStringSubmatchIndex(text, -1)
		}
		for _, m := range ms {
			ss, se := m[0], m[1]
			if g := r.secretGroup; g > 0 && m[2*g] >= 0 {
				ss, se = m[2*g], m[2*g+1]
			} else if g == 0 {
				for g := 1; 2*g < len(m); g++ {
					if m[2*g] >= 0 && m[2*g+1] > m[2*g] {
						ss, se = m[2*g], m[2*g+1]
						break
					}
				}
			}
			if len(m) == 2 || ss == m[0] && se == m[1] { // no group: the match is the secret
				match := strings.Trim(text[m[0]:m[1]], "\n")
				ss = m[0] + strings.Index(text[m[0]:m[1]], match)
				se = ss + len(match)
			}
			secret := text[ss:se]
			if strings.Contains(secret, "[REDACTED:") {
				continue // masked already
			}
			if r.entropy > 0 && entropy(secret) <= r.entropy {
				continue
			}
			if fast {
				m = r.fullMatch(text, m, lines)
			}
			match := strings.Trim(text[m[0]:m[1]], "\n")
			line := lineAround(text, ss, se)
			if allowed(s.allow, path, secret, match, line) || allowed(r.allow, path, secret, match, line) {
				continue
			}
			out = append(out, Finding{Rule: r.id, Line: strings.Count(text[:ss], "\n") + 1, Start: ss, End: se})
		}
	}
	return nonOverlapping(out)
}

// nonOverlapping orders findings by position and, of overlapping ones
// (several rules may find the same secret), keeps the first, preferring a
// provider's rule to a generic one, and the longer.
func nonOverlapping(out []Finding) []Finding {
	slices.SortFunc(out, func(a, b Finding) int {
		if a.Start != b.Start {
			return a.Start - b.Start
		}
		if ga, gb := strings.HasPrefix(a.Rule, "generic"), strings.HasPrefix(b.Rule, "generic"); ga != gb {
			if ga {
				return 1
			}
			return -1
		}
		return b.End - a.End // the longer first
	})
	kept := out[:0]
	for _, f := range out {
		if len(kept) > 0 && f.Start < kept[len(kept)-1].End {
			continue
		}
		kept = append(kept, f)
	}
	return kept
}

func allowed(lists []allowlist, path, secret, match, line string) bool {
	for _, a := range lists {
		target := secret
		switch a.target {
		case "match":
			target = match
		case "line":
			target = line
		}
		regex := slices.ContainsFunc(a.regexes, func(re *regexp.Regexp) bool { return re.MatchString(target) })
		lower := strings.ToLower(secret)
		stop := slices.ContainsFunc(a.stopwords, func(w string) bool { return strings.Contains(lower, w) })
		if !a.and {
			if regex || stop {
				return true
			}
			continue
		}
		ok := !a.commits // content being written belongs to no commit yet
		if len(a.paths) > 0 {
			ok = ok && slices.ContainsFunc(a.paths, func(re *regexp.Regexp) bool { return re.MatchString(path) })
		}
		if len(a.regexes) > 0 {
			ok = ok && regex
		}
		if len(a.stopwords) > 0 {
			ok = ok && stop
		}
		if ok {
			return true
		}
	}
	return false
}

// lineAround returns the lines of text that hold [start, end).
func lineAround(text string, start, end int) string {
	a := strings.LastIndexByte(text[:start], '\n') + 1
	b := strings.IndexByte(text[end:], '\n')
	if b < 0 {
		return text[a:]
	}
	return text[a : end+b]
}

// entropy is the Shannon entropy of s in bits per character, as gitleaks
// computes it.
func entropy(s string) float64 {
	if s == "" {
		return 0
	}
	counts := map[rune]int{}
	for _, r := range s {
		counts[r]++
	}
	var e float64
	inv := 1 / float64(len(s))
	for _, n := range counts {
		f := float64(n) * inv
		e -= f * math.Log2(f)
	}
	return e
}

// MaskSecrets replaces each finding (ordered, not overlapping, as Find
// returns them) in text by its placeholder. It returns the masked text and
// the line of each placeholder in it, which differs from the finding's
// line after a masked secret that spanned lines (a private key).
func MaskSecrets(text string, fs []Finding) (string, []int) {
	var b strings.Builder
	lines := make([]int, len(fs))
	at, removed := 0, 0
	for i, f := range fs {
		b.WriteString(text[at:f.Start])
		b.WriteString(f.Mask())
		lines[i] = f.Line - removed
		removed += strings.Count(text[f.Start:f.End], "\n")
		at = f.End
	}
	b.WriteString(text[at:])
	return b.String(), lines
}

// JoinWindow is how far either side of the edges of an edit FindEdit
// reads the file (further, to the start or end of a line, by at most as
// much again): enough for any secret the rules know, a private key
// included.
const JoinWindow = 8 << 10

// FindEdit returns the secrets an edit puts into a file, ordered by
// position, without overlaps: text is the whole file after the edit,
// which wrote text[start:end] (start == end: it only removed text there);
// written are the findings of the written text alone, as Find returns
// them for text[start:end] (found beforehand, before a lock is taken, say).
// Besides those, it finds the secrets that cross an edge of the edit —
// completed by the written text with the file's own, or whose pieces a
// removal joined — reading only JoinWindow around each edge. A secret the
// file held already, away from the edit, is not reported. Offsets and
// lines are the file's.
func (s *SecretRules) FindEdit(path, text string, start, end int, written []Finding) []Finding {
	startLine := strings.Count(text[:start], "\n")
	out := make([]Finding, 0, len(written))
	for _, f := range written {
		f.Start += start
		f.End += start
		f.Line += startLine
		out = append(out, f)
	}
	var edges []int // no secret crosses the file's start or end
	for _, edge := range []int{start, end} {
		if edge > 0 && edge < len(text) && !slices.Contains(edges, edge) {
			edges = append(edges, edge)
		}
	}
	for _, edge := range edges {
		a, b := window(text, edge)
		line := strings.Count(text[:a], "\n")
		for _, f := range s.Find(path, text[a:b]) {
			f.Start += a
			f.End += a
			f.Line += line
			if f.Start < edge && edge < f.End {
				out = append(out, f)
			}
		}
	}
	return nonOverlapping(out)
}

// window returns the part of text FindEdit reads around edge: JoinWindow
// either side, widened to whole lines by at most JoinWindow more.
func window(text string, edge int) (a, b int) {
	a, b = max(0, edge-JoinWindow), min(len(text), edge+JoinWindow)
	if i := strings.LastIndexByte(text[max(0, a-JoinWindow):a], '\n'); i >= 0 {
		a = max(0, a-JoinWindow) + i + 1
	} else if a-JoinWindow <= 0 {
		a = 0
	}
	if i := strings.IndexByte(text[b:min(len(text), b+JoinWindow)], '\n'); i >= 0 {
		b += i
	} else if b+JoinWindow >= len(text) {
		b = len(text)
	}
	return a, b
}
