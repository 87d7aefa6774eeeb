package main

import (
	"flag"
	"os"
	"os/exec"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

var update = flag.Bool("update", false, "rewrite the expected output in testdata/script from what the commands print")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"gitmem": func() { os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the CLI end to end: testdata/script/*.txtar, each a
// session of gitmem commands checked against expected output and with the
// real git CLI. The clock is fixed (GITMEM_NOW) and so are identities, so
// commit hashes are stable.
func TestScripts(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("the scripts check results with the git CLI")
	}
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: *update,
		Setup: func(env *testscript.Env) error {
			env.Setenv("GITMEM_NOW", "2026-03-01T09:00:00Z")
			env.Setenv("GIT_CONFIG_NOSYSTEM", "1")
			env.Setenv("HOME", env.WorkDir)
			env.Setenv("GITMEM_REPO", env.WorkDir+"/memory")
			return os.WriteFile(env.WorkDir+"/.gitconfig", []byte("[user]\n\tname = Olive Operator\n\temail = olive@example.com\n"), 0o600)
		},
	})
}
