//go:build unix

package gitdir

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// OpenRead opens a file to read, as os.Open does, without registering it
// with Go's poller: os.Open tries, for every file, and for a regular file
// that costs four fcntl and an epoll_ctl that fails (the first one also
// makes the poller: an epoll instance and its eventfd); os.NewFile on a
// descriptor opened blocking costs one fcntl. What reads it does (Read,
// ReadAt, Stat, Fd for flock) are the same system calls. Only a regular
// file is opened, as OpenFile says. The error is a *fs.PathError, as
// os.Open's.
func OpenRead(path string) (*os.File, error) { return OpenFile(path, os.O_RDONLY, 0) }

// OpenFile is os.OpenFile of a regular file (a lock file, a log file, an
// object, a pack, .git/index) without the poller's calls, as OpenRead.
// Anything else put there by hand is not waited on: a named pipe (whose
// blocking open waits for the other end, and its reads for a writer
// that never writes) is ErrNotRegular, as a socket or a device is; a
// folder is EISDIR, as a read of it would be. Each is found at the open,
// made non-blocking, by fstat, and a regular file's descriptor made
// blocking again: two system calls more than a bare open. flag must not
// hold O_NONBLOCK.
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	return openRegular(path, flag, perm, unix.EISDIR)
}

// OpenRegular is OpenFile of a file that must be a regular one, a folder
// too being ErrNotRegular: for gitmem's own files, whose callers take
// anything but a regular file as no file.
func OpenRegular(path string, flag int, perm os.FileMode) (*os.File, error) {
	return openRegular(path, flag, perm, ErrNotRegular)
}

// openRegular is OpenFile, a folder being dirErr.
func openRegular(path string, flag int, perm os.FileMode, dirErr error) (*os.File, error) {
	for {
		fd, err := unix.Open(path, flag|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, uint32(perm.Perm()))
		switch err {
		case nil:
		case unix.EINTR:
			continue
		case unix.ENXIO:
			// Opened to write, non-blocking: a FIFO without a reader (or
			// a socket, a device without its driver), no regular file.
			err = ErrNotRegular
			fallthrough
		default:
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
		}
		if typ := st.Mode & unix.S_IFMT; typ != unix.S_IFREG {
			unix.Close(fd)
			err := ErrNotRegular
			if typ == unix.S_IFDIR {
				err = dirErr
			}
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, flag&^unix.O_NONBLOCK); err != nil {
			unix.Close(fd)
			return nil, &fs.PathError{Op: "fcntl", Path: path, Err: err}
		}
		return os.NewFile(uintptr(fd), path), nil
	}
}

// OpenDir opens a folder (to list it, to make its entries durable), as
// os.Open does, with O_DIRECTORY: anything else there is ENOTDIR, found
// by the open, which does not wait on a named pipe put there (a
// blocking open of one waits for a writer).
func OpenDir(path string) (*os.File, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_DIRECTORY, 0)
		switch err {
		case nil:
			return os.NewFile(uintptr(fd), path), nil
		case unix.EINTR:
			continue
		default:
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
	}
}

// ReadFile reads a small file whole, as os.ReadFile does, in fewer
// system calls: an open, reads until the end, a close. os.ReadFile makes
// an *os.File, which registers every file with Go's poller (four fcntl
// and an epoll_ctl that fails for a regular file) and looks its size up:
// six calls more per file, and opening a store reads a dozen (HEAD, the
// branch, .git/config, index-head, ...). Only a regular file is read: a
// folder is EISDIR (as os.ReadFile says), anything else (a FIFO, a
// socket, a device put there by hand) ErrNotRegular, never waited on
// (the open does not block) nor read as empty. The error is a
// *fs.PathError, as os's.
func ReadFile(path string) ([]byte, error) { return ReadFileMax(path, -1) }

// ReadFileMax is ReadFile of a file that holds at most max bytes (max < 0:
// any): a larger one is ErrTooBig, found by its size before any read, and
// never read past max+1 bytes (one that grows meanwhile).
func ReadFileMax(path string, max int64) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return nil, &fs.PathError{Op: "read", Path: path, Err: unix.EISDIR}
	default:
		return nil, &fs.PathError{Op: "read", Path: path, Err: ErrNotRegular}
	}
	if max >= 0 && st.Size > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: ErrTooBig}
	}
	buf := make([]byte, 0, 512)
	for {
		if max >= 0 && int64(len(buf)) > max {
			return nil, &fs.PathError{Op: "read", Path: path, Err: ErrTooBig}
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// listNames is ListNames's listing: an open, reads until the end, a
// close, without the *os.File os.ReadDir makes (its poller registration
// and look at the folder).
func listNames(dir string) []string {
	var fd int
	var err error
	for {
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_DIRECTORY, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.ReadDirent(fd, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil || n <= 0:
			return names
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}
