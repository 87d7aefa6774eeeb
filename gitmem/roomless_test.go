package gitmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A process that keeps making files by hand in a memory that has no room
// for them: each adopt finds a new one, and named it at ERROR, one line
// per adopt for as long as the process ran. The left files are named
// when there were none before, and again each time their count doubles
// since the last line: 1, 2, 4, 8 of ten.
func TestFilesMadeByHandOneAtATimePastTheLimitAreNamedAsTheirCountDoubles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	opt.MaxFiles = 1
	logs := captureLogs(t, &opt)
	logf := opt.Logf
	opt.Errorf = func(format string, a ...any) { logf("ERROR "+format, a...) }
	r, _, err := Init(ctx, dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	write(t, r, "t1", "a.md", "a\n")
	settle(t, r)
	for i := range 10 {
		if err := os.WriteFile(filepath.Join(dir, "memories", fmt.Sprintf("n%d.md", i)), []byte("by hand\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
			t.Fatalf("adopt %d: %v, want ErrNoChange", i, err)
		}
	}
	var named []string
	for _, l := range logs() {
		if strings.HasPrefix(l, "ERROR") {
			named = append(named, l)
		}
	}
	want := []string{"1 file(s) made by hand in memories/ (memories/n0.md first)", "2 file(s) made by hand in memories/ (memories/n0.md first)",
		"4 file(s) made by hand in memories/ (memories/n0.md first)", "8 file(s) made by hand in memories/ (memories/n0.md first)"}
	if len(named) != len(want) {
		t.Fatalf("%d ERROR lines, want %d:\n%s", len(named), len(want), strings.Join(named, "\n"))
	}
	for i, l := range named {
		if !strings.HasPrefix(l, "ERROR gitmem: "+want[i]+" are not committed") {
			t.Errorf("ERROR line %d: %s, want %s ...", i, l, want[i])
		}
	}
}
