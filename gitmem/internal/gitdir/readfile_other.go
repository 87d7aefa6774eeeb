//go:build !unix

package gitdir

import "os"

// ReadFile is os.ReadFile (readfile_unix.go: in fewer system calls).
func ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }
