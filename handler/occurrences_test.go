package handler

import (
	"slices"
	"strings"
	"testing"
)

// Every occurrence, overlapping ones too, in order.
func TestOccurrences(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s, sub string
		want   []int
	}{
		{"aaa", "aa", []int{0, 1}},
		{"abcabc", "abc", []int{0, 3}},
		{"abc", "d", nil},
		{"aabaabaab", "aabaab", []int{0, 3}},
		{"line one\nline two\n", "line", []int{0, 9}},
		{"ab\ncd", "b\nc", []int{1}},
	} {
		if got := occurrences(c.s, c.sub); !slices.Equal(got, c.want) {
			t.Errorf("%q in %q: %v, want %v", c.sub, c.s, got, c.want)
		}
	}
}

// The worst case for a search restarted after each match: half a MiB of
// one character in a MiB of it (524,289 overlapping occurrences). Linear
// here; `go test -bench Occurrences ./handler` shows it.
func BenchmarkOccurrencesOverlapping(b *testing.B) {
	s, sub := strings.Repeat("a", 1<<20), strings.Repeat("a", 1<<19)
	for range b.N {
		if n := len(occurrences(s, sub)); n != 1<<19+1 {
			b.Fatal(n)
		}
	}
}
