//go:build !linux

package gitmem

import (
	"io/fs"
	"os"
)

// exchange is Linux's: elsewhere put moves the old file aside first.
func (w *worktree) exchange(tmp, p string) (aside string, placed, ok bool, err error) {
	return "", false, false, nil
}

// reusable: files taken aside are reused only where Linux's write lease
// can tell that nobody else holds them open.
func reusable(*os.File, fs.FileInfo) bool { return false }
