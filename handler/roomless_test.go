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

// limitedMemory makes a memory and a handler over it, both held to
// limits' --max-files and --max-total-bytes (the repository's for the
// files an adopt takes, the handler's for the model's calls), and run,
// which makes one call and fails the test unless it answers want.
func limitedMemory(t *testing.T, limits policy.Limits) (r *gitmem.Repo, dir string, run func(input, want string)) {
	t.Helper()
	dir = gittest.TempDir(t)
	r, _, err := gitmem.Init(context.Background(), dir, gitmem.Options{Now: func() time.Time { return epoch }, Logf: t.Logf, Errorf: t.Logf,
		Operator: gitmem.Signature{Name: "op", Email: "op@example.com"}, MaxFiles: limits.MaxFiles, MaxTotalBytes: limits.MaxTotalBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	h := handler.New(r, handler.Options{Limits: limits, Logger: testLog(t)})
	n := 0
	run = func(input, want string) {
		t.Helper()
		n++
		if res := call(h, fmt.Sprintf("toolu_%d", n), input); res.Content != want {
			t.Fatalf("%s: %q, want %q", input, res.Content, want)
		}
	}
	return r, dir, run
}

// A file made by hand that an adopt left for want of room (--max-files)
// stays on disk, and the model cannot see it; nor can a change of the
// model's write over it. A rename or a create onto it, or onto one made
// since the last adopt, gets "already exists" (the rename was committed,
// and the hand file merged with it between conflict markers); once there
// is room, the adopt before the call takes the file, which then exists
// for the model too. Every hand file stays on disk as it was made, and no
// commit holds a conflict marker.
func TestTheModelWritesNoFileOverOneLeftForWantOfRoom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	limits := policy.DefaultLimits
	limits.MaxFiles = 2
	r, dir, run := limitedMemory(t, limits)
	hand := func(p, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, "memories", p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "memories", p), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(`{"command":"create","path":"/memories/a.md","file_text":"a\n"}`, "File created successfully at: /memories/a.md")
	run(`{"command":"create","path":"/memories/d/b.md","file_text":"b\n"}`, "File created successfully at: /memories/d/b.md")
	hand("n.md", "made by hand\n")
	hand("e/b.md", "also by hand\n")
	if _, err := r.Adopt(ctx); !errors.Is(err, gitmem.ErrNoChange) {
		t.Fatalf("adopt: %v, want ErrNoChange (no room)", err)
	}
	run(`{"command":"rename","old_path":"/memories/a.md","new_path":"/memories/n.md"}`, "Error: The destination /memories/n.md already exists")
	run(`{"command":"rename","old_path":"/memories/d","new_path":"/memories/e"}`, "Error: The destination /memories/e already exists")
	run(`{"command":"rename","old_path":"/memories/gone.md","new_path":"/memories/n.md"}`, "Error: The destination /memories/n.md already exists")
	run(`{"command":"rename","old_path":"/memories/a.md","new_path":"/memories/n.md/x.md"}`, "Error: Cannot rename /memories/a.md to /memories/n.md/x.md: one of its parent folders is a file")
	run(`{"command":"create","path":"/memories/n.md","file_text":"model\n"}`, "Error: File /memories/n.md already exists")
	run(`{"command":"create","path":"/memories/n.md/x.md","file_text":"model\n"}`, "Error: Cannot create /memories/n.md/x.md: one of its parent folders is a file")
	run(`{"command":"create","path":"/memories/o.md","file_text":"model\n"}`, "Error: Cannot create /memories/o.md: the memory already holds 2 files, the limit is 2 files")
	hand("m.md", "made by hand since the last adopt\n") // not yet named left
	run(`{"command":"rename","old_path":"/memories/a.md","new_path":"/memories/m.md"}`, "Error: The destination /memories/m.md already exists")
	// Room for one: the adopt before the create takes m.md, first in
	// path order; n.md is left, and not written over.
	run(`{"command":"delete","path":"/memories/d/b.md"}`, "Successfully deleted /memories/d/b.md")
	run(`{"command":"create","path":"/memories/m.md","file_text":"model\n"}`, "Error: File /memories/m.md already exists")
	run(`{"command":"rename","old_path":"/memories/a.md","new_path":"/memories/n.md"}`, "Error: The destination /memories/n.md already exists")
	if _, err := r.Adopt(ctx); err != nil && !errors.Is(err, gitmem.ErrNoChange) {
		t.Fatal(err)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"n.md": "made by hand\n", "e/b.md": "also by hand\n", "m.md": "made by hand since the last adopt\n", "a.md": "a\n"} {
		if got, err := os.ReadFile(filepath.Join(dir, "memories", p)); err != nil || string(got) != want {
			t.Errorf("%s on disk = %q (%v), want %q", p, got, err, want)
		}
	}
	if log := gittest.Git(t, dir, "log", "-p", "HEAD"); strings.Contains(log, "<<<<<<<") {
		t.Errorf("a commit holds conflict markers:\n%s", log)
	}
	if got, want := strings.Join(strings.Fields(gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD")), " "), "memories/a.md memories/m.md"; got != want {
		t.Errorf("HEAD holds %s, want %s", got, want)
	}
}

// The same for a file made by hand that would take the memory past its
// largest total size (--max-total-bytes): left on disk, and neither a
// create nor a rename of the model's writes over it (a create that fits
// the limit was committed, and the hand file merged with it between
// conflict markers).
func TestTheModelWritesNoFileOverOneLeftForTheTotalSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	limits := policy.DefaultLimits
	limits.MaxTotalBytes = 10
	r, dir, run := limitedMemory(t, limits)
	for _, c := range []struct{ input, want string }{
		{`{"command":"create","path":"/memories/a.md","file_text":"aaaa\n"}`, "File created successfully at: /memories/a.md"},
		{"", ""}, // n.md made by hand, left by the adopt
		{`{"command":"create","path":"/memories/n.md","file_text":"x\n"}`, "Error: File /memories/n.md already exists"},
		{`{"command":"rename","old_path":"/memories/a.md","new_path":"/memories/n.md"}`, "Error: The destination /memories/n.md already exists"},
	} {
		if c.input == "" {
			if err := os.WriteFile(filepath.Join(dir, "memories", "n.md"), []byte("by hand\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Adopt(ctx); !errors.Is(err, gitmem.ErrNoChange) {
				t.Fatalf("adopt: %v, want ErrNoChange (no room)", err)
			}
			continue
		}
		run(c.input, c.want)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "memories", "n.md")); err != nil || string(got) != "by hand\n" {
		t.Errorf("n.md on disk = %q (%v)", got, err)
	}
	if got, want := strings.Join(strings.Fields(gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD")), " "), "memories/a.md"; got != want {
		t.Errorf("HEAD holds %s, want %s", got, want)
	}
}

// A file made by hand in a folder, left for want of room, stays where it
// is when the model renames the folder after: no commit holds it, so it
// is no edit of a file the rename moved. The model then creates a file of its
// own at the new place (nothing is there, on disk or in HEAD). Once there
// is room, the adopt takes the hand file where it was made, as it is, and
// the model's file stays as created: no commit holds conflict markers.
// (The hand file was noted as a kept edit bound for the new place, and
// merged into the model's file there between conflict markers.)
func TestAFileLeftForWantOfRoomStaysWhereItIsWhenTheModelRenamesItsFolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	limits := policy.DefaultLimits
	limits.MaxFiles = 3
	r, dir, run := limitedMemory(t, limits)
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
	if got := gittest.Git(t, dir, "show", "HEAD:memories/d/h.md"); got != "made by hand\n" {
		t.Errorf("HEAD:memories/d/h.md = %q, want the hand file as made", got)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "memories", "d", "h.md")); err != nil || string(got) != "made by hand\n" {
		t.Errorf("memories/d/h.md on disk: %q, %v; want the hand file as made", got, err)
	}
}
