//go:build unix

package gitdir

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// mapTemp writes a file of size bytes in dir and maps it with mapFile,
// checking what it reads.
func mapTemp(t *testing.T, dir string, size int) (path string, data []byte, unmap func()) {
	t.Helper()
	path = filepath.Join(dir, fmt.Sprintf("f%d", size))
	want := bytes.Repeat([]byte{'g'}, size)
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	data, unmap, err := mapFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("%d bytes: got %d bytes back", size, len(data))
	}
	return path, data, unmap
}

// TestMapFileOutsideSharedTable: mapFile's mappings are not in
// unix.Mmap's table of the process, whose one lock Munmap holds through
// its system call (every store of a server waited there, issue 25); an
// unmap done twice does nothing the second time.
func TestMapFileOutsideSharedTable(t *testing.T) {
	_, data, unmap := mapTemp(t, t.TempDir(), mapMin) // mapped, not read
	if err := unix.Munmap(data); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("unix.Munmap of mapFile's mapping: %v, want EINVAL (not in unix's table)", err)
	}
	if data[mapMin-1] != 'g' {
		t.Fatal("the mapping changed")
	}
	unmap()
	unmap()
}
