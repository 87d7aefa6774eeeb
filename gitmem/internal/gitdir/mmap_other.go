//go:build !unix

package gitdir

import "os"

// mapFile reads a file into memory (no mmap here).
func mapFile(path string) ([]byte, func(), error) {
	data, err := os.ReadFile(path)
	return data, func() {}, err
}

// canMapPacks: mapFile would read whole packs into memory here.
const canMapPacks = false
