//go:build linux

package gitmem

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Paths beneath the worktree's folder in one step. os.Root resolves a
// path a folder at a time, an openat and a close for each: an lstat of
// memories/d012/f01234.md is five system calls, and under 64 clients
// os.Root took a fifth of serve's CPU (measured; most of it lstat and
// open of memory files). openat2(2) with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS resolves the folders in one call and refuses what
// os.Root would resolve itself (a symbolic link on the way, "..", a
// path leaving the folder); then, on any other failure, and on a kernel
// without openat2 (before 5.6, or a filter that forbids it), os.Root
// does the work, so what each call returns is what os.Root returns.

// beneathOff is set once openat2 is found missing or forbidden.
var beneathOff atomic.Bool

// openBase opens the worktree's folder for openat2 (nil: none): the
// folder root holds, not another one put at dir since root was opened.
// An *os.File, not a bare descriptor: its lookups hold a reference
// (RawConn.Control), so a close meanwhile neither races them nor lets
// them resolve beneath whatever reuses the descriptor's number.
func openBase(root *os.Root, dir string) (*os.File, syscall.RawConn) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil
	}
	f := os.NewFile(uintptr(fd), dir)
	fi, err := f.Stat()
	rfi, rerr := root.Stat(".")
	rc, cerr := f.SyscallConn()
	if err != nil || rerr != nil || cerr != nil || !os.SameFile(fi, rfi) {
		f.Close()
		return nil, nil
	}
	return f, rc
}

// beneath opens p (relative to the worktree's folder) with flags, never
// through a symbolic link; ok is false when os.Root must do it.
func (w *worktree) beneath(p string, flags int) (fd int, ok bool) {
	if w.baseRC == nil || beneathOff.Load() {
		return -1, false
	}
	fd = -1
	w.lookups.Add(1)
	cerr := w.baseRC.Control(func(base uintptr) {
		for {
			nfd, err := unix.Openat2(int(base), p, &unix.OpenHow{
				Flags:   uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW),
				Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
			})
			switch {
			case err == nil:
				fd, ok = nfd, true
			case err == unix.EINTR || err == unix.EAGAIN && flags&unix.O_NONBLOCK == 0:
				// (With O_NONBLOCK, EAGAIN is another program's lease:
				// os.Root answers it, at once.)
				continue
			case err == unix.ENOSYS || err == unix.EPERM && flags&unix.O_PATH != 0:
				beneathOff.Store(true)
			}
			return
		}
	})
	if cerr != nil { // closed: os.Root answers (ErrClosed)
		return -1, false
	}
	return fd, ok
}

// folderFD is a folder of the worktree held open (O_PATH) for the lstat
// of the next path, when it is in the same folder (lstatIn).
type folderFD struct {
	dir string // "": none
	fd  int
}

// done closes the folder held.
func (f *folderFD) done() {
	if f.dir != "" {
		unix.Close(f.fd)
		f.dir = ""
	}
}

// fastLstat is os.Root's Lstat by openat2 and fstatat: ok is false
// when os.Root must do it. With last, the folder's descriptor is taken
// from it when it holds p's folder, and left there.
func (w *worktree) fastLstat(p string, last *folderFD) (fi fs.FileInfo, err error, ok bool) {
	dir, name := path.Split(p)
	if name == "" || name == "." || name == ".." {
		return nil, nil, false
	}
	if dir == "" {
		dir = "."
	}
	var dfd int
	if last != nil && last.dir == dir {
		dfd = last.fd
	} else {
		if dfd, ok = w.beneath(dir, unix.O_PATH|unix.O_DIRECTORY); !ok {
			return nil, nil, false
		}
		if last != nil {
			last.done()
			last.dir, last.fd = dir, dfd
		} else {
			defer unix.Close(dfd)
		}
	}
	var st unix.Stat_t
	for {
		err = unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			break
		}
	}
	switch {
	case err == nil:
		return newStatInfo(name, &st), nil, true
	case err == unix.ENOENT || err == unix.ENOTDIR:
		return nil, &fs.PathError{Op: "statat", Path: p, Err: err}, true
	}
	return nil, nil, false
}

