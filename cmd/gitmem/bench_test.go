package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// TestBenchSmoke runs gitmem bench in its quick mode end to end
// (testdata/bench), so the command cannot rot: every backend, the
// concurrency runs and the markdown. It checks what the run reports,
// never how fast anything was.
func TestBenchSmoke(t *testing.T) {
	gittest.Long(t, "gitmem bench: servers and node clients")
	if testing.Short() {
		t.Skip("starts servers and node")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("the benchmark needs the git CLI")
	}
	sdk, _ := filepath.Abs("../../" + sdkHarness)
	if _, err := os.Stat(filepath.Join(sdk, "node_modules", "@anthropic-ai", "sdk")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("@anthropic-ai/sdk is not installed: run npm ci in %s", sdkHarness)
		}
		t.Logf("@anthropic-ai/sdk is not installed (npm ci in %s): the TypeScript backend is left out", sdkHarness)
		sdk = "none"
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/bench",
		Setup: func(env *testscript.Env) error {
			env.Setenv("GITMEM_BENCH_SDK", sdk)
			env.Setenv("HOME", env.WorkDir)
			fsckAtEnd(env)
			return nil
		},
		Condition: func(cond string) (bool, error) {
			if cond == "sdk" {
				return sdk != "none", nil
			}
			return false, nil
		},
	})
}
