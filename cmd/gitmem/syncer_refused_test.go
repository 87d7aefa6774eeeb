package main

import (
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A remote whose history is refused (here another memory's: unrelated
// histories; objects git fsck refuses and a history redacted here are
// refused alike) is not retried at the failure pace: trying again changes
// nothing until the remote changes. serve --sync logs the refusal at
// ERROR once and tries again only after at least a minute (growing), and
// gitmem status says the last attempt was refused. (Finding N7 of the
// attacker pass: logged at INFO and retried every 30 s forever.)
func TestServeSyncRefusalIsAnErrorOnceAndBacksOff(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	dir := gittest.TempDir(t)
	other, mem, bare := filepath.Join(dir, "other"), filepath.Join(dir, "mem"), filepath.Join(dir, "remote.git")
	for _, repo := range []string{other, mem} {
		env := env
		if repo == other { // another first commit: another history
			env = append(env[:len(env):len(env)], "GITMEM_NOW=2026-02-01T09:00:00Z")
		}
		gitmemOut(t, env, "--repo", repo, "init")
		cmd := exec.Command("gitmem", "--repo", repo, "serve")
		cmd.Env = env
		cmd.Stdin = strings.NewReader(`{"type":"tool_use","id":"toolu_1","name":"memory","input":{"command":"create","path":"/memories/` + filepath.Base(repo) + `.md","file_text":"x\n"}}` + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	gittest.Git(t, "", "clone", "-q", "--bare", other, bare)
	gitmemOut(t, env, "--repo", mem, "remote", "add", "origin", bare)

	var log lockedBuffer
	base, _, stop := startHTTPProcessTo(t, &log, env, mem, "--http", "--sync", "origin", "--sync-every", "1s")
	// The first refusal (a minute: a bound for a hang, on a loaded
	// machine), then four seconds more: with the failure pace (1 s, then
	// 1 s ... at --sync-every 1s) three tries or more.
	for hang := time.Now().Add(time.Minute); !strings.Contains(log.String(), "shares no commit"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(hang) {
			t.Fatalf("no refusal logged in a minute:\n%s", log.String())
		}
	}
	time.Sleep(4 * time.Second)
	res, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	health, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(health), "sync-refused: ") {
		t.Errorf("/healthz does not report the refusal:\n%s", health)
	}
	stop()
	var errors, tries []string
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "shares no commit") || strings.Contains(line, "sync with origin") && !strings.Contains(line, "sharing") {
			tries = append(tries, line)
			if strings.Contains(line, "level=ERROR") {
				errors = append(errors, line)
			}
		}
	}
	if len(errors) != 1 || len(tries) != 1 {
		t.Errorf("the refusal logged %d time(s), %d at ERROR; want once, at ERROR:\n%s", len(tries), len(errors), strings.Join(tries, "\n"))
	}
	if len(errors) == 1 && !strings.Contains(errors[0], "next try is in 1m") {
		t.Errorf("the refusal does not say the next try comes in a minute or more: %s", errors[0])
	}
	status := gitmemOut(t, env, "--repo", mem, "status", "origin")
	if !strings.Contains(status, "was refused: ") || !strings.Contains(status, "shares no commit") || !strings.Contains(status, "trying again changes nothing until the remote does") {
		t.Errorf("gitmem status does not say the sync is refused:\n%s", status)
	}
	if json := gitmemOut(t, env, "--repo", mem, "status", "--json", "origin"); !strings.Contains(json, `"refused":true`) {
		t.Errorf("gitmem status --json: %s", json)
	}
}
