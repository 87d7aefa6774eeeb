//go:build !unix

package gitmem

import "os"

// ownedByUs reports whether path belongs to the user this process runs
// as: where the system does not tell, whether it exists.
func ownedByUs(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
