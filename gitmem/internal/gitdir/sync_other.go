//go:build !linux

package gitdir

import "os"

// syncFS makes what was written durable: each of paths (files and
// folders; ones that no longer exist are skipped) is synced to the device
// (syncToDevice), then the device's write cache is flushed once for all
// of them where that is a separate step (flushDevice, on macOS). The
// paths are on one file system, the repository's (as syncfs(2) assumes
// on Linux).
func syncFS(dir string, paths []string) error {
	var last *os.File // a regular file synced: the device's cache is flushed through it
	defer func() {
		if last != nil {
			last.Close()
		}
	}()
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		fi, serr := f.Stat()
		err = syncToDevice(f, serr == nil && fi.IsDir())
		if err == nil && serr == nil && fi.Mode().IsRegular() {
			if last != nil {
				last.Close()
			}
			last = f
		} else {
			f.Close()
		}
		if err != nil {
			return err
		}
	}
	if last == nil {
		return nil
	}
	return flushDevice(last)
}

// writeOut is a no-op here (see sync_linux.go).
func writeOut(f *os.File, off, n int64) {}

// FreeSpace is 0 here: not told (see sync_linux.go).
func FreeSpace(dir string) int64 { return 0 }
