//go:build unix

package gitmem

import (
	"os"
	"syscall"
)

// ownedByUs reports whether path belongs to the user this process runs as.
func ownedByUs(path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
