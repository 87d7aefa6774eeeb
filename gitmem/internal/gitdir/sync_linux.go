package gitdir

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// SyncFS makes everything written to the file system that holds dir
// durable: one syncfs(2) flushes every file and folder changed on it, far
// cheaper than an fsync per file for a checkpoint's many small files.
// paths (what was written) is not needed here.
func SyncFS(dir string, paths []string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := Injected(StepSync, dir); err != nil {
		return err
	}
	for {
		err := unix.Syncfs(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}
