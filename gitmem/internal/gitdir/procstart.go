package gitdir

import (
	"bytes"
	"os"
	"strconv"
)

// readProcStart reads the start time of the process pid: field 22 of
// /proc/PID/stat, in clock ticks since boot. It reports false where it
// cannot be read (no /proc: not Linux; the process is gone).
func readProcStart(pid int) (uint64, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// "pid (comm) state ...": comm may hold spaces and parentheses; the
	// fields after its last ")" are the third onwards.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 20 {
		return 0, false
	}
	t, err := strconv.ParseUint(string(f[19]), 10, 64)
	return t, err == nil
}

// ProcessStart is the start time of the process pid (readProcStart):
// false where it cannot be read.
func ProcessStart(pid int) (uint64, bool) { return readProcStart(pid) }

// ProcessGone says no process with this pid runs on this machine (false
// where that cannot be told).
func ProcessGone(pid int) bool { return processGone(pid) }
