//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A token file others can read or write is refused, as ssh refuses such
// a private key (storesapi's tests check owners and folders too): at start (exit 2, the message names the file and the
// chmod that fixes it) and, in handler's tests, at a SIGHUP reload (the
// old tokens stay). What gitmem token add writes is 0600. (Issue 21, item 19: a 0666 file was
// taken without a word.)
func TestTokenFileOthersCanReadIsRefused(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	dir := gittest.TempDir(t)
	stores, tokens := filepath.Join(dir, "stores"), filepath.Join(dir, "tokens.json")
	gitmemOut(t, env, "token", "add", "bot", "--file", tokens, "--store", "*")
	if fi, err := os.Stat(tokens); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token add made %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	for mode, how := range map[os.FileMode]string{0o666: "read and written by its group and others", 0o644: "read by its group and others",
		0o640: "read by its group", 0o620: "written by its group", 0o602: "written by others"} {
		if err := os.Chmod(tokens, mode); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a server that took the file would serve on
		cmd := exec.CommandContext(ctx, "gitmem", "serve", "--http", "127.0.0.1:0", "--stores", stores, "--tokens", tokens)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		cancel()
		ee, _ := err.(*exec.ExitError)
		if ee == nil || ee.ExitCode() != 2 {
			t.Fatalf("mode %04o: serve: %v\n%s", mode, err, out)
		}
		want := fmt.Sprintf("%s can be %s (mode %04o)", tokens, how, mode)
		if !strings.Contains(string(out), want) || !strings.Contains(string(out), "chmod 600 "+tokens) {
			t.Errorf("mode %04o: %s\nwant it to say %q and name the fix, chmod 600", mode, out, want)
		}
	}
	os.Chmod(tokens, 0o600) // and with the fix it serves
	_, stop := serveHTTPProcess(t, env, "", "--http", "--stores", stores, "--tokens", tokens)
	stop()
}
