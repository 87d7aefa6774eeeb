package bench

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// A backend executes memory tool calls. call returns an error when the
// call failed (a tool error counts: the benchmark's calls all succeed).
// Backends behind a server are safe for concurrent calls.
type backend interface {
	call(op Op) error
	close() error
}

var idSeq atomic.Int64

// toolUse is the tool_use block of op, with a fresh id.
func toolUse(op Op) []byte {
	return toolUseBlock(fmt.Sprintf("toolu_bench_%d", idSeq.Add(1)), op.Input)
}

func toolUseBlock(id string, input map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"type": "tool_use", "id": id, "name": "memory", "input": input})
	return b
}

// Result is a tool_result's content and error flag.
type Result struct {
	Content string `json:"content"`
	IsError bool   `json:"is_error"`
}

func (r Result) err(op Op) error {
	if r.IsError {
		return fmt.Errorf("%s %v: %s", op.Cmd, op.Input["path"], r.Content)
	}
	return nil
}

// child is a server process the benchmark started; its stderr is kept
// for the error message if it fails.
type child struct {
	cmd    *exec.Cmd
	stderr *tailBuffer
}

func startChild(cmd *exec.Cmd) (*child, error) {
	c := &child{cmd: cmd, stderr: &tailBuffer{}}
	if cmd.Stderr == nil {
		cmd.Stderr = c.stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", filepath.Base(cmd.Path), err)
	}
	return c, nil
}

// settle waits until the child has used no CPU for idleFor (at most
// limit), and returns how long after the call it last used some (wall),
// and the CPU time it used meanwhile (cpu): the work it went on doing
// after its last answer (a backlog written in the background). wall
// holds the pauses before that work too (gitmem lets the writer lock go,
// with a checkpoint, once idle for 200 ms): cpu is the work. Zero where
// the system does not tell a process's CPU time.
func (c *child) settle(limit time.Duration) (wall, cpu time.Duration) {
	pid := c.cmd.Process.Pid
	return settleTicks(limit, func() (int64, bool) { return cpuTicks(pid) }, time.Now, time.Sleep)
}

// settleTicks is settle over ticks, the process's CPU time in clock
// ticks, looked at every 20 ms (of the clock now and sleep).
func settleTicks(limit time.Duration, ticks func() (int64, bool), now func() time.Time, sleep func(time.Duration)) (wall, cpu time.Duration) {
	const poll, idleFor = 20 * time.Millisecond, 300 * time.Millisecond
	t0 := now()
	first, ok := ticks()
	if !ok {
		return 0, 0
	}
	last := first
	busy := t0 // when a change of the CPU time was last seen
	for t := t0; t.Sub(busy) < idleFor && t.Sub(t0) < limit; t = now() {
		sleep(poll)
		if v, ok := ticks(); ok && v != last {
			last, busy = v, now()
		}
	}
	return busy.Sub(t0), time.Duration(last-first) * clockTick
}

// stop ends the child: SIGINT (a server finishes what is in flight and
// exits).
func (c *child) stop() error {
	c.cmd.Process.Signal(os.Interrupt)
	return c.wait("SIGINT")
}

// wait waits for the child to exit after it was told to (by what), and
// kills it after 30 s.
func (c *child) wait(what string) error {
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s did not exit within 30 s of %s", filepath.Base(c.cmd.Path), what)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() {
		return nil // ended by our signal
	}
	if err != nil {
		return fmt.Errorf("%s: %v: %s", filepath.Base(c.cmd.Path), err, c.stderr.String())
	}
	return nil
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// lineServer speaks JSON lines to a child: one tool_use block per line
// in, one tool_result per line out (gitmem serve, and the TypeScript
// harness in stdio mode). One call at a time.
type lineServer struct {
	*child
	mu  sync.Mutex
	in  io.WriteCloser
	out *bufio.Scanner
}

func startLineServer(cmd *exec.Cmd) (*lineServer, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c, err := startChild(cmd)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 64<<20)
	return &lineServer{child: c, in: in, out: sc}, nil
}

func (s *lineServer) call(op Op) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.in.Write(append(toolUse(op), '\n')); err != nil {
		return fmt.Errorf("write to %s: %v: %s", filepath.Base(s.cmd.Path), err, s.stderr.String())
	}
	if !s.out.Scan() {
		return fmt.Errorf("%s ended: %v: %s", filepath.Base(s.cmd.Path), s.out.Err(), s.stderr.String())
	}
	var r Result
	if err := json.Unmarshal(s.out.Bytes(), &r); err != nil {
		return fmt.Errorf("%s answered %q: %v", filepath.Base(s.cmd.Path), s.out.Text(), err)
	}
	return r.err(op)
}

