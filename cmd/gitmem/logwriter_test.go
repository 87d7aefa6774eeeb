//go:build unix

package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// gatedWriter takes nothing until open is closed (a stderr read by a
// busy process, journald behind), then keeps what it is given.
type gatedWriter struct {
	open chan struct{}
	lockedBuffer
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	<-g.open
	return g.lockedBuffer.Write(p)
}

// serve's log lines go out from a goroutine of their own (logWriter): a
// call's answer does not wait for stderr to take them. Here stderr takes
// nothing until the calls are done: 400 calls, two lines each (about
// 130 KB, twice what a pipe holds), are all answered, and once stderr
// goes on every line is there, in order. Before, the calls stopped being
// answered once the pipe was full: each waited in slog's write(2).
func TestServeCallsDoNotWaitForStderr(t *testing.T) {
	t.Parallel()
	gate := &gatedWriter{open: make(chan struct{})} // the start's few lines wait in the pipe
	var once sync.Once
	release := func() { once.Do(func() { close(gate.open) }) }
	repo := filepath.Join(gittest.TempDir(t), "memory")
	base, _, stopServe := startHTTPProcessTo(t, gate, testEnv(t), repo, "--http")
	t.Cleanup(release) // before stopServe (cleanups run last first)
	client := &http.Client{Timeout: 20 * time.Second}
	const calls = 400
	for i := range calls {
		if _, err := postCall(client, base, fmt.Sprintf("toolu_%03d", i), `{"command":"view","path":"/memories"}`); err != nil {
			t.Fatalf("call %d while stderr took nothing: %v", i, err)
		}
	}
	release()
	stopServe()
	var ids []string
	for _, line := range strings.Split(gate.String(), "\n") {
		if strings.Contains(line, `msg="tool call"`) {
			_, after, _ := strings.Cut(line, " id=")
			ids = append(ids, strings.Fields(after)[0])
		}
	}
	if len(ids) != calls {
		t.Fatalf("%d tool call lines, want %d", len(ids), calls)
	}
	for i, id := range ids {
		if want := fmt.Sprintf("toolu_%03d", i); id != want {
			t.Fatalf("tool call line %d is %s's, want %s's", i, id, want)
		}
	}
}

// A stderr that takes nothing never holds serve up (F2): with 3 MB of
// lines written, three times what waits, every Write returns and so does
// Close (after flushWait). Once stderr takes lines again, it gets the
// first ones in order, then a line that counts the others, dropped; then
// a line written after Close. Before, a Write waited for room once 1 MiB
// waited (a call held, and a SIGTERM with it) and Close waited for stderr
// for ever: the test failed at its 2-minute bound.
func TestLogWriterStuckStderrHoldsNothing(t *testing.T) {
	t.Parallel()
	gate := &gatedWriter{open: make(chan struct{})}
	lw := newLogWriter(gate, func(n int) []byte { return fmt.Appendf(nil, "dropped %d\n", n) })
	lw.flushWait = time.Millisecond
	line := strings.Repeat("x", 995)
	const lines = 3000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range lines {
			fmt.Fprintf(lw, "%04d %s\n", i, line)
		}
		lw.Close()
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute): // a bound for a hang, not a timing
		t.Fatal("the writes or Close waited for a stderr that takes nothing")
	}
	close(gate.open)
	<-lw.done
	// A Write after Close waits flushWait for stderr: long enough now
	// that a loaded machine's scheduling cannot drop it (it did, at 1 ms).
	lw.flushWait = time.Minute
	fmt.Fprintln(lw, "after")
	got := strings.Split(strings.TrimSuffix(gate.String(), "\n"), "\n")
	if len(got) < 3 || got[len(got)-1] != "after" {
		t.Fatalf("%d lines, ending %q", len(got), got[len(got)-1])
	}
	// The lines kept are in order, and each notice counts the lines
	// dropped right before the next one kept (or the end). The drain
	// takes one batch before stderr blocks it: when it was scheduled
	// only once 1 MiB waited (a loaded machine), that batch ends with a
	// notice too, and a second MiB is kept after it.
	next, kept, notices := 0, 0, 0
	for i, l := range got[:len(got)-1] {
		var n int
		if _, err := fmt.Sscanf(l, "dropped %d", &n); err == nil {
			next += n
			notices++
			continue
		}
		if want := fmt.Sprintf("%04d %s", next, line); l != want {
			t.Fatalf("line %d is %.10q, want %.10q", i, l, want)
		}
		next++
		kept++
	}
	if next != lines || notices == 0 || notices > 2 {
		t.Fatalf("%d lines kept and counted of %d, %d notices", next, lines, notices)
	}
	if kept*len(fmt.Sprintf("%04d %s\n", 0, line)) < logBufferMax || kept == lines { // a line is 1,001 bytes
		t.Fatalf("%d of %d lines kept: want at least what 1 MiB holds", kept, lines)
	}
}