// fastOpen is os.Root's OpenFile (of an existing file) by openat2.
func (w *worktree) fastOpen(p string, flag int) (*os.File, bool) {
	fd, ok := w.beneath(p, flag)
	if !ok {
		return nil, false
	}
	return os.NewFile(uintptr(fd), p), true
}

// fastOpenRead opens p for readRegular by openat2, as a bare descriptor:
// an *os.File (os.NewFile, as os.Root's OpenFile) costs a regular file two
// to five system calls more on Linux, the poller trying it and giving it
// back, where the read itself is an fstat and a read or two.
func (w *worktree) fastOpenRead(p string) (statReader, func(), bool) {
	fd, ok := w.beneath(p, readFlags)
	if !ok {
		return nil, nil, false
	}
	return &rawFile{fd: fd, path: p}, func() { unix.Close(fd) }, true
}

// rawFile reads a descriptor readRegular's caller closes.
type rawFile struct {
	fd   int
	path string
}

func (f *rawFile) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, err := unix.Read(f.fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, &fs.PathError{Op: "read", Path: f.path, Err: err}
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f *rawFile) Stat() (fs.FileInfo, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstat(f.fd, &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "stat", Path: f.path, Err: err}
		}
		return newStatInfo(path.Base(f.path), &st), nil
	}
}

// openDir opens the folder d for the *at calls of exchange.
func (w *worktree) openDir(d string) (fd int, done func(), err error) {
	if fd, ok := w.beneath(d, unix.O_PATH|unix.O_DIRECTORY); ok {
		return fd, func() { unix.Close(fd) }, nil
	}
	f, err := w.root.Open(d)
	if err != nil {
		return -1, nil, err
	}
	return int(f.Fd()), func() { f.Close() }, nil
}

// statInfo is the fs.FileInfo of an fstatat, as os.Lstat's: Sys is a
// *syscall.Stat_t.
type statInfo struct {
	name string
	st   syscall.Stat_t
}

func newStatInfo(name string, u *unix.Stat_t) *statInfo {
	return &statInfo{name: name, st: syscall.Stat_t{
		Dev: u.Dev, Ino: u.Ino, Nlink: u.Nlink, Mode: u.Mode, Uid: u.Uid, Gid: u.Gid, Rdev: u.Rdev,
		Size: u.Size, Blksize: u.Blksize, Blocks: u.Blocks,
		Atim: syscall.Timespec{Sec: u.Atim.Sec, Nsec: u.Atim.Nsec},
		Mtim: syscall.Timespec{Sec: u.Mtim.Sec, Nsec: u.Mtim.Nsec},
		Ctim: syscall.Timespec{Sec: u.Ctim.Sec, Nsec: u.Ctim.Nsec},
	}}
}

func (i *statInfo) Name() string       { return i.name }
func (i *statInfo) Size() int64        { return i.st.Size }
func (i *statInfo) ModTime() time.Time { return time.Unix(i.st.Mtim.Unix()) }
func (i *statInfo) IsDir() bool        { return i.Mode().IsDir() }
func (i *statInfo) Sys() any           { return &i.st }

