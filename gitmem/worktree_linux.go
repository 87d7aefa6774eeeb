//go:build linux

package gitmem

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"syscall"

	"golang.org/x/sys/unix"
)

// exchange moves tmp to p in one step: renameat2 with RENAME_NOREPLACE
// when p is free, RENAME_EXCHANGE when a file is there (which tmp's name
// then holds: aside). ok is false when the file system cannot (put falls
// back to a rename aside).
func (w *worktree) exchange(tmp, p string) (aside string, placed, ok bool, err error) {
	from, err := w.root.Open(path.Dir(tmp))
	if err != nil {
		return "", false, false, nil
	}
	defer from.Close()
	to, err := w.root.Open(path.Dir(p))
	if err != nil {
		return "", false, false, nil
	}
	defer to.Close()
	fd, td := int(from.Fd()), int(to.Fd())
	for range 3 {
		err = unix.Renameat2(fd, path.Base(tmp), td, path.Base(p), unix.RENAME_NOREPLACE)
		if err == nil {
			w.touch(p)
			return "", true, true, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			break
		}
		err = unix.Renameat2(fd, path.Base(tmp), td, path.Base(p), unix.RENAME_EXCHANGE)
		if err == nil {
			w.touch(p)
			return tmp, true, true, nil
		}
		if !errors.Is(err, unix.ENOENT) { // removed meanwhile: no-replace again
			break
		}
	}
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOENT) {
		return "", false, false, nil // not supported here (or a folder at p): the portable way
	}
	return "", false, true, err
}

// reusable reports whether the file f, taken aside, can be reused as a
// spare (worktree.recycle): it has one link, it is the process's own, and
// no other open file description refers to it — a write lease is granted
// only then (fcntl(2), F_SETLEASE), and given back at once.
func reusable(f *os.File, fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink != 1 || int(st.Uid) != os.Geteuid() {
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	granted := false
	rc.Control(func(fd uintptr) {
		if _, err := unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_WRLCK); err == nil {
			granted = true
			unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_UNLCK)
		}
	})
	return granted
}
