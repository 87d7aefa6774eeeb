//go:build !linux

package gitdir

// LockHolder names the process holding the writer lock at path where the
// kernel says it (Linux: lockholder_linux.go); here it cannot be told.
func LockHolder(path string) (pid int, name string) { return 0, "" }