// Mode is as os's (fillFileStatFromSys).
func (i *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(i.st.Mode & 0o777)
	switch i.st.Mode & syscall.S_IFMT {
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if i.st.Mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if i.st.Mode&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if i.st.Mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// sameFile is os.SameFile, for statInfo too.
func sameFile(a, b fs.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 {
		return os.SameFile(a, b)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// exchange moves tmp to p in one step: renameat2 with RENAME_NOREPLACE
// when p is free, RENAME_EXCHANGE when a file is there (which tmp's name
// then holds: aside), the latter first when there says a file is likely
// at p. ok is false when the file system cannot (put falls back to a
// rename aside).
func (w *worktree) exchange(tmp, p string, there bool) (aside string, asideInfo fs.FileInfo, placed, ok bool, err error) {
	fd, doneFrom, err := w.openDir(path.Dir(tmp))
	if err != nil {
		return "", nil, false, false, nil
	}
	defer doneFrom()
	td, doneTo, err := w.openDir(path.Dir(p))
	if err != nil {
		return "", nil, false, false, nil
	}
	defer doneTo()
	for range 6 {
		if there {
			err = unix.Renameat2(fd, path.Base(tmp), td, path.Base(p), unix.RENAME_EXCHANGE)
			if err == nil {
				w.touch(p)
				// What was at p, looked at where it now is, in the folder
				// at hand (takeAside's lstat, one call).
				var st unix.Stat_t
				if unix.Fstatat(fd, path.Base(tmp), &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
					asideInfo = newStatInfo(path.Base(tmp), &st)
				}
				return tmp, asideInfo, true, true, nil
			}
			if !errors.Is(err, unix.ENOENT) { // ENOENT: nothing at p (removed meanwhile)
				break
			}
		} else {
			err = unix.Renameat2(fd, path.Base(tmp), td, path.Base(p), unix.RENAME_NOREPLACE)
			if err == nil {
				w.touch(p)
				return "", nil, true, true, nil
			}
			if !errors.Is(err, unix.EEXIST) {
				break
			}
		}
		there = !there
	}
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOENT) {
		return "", nil, false, false, nil // not supported here (or a folder at p): the portable way
	}
	return "", nil, false, true, err
}

// euid is the process's effective user (gitmem never changes it).
var euid = os.Geteuid()

// reusable reports whether a file taken aside, with stat data fi and held
// alone (holdAlone), can be reused as a spare (worktree.recycle): it has
// one link and it is the process's own.
func reusable(fi fs.FileInfo, alone bool) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return alone && ok && st.Nlink == 1 && int(st.Uid) == euid
}

// Leases (fcntl(2), F_SETLEASE) tell who else holds a file open: the
// kernel grants a write lease only when no other open file description
// refers to the file, and a read lease only when none is open for
// writing. Held, a lease makes another program's open of the file (for
// writing, or any open for a write lease) wait until it is given back, so
// what is read meanwhile is one whole state of the file: never one a
// program truncated (open with O_TRUNC) and is still to write.

// holdAlone takes a write lease on f (open read-write): ok when nobody
// else holds the file open. release gives it back.
func holdAlone(f *os.File) (release func(), ok bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return func() {}, false
	}
	rc.Control(func(fd uintptr) {
		_, err = unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_WRLCK)
	})
	if err != nil {
		return func() {}, false
	}
	return func() {
		rc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_UNLCK) })
	}, true
}

// writing reports whether a program holds the regular file at p open for
// writing (readSettled's busy) still after writerWait (a child process
// this one forked holds its descriptors only until its exec: see
// editedBefore), without reading it. Where that cannot be told (a file
// system without leases, a file of another owner), or p cannot be
// opened, it is false; elsewhere than Linux it always is
// (worktree_other.go).
func (w *worktree) writing(p string) bool {
	return w.writerStays(p, func() bool { return w.writingNow(p) })
}

// writingNow is writing's look, once.
func (w *worktree) writingNow(p string) bool {
	f, done, err := w.openRegular(p)
	if leased(err) {
		return true // another program's lease: it is busy with it
	}
	if err != nil {
		return false
	}
	defer done()
	release, busy := holdRead(f)
	release()
	return busy
}

// holdRead takes a read lease on the file f reads (opened read-only):
// busy when a program holds it open for writing. Where leases cannot tell
// (a file system without them, a file of another owner), busy is false
// and release does nothing.
func holdRead(f statReader) (release func(), busy bool) {
	var fd uintptr
	switch f := f.(type) {
	case *rawFile:
		fd = uintptr(f.fd)
	case *os.File:
		fd = f.Fd()
	default:
		return func() {}, false
	}
	for {
		_, err := unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_RDLCK)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return func() {}, true
		case err != nil:
			return func() {}, false
		}
		return func() { unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_UNLCK) }, false
	}
}
