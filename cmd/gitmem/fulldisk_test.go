//go:build linux

package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// fullDiskAt mounts a small tmpfs at a new folder and returns it, with
// fill, which takes every byte left on it, and free, which gives them
// back. The test is skipped where mounting is not allowed (not root).
func fullDiskAt(t *testing.T) (dir string, fill, free func()) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=8m"); err != nil {
		t.Skipf("a full disk is a tmpfs mounted here: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	filler := filepath.Join(dir, "filler")
	fill = func() {
		f, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 4096)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				return
			}
		}
	}
	free = func() {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	}
	return dir, fill, free
}

// A CLI command that writes to a memory served by a gitmem serve whose
// checkpoints fail (the disk is full: the write-ahead log took the
// change, git's pack cannot be written) is not left waiting: the server
// lets the writer lock go when the command waits for it, the command
// replays the log and fails with the disk's error, saying the changes
// are safe in the log; fsck --repair, beside the server holding the lock
// again, does the same. Once there is room, every acknowledged change is
// in git's history. (Both waited silently, for ever or until space was
// freed.)
func TestCommandsBesideAServerOnAFullDisk(t *testing.T) {
	t.Parallel()
	disk, fill, free := fullDiskAt(t)
	env := testEnv(t)
	repo := filepath.Join(disk, "memory")
	var stderr lockedBuffer
	base, _, stop := startHTTPProcessTo(t, &stderr, env, repo, "--http", "--adopt-every", "0")
	client := &http.Client{}
	create := func(id string) bool {
		t.Helper()
		ok, err := postCall(client, base, id, `{"command":"create","path":"/memories/`+id+`.md","file_text":"`+id+`\n"}`)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !create("toolu_1") {
		t.Fatal("the first call failed")
	}
	fill()
	if !create("toolu_2") { // the log has room: it is preallocated
		t.Fatalf("a call on the full disk was not acknowledged:\n%s", stderr.String())
	}
	// The server holds the writer lock and its checkpoints fail.
	for deadline := time.Now().Add(time.Minute); !strings.Contains(stderr.String(), "cannot be written to git's files yet"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server's checkpoint did not fail:\n%s", stderr.String())
		}
	}

	run := func(args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound for a hang
		defer cancel()
		cmd := exec.CommandContext(ctx, "gitmem", append([]string{"--repo", repo}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("gitmem %s waited beside the server until killed:\n%s", strings.Join(args, " "), out)
		}
		return string(out), err
	}
	out, err := run("gc")
	if err == nil || !strings.Contains(out, "no space left on device") || !strings.Contains(out, "safe in the write-ahead log") {
		t.Fatalf("gitmem gc on the full disk: %v\n%s", err, out)
	}
	if create("toolu_3") { // the server takes the lock back: refused, the disk is full
		t.Fatal("a change was accepted on the full disk")
	}
	out, err = run("fsck", "--repair")
	if err == nil || !strings.Contains(out, "no space left on device") {
		t.Fatalf("gitmem fsck --repair on the full disk: %v\n%s", err, out)
	}

	free()
	if !create("toolu_4") {
		t.Fatalf("a call once there is room failed:\n%s", stderr.String())
	}
	stop()
	ids := strings.Fields(gittest.Git(t, repo, "log", "--reverse", "--format=%(trailers:key=Tool-Use-Id,valueonly,separator=)"))
	if got := strings.Join(ids, " "); got != "toolu_1 toolu_2 toolu_4" {
		t.Fatalf("history: %q\nserve's log:\n%s", got, stderr.String())
	}
	gittest.Fsck(t, repo)
	if st := gittest.Git(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("git status:\n%s", st)
	}
}
