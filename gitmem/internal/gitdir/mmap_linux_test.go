package gitdir

import (
	"os"
	"strings"
	"testing"
)

// TestMapFileReadsSmallFiles: a file smaller than mapMin (the index of
// a materialised group, a fold's pack) is read, not mapped: no mapping
// to make and undo per group under the object store's lock (issue 25);
// a larger one is mapped, until its unmap.
func TestMapFileReadsSmallFiles(t *testing.T) {
	dir := t.TempDir()
	mapped := func(path string) bool {
		maps, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(maps), path)
	}
	for _, size := range []int{1100, mapMin - 1, mapMin} {
		path, _, unmap := mapTemp(t, dir, size)
		if got, want := mapped(path), size >= mapMin; got != want {
			t.Errorf("%d bytes: mapped %v, want %v", size, got, want)
		}
		unmap()
		if mapped(path) {
			t.Errorf("%d bytes: still mapped after unmap", size)
		}
	}
}
