//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// flockFile takes flock(2) on path (exclusive; not waiting when try),
// as another gitmem process does on .git/gitmem/lock and intent.
func flockFile(t *testing.T, path string, try bool) (*os.File, bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	how := syscall.LOCK_EX
	if try {
		how |= syscall.LOCK_NB
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return f, true
}

// serve --http stopped (SIGTERM) while a call waits for the writer lock
// (held by another process, as gitmem gc --full holds it) answers the call
// with nothing changed, and exits 0, while the other process still holds
// the lock: the requests run in serve's context, which the signal ends,
// and the wait for the lock gives up with it. (It waited until the lock
// was free: the answer, and serve's exit, came only after the holder let
// go.) The next start is clean, and so is git fsck --strict.
func TestServeStoppedStopsACallBeforeItsCommitPoint(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	repo := filepath.Join(gittest.TempDir(t), "memory")
	var stderr lockedBuffer
	base, proc, stop := startHTTPProcessTo(t, &stderr, env, repo, "--http", "--adopt-every", "0")
	dir := filepath.Join(repo, ".git", "gitmem")

	// Take the writer lock as another gitmem process does: queue on the
	// intent lock (serve lets go of the writer lock when it sees it held),
	// take the writer lock, let the intent lock go.
	intent, _ := flockFile(t, filepath.Join(dir, "intent"), false)
	lock, _ := flockFile(t, filepath.Join(dir, "lock"), false)
	intent.Close()
	defer lock.Close()

	answered := make(chan string, 1)
	go func() {
		body := `{"type":"tool_use","id":"toolu_stop","name":"memory","input":{"command":"create","path":"/memories/late.md","file_text":"x\n"}}`
		res, err := http.Post(base+"/v1/tool_use", "application/json", strings.NewReader(body))
		if err != nil {
			answered <- err.Error()
			return
		}
		defer res.Body.Close()
		var r handler.Result
		data, _ := io.ReadAll(res.Body)
		if err := json.Unmarshal(data, &r); err != nil {
			answered <- string(data)
			return
		}
		answered <- r.Content
	}()
	// The call waits for the writer lock once it holds the intent lock.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		f, free := flockFile(t, filepath.Join(dir, "intent"), true)
		if !free {
			break
		}
		f.Close()
		if time.Now().After(deadline) {
			t.Fatal("the call never waited for the writer lock")
		}
	}
	terminate(proc)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(stderr.String(), "shutting down"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start shutting down:\n%s", stderr.String())
		}
	}
	// Answered, and exited, with the lock still held.
	select {
	case got := <-answered:
		if got != "Error: The call was cancelled before its change was saved; nothing was changed" {
			t.Errorf("the call in flight at SIGTERM was answered %q", got)
		}
	case <-time.After(time.Minute):
		t.Fatal("the call in flight at SIGTERM is not answered while another process holds the writer lock")
	}
	stop() // waits for the exit: 0, else the test fails
	if _, free := flockFile(t, filepath.Join(dir, "lock"), true); free {
		t.Fatal("the other process's lock was taken from it")
	}
	lock.Close()

	// The next start is clean: it serves a call at once.
	base, _, stop = startHTTPProcessTo(t, &stderr, env, repo, "--http", "--adopt-every", "0")
	body := `{"type":"tool_use","id":"toolu_next","name":"memory","input":{"command":"create","path":"/memories/next.md","file_text":"y\n"}}`
	res, err := http.Post(base+"/v1/tool_use", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var r handler.Result
	err = json.NewDecoder(res.Body).Decode(&r)
	res.Body.Close()
	if err != nil || r.IsError {
		t.Fatalf("the call after a restart: %+v, %v", r, err)
	}
	stop()
	if log := gittest.Git(t, repo, "log", "--format=%H %(trailers:key=Tool-Use-Id,valueonly,separator=)"); strings.Contains(log, "toolu_stop") {
		t.Errorf("the call stopped before its commit point committed:\n%s", log)
	}
	// git fsck --strict: at the end (gittest.TempDir).
}
