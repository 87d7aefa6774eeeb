//go:build !linux

package bench

import (
	"errors"
	"os"
)

func fdatasync(f *os.File) error { return f.Sync() }

func fsType(string) string { return "" }

const clockTick = 0

func cpuTicks(int) (int64, bool) { return 0, false }

// writeBack is the Linux one's flush before a timed run; elsewhere the
// bench's runs start on whatever the disk holds.
func writeBack(string) {}

func evict([]string) error { return errors.New("--stores-evict: on Linux only") }
