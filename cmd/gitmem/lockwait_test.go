//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A command that writes, waiting for the writer lock another process
// holds and recorded nothing about (its checkpoints do not fail: a gc,
// a redaction, here the test), says so a second into the wait unless
// --lock-wait (or GITMEM_LOCK_WAIT) ends it before, and gives up with
// exit code 5, nothing changed. On Linux it names the process holding
// the lock, as /proc/locks does (it named none). (It waited silently for
// as long as the lock was held.)
func TestCommandGivesUpOnAHeldLock(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	repo := filepath.Join(gittest.TempDir(t), "memory")
	gitmemOut(t, env, "--repo", repo, "init")
	head := gittest.Git(t, repo, "rev-parse", "HEAD")
	f, err := os.OpenFile(filepath.Join(repo, ".git", "gitmem", "lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	// The kernel names the holder (Linux: /proc/locks), this test.
	held := "another process holds it"
	if runtime.GOOS == "linux" {
		comm, _ := os.ReadFile("/proc/self/comm")
		held += fmt.Sprintf(" (pid %d, %s)", os.Getpid(), strings.TrimSpace(string(comm)))
	}
	gaveUp := func(wait string) string {
		return "gitmem: gave up after " + wait + " waiting for the writer lock of this memory: " + held + "; nothing was changed (a serve lets the lock go within a second of a command asking for it; a gc, redaction or fsck --repair keeps it until done): run the command again, or give it longer with --lock-wait\n"
	}
	for _, tc := range []struct {
		args, env []string
		want      string
	}{
		{[]string{"--lock-wait", "1500ms", "gc"}, nil,
			"gitmem: waiting for the writer lock of this memory: " + held + "; gives up after 1.5s (--lock-wait)\n" + gaveUp("1.5s")},
		{[]string{"fsck", "--repair"}, []string{"GITMEM_LOCK_WAIT=200ms"}, gaveUp("200ms")}, // over before a second
	} {
		stdout, stderr, code := gitmemRun(t, append(env, tc.env...), append([]string{"--repo", repo}, tc.args...)...)
		if code != exitLocked || stdout != "" || stderr != tc.want {
			t.Errorf("gitmem %s: exit %d\nstdout %q\nstderr %q\nwant   %q", strings.Join(tc.args, " "), code, stdout, stderr, tc.want)
		}
	}
	if got := gittest.Git(t, repo, "rev-parse", "HEAD"); got != head {
		t.Fatalf("HEAD moved from %s to %s", head, got)
	}
	// A reading command asks the holder to write what it holds back
	// (gitmem.Open's catchUp); one that does not within --lock-wait
	// leaves it reading what git's files hold, with a warning.
	stdout, stderr, code := gitmemRun(t, env, "--repo", repo, "--lock-wait", "200ms", "log")
	wantErr := "gitmem: warning: acknowledged changes may not be shown: the writer lock of this memory: " + held + ", and it did not let it go within 200ms of being asked to write what it holds back (a serve does at once; a gc, redaction or fsck --repair keeps it until done, holding nothing back)\n"
	if code != exitOK || !strings.HasPrefix(stdout, head[:7]+" ") || stderr != wantErr {
		t.Errorf("gitmem log beside the held lock: exit %d\nstdout %q, want the commit %s\nstderr %q\nwant   %q", code, stdout, head[:7], stderr, wantErr)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if _, stderr, code := gitmemRun(t, env, "--repo", repo, "--lock-wait", "1500ms", "gc"); code != exitOK {
		t.Fatalf("gitmem gc once the lock is free: exit %d\n%s", code, stderr)
	}
}

// gitmemRun runs gitmem with args (a bound for a hang, not a timing:
// the command is killed after a minute) and returns its stdout, its
// stderr and its exit code.
func gitmemRun(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "gitmem", args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	// Errorf, not Fatalf: the full-disk tests run it in goroutines. The
	// exit code -1 then fails the caller's checks too.
	if ctx.Err() != nil {
		t.Errorf("gitmem %s waited until killed:\n%s", strings.Join(args, " "), errOut.String())
		return out.String(), errOut.String(), -1
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Errorf("gitmem %s: %v", strings.Join(args, " "), err)
		return out.String(), errOut.String(), -1
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// A holder of the writer lock that recorded nothing may be any program
// (flock .git/gitmem/lock sleep 100): the lock file says nothing of its
// holder. It is "another process", with the name the kernel gives it
// when it does; only a record, which gitmem alone writes, says gitmem.
// (Every holder was "another gitmem process".)
func TestHeldBySaysGitmemOnlyWhenItKnows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		h    gitmem.Holder
		want string
	}{
		{gitmem.Holder{}, "another process holds it"},
		{gitmem.Holder{Locker: 42, LockerName: "flock"}, "another process holds it (pid 42, flock)"},
		{gitmem.Holder{Pid: 7, Process: "gitmem serve", Since: time.Unix(0, 0), Failing: "write: no space left on device"}, "another gitmem process holds it (pid 7, gitmem serve): "},
	} {
		if got := heldBy(tc.h); !strings.HasPrefix(got, tc.want) || tc.h.Pid == 0 && got != tc.want {
			t.Errorf("heldBy(%+v) = %q, want %q", tc.h, got, tc.want)
		}
	}
}

// What a holder recorded (a file anyone who can write .git can forge, a
// failure that names a memory file) is printed with its control and
// bidirectional characters escaped, and cut: no escape sequence, line
// break or reordering reaches the terminal.
func TestHeldByEscapesTheRecord(t *testing.T) {
	t.Parallel()
	h := gitmem.Holder{Pid: 7, Process: "gitmem serve\x1b[2J\x1b]0;pwned\x07", Since: time.Unix(0, 0),
		Failing: "no space\nleft \u202etxt.exe\x1b[31mRED" + strings.Repeat("x", 2000)}
	got := heldBy(h)
	if strings.ContainsFunc(got, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\u202e' }) {
		t.Fatalf("raw: %q", got)
	}
	if !strings.Contains(got, `"gitmem serve\x1b[2J\x1b]0;pwned\a"`) || !strings.Contains(got, `"no space\nleft \u202etxt.exe\x1b[31mRED`) || len(got) > 1000 {
		t.Fatalf("%q", got)
	}
	if got := heldBy(gitmem.Holder{Pid: 7, Process: "gitmem serve", Failing: "write: no space left on device"}); !strings.Contains(got, "(pid 7, gitmem serve)") || !strings.Contains(got, "(write: no space left on device)") {
		t.Fatalf("a plain record is quoted: %q", got)
	}
	// A process names itself (/proc/PID/comm): escaped too.
	if got := heldBy(gitmem.Holder{Locker: 7, LockerName: "gc\x1b[2J"}); got != `another process holds it (pid 7, "gc\x1b[2J")` {
		t.Fatalf("the kernel's holder: %q", got)
	}
}

// --lock-wait bounds a wait, never a lock that is free: one over before
// the first look at the lock (1ns) still takes a free lock (it gave up,
// exit 5, with no other process at all). A negative one is refused as
// any bad value is, and the help names GITMEM_LOCK_WAIT as it names the
// other globals' variables.
func TestLockWaitTinyNegativeAndHelp(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	repo := filepath.Join(gittest.TempDir(t), "memory")
	gitmemOut(t, env, "--repo", repo, "init")
	for _, args := range [][]string{{"--lock-wait", "1ns", "gc"}, {"--lock-wait", "1ns", "fsck", "--repair"}} {
		if _, stderr, code := gitmemRun(t, env, append([]string{"--repo", repo}, args...)...); code != exitOK {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
	for _, tc := range []struct{ args, env []string }{
		{[]string{"--lock-wait", "-1s", "gc"}, nil},
		{[]string{"gc"}, []string{"GITMEM_LOCK_WAIT=-1s"}},
	} {
		if _, stderr, code := gitmemRun(t, append(env, tc.env...), append([]string{"--repo", repo}, tc.args...)...); code != exitUsage || !strings.Contains(stderr, "--lock-wait cannot be negative") {
			t.Errorf("%v %v: exit %d, %s", tc.env, tc.args, code, stderr)
		}
	}
	if stdout, _, _ := gitmemRun(t, env, "gc", "--help"); !strings.Contains(stdout, "[$GITMEM_LOCK_WAIT]") {
		t.Errorf("gc --help:\n%s", stdout)
	}
}

// serve's start waiting for the writer lock another process holds says
// so a second into the wait, and answers HTTP meanwhile: /healthz and
// /readyz 503 at once (a tool call waits its 5 s for the start, then 503
// with Retry-After, changing nothing: TestHTTPCallDuringTheStartWaitsThen503,
// with a shorter wait); once the lock is free, a call is served. (It
// listened without answering: every connection hung until the lock was
// let go.)
func TestServeStartSaysItWaitsForTheLock(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	repo := filepath.Join(gittest.TempDir(t), "memory")
	gitmemOut(t, env, "--repo", repo, "init")
	head := gittest.Git(t, repo, "rev-parse", "HEAD")
	f, err := os.OpenFile(filepath.Join(repo, ".git", "gitmem", "lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound for a hang
	defer cancel()
	cmd := exec.CommandContext(ctx, "gitmem", "--repo", repo, "serve", "--http", "127.0.0.1:0")
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stderr)
	line := func(what string, re *regexp.Regexp) []string {
		t.Helper()
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				return m
			}
			t.Logf("serve: %s", sc.Text())
		}
		t.Fatalf("serve's log ended without %s", what)
		return nil
	}
	base := line("saying it waits for the writer lock", regexp.MustCompile(
		`waiting for the writer lock of this memory: another process holds it.*; serve waits as long as it takes; meanwhile (http://127\.0\.0\.1:[0-9]+) answers 503 \(starting\)`))[1]
	get := func(path string) (int, http.Header, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(body)
	}
	call := `{"type":"tool_use","id":"toolu_01","name":"memory","input":{"command":"create","path":"/memories/a.md","file_text":"a\n"}}`
	post := func() (int, http.Header, string) {
		t.Helper()
		resp, err := http.Post(base+"/v1/tool_use", "application/json", strings.NewReader(call))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(body)
	}
	for _, probe := range []string{"/healthz", "/readyz"} {
		if code, _, body := get(probe); code != 503 || body != "not ready: starting\n" {
			t.Errorf("GET %s while the start waits: %d %q, want 503 \"not ready: starting\\n\"", probe, code, body)
		}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	line("serving the memory tool", regexp.MustCompile(`serving the memory tool on `+regexp.QuoteMeta(base)+`/v1/tool_use`))
	if got := gittest.Git(t, repo, "rev-parse", "HEAD"); got != head {
		t.Fatalf("HEAD moved from %s to %s during the start", head, got)
	}
	if code, _, body := post(); code != 200 || !strings.Contains(body, `"tool_use_id":"toolu_01"`) || strings.Contains(body, `"is_error":true`) {
		t.Fatalf("the call once the start is done: %d %s", code, body)
	}
	if code, _, body := get("/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("GET /readyz once started: %d %q", code, body)
	}
}

// A request that comes during serve's start (httpServer before serve)
// waits for it up to startWait, then is answered 503 with Retry-After and
// x-should-retry, changing nothing; once the start is done, requests reach
// the routes. Here with a startWait of 50 ms (serve's is 5 s; the probes,
// answered at once: TestServeStartSaysItWaitsForTheLock).
func TestHTTPCallDuringTheStartWaitsThen503(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startHTTP(ctx, ln, 50*time.Millisecond)
	defer s.close()
	base := "http://" + ln.Addr().String()
	client := &http.Client{Timeout: time.Minute} // a bound for a hang
	do := func(method, path string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(`{}`))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(body)
	}
	code, h, body := do("POST", "/v1/tool_use")
	if want := `{"error":"the server is starting; nothing was changed; retry after 1 s"}` + "\n"; code != 503 || body != want || h.Get("Retry-After") != "1" || h.Get("x-should-retry") != "true" {
		t.Errorf("a call during the start: %d %q (Retry-After %q, x-should-retry %q), want 503 %q, 1, true", code, body, h.Get("Retry-After"), h.Get("x-should-retry"), want)
	}
	served := make(chan error, 1)
	go func() {
		served <- s.serve(ctx, base, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "routes\n") }), slog.New(slog.DiscardHandler))
	}()
	<-s.ready
	if code, _, body := do("POST", "/v1/tool_use"); code != 200 || body != "routes\n" {
		t.Errorf("a call once started: %d %q", code, body)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