func (s *lineServer) close() error {
	s.in.Close() // end of input: the server exits
	return s.wait("the end of its input")
}

// httpServer is a child serving POST /v1/tool_use on loopback (gitmem
// serve --http, the TypeScript harness in http mode). It announces its
// address on a line of its stdout or stderr.
type httpServer struct {
	*child
	url    string
	client *http.Client
}

// startHTTPServer starts cmd and waits for the line that names its
// address: host:port, right after prefix.
func startHTTPServer(cmd *exec.Cmd, fromStderr bool, prefix string) (*httpServer, error) {
	var pipe io.ReadCloser
	var err error
	if fromStderr {
		pipe, err = cmd.StderrPipe()
	} else {
		pipe, err = cmd.StdoutPipe()
	}
	if err != nil {
		return nil, err
	}
	c, err := startChild(cmd)
	if err != nil {
		return nil, err
	}
	tail := c.stderr // the announcing stream is kept there too
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		found := false
		for sc.Scan() {
			line := sc.Text()
			tail.Write([]byte(line + "\n"))
			if _, after, ok := strings.Cut(line, prefix); ok && !found {
				found = true
				hostPort, _, _ := strings.Cut(strings.Fields(after + " ")[0], "/")
				addr <- hostPort
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			c.cmd.Wait()
			return nil, fmt.Errorf("%s ended before serving: %s", filepath.Base(cmd.Path), tail.String())
		}
		tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, DisableCompression: true}
		return &httpServer{child: c, url: "http://" + a + "/v1/tool_use", client: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}, nil
	case <-time.After(10 * time.Minute):
		c.cmd.Process.Kill()
		c.cmd.Wait()
		return nil, fmt.Errorf("%s did not start serving within 10 minutes: %s", filepath.Base(cmd.Path), tail.String())
	}
}

func (s *httpServer) call(op Op) error {
	_, err := s.timedCall(op)
	return err
}

// timedCall is call, also returning the time the server says it took
// (its Server-Timing header; -1 when it sent none).
func (s *httpServer) timedCall(op Op) (time.Duration, error) {
	r, took, err := s.post(toolUse(op))
	if err == nil {
		err = r.err(op)
	}
	return took, err
}

// post sends one tool_use block and returns its tool_result and the
// server's time over it (see timedCall).
func (s *httpServer) post(block []byte) (r Result, took time.Duration, err error) {
	return s.postTo(s.url, "", block)
}

// postTo is post to url, with a bearer token unless token is "".
func (s *httpServer) postTo(url, token string, block []byte) (r Result, took time.Duration, err error) {
	req, err := http.NewRequest("POST", url, bytes.NewReader(block))
	if err != nil {
		return r, -1, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := s.client.Do(req)
	if err != nil {
		return r, -1, err
	}
	defer res.Body.Close()
	took = serverTiming(res.Header.Get("Server-Timing"))
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return r, took, err
	}
	if res.StatusCode != http.StatusOK {
		return r, took, fmt.Errorf("HTTP %d: %s", res.StatusCode, bytes.TrimSpace(body))
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, took, fmt.Errorf("answer %q: %v", body, err)
	}
	return r, took, nil
}

// serverTiming reads "call;dur=MS" (-1: no such header).
func serverTiming(h string) time.Duration {
	_, ms, ok := strings.Cut(h, "dur=")
	f, err := strconv.ParseFloat(ms, 64)
	if !ok || err != nil || f < 0 {
		return -1
	}
	return time.Duration(f * float64(time.Millisecond))
}

// Server is gitmem serve --http in a child process, for tests that load
// it the way clients do.
type Server struct{ s *httpServer }

// gitmemAnnounce precedes the address in the line gitmem serve --http
// logs when it is ready.
const gitmemAnnounce = "serving the memory tool on http://"

// StartServer starts cmd, a gitmem serve --http on a loopback address
// (port 0 picks a free one), and returns once it serves.
func StartServer(cmd *exec.Cmd) (*Server, error) {
	s, err := startHTTPServer(cmd, true, gitmemAnnounce)
	if err != nil {
		return nil, err
	}
	return &Server{s}, nil
}

// Call runs one memory tool call under the tool_use id id.
func (s *Server) Call(id string, input map[string]any) (Result, error) {
	r, _, err := s.s.post(toolUseBlock(id, input))
	return r, err
}

// Close stops the server as an operator would (SIGINT): it finishes the
// calls in flight, checkpoints and exits.
func (s *Server) Close() error { return s.s.close() }

func (s *httpServer) close() error {
	s.client.CloseIdleConnections()
	return s.stop()
}

//go:embed sdk_backend.js
var sdkBackendJS []byte

