package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What an operator command's repository says the operator must act on
// (gitmem.Options.Errorf) is logged at ERROR, as serve logs it: gitmem
// init on a folder of more files than the most files committed the first
// 10,000, said so at INFO, and said nothing at --log-level warn: the
// files left out of the first commit went unmentioned; so did a file
// over the largest file size. Both are said through the one Errorf the
// command gives its repository (that each is said there is gitmem's
// TestHandMadeFilesPastTheFileLimitAreLeft and
// TestHandMadeFileOverTheLimitIsNotRead); the file over the largest size
// is the one made here: 10,001 files took init ~25 s of CPU under -race,
// and past gitmemRun's minute on a busy machine.
func TestOperatorCommandsLogTheirErrorsAtError(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "memory")
	mem := filepath.Join(dir, "memories")
	if err := os.MkdirAll(mem, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mem, "notes.md"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mem, "big.md"), []byte(strings.Repeat("x", 1<<20+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := gitmemRun(t, testEnv(t), "--repo", dir, "--log-level", "warn", "init")
	if code != 0 {
		t.Fatalf("init exited %d:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, `level=ERROR msg="memories/big.md is 1,048,577 bytes, over the limit of 1,048,576 bytes per file: it is not committed`) {
		t.Errorf("init's stderr does not say at ERROR that a file was left out:\n%s", stderr)
	}
}
