package policy

import (
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

func TestParsePath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, rel string
		ok      bool
	}{
		{"/memories", "", true},
		{"/memories/", "", true},
		{"/memories//", "", true},
		{"/memories/a//b/", "a/b", true},
		{"/memories/notes.md", "notes.md", true},
		{"/memories/.hidden", ".hidden", true},
		{"/memories/dir with space/ü.md", "dir with space/ü.md", true},
		{"/memories/50% off", "50% off", true},
		{"/memories/.github", ".github", true},
		{"/memoriesX", "", false},
		{"/memories/.", "", false},
		{"/memories/a/..", "", false},
		{"/memories/..", "", false},
		{"/memories/%2E%2e/x", "", false},
		{"/memories/%00", "", false},
		{"/memories/a\x7fb", "", false},
		{"/memories/a\u0085b", "", false},
		{"/memories/\xff", "", false},
		{"/memories/.GIT", "", false},
		{"/memories/.git. ", "", false},
		{"/memories/" + strings.Repeat("a/", 600), "", false},
		{"", "", false},
		{"/", "", false},
	} {
		rel, err := ParsePath(tc.in)
		if (err == nil) != tc.ok || rel != tc.rel {
			t.Errorf("ParsePath(%q) = %q, %v; want %q ok=%v", tc.in, rel, err, tc.rel, tc.ok)
		}
	}
}

// FuzzParsePath: whatever the input, an accepted path names a place
// strictly inside memories/, in canonical form.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"/memories", "/memories/a/../b", "/memories/%2e%2e/x", "/memories//a/./b", "/memoriesx/..", "/memories/\\..\\x", "/memories/.git/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		rel, err := ParsePath(p)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		base := "/srv/repo/memories"
		joined := filepath.Join(base, filepath.FromSlash(rel))
		if joined != base && !strings.HasPrefix(joined, base+"/") {
			t.Fatalf("%q -> %q escapes: %s", p, rel, joined)
		}
		if filepath.ToSlash(filepath.Clean("/"+rel)) != "/"+rel && rel != "" {
			t.Fatalf("%q -> %q is not canonical", p, rel)
		}
		for _, seg := range strings.Split(rel, "/") {
			if seg == "." || seg == ".." || IsReservedName(seg) || strings.ContainsAny(seg, "\\\x00") {
				t.Fatalf("%q -> %q has segment %q", p, rel, seg)
			}
		}
		if Display(rel) != strings.TrimRight(Display(rel), "/") {
			t.Fatalf("display %q", Display(rel))
		}
	})
}