// serve (stdio) with a stderr that is open but never read, and full
// from the start, answers and commits every call, and exits at stdin's
// end, after waiting logFlushWait for stderr. Before (F2), it waited for
// stderr for ever: the test failed at its 2-minute bound.
func TestServeExitsWhileStderrTakesNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a process")
	}
	repo := filepath.Join(gittest.TempDir(t), "memory")
	// The pipe is full before serve starts (fillPipe): none of its lines
	// fit, so a few calls are as many as a pipe's worth of them (it took
	// 600 calls, 120 KB of lines, to fill an empty one: 6 s of CPU).
	const calls = 20
	var in strings.Builder
	for i := range calls {
		fmt.Fprintf(&in, `{"type":"tool_use","id":"toolu_%03d","name":"memory","input":{"command":"create","path":"/memories/notes/a-long-enough-name-for-a-long-log-line-%03d.md","file_text":"%d\n"}}`+"\n", i, i, i)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close() // open, never read
	fillPipe(t, w)
	cmd := exec.Command("gitmem", "--repo", repo, "serve")
	cmd.Env = testEnv(t)
	cmd.Stdin = strings.NewReader(in.String())
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if ok, err := exitOf(cmd); !ok {
		t.Fatalf("serve did not exit at stdin's end while stderr took nothing (%d answers)", strings.Count(out.String(), "tool_use_id"))
	} else if err != nil {
		t.Fatalf("serve: %v", err)
	}
	if n := strings.Count(out.String(), `"tool_use_id"`); n != calls {
		t.Fatalf("%d answers, want %d", n, calls)
	}
	held, err := io.ReadAll(r) // what the pipe took: serve is gone
	if err != nil {
		t.Fatal(err)
	}
	if last := fmt.Sprintf("id=toolu_%03d", calls-1); strings.Contains(string(held), last) {
		t.Fatalf("the pipe took every line (%d bytes): the test needs more", len(held))
	}
	if n := strings.Count(gittest.Git(t, repo, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)"), "toolu_"); n != calls {
		t.Fatalf("%d commits with a tool_use id, want %d", n, calls)
	}
}

// A Write after Close (the error that ended serve, written by run) waits
// at most flushWait for a stderr that takes nothing, and a later one not
// at all. Before, it went straight to stderr and waited for ever: the
// test failed at its 2-minute bound.
func TestLogWriterLastWordsWaitABoundedTime(t *testing.T) {
	t.Parallel()
	gate := &gatedWriter{open: make(chan struct{})}
	lw := newLogWriter(gate, func(n int) []byte { return fmt.Appendf(nil, "dropped %d\n", n) })
	lw.flushWait = time.Millisecond
	lw.Close() // nothing waited: drain returned
	<-lw.done
	done := make(chan struct{})
	go func() {
		defer close(done)
		fmt.Fprintln(lw, "gitmem: the last words")
		fmt.Fprintln(lw, "gitmem: more")
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute): // a bound for a hang, not a timing
		t.Fatal("a Write after Close waited for a stderr that takes nothing")
	}
	close(gate.open)
	for deadline := time.Now().Add(time.Minute); gate.String() == "" && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if got := gate.String(); got != "gitmem: the last words\n" {
		t.Fatalf("stderr took %q, want the first line only (the second dropped: stderr was stuck)", got)
	}
}

// serve that ends with an error (its --http address taken) while its
// stderr, a pipe nobody reads, is full exits with its error's code.
// Before, run wrote the error line straight to stderr and the process
// never exited: the test failed at its 2-minute bound.
func TestServeEndsWithAnErrorWhileStderrTakesNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a process")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close() // open, never read
	fillPipe(t, w)
	cmd := exec.Command("gitmem", "--repo", filepath.Join(gittest.TempDir(t), "memory"), "serve", "--http", ln.Addr().String())
	cmd.Env = testEnv(t)
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	ok, err := exitOf(cmd)
	if !ok {
		t.Fatal("serve did not exit after its error while stderr took nothing")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure {
		t.Fatalf("serve on a taken address: %v, want exit code %d", err, exitFailure)
	}
}

// exitOf waits for the started cmd to exit and says how; exited is false
// if it had not after 2 minutes (a bound for a hang, not a timing), when
// it is killed.
func exitOf(cmd *exec.Cmd) (exited bool, err error) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return true, err
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		return false, nil
	}
}

// fillPipe writes to w until the pipe holds all it can.
func fillPipe(t *testing.T, w *os.File) {
	t.Helper()
	raw, err := w.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	var werr error
	if err := raw.Write(func(fd uintptr) bool {
		if werr = syscall.SetNonblock(int(fd), true); werr != nil {
			return true
		}
		for {
			if _, err := syscall.Write(int(fd), chunk); err != nil {
				if err != syscall.EAGAIN {
					werr = err
				}
				break
			}
		}
		werr = errors.Join(werr, syscall.SetNonblock(int(fd), false))
		return true
	}); err != nil || werr != nil {
		t.Fatal(err, werr)
	}
}
