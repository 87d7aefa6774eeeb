//go:build !unix

package gitdir

import "os"

// ReadFile is os.ReadFile (readfile_unix.go: in fewer system calls).
func ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

// listNames is ListNames's listing (readfile_unix.go: in fewer system
// calls).
func listNames(dir string) []string {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	return names
}
