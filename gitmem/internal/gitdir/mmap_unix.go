//go:build unix

package gitdir

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapFile maps a file read-only into memory: an index is searched in
// place, paged in by the kernel as it is touched, and costs no heap. A
// file smaller than mapMin is read instead: most packs gitmem writes are
// a group of calls' few objects, one mapped and unmapped per group and
// fold (issue 25), and each munmap in a process of many threads has
// the other CPUs it runs on flush their TLBs.
// The mapping is made and undone with MmapPtr and MunmapPtr: unix.Mmap
// and unix.Munmap keep a table of mappings under one lock of the
// process, which Munmap holds through its system call, so that a
// server's stores, each adding and dropping packs, waited for each other
// there, with their object store's lock held (issue 25: a fifth of the
// time calls spent blocked under the load of many stores).
func mapFile(path string) ([]byte, func(), error) {
	f, err := OpenRead(path)
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
	if fi.Size() < mapMin {
		data := make([]byte, fi.Size())
		if _, err := f.ReadAt(data, 0); err != nil {
			return nil, nil, err
		}
		return data, func() {}, nil
	}
	size := uintptr(fi.Size())
	if int64(size) != fi.Size() || int(size) < 0 {
		return nil, nil, unix.ENOMEM // larger than this platform can map
	}
	addr, err := unix.MmapPtr(int(f.Fd()), 0, nil, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	// Once only: a second munmap could undo a mapping made since at the
	// same address (unix.Munmap's table refused it).
	return unsafe.Slice((*byte)(addr), int(size)), sync.OnceFunc(func() { unix.MunmapPtr(addr, size) }), nil
}

// mapMin is the size from which mapFile maps a file rather than read
// it.
const mapMin = 64 << 10

// canMapPacks: pack files can be mapped (see packSet.mapPacks).
const canMapPacks = true
