//go:build !linux

package gitmem

import (
	"io/fs"
	"os"
	"syscall"
)

// exchange is Linux's: elsewhere put moves the old file aside first.
func (w *worktree) exchange(tmp, p string, there bool) (aside string, asideInfo fs.FileInfo, placed, ok bool, err error) {
	return "", nil, false, false, nil
}

// reusable: files taken aside are reused only where Linux's write lease
// can tell that nobody else holds them open.
func reusable(fs.FileInfo, bool) bool { return false }

// Leases are Linux's (worktree_linux.go): here who else holds a file open
// cannot be told, and a file taken aside is read as it is (and not reused).
func holdAlone(*os.File) (func(), bool)  { return func() {}, true }
func holdRead(statReader) (func(), bool) { return func() {}, false }

// writing is Linux's (worktree_linux.go): no lease tells a writer here.
func (w *worktree) writing(string) bool { return false }

// The one-step path resolution is Linux's (worktree_linux.go): os.Root
// does it all here.
func openBase(*os.Root, string) (*os.File, syscall.RawConn) { return nil, nil }

// folderFD is Linux's (worktree_linux.go): nothing is held open here.
type folderFD struct{}

func (*folderFD) done() {}

func (w *worktree) fastLstat(string, *folderFD) (fs.FileInfo, error, bool) { return nil, nil, false }
func (w *worktree) fastOpen(string, int) (*os.File, bool)                  { return nil, false }
func (w *worktree) fastOpenRead(string) (statReader, func(), bool)         { return nil, nil, false }

func sameFile(a, b fs.FileInfo) bool { return os.SameFile(a, b) }
