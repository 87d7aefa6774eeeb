package gitmem

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
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
