//go:build !unix

package gitdir

import (
	"io"
	"io/fs"
	"os"
	"syscall"
)

// OpenRead is os.Open (readfile_unix.go: without the poller's calls).
func OpenRead(path string) (*os.File, error) { return os.Open(path) }

// OpenFile is os.OpenFile (readfile_unix.go: without the poller's calls).
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag, perm)
}

// OpenRegular is os.OpenFile of a regular file; anything else is
// ErrNotRegular (readfile_unix.go: opened without waiting on it).
func OpenRegular(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = &fs.PathError{Op: "open", Path: path, Err: ErrNotRegular}
		}
		return nil, err
	}
	return f, nil
}

// OpenDir is os.Open of a folder (readfile_unix.go: anything else there
// is not waited on).
func OpenDir(path string) (*os.File, error) { return os.Open(path) }

// ReadFile is os.ReadFile (readfile_unix.go: in fewer system calls).
func ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

// ReadFileMax is ReadFile of a file that holds at most max bytes (max < 0:
// any): a larger one is ErrTooBig, found by its size before any read, and
// never read past max+1 bytes (one that grows meanwhile).
func ReadFileMax(path string, max int64) ([]byte, error) {
	if max < 0 {
		return ReadFile(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err == nil && fi.IsDir() {
		err = &fs.PathError{Op: "read", Path: path, Err: syscall.EISDIR}
	} else if err == nil && !fi.Mode().IsRegular() {
		err = &fs.PathError{Op: "read", Path: path, Err: ErrNotRegular}
	}
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && (fi.Size() > max || int64(len(data)) > max) {
		err = &fs.PathError{Op: "read", Path: path, Err: ErrTooBig}
	}
	if err != nil {
		return nil, err
	}
	return data, nil
}

// listNames is ListNames's listing (readfile_unix.go: in fewer system
// calls).
func listNames(dir string) []string {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	return names
}
