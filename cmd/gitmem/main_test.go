package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

var update = flag.Bool("update", false, "rewrite the expected output in testdata/script from what the commands print")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"gitmem": func() { os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the CLI end to end: testdata/script/*.txtar, each a
// session of gitmem commands checked against expected output and with the
// real git CLI, and ended by git fsck --strict in every repository it
// leaves (fsckAtEnd). The clock is fixed (GITMEM_NOW) and so are
// identities, so commit hashes are stable.
//
// The scripts start gitmem some 500 times, and under -race they run a
// build without it (plainGitmem): a -race program costs ~0.15 s more CPU
// to start and exit than the whole of most commands (the race runtime
// clears its tables), most of the scripts' CPU. The race detector still
// runs over the same code in this package's and the store's tests, and
// over gitmem serve in the tests that start this binary.
func TestScripts(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("the scripts check results with the git CLI")
	}
	bin := plainGitmem(t)
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: *update,
		Cmds:          map[string]func(*testscript.TestScript, bool, []string){"serving": serving},
		Condition: func(cond string) (bool, error) {
			if cond == "root" { // [root]: the script may give files to another user
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Setup: func(env *testscript.Env) error {
			if bin != "" {
				env.Setenv("PATH", bin+string(os.PathListSeparator)+env.Getenv("PATH"))
			}
			env.Setenv("GITMEM_NOW", "2026-03-01T09:00:00Z")
			env.Setenv("GIT_CONFIG_NOSYSTEM", "1")
			env.Setenv("HOME", env.WorkDir)
			env.Setenv("GITMEM_REPO", env.WorkDir+"/memory")
			fsckAtEnd(env)
			return os.WriteFile(env.WorkDir+"/.gitconfig", []byte("[user]\n\tname = Olive Operator\n\temail = olive@example.com\n"), 0o600)
		},
	})
}

// plainGitmem returns a folder holding gitmem built without -race, for
// the scripts to find before this binary on PATH, or "" when this test
// binary is itself built without it. The build is the Dockerfile's own
// (static, -trimpath), so that TestDockerfile (./test.sh long) finds its
// packages compiled; without the symbol table and DWARF (-s -w, as the
// Dockerfile's too), its link, made anew at every run (its folder is
// new), takes ~3.2 s of CPU rather than ~4.6 s.
func plainGitmem(t *testing.T) string {
	if !raceBuild {
		return ""
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(dir, "gitmem"), ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// fsckAtEnd makes a script end with git fsck --strict in every git
// repository under $WORK, bare ones included: the script fails with git's
// output for each that is not clean.
func fsckAtEnd(env *testscript.Env) {
	env.Defer(func() {
		if err := gittest.FsckTree(env.WorkDir, env.WorkDir); err != nil {
			env.T().Fatal("at the end of the script: ", err)
		}
	})
}

// serving LOG VAR waits (up to a minute) until a gitmem serve --http
// started in the background says in LOG, its standard error, the address
// it serves, and sets VAR to its URL (http://127.0.0.1:PORT).
func serving(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: serving LOG VAR")
	}
	re := regexp.MustCompile(`serving the memory tool on (http://[0-9.]+:[0-9]+)`)
	var data []byte
	for range 600 {
		data, _ = os.ReadFile(ts.MkAbs(args[0]))
		if m := re.FindSubmatch(data); m != nil {
			ts.Setenv(args[1], string(m[1]))
			return
		}
		if regexp.MustCompile(`(?m)^gitmem: `).Match(data) {
			break // it failed
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.Fatalf("%s does not say where gitmem serve listens:\n%s", args[0], data)
}
