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

// syncFS makes everything written to the file system that holds dir
// durable: one syncfs(2) flushes every file and folder changed on it, far
// cheaper than an fsync per file for a checkpoint's many small files.
// paths (what was written) is not needed here.
func syncFS(dir string, paths []string) error {
	f, err := OpenDir(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		err := unix.Syncfs(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// writeOut starts writing the file's bytes [off, off+n) to the device and
// waits for them, without their metadata (sync_file_range(2)): a large
// write taken by the device in steps. Not a durability point; best effort.
func writeOut(f *os.File, off, n int64) {
	unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
}

// FreeSpace is how many bytes the file system that holds dir has free
// for this process (statfs(2)); 0 when it cannot tell.
func FreeSpace(dir string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
