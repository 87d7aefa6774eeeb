package main

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// lockedBuffer collects a process's stderr while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// A server with a token: /healthz, /readyz and /metrics answer without
// it, every request and every tool call is one log line, and the metrics
// count what happened.
func TestServerLogsAndMetrics(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	repo := filepath.Join(gittest.TempDir(t), "mem")
	cmd := exec.Command("gitmem", "--repo", repo, "--log-format", "json", "serve", "--http", addr, "--token", "s3cret",
		"--session", "ignored-over-http")
	cmd.Env = testEnv(t)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	base := "http://" + addr
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if res, err := http.Get(base + "/healthz"); err == nil && res.StatusCode != 503 { // 503: starting
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("/healthz without the token: %d", res.StatusCode)
			}
			break
		} else if err == nil {
			res.Body.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", stderr.String())
		}
	}
	if code, body := get(t, base+"/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz: %d %q", code, body)
	}
	post := func(token, body string) int {
		req, _ := http.NewRequest("POST", base+"/v1/tool_use", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Gitmem-Agent", "planner")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := post("wrong", `{}`); code != 401 {
		t.Errorf("wrong token: %d", code)
	}
	for i, input := range []string{
		`{"command":"create","path":"/memories/a.md","file_text":"x\n"}`,
		`{"command":"create","path":"/memories/a.md","file_text":"again"}`,
		`{"command":"view","path":"/memories/a.md"}`,
		`{"command":"frobnicate"}`,
	} {
		if code := post("s3cret", fmt.Sprintf(`{"type":"tool_use","id":"toolu_%d","name":"memory","input":%s}`, i, input)); code != 200 {
			t.Fatalf("call %d: %d", i, code)
		}
	}
	code, metrics := get(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics without the token: %d", code)
	}
	for _, want := range []string{
		`gitmem_tool_calls_total{command="create",outcome="ok"} 1`,
		`gitmem_tool_calls_total{command="create",outcome="error"} 1`,
		`gitmem_tool_calls_total{command="view",outcome="ok"} 1`,
		`gitmem_tool_calls_total{command="other",outcome="error"} 1`,
		`gitmem_commit_duration_seconds_count 1`,
		`gitmem_history_index_lag_commits `,
		`gitmem_loose_objects `,
		`gitmem_gc_runs_total{result="ok",trigger="background"} 0`,
		`go_goroutines `,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	if m := regexp.MustCompile(`(?m)^gitmem_repository_size_bytes (\S+)$`).FindStringSubmatch(metrics); m == nil {
		t.Error("/metrics has no repository size")
	} else if size, _ := strconv.ParseFloat(m[1], 64); size < 1000 {
		t.Errorf("repository size %v", size)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}

	// One JSON line per request and per call.
	var requests, calls []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		switch rec["msg"] {
		case "http request":
			requests = append(requests, rec)
		case "tool call":
			calls = append(calls, rec)
		}
	}
	var posted int
	for _, r := range requests {
		if r["method"] == "POST" && r["path"] == "/v1/tool_use" && r["status"] == 200.0 && r["bytes"].(float64) > 0 && r["duration"].(float64) > 0 {
			posted++
		}
	}
	if posted != 4 || len(requests) < 8 {
		t.Errorf("%d access-log lines, %d of them for the calls:\n%s", len(requests), posted, stderr.String())
	}
	if len(calls) != 4 {
		t.Fatalf("%d tool call lines", len(calls))
	}
	first := calls[0]
	if first["id"] != "toolu_0" || first["command"] != "create" || first["path"] != "/memories/a.md" || first["outcome"] != "ok" ||
		first["agent"] != "planner" || !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(fmt.Sprint(first["commit"])) || first["level"] != "INFO" {
		t.Errorf("tool call line: %v", first)
	}
	if calls[1]["outcome"] != "error" || calls[1]["commit"] != nil {
		t.Errorf("refused call line: %v", calls[1])
	}
}

// looseObject writes a loose object whose hash starts with 17, the folder
// gitmem counts to estimate the loose objects (one there: an estimate of
// 256), and returns its hash.
func looseObject(t *testing.T, repo string, seed int) string {
	t.Helper()
	for i := 0; ; i++ {
		data := fmt.Sprintf("filler %d %d\n", seed, i)
		if sum := sha1.Sum([]byte(fmt.Sprintf("blob %d\x00%s", len(data), data))); sum[0] == 0x17 {
			return strings.TrimSpace(gittest.GitIn(t, repo, data, "hash-object", "-w", "--stdin"))
		}
	}
}

func looseCount(t *testing.T, repo string) string {
	return regexp.MustCompile(`(?m)^count: \d+$`).FindString(gittest.Git(t, repo, "count-objects", "-v"))
}

// A short-lived server packs too: at start (in the background: calls are
// served meanwhile) and at exit, when the loose objects passed
// --gc-loose.
func TestServePacksAtStartAndExit(t *testing.T) {
	t.Parallel()
	repo := filepath.Join(gittest.TempDir(t), "mem")
	env := testEnv(t)
	init := exec.Command("gitmem", "--repo", repo, "init")
	init.Env = env
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	looseObject(t, repo, 1)
	cmd := exec.Command("gitmem", "--repo", repo, "serve", "--gc-loose", "256")
	cmd.Env = env
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, `{"type":"tool_use","id":"t1","name":"memory","input":{"command":"view","path":"/memories"}}`)
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); !strings.Contains(stderr.String(), `trigger=start`) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := looseCount(t, repo); got != "count: 0" {
		t.Errorf("after start: %s\n%s", got, stderr.String())
	}
	looseObject(t, repo, 2)
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}
	if got := looseCount(t, repo); got != "count: 0" {
		t.Errorf("after exit: %s\n%s", got, stderr.String())
	}
	for _, trigger := range []string{"start", "exit"} {
		if !strings.Contains(stderr.String(), `msg="packed loose objects" trigger=`+trigger) {
			t.Errorf("no log line for the pack at %s:\n%s", trigger, stderr.String())
		}
	}
}
