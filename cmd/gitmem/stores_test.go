package main

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// gitmemOut runs the CLI and returns what it printed on stdout.
func gitmemOut(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("gitmem", args...)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gitmem %v: %v", args, err)
	}
	return string(out)
}

// The multi-store server as operators run it: stores and tokens made with
// the CLI, tool calls over HTTP, and a token file reloaded on SIGHUP.
func TestServeStoresProcess(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	dir := gittest.TempDir(t)
	stores, tokens := filepath.Join(dir, "stores"), filepath.Join(dir, "tokens.json")
	gitmemOut(t, env, "store", "create", "alice", "--stores", stores, "--description", "Alice's memory")
	bot := strings.TrimSpace(gitmemOut(t, env, "token", "add", "alice-bot", "--file", tokens, "--store", "alice"))
	if !strings.HasPrefix(bot, "gitmem_") || len(bot) != len("gitmem_")+43 {
		t.Fatalf("secret %q", bot)
	}
	if list := gitmemOut(t, env, "token", "list", "--file", tokens); list != "alice-bot\tread-write\tagent\talice\n" {
		t.Errorf("token list: %q", list)
	}
	base, proc, stop := startHTTPProcess(t, env, filepath.Join(dir, "unused"), "--http", "--stores", stores, "--tokens", tokens)

	call := func(secret, store string) (int, handler.Result) {
		req, _ := http.NewRequest("POST", base+"/v1/stores/"+store+"/tool_use",
			strings.NewReader(`{"type":"tool_use","id":"toolu_1","name":"memory","input":{"command":"create","path":"/memories/a.md","file_text":"hi\n"}}`))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var r handler.Result
		json.NewDecoder(res.Body).Decode(&r)
		return res.StatusCode, r
	}
	if code, res := call(bot, "alice"); code != 200 || res.IsError {
		t.Fatalf("alice-bot: %d %+v", code, res)
	}
	// Another process sees the commit once the server's git files follow
	// its log: milliseconds, well within the checkpoint interval (waited
	// for with git, not with a gitmem process a try: a quarter second of
	// CPU each).
	waitForInGit(t, filepath.Join(stores, "alice"), "toolu_1")
	out := gitmemOut(t, env, "--repo", filepath.Join(stores, "alice"), "log", "-n", "1", "--json")
	if !strings.Contains(out, `"author":{"email":"alice-bot@gitmem.invalid","name":"alice-bot"}`) || !strings.Contains(out, `"agent":"alice-bot"`) {
		t.Errorf("the commit: %s", out)
	}

	// A token added while the server runs works after SIGHUP; a removed one
	// stops working.
	carol := strings.TrimSpace(gitmemOut(t, env, "token", "add", "carol", "--file", tokens, "--store", "*", "--read-only"))
	gitmemOut(t, env, "token", "remove", "alice-bot", "--file", tokens)
	if code, _ := call(carol, "alice"); code != http.StatusUnauthorized {
		t.Errorf("carol before SIGHUP: %d", code)
	}
	if err := proc.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, res := call(carol, "alice")
		if code == 200 {
			if !res.IsError || !strings.Contains(res.Content, "read-only") {
				t.Errorf("carol is read-only: %+v", res)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("carol after SIGHUP: %d", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _ := call(bot, "alice"); code != http.StatusUnauthorized {
		t.Errorf("removed alice-bot: %d", code)
	}
	stop()
}
