//go:build !linux

package gitdir

import "os"

// fdatasync is a full fsync where the system has no fdatasync (on macOS
// fsync does not even reach the disk's cache; F_FULLFSYNC would).
func fdatasync(f *os.File) error { return f.Sync() }

// SyncFS makes what was written durable: each of paths (files and
// folders; ones that no longer exist are skipped) is fsynced.
func SyncFS(dir string, paths []string) error {
	if err := Injected(StepSync, dir); err != nil {
		return err
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		if fi, serr := f.Stat(); serr == nil && fi.IsDir() {
			err = fsyncDir(f)
		} else {
			err = Fsync(f)
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// writeOut is a no-op here (see sync_linux.go).
func writeOut(f *os.File, off, n int64) {}

// FreeSpace is 0 here: not told (see sync_linux.go).
func FreeSpace(dir string) int64 { return 0 }
