//go:build unix

package gitdir

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps a file read-only into memory: an index is searched in
// place, paged in by the kernel as it is touched, and costs no heap.
func mapFile(path string) ([]byte, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if fi.Size() == 0 {
		return nil, func() {}, nil
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() { unix.Munmap(data) }, nil
}

// canMapPacks: pack files can be mapped (see packSet.mapPacks).
const canMapPacks = true