// tsCommand runs the TypeScript SDK's file backend on base (its
// memories/ folder) in mode "stdio" or "http", with the SDK from
// sdkDir/node_modules.
func tsCommand(ctx context.Context, sdkDir, scratch, mode, base string) (*exec.Cmd, error) {
	script := filepath.Join(scratch, "sdk_backend.js")
	if err := os.WriteFile(script, sdkBackendJS, 0o600); err != nil {
		return nil, err
	}
	return nodeCommand(ctx, sdkDir, script, mode, base), nil
}

// nodeCommand runs script with node, the SDK found in sdkDir/node_modules.
func nodeCommand(ctx context.Context, sdkDir, script string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(sdkDir, "node_modules"))
	return cmd
}

// applyFS runs op on plain files under dir/memories, as a backend
// without the memory tool would, and returns the repository paths it
// changed.
func applyFS(dir string, op Op) ([]string, error) {
	paths := op.paths()
	abs := func(rel string) string { return filepath.Join(dir, "memories", filepath.FromSlash(rel)) }
	repo := func(rel string) string { return "memories/" + rel }
	p := abs(paths[0])
	switch op.Cmd {
	case "view":
		_, err := os.ReadFile(p)
		return nil, err
	case "create":
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, err
		}
		return []string{repo(paths[0])}, os.WriteFile(p, []byte(op.Input["file_text"].(string)), 0o600)
	case "str_replace", "insert":
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		s := string(data)
		if op.Cmd == "str_replace" {
			old := op.Input["old_str"].(string)
			if strings.Count(s, old) != 1 {
				return nil, fmt.Errorf("str_replace %s: old_str %q occurs %d times", paths[0], old, strings.Count(s, old))
			}
			s = strings.Replace(s, old, op.Input["new_str"].(string), 1)
		} else {
			lines := strings.Split(s, "\n")
			at := op.Input["insert_line"].(int)
			text := strings.TrimSuffix(op.Input["insert_text"].(string), "\n")
			s = strings.Join(append(lines[:at:at], append([]string{text}, lines[at:]...)...), "\n")
		}
		return []string{repo(paths[0])}, os.WriteFile(p, []byte(s), 0o600)
	case "delete":
		return []string{repo(paths[0])}, os.Remove(p)
	case "rename":
		to := abs(paths[1])
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			return nil, err
		}
		return []string{repo(paths[0]), repo(paths[1])}, os.Rename(p, to)
	}
	return nil, fmt.Errorf("unknown command %q", op.Cmd)
}

func commitMessage(op Op) string {
	return fmt.Sprintf("memory: %s %v\n\nTool-Use-Id: toolu_bench_%d\nMemory-Command: %s\n", op.Cmd, op.Input["path"], idSeq.Add(1), op.Cmd)
}

// gitCLI commits each change with `git add` and `git commit`. Commits are
// made durable (core.fsync=committed: objects and refs are fsynced;
// git's default fsyncs neither for a loose commit).
type gitCLI struct{ dir string }

func (g *gitCLI) call(op Op) error {
	paths, err := applyFS(g.dir, op)
	if err != nil || len(paths) == 0 {
		return err
	}
	if _, err := gitOutput(g.dir, append([]string{"add", "-A", "--"}, paths...)...); err != nil {
		return err
	}
	_, err = gitOutput(g.dir, "-c", "core.fsync=committed", "-c", "gc.auto=0", "-c", "user.name=bench", "-c", "user.email=bench@gitmem.invalid",
		"commit", "-q", "--no-verify", "-m", commitMessage(op))
	return err
}

func (g *gitCLI) close() error { return nil }

// goGit commits each change with go-git's Worktree.Add (Remove for a
// deleted path) and Commit. go-git writes without fsync.
type goGit struct {
	dir string
	wt  *git.Worktree
}

func openGoGit(dir string) (*goGit, error) {
	r, err := git.PlainOpen(dir)
	if err != nil {
		return nil, err
	}
	wt, err := r.Worktree()
	if err != nil {
		return nil, err
	}
	return &goGit{dir: dir, wt: wt}, nil
}

func (g *goGit) call(op Op) error {
	paths, err := applyFS(g.dir, op)
	if err != nil || len(paths) == 0 {
		return err
	}
	for _, p := range paths {
		if _, err := os.Lstat(filepath.Join(g.dir, filepath.FromSlash(p))); err == nil {
			_, err = g.wt.Add(p)
		} else {
			_, err = g.wt.Remove(p)
		}
		if err != nil {
			return fmt.Errorf("go-git %s: %w", p, err)
		}
	}
	sig := &object.Signature{Name: "bench", Email: "bench@gitmem.invalid", When: time.Now()}
	_, err = g.wt.Commit(commitMessage(op), &git.CommitOptions{Author: sig, Committer: sig})
	return err
}

func (g *goGit) close() error { return nil }