func TestHumanSize(t *testing.T) {
	t.Parallel()
	// Expected values are what the reference's formatFileSize prints.
	for n, want := range map[int64]string{
		0: "0B", 1: "1B", 17: "17B", 1023: "1023B", 1024: "1K", 1280: "1.3K", 1331: "1.3K",
		1536: "1.5K", 4096: "4K", 10 * 1024: "10K", 1048575: "1024.0K", 1 << 20: "1M",
		1258291: "1.2M", 1 << 30: "1G", 5 << 30: "5G",
	} {
		if got := HumanSize(n); got != want {
			t.Errorf("HumanSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCountLines(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int{"": 0, "a": 1, "a\n": 1, "a\nb": 2, "a\nb\n": 2, "\n": 1, "\n\n": 2} {
		if got := CountLines(s); got != want {
			t.Errorf("CountLines(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestViewRange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ a, b, n, from, to int }{
		{1, 2, 5, 0, 2}, {2, -1, 5, 1, 5}, {0, 3, 5, 0, 3}, {-4, 1, 5, 0, 1},
		{4, 9, 5, 3, 5}, {7, 9, 5, 5, 5}, {3, 2, 5, 2, 2},
		// b below -1 counts from the end, as JavaScript's lines.slice(a-1, b).
		{-1, -2, 5, 0, 3}, {2, -3, 5, 1, 2}, {4, -3, 5, 3, 3}, {1, -9, 5, 0, 0}, {1, 0, 5, 0, 0},
	} {
		if from, to := ViewRange(tc.a, tc.b, tc.n); from != tc.from || to != tc.to {
			t.Errorf("ViewRange(%d,%d,%d) = %d,%d want %d,%d", tc.a, tc.b, tc.n, from, to, tc.from, tc.to)
		}
	}
}

func TestLessIsUTF16Order(t *testing.T) {
	t.Parallel()
	// U+FF5E sorts after U+1F600 in UTF-16 (0xFF5E > 0xD83D) but before it
	// in UTF-8 byte order; JavaScript's sort uses UTF-16.
	if !Less("\U0001F600", "\uFF5E") || Less("\uFF5E", "\U0001F600") {
		t.Error("supplementary characters must sort before U+FF5E")
	}
	if !Less("B", "a") || !Less("a", "ab") || Less("b", "a") {
		t.Error("ASCII order")
	}
}

func TestPageKeepsWithinLimit(t *testing.T) {
	t.Parallel()
	lines := SplitLines(strings.Repeat("0123456789\n", 100))
	out := Page("H:", lines, 0, len(lines), 200)
	if len(out) > 200 {
		t.Fatalf("page is %d bytes", len(out))
	}
	if !strings.HasSuffix(out, "Use view_range [7, -1] to see more.]") {
		t.Fatalf("page tail: %q", out[len(out)-80:])
	}
	if full := Page("H:", lines, 0, len(lines), 0); strings.Count(full, "\n") != len(lines) {
		t.Fatal("unlimited page lost lines")
	}
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1048576: "1,048,576", -1234: "-1,234"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q", n, got)
		}
	}
}

// TestCheckGlob: CheckGlob refuses exactly the globs doublestar refuses,
// and says why.
func TestCheckGlob(t *testing.T) {
	t.Parallel()
	for g, want := range map[string]string{
		"[":         `"[" has a [ at byte 1 that no ] closes`,
		"a[]b":      `"a[]b" has an empty [] at byte 2`,
		"[!]":       `"[!]" has an empty [] at byte 1`,
		`a\`:        `"a\\" ends in a lone \`,
		"{a,b":      `"{a,b" has a { that no } closes`,
		"a}":        `"a}" has a } at byte 2 that no { opens`,
		"core/**":   "",
		"[a-z]*.md": "",
		`\[x`:       "",
		"{a,{b,c}}": "",
		`[\]]`:      "",
	} {
		err := CheckGlob(g)
		switch {
		case want == "" && err != nil:
			t.Errorf("CheckGlob(%q) = %v", g, err)
		case want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)):
			t.Errorf("CheckGlob(%q) = %v, want %s...", g, err, want)
		}
	}
	chars := []byte(`ab/*?[]{}!^,\-`)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, 1+rng.IntN(8))
		for i := range b {
			b[i] = chars[rng.IntN(len(chars))]
		}
		if ok := CheckGlob(string(b)) == nil; ok != doublestar.ValidatePattern(string(b)) {
			t.Fatalf("CheckGlob(%q) accepts: %v, doublestar: %v", b, ok, !ok)
		}
	}
}

// The names git reads as .git, .gitmodules, .gitattributes or
// .gitignore on some file system are refused in a path, as git's own
// verify_path and fsck refuse them: one create of /memories/git~1/x made
// a tree `git fsck --strict` refuses (hasDotgit) and a remote every
// other agent's pull refused; GITMOD~1 was checked by git as a
// .gitmodules. Before, only the exact names were refused (any case,
// trailing dots and spaces).
func TestParsePathRefusesGitsOtherSpellings(t *testing.T) {
	t.Parallel()
	for _, seg := range []string{
		"git~1", "GIT~1", "Git~1.", ".git::$INDEX_ALLOCATION", ".git:stream",
		".g\u200cit", ".git\u200d", ".GIT\ufeff", "\u202e.git",
		"GITMOD~1", "gitmod~4", ".gitmodules::$DATA", ".gitmodules\u200c", "gi7eba~9",
		"GITATT~1", ".gitattributes\u200e", "gi7d29~1",
		"GITIGN~1", ".gitignore::$DATA", "gi250a~2",
		// git reads U+FFFE and U+FFFF as malformed UTF-8, the end of
		// the name: .git whatever follows (an attacker's pass).
		".git\uffff", ".git\ufffe", ".git\uffffx", ".g\u200cit\ufffe", ".gitmodules\uffff",
	} {
		for _, p := range []string{"/memories/" + seg, "/memories/" + seg + "/notes.md", "/memories/a/" + seg} {
			_, err := ParsePath(p)
			if want := "Path " + p + " uses the reserved name " + seg; err == nil || err.Error() != want {
				t.Errorf("ParsePath(%q) = %v, want %q", p, err, want)
			}
		}
	}
	for _, seg := range []string{
		"git", "git~2", "git~1x", ".gitx", ".git-notes", ".github", "gitmodules",
		"GITMOD~5", "GITMOD~1.md", ".gitmodules.md", "gitign~1x", "gi7eba~a", "~1", ".g\u200cithub",
	} {
		if _, err := ParsePath("/memories/" + seg); err != nil {
			t.Errorf("ParsePath(%q) = %v, want it taken", "/memories/"+seg, err)
		}
	}
}

// A pattern that matches empty text anywhere, not only empty input: \b
// matched no empty string and was taken, then put the placeholder at
// every word boundary of every commit, name and file.
func TestMatchesEmpty(t *testing.T) {
	for _, p := range []string{`a*`, `(a|)`, `^`, `$`, `x?`, `\B`, `(?m)^`, `\A`, `\z`, `\b`, `(?:)`, `a{0,3}`, `(\b)+`,
		`\bfoo\b|\b`, `(?i)\b(?:)`, `[a-z]*\b`} {
		if !MatchesEmpty(regexp.MustCompile(p)) {
			t.Errorf("%s: not found to match empty text", p)
		}
	}
	for _, p := range []string{`\bsk-[a-z]+\b`, `.`, `[A-Za-z0-9_-]{11,}`, `a+`, `x{2}`, `\b\w`, `^pin [0-9]+$`, `(a|b)c*`, `(?s).+`} {
		if MatchesEmpty(regexp.MustCompile(p)) {
			t.Errorf("%s: found to match empty text", p)
		}
	}
}
