package policy

import (
	"strings"
	"testing"
)

// IsPlainRel says yes only to paths ParsePath takes as they are, and to
// the paths a memory is mostly made of.
func TestIsPlainRelOnlyWhereParsePathTakesThePathAsItIs(t *testing.T) {
	t.Parallel()
	for _, rel := range []string{"a.md", "notes/todo.md", "d001/f00123.md", "A-b_c.d.e", "x/y/z", "git", "gitmodules", "a.git",
		strings.Repeat("n", MaxSegmentBytes), strings.Repeat("abcdefgh/", 110)[:len(strings.Repeat("abcdefgh/", 110))-1-9*2]} {
		if !IsPlainRel(rel) {
			t.Errorf("IsPlainRel(%q) = false, want true", rel)
		}
	}
	for _, rel := range []string{"", "/a", "a/", "a//b", ".git", ".gitmodules", "d/.git", "git~1", "GITMOD~1", ".", "..", "a/../b", "a/./b",
		".hidden", "a b", "a%41", "a\\b", "a\x00b", "é.md", "a:b",
		strings.Repeat("n", MaxSegmentBytes+1), strings.Repeat("abcdefgh/", 120)[:len(strings.Repeat("abcdefgh/", 120))-1]} {
		if IsPlainRel(rel) {
			t.Errorf("IsPlainRel(%q) = true, want false", rel)
		}
	}
	// Every path of up to 4 bytes over an alphabet of the characters the
	// rules turn on: where IsPlainRel says yes, ParsePath takes it as it is.
	alphabet := []byte("a.G/~%1 -_\\:")
	var walk func(prefix []byte)
	n := 0
	walk = func(prefix []byte) {
		if rel := string(prefix); IsPlainRel(rel) {
			n++
			if got, err := ParsePath(Display(rel)); err != nil || got != rel {
				t.Errorf("IsPlainRel(%q) = true, but ParsePath gives %q, %v", rel, got, err)
			}
		}
		if len(prefix) == 4 {
			return
		}
		for _, c := range alphabet {
			walk(append(prefix, c))
		}
	}
	walk(nil)
	if n == 0 {
		t.Fatal("no generated path was plain")
	}
}
