//go:build unix

package gitmem

import (
	"syscall"
	"testing"
)

// mkfifo makes a named pipe at path (for the tests of one put by hand
// where gitmem expects a file).
func mkfifo(t testing.TB, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}
