//go:build !linux

package bench

import (
	"errors"
	"os"
)

func fdatasync(f *os.File) error { return f.Sync() }

func fsType(string) string { return "" }

func cpuTicks(int) (int64, bool) { return 0, false }

func evict([]string) error { return errors.New("--stores-evict: on Linux only") }
