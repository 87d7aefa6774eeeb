package gitdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// LockHolder names the process holding the lock (this one: its pid and
// /proc/self/comm), and no one once it is let go or for another file.
func TestLockHolderFromProcLocks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, other := filepath.Join(dir, "lock"), filepath.Join(dir, "other")
	l, err := OpenFileLock(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	o, err := OpenFileLock(other)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if pid, name := LockHolder(path); pid != 0 || name != "" {
		t.Fatalf("a free lock is held by %d (%s)", pid, name)
	}
	if err := l.Lock(); err != nil {
		t.Fatal(err)
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	if pid, name := LockHolder(path); pid != os.Getpid() || name != strings.TrimSpace(string(comm)) {
		t.Fatalf("LockHolder = %d (%s), want %d (%s)", pid, name, os.Getpid(), comm)
	}
	if pid, _ := LockHolder(other); pid != 0 {
		t.Fatalf("another file's lock is held by %d", pid)
	}
	l.Unlock()
	if pid, _ := LockHolder(path); pid != 0 {
		t.Fatalf("a lock let go is held by %d", pid)
	}
}
