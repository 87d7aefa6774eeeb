package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// serve listens before it touches the repository: on a busy port it exits
// 1 and has changed nothing, neither fetched and merged a --sync remote
// nor created a missing repository.
func TestServeOnABusyPortChangesNothing(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	dir := gittest.TempDir(t)
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env, cmd.Dir = env, dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	behindClone(t, dir, 1) // b lacks a commit of origin's: a sync would fetch and merge it
	if behind, ahead := run("git", "-C", "b", "rev-parse", "HEAD"), run("git", "-C", "shared.git", "rev-parse", "main"); behind == ahead {
		t.Fatalf("b is at origin's commit %s: a sync would change nothing", ahead)
	}
	state := func() string {
		return run("git", "-C", "b", "for-each-ref", "--format=%(refname) %(objectname)") + run("git", "-C", "b", "status", "--porcelain")
	}
	before := state()

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"http --sync", []string{"--repo", "b", "serve", "--http", addr, "--sync", "origin", "--sync-every", "1h"}},
		{"mcp-http --sync", []string{"--repo", "b", "serve", "--mcp-http", addr, "--sync", "origin", "--sync-every", "1h"}},
		{"http, no repository", []string{"--repo", "missing", "serve", "--http", addr}},
		{"stores", []string{"serve", "--http", addr, "--stores", "stores"}},
	} {
		cmd := exec.Command("gitmem", tc.args...)
		cmd.Env, cmd.Dir = env, dir
		out, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); err == nil || code != exitFailure || !strings.Contains(string(out), "cannot listen on "+addr) {
			t.Errorf("%s on a busy port: exit %d, %s", tc.name, code, out)
		}
	}
	if after := state(); after != before {
		t.Errorf("a serve that could not listen changed the repository:\nbefore\n%s\nafter\n%s", before, after)
	}
	for _, d := range []string{"missing", "stores"} {
		if _, err := os.Stat(filepath.Join(dir, d)); !os.IsNotExist(err) {
			t.Errorf("a serve that could not listen created %s: %v", d, err)
		}
	}
}
