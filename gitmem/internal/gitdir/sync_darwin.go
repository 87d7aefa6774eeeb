package gitdir

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// On macOS fsync(2) hands a file's data to the device but does not flush
// the device's write cache, which a power cut can lose: durable takes
// fcntl(F_FULLFSYNC), which does. It flushes the whole device's cache, so
// it is costly (milliseconds): the write-ahead log pays one per group of
// changes (group commit), a checkpoint one in all.

// fdatasync is F_FULLFSYNC: the write-ahead log's commit point.
func fdatasync(f *os.File) error { return fullFsync(f) }

// fullFsync is fcntl(F_FULLFSYNC); where the file system does not take it
// (ENOTSUP: an SMB mount, say), fsync(2), as Go's (*os.File).Sync does.
func fullFsync(f *os.File) error {
	for {
		_, err := unix.FcntlInt(f.Fd(), unix.F_FULLFSYNC, 0)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOTSUP):
			return plainFsync(f)
		}
		return err
	}
}

// syncToDevice is fsync(2), for a file or a folder: its data and
// metadata reach the device; flushDevice then makes them durable, for
// every file at once.
func syncToDevice(f *os.File, _ bool) error { return plainFsync(f) }

// flushDevice flushes the device's write cache through f, a file on it
// (F_FULLFSYNC): a checkpoint's one full flush.
func flushDevice(f *os.File) error { return fullFsync(f) }

func plainFsync(f *os.File) error {
	for {
		err := unix.Fsync(int(f.Fd()))
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
