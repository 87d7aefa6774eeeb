package gitdir

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockHolder names the process that holds the flock(2) lock on the file
// at path (the writer lock), as the kernel tells it in /proc/locks: its
// pid and its name (/proc/PID/comm). 0 and "" when it cannot be told (no
// such lock listed, the pid not visible here, the process gone).
func LockHolder(path string) (pid int, name string) {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return 0, ""
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0, ""
	}
	defer f.Close()
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 4242 fd:01:131090 0 EOF"; a process
		// blocked on the lock is listed as "1: -> FLOCK ...".
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[1] != "FLOCK" || fs[3] != "WRITE" || fs[5] != want {
			continue
		}
		if p, err := strconv.Atoi(fs[4]); err == nil && p > 0 {
			comm, err := os.ReadFile("/proc/" + fs[4] + "/comm")
			if err != nil {
				return 0, "" // gone since
			}
			return p, strings.TrimSuffix(string(comm), "\n")
		}
	}
	return 0, ""
}
