package gitdir

import (
	"path/filepath"
	"testing"
)

// What is built aside is the folder and what it holds, until done.
func TestBuildAside(t *testing.T) {
	root := filepath.Join(t.TempDir(), NewTempPrefix+"x")
	done := BuildAside(root + "/")
	for p, want := range map[string]bool{root: true, filepath.Join(root, ".git", "HEAD"): true, root + "y": false, filepath.Dir(root): false} {
		if got := isAside(p); got != want {
			t.Errorf("isAside(%s) = %v", p, got)
		}
	}
	done()
	if isAside(filepath.Join(root, "HEAD")) {
		t.Error("still aside once done")
	}
}
