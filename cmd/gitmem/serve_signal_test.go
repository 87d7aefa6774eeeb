package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/storesapi"
)

// Every serve mode takes SIGHUP without dying (docs/operations.md: kill
// -HUP the server): it reloads what it has to reload, the token file of
// serve --stores --tokens, and else logs that there is nothing to reload;
// it then goes on serving and still shuts down gracefully.
func TestEveryServeTakesSIGHUP(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	const call = `{"type":"tool_use","id":"toolu_1","name":"memory","input":{"command":"view","path":"/memories"}}` + "\n"
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"
	for _, tc := range []struct {
		name   string
		args   []string // after serve; ADDR is a free loopback port
		stdin  string   // a line that gets one line back (stdio modes)
		logged string   // what the SIGHUP logs
	}{
		{"stdio", nil, call, "nothing to reload"},
		{"mcp", []string{"--mcp"}, initialize, "nothing to reload"},
		{"http", []string{"--http", "ADDR"}, "", "nothing to reload"},
		{"http-sync", []string{"--http", "ADDR", "--sync", "origin", "--sync-every", "1h"}, "", "nothing to reload"},
		{"mcp-http", []string{"--mcp-http", "ADDR"}, "", "nothing to reload"},
		{"stores", []string{"--http", "ADDR", "--stores", "STORES"}, "", "nothing to reload"},
		{"stores-tokens", []string{"--http", "ADDR", "--stores", "STORES", "--tokens", "TOKENS"}, "", "level=INFO msg=\"SIGHUP: reloaded 1 token(s)\""},
		// A reload that fails is an ERROR: one who keeps only problems
		// (--log-level warn) sees it. (It was INFO.)
		{"stores-tokens-broken", []string{"--http", "ADDR", "--stores", "STORES", "--tokens", "TOKENS"}, "", "level=ERROR msg=\"SIGHUP: the token file was not reloaded, the old tokens stay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := gittest.TempDir(t)
			repo := filepath.Join(tmp, "memory")
			tokens := filepath.Join(tmp, "tokens.json")
			// The memory and the token file are made in this process, as
			// gitmem init, remote add and token add make them (a process
			// each was a quarter second of CPU).
			if strings.Contains(tc.name, "sync") {
				r, _, err := gitmem.Init(context.Background(), repo, gitmem.Options{Logf: t.Logf})
				if err != nil {
					t.Fatal(err)
				}
				gittest.Git(t, tmp, "init", "-q", "--bare", filepath.Join(tmp, "shared.git"))
				if err := errors.Join(r.AddRemote("origin", filepath.Join(tmp, "shared.git")), r.Close()); err != nil {
					t.Fatal(err)
				}
			}
			if strings.Contains(tc.name, "tokens") {
				if err := editTokens(tokens, func(f *policy.TokenFile) error {
					f.Tokens = append(f.Tokens, policy.Token{Name: "bot", SHA256: storesapi.HashToken("s3cret"), Stores: []string{"*"}, Access: policy.ReadWrite, Role: policy.Agent})
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			args := []string{"--repo", repo, "serve"}
			for _, a := range tc.args {
				a = strings.NewReplacer("ADDR", addr, "STORES", filepath.Join(tmp, "stores"), "TOKENS", tokens).Replace(a)
				args = append(args, a)
			}
			cmd := exec.Command("gitmem", args...)
			cmd.Env = env
			stdin, _ := cmd.StdinPipe()
			stdoutPipe, _ := cmd.StdoutPipe()
			stderrPipe, _ := cmd.StderrPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			logged := make(chan string, 100)
			go func() {
				s := bufio.NewScanner(stderrPipe)
				for s.Scan() {
					logged <- s.Text()
				}
				close(logged)
			}()
			stdout := bufio.NewReader(stdoutPipe)
			// alive answers one request: a line on stdin, or GET /healthz.
			alive := func(when string) {
				t.Helper()
				if tc.stdin != "" {
					io.WriteString(stdin, tc.stdin)
					if _, err := stdout.ReadString('\n'); err != nil {
						t.Fatalf("%s: no answer on stdout: %v", when, err)
					}
					return
				}
				for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					res, err := http.Get("http://" + addr + "/healthz")
					if err == nil {
						res.Body.Close()
						if res.StatusCode == http.StatusOK {
							return
						}
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: no answer on %s: %v", when, addr, err)
					}
				}
			}
			alive("at start")
			if strings.HasSuffix(tc.name, "broken") {
				if err := os.WriteFile(tokens, []byte("{"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			timeout := time.After(20 * time.Second)
		wait:
			for {
				select {
				case l, ok := <-logged:
					if !ok {
						t.Fatalf("serve %s ended at SIGHUP: %v", strings.Join(tc.args, " "), cmd.Wait())
					}
					if strings.Contains(l, "SIGHUP: ") {
						if !strings.Contains(l, tc.logged) {
							t.Errorf("SIGHUP logged %q, want %q", l, tc.logged)
						}
						break wait
					}
				case <-timeout:
					t.Fatal("SIGHUP logged nothing")
				}
			}
			alive("after SIGHUP")
			if tc.stdin != "" {
				stdin.Close()
			} else {
				cmd.Process.Signal(syscall.SIGTERM)
			}
			go func() {
				for range logged {
				}
			}()
			io.Copy(io.Discard, stdout)
			if err := cmd.Wait(); err != nil {
				t.Errorf("serve %s after SIGHUP: %v", strings.Join(tc.args, " "), err)
			}
		})
	}
}
