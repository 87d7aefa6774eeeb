package handler_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

// A6: a file made by hand in a folder, left for want of room, is noted as
// a kept edit bound for the folder's new place when the model renames the
// folder; the model then creates a file of its own at that new place (no
// file is there, on disk or in HEAD: the create is right to succeed).
// Once there is room, the adopt merges the hand file, which no commit
// ever held, into the model's file between conflict markers.
// Expected: the model's file stays as created, the hand file is committed
// as it is (where it is, or at a free path), and no commit holds
// conflict markers.
func TestA6LeftFileInARenamedFolderIsNotMergedIntoTheModelsNewFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := gittest.TempDir(t)
	r, _, err := gitmem.Init(ctx, dir, gitmem.Options{Now: func() time.Time { return epoch }, Logf: t.Logf, Errorf: t.Logf,
		Operator: gitmem.Signature{Name: "op", Email: "op@example.com"}, MaxFiles: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	limits := policy.DefaultLimits
	limits.MaxFiles = 3
	h := handler.New(r, handler.Options{Limits: limits, Logger: testLog(t)})
	n := 0
	run := func(input, want string) {
		t.Helper()
		n++
		res := call(h, fmt.Sprintf("toolu_%d", n), input)
		if res.Content != want {
			t.Fatalf("%s: %q, want %q", input, res.Content, want)
		}
	}
	run(`{"command":"create","path":"/memories/a.md","file_text":"a\n"}`, "File created successfully at: /memories/a.md")
	run(`{"command":"create","path":"/memories/c.md","file_text":"c\n"}`, "File created successfully at: /memories/c.md")
	run(`{"command":"create","path":"/memories/d/b.md","file_text":"b\n"}`, "File created successfully at: /memories/d/b.md")
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "memories", "d", "h.md"), []byte("made by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Adopt(ctx); !errors.Is(err, gitmem.ErrNoChange) {
		t.Fatalf("adopt: %v, want ErrNoChange (no room)", err)
	}
	run(`{"command":"rename","old_path":"/memories/d","new_path":"/memories/e"}`, "Successfully renamed /memories/d to /memories/e")
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	run(`{"command":"delete","path":"/memories/a.md"}`, "Successfully deleted /memories/a.md")
	run(`{"command":"create","path":"/memories/e/h.md","file_text":"the model's\n"}`, "File created successfully at: /memories/e/h.md")
	run(`{"command":"delete","path":"/memories/c.md"}`, "Successfully deleted /memories/c.md")
	if _, err := r.Adopt(ctx); err != nil && !errors.Is(err, gitmem.ErrNoChange) {
		t.Fatal(err)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if log := gittest.Git(t, dir, "log", "-p", "HEAD"); strings.Contains(log, "<<<<<<<") {
		t.Errorf("a commit holds conflict markers:\n%s", log)
	}
	if got := gittest.Git(t, dir, "show", "HEAD:memories/e/h.md"); got != "the model's\n" {
		t.Errorf("HEAD:memories/e/h.md = %q, want the model's file as created", got)
	}
}
