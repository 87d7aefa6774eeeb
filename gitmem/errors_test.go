package gitmem

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// A StorageError says why (the cause's text) so that an operator's log or
// CLI message is useful, but never a host path: a path is shown from .git/
// or memories/ on, or by its last element.
func TestStorageErrorNamesTheCauseWithoutHostPaths(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err        error
		want       string
		hostDetail string
	}{
		{&StorageError{Op: "write an object", Err: &os.PathError{Op: "write", Path: "/srv/secret-host/mem/.git/objects/ab/cdef", Err: syscall.ENOSPC}},
			"gitmem: write an object failed: write .git/objects/ab/cdef: no space left on device", "/srv"},
		{&StorageError{Op: "checkpoint", Err: fmt.Errorf("sync: %w", &os.PathError{Op: "fsync", Path: "/home/a b/m/memories/x.md", Err: syscall.EIO})},
			"gitmem: checkpoint failed: sync: fsync memories/x.md: input/output error", "/home"},
		{&StorageError{Op: "rename", Err: &os.LinkError{Op: "rename", Old: "/var/lib/g/.git/gitmem/tmp/1", New: "/var/lib/g/.git/HEAD", Err: syscall.EACCES}},
			"gitmem: rename failed: rename .git/gitmem/tmp/1 .git/HEAD: permission denied", "/var"},
		{&StorageError{Op: "read", Err: errors.New("open /opt/x/y.pack: bad header")},
			"gitmem: read failed: open y.pack: bad header", "/opt"},
		{&StorageError{Op: "read the history index", Err: errors.New("it does not reach HEAD after a rebuild")},
			"gitmem: read the history index failed: it does not reach HEAD after a rebuild", ""},
		{&StorageError{Op: "nothing below"}, "gitmem: nothing below failed", ""},
	} {
		got := c.err.Error()
		if got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
		if c.hostDetail != "" && strings.Contains(got, c.hostDetail) {
			t.Errorf("%q shows a host path", got)
		}
	}
}

// A log file that cannot be opened is damage only for what the file is
// (its content, a folder in its place): the Problem, which a client of
// the stores server is shown, names it from .git/ on, never a host path.
// What the system refuses (the store's folder deleted while it opened,
// out of files, an I/O error, a permission) is a *StorageError: a retry
// or the operator's fix of the server mends it, not gitmem fsck. Before,
// every failure was "damaged", with the open's error and the store's
// absolute path in the Problem.
func TestWALOpenErrorIsDamageOnlyForTheFile(t *testing.T) {
	t.Parallel()
	const host = "/srv/stores/s1"
	wal := host + "/.git/gitmem/wal"
	for _, c := range []struct {
		err     error
		damaged string // the Problem; "": a *StorageError
	}{
		{&fs.PathError{Op: "open", Path: wal, Err: syscall.EISDIR}, "the write-ahead log .git/gitmem/wal is a folder, not a file"},
		{&fs.PathError{Op: "open", Path: wal, Err: gd.ErrNotRegular}, "the write-ahead log .git/gitmem/wal is not a regular file"},
		{errors.New("wal is not a gitmem write-ahead log"), "the write-ahead log .git/gitmem/wal cannot be read (wal is not a gitmem write-ahead log)"},
		{fmt.Errorf("a record of %s does not decode", wal), "the write-ahead log .git/gitmem/wal cannot be read (a record of .git/gitmem/wal does not decode)"},
		{&fs.PathError{Op: "open", Path: wal, Err: syscall.ENOENT}, ""},
		{&fs.PathError{Op: "open", Path: wal + ".new", Err: syscall.ENOTDIR}, ""},
		{&os.LinkError{Op: "rename", Old: wal + ".new", New: wal, Err: syscall.ENOENT}, ""},
		{&fs.PathError{Op: "open", Path: wal, Err: syscall.EMFILE}, ""},
		{&fs.PathError{Op: "read", Path: wal, Err: syscall.EIO}, ""},
		{&fs.PathError{Op: "open", Path: wal, Err: syscall.EACCES}, ""},
		{&fs.PathError{Op: "write", Path: wal + ".new", Err: syscall.ENOSPC}, ""},
	} {
		err := walOpenError("wal", c.err)
		var de *DamagedError
		var se *StorageError
		switch {
		case c.damaged != "" && (!errors.As(err, &de) || de.Problem != c.damaged):
			t.Errorf("%v: %#v\nwant damaged: %s", c.err, err, c.damaged)
		case c.damaged == "" && !errors.As(err, &se):
			t.Errorf("%v: %#v, want a *StorageError", c.err, err)
		case c.damaged == "" && !errors.Is(err, c.err.(interface{ Unwrap() error }).Unwrap()):
			t.Errorf("%v: %#v does not unwrap to its errno", c.err, err)
		}
		if strings.Contains(err.Error(), host) {
			t.Errorf("%v: names a host path: %s", c.err, err)
		}
	}
	if !OutOfFiles(walOpenError("wal", &fs.PathError{Op: "open", Path: wal, Err: syscall.EMFILE})) {
		t.Error("EMFILE is not out of files")
	}
}
