package handler_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

// A storage failure (here a blob git cannot read back) answers the model
// with generic text — no host path, no library detail — while the
// operator's record of the call names the cause, with no host path either.
func TestStorageFailureIsGenericForTheModel(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
	dir := gittest.TempDir(t)
	opt := gitmem.Options{Now: func() time.Time { return epoch }, Logf: t.Logf}
	r, _, err := gitmem.Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	h := handler.New(r, handler.Options{Limits: policy.DefaultLimits, Logger: testLog(t)})
	if res := call(h, "toolu_1", `{"command":"create","path":"/memories/a.md","file_text":"hello\n"}`); res.IsError {
		t.Fatal(res.Content)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	blob := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD:memories/a.md"))
	// gitmem writes packs: unpack them, so that the blob is a file of its own.
	packs, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "pack-*.pack"))
	for _, pack := range packs {
		data, err := os.ReadFile(pack)
		if err != nil {
			t.Fatal(err)
		}
		base := strings.TrimSuffix(pack, ".pack")
		for _, ext := range []string{".pack", ".idx", ".keep", ".rev"} {
			os.Remove(base + ext)
		}
		gittest.GitIn(t, dir, string(data), "unpack-objects", "-q")
	}
	obj := filepath.Join(dir, ".git", "objects", blob[:2], blob[2:])
	if _, err := os.Stat(obj); err != nil {
		t.Fatalf("the blob is not a loose object after unpacking: %v", err)
	}
	r, err = gitmem.Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// A directory where the object was: reading it fails with the host path.
	if err := os.Remove(obj); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(obj, 0o700); err != nil {
		t.Fatal(err)
	}
	gittest.Damaged(t, dir, "a blob is a folder: the storage failure")
	var calls []handler.Call
	h = handler.New(r, handler.Options{Limits: policy.DefaultLimits, Logger: testLog(t), OnCall: func(c handler.Call) { calls = append(calls, c) }})
	res := call(h, "toolu_2", `{"command":"view","path":"/memories/a.md"}`)
	if !res.IsError || res.Content != "Error: The memory store could not complete the command; nothing was changed" {
		t.Fatalf("the model got %q", res.Content)
	}
	if len(calls) != 1 || calls[0].Err == nil {
		t.Fatalf("calls %+v", calls)
	}
	logged := calls[0].Err.Error()
	if strings.Contains(logged, dir) || strings.Count(logged, "is a directory") != 1 {
		t.Fatalf("the operator's record of the call: %q", logged)
	}
	t.Log(logged)
}
