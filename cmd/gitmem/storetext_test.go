package main

import (
	"testing"

	"github.com/gitmem-dev/gitmem/stores"
)

// A store's texts are read from its commits, which a hand or a pull may
// have made: the CLI prints their control and format characters escaped,
// so none reaches the terminal (an escape sequence, a bell, a
// right-to-left override) or splits store list's line and columns.
func TestStoreTextIsShownEscaped(t *testing.T) {
	for in, want := range map[string]string{
		"Customer 4711":     "Customer 4711",
		"évolué ✓":          "évolué ✓",
		"evil\x1b[31mRED\a": `evil\u001b[31mRED\u0007`,
		"a\u202egnp.exe":    `a\u202egnp.exe`,
		"line\u2028sep\r":   `line\u2028sep\u000d`,
		"keeps\ta tab":      "keeps\ta tab",
		"bad \xff byte":     `bad \ufffd byte`,
		"new\nline":         `new\u000aline`,
	} {
		if got := shownText(in); got != want {
			t.Errorf("shownText(%q) = %q, want %q", in, got, want)
		}
	}
	info := stores.Info{Name: "s", Meta: stores.Meta{DisplayName: "evil\x1b]0;x\a\tcol", Description: "first\tline\nsecond"}}
	if got, want := listedAs(info), `evil\u001b]0;x\u0007 col — first line`; got != want {
		t.Errorf("listedAs = %q, want %q", got, want)
	}
}
