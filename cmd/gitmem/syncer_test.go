package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

// A remote that hangs never holds up a tool call; the failure shows in
// /healthz, and once the remote works the sync catches up.
func TestBackgroundSyncNeverBlocksCalls(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
	// A git:// server that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 100)
	var conns []net.Conn
	var cmu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			cmu.Lock()
			conns = append(conns, c)
			cmu.Unlock()
			accepted <- struct{}{}
		}
	}()
	defer func() {
		cmu.Lock()
		for _, c := range conns {
			c.Close()
		}
		cmu.Unlock()
	}()

	dir := filepath.Join(gittest.TempDir(t), "memory")
	repo, _, err := gitmem.Init(context.Background(), dir, gitmem.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	if err := repo.AddRemote("origin", fmt.Sprintf("git://%s/memory.git", ln.Addr())); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	var lmu sync.Mutex
	s := &syncer{repo: repo, remote: "origin", every: 50 * time.Millisecond, timeout: 300 * time.Millisecond, now: time.Now,
		logf: func(f string, a ...any) { lmu.Lock(); fmt.Fprintf(&logs, f+"\n", a...); lmu.Unlock() }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.run(ctx) }()
	defer func() { cancel(); <-done }()

	h := handler.New(repo, handler.Options{Limits: policy.DefaultLimits})
	srv := httptest.NewServer(h.HTTP(handler.HTTPOptions{Health: s.health}))
	defer srv.Close()
	<-accepted // a sync is waiting on the remote now
	for i := range 5 {
		res := make(chan handler.Result, 1)
		go func() {
			res <- h.HandleJSON(context.Background(), handler.Caller{}, fmt.Appendf(nil, `{"type":"tool_use","id":"toolu_%d","name":"memory","input":{"command":"create","path":"/memories/f%d.md","file_text":"x\n"}}`, i, i))
		}()
		select {
		case r := <-res:
			if r.IsError {
				t.Fatalf("a call failed while the remote hangs: %s", r.Content)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a call waited on the hanging remote")
		}
	}
	health := func() string {
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	var body string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if body = health(); strings.Contains(body, "sync-last-error:") {
			break
		}
	}
	for _, want := range []string{"ok\n", "sync-remote: origin\n", "sync-last-success: never\n", "sync-unpushed: 6\n", "sync-failures: ", "sync-last-error: "} {
		if !strings.Contains(body, want) {
			t.Errorf("/healthz lacks %q:\n%s", want, body)
		}
	}
	lmu.Lock()
	if !strings.Contains(logs.String(), "sync with origin failed (1 in a row; next try in") {
		t.Errorf("the failure is not logged:\n%s", logs.String())
	}
	lmu.Unlock()

	// The remote is fixed: the next try pushes everything.
	bare := filepath.Join(gittest.TempDir(t), "shared.git")
	gittest.Git(t, "", "init", "-q", "--bare", "--initial-branch=main", bare)
	repo.RemoveRemote("origin")
	repo.AddRemote("origin", bare)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if body = health(); strings.Contains(body, "sync-unpushed: 0\n") && !strings.Contains(body, "sync-last-success: never") {
			break
		}
	}
	if !strings.Contains(body, "sync-unpushed: 0\n") || strings.Contains(body, "sync-failures") {
		t.Fatalf("after the remote came back:\n%s", body)
	}
	if out := gittest.Git(t, bare, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)", "main"); strings.Count(out, "toolu_") != 5 {
		t.Fatalf("the remote holds %q", out)
	}
}
