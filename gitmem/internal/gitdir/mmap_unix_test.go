//go:build unix

package gitdir

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMapFileOutsideSharedTable: mapFile's mappings are not in
// unix.Mmap's table of the process, whose one lock Munmap holds through
// its system call (every store of a server waited there, issue 25); an
// unmap done twice does nothing the second time.
func TestMapFileOutsideSharedTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	want := bytes.Repeat([]byte("gitmem "), mapMin/7+1) // mapped, not read
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	data, unmap, err := mapFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("mapped %d bytes, not the file's %d", len(data), len(want))
	}
	if err := unix.Munmap(data); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("unix.Munmap of mapFile's mapping: %v, want EINVAL (not in unix's table)", err)
	}
	if !bytes.Equal(data, want) {
		t.Fatal("the mapping changed")
	}
	unmap()
	unmap()
}
