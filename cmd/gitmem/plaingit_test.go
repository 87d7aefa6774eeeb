package main

import (
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// What git takes away from a running serve — the branch (git update-ref
// -d), HEAD (git checkout -b) — is put back and logged at ERROR, every
// call still succeeds, and after a clean exit git's view is whole.
func TestServeLogsWhatGitTookAwayAtError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	repo := filepath.Join(t.TempDir(), "memory")
	cmd := exec.Command("gitmem", "--repo", repo, "serve", "--http", addr)
	cmd.Env = testEnv(t)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	base := "http://" + addr
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if res, err := http.Get(base + "/healthz"); err == nil {
			res.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", stderr.String())
		}
	}
	call := func(id, input string) {
		t.Helper()
		if ok, err := postCall(http.DefaultClient, base, id, input); err != nil || !ok {
			t.Fatalf("%s: ok %v, %v\n%s", id, ok, err, stderr.String())
		}
	}
	call("toolu_1", `{"command":"create","path":"/memories/a.md","file_text":"one\n"}`)
	git(t, repo, "update-ref", "-d", "refs/heads/main")
	call("toolu_2", `{"command":"create","path":"/memories/b.md","file_text":"two\n"}`)
	git(t, repo, "checkout", "-q", "-b", "other")
	call("toolu_3", `{"command":"create","path":"/memories/c.md","file_text":"three\n"}`)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{
		`level=ERROR msg="the branch refs/heads/main was deleted outside gitmem`,
		`level=ERROR msg="HEAD was moved outside gitmem (switched to refs/heads/other`,
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the log has no %s:\n%s", want, stderr.String())
		}
	}
	if head := strings.TrimSpace(git(t, repo, "symbolic-ref", "HEAD")); head != "refs/heads/main" {
		t.Errorf("HEAD names %s", head)
	}
	ids := git(t, repo, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)")
	for _, id := range []string{"toolu_1", "toolu_2", "toolu_3"} {
		if !strings.Contains(ids, id+"\n") {
			t.Errorf("%s is not on the branch:\n%s", id, ids)
		}
	}
	git(t, repo, "fsck", "--strict")
	if st := git(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("git status after serve exited:\n%s", st)
	}
}
