//go:build !unix

package gitmem

import "testing"

// mkfifo skips the test: this system has no named pipes in its folders
// (see fifo_unix_test.go).
func mkfifo(t testing.TB, _ string) {
	t.Helper()
	t.Skip("no named pipes here")
}
