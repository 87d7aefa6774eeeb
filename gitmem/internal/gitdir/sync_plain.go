//go:build !linux && !darwin

package gitdir

import "os"

// fdatasync is a full fsync where the system has no fdatasync: Go's
// (*os.File).Sync, fsync(2) on the BSDs, FlushFileBuffers on Windows
// (which flushes the device's write cache too).
func fdatasync(f *os.File) error { return f.Sync() }

// syncToDevice is Fsync (fsyncDir for a folder): one step makes a file
// durable here.
func syncToDevice(f *os.File, dir bool) error {
	if dir {
		return fsyncDir(f)
	}
	return Fsync(f)
}

// flushDevice has nothing left to do here.
func flushDevice(*os.File) error { return nil }
