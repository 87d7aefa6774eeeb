package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What an operator command's repository says the operator must act on
// (gitmem.Options.Errorf) is logged at ERROR, as serve logs it: gitmem
// init on a folder of more files than the most files committed the first
// 10,000, said so at INFO, and said nothing at --log-level warn: the
// files left out of the first commit went unmentioned.
func TestOperatorCommandsLogTheirErrorsAtError(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "memory")
	mem := filepath.Join(dir, "memories")
	if err := os.MkdirAll(mem, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 10_001 {
		if err := os.WriteFile(filepath.Join(mem, fmt.Sprintf("f%05d.md", i)), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, stderr, code := gitmemRun(t, testEnv(t), "--repo", dir, "--log-level", "warn", "init")
	if code != 0 {
		t.Fatalf("init exited %d:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, `level=ERROR msg="1 file(s) made by hand in memories/ (memories/f10000.md first) are not committed`) {
		t.Errorf("init's stderr does not say at ERROR that a file was left out:\n%s", stderr)
	}
}
