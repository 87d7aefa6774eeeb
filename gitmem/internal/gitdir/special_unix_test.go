//go:build unix

package gitdir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// noHang runs f, failing the test if it has not returned after a long
// while: what it guards against is a call blocked for ever (an open of a
// FIFO no process writes or reads), not a slow one.
func noHang(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s blocked", what)
	}
}

// A file of git's that is not a regular file (a FIFO, a folder, a
// socket put there by hand or by a restored backup) is an error to
// ReadFile: never read as empty, never waited on.
func TestReadFileTakesOnlyRegularFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "config")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	var data []byte
	var err error
	noHang(t, "ReadFile of a FIFO", func() { data, err = ReadFile(fifo) })
	if err == nil {
		t.Fatalf("ReadFile of a FIFO: %q, no error", data)
	}
	if _, err := ReadFile(dir); err == nil {
		t.Fatal("ReadFile of a folder: no error")
	}
	// Mark reads .git/config too: a FIFO there is an error, not an
	// empty config it would write gitmem's mark over, nor a wait.
	noHang(t, "Mark over a FIFO .git/config", func() { err = Mark(nil, dir) })
	var d *Damaged
	if !errors.As(err, &d) {
		t.Fatalf("Mark over a FIFO .git/config: %v, want the repository named damaged", err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO was replaced: %v %v", fi, err)
	}
}

// RewriteCache writes over a regular file only: a symlink at the cache's
// path is replaced (its target, anywhere on the host, is not written
// through), and a FIFO is replaced without waiting for a reader.
func TestRewriteCacheWritesOnlyIntoItsOwnFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("victim content\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "index-head")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if err := RewriteCache(link, []byte("new\n"), OwnFileMode); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "victim content\n" {
		t.Fatalf("a symlink's target was written through: %q", got)
	}
	if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the symlink was not replaced by a file: %v %v", fi, err)
	}
	fifo := filepath.Join(dir, "fifo-head")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	var err error
	noHang(t, "RewriteCache of a FIFO", func() { err = RewriteCache(fifo, []byte("new\n"), OwnFileMode) })
	if got, rerr := os.ReadFile(fifo); err != nil || rerr != nil || string(got) != "new\n" {
		t.Fatalf("RewriteCache of a FIFO: %v; then %q %v", err, got, rerr)
	}
}

// A branch whose file is a folder or a FIFO is a damaged branch, said as
// one (what to run, no host path), not a raw read error.
func TestABranchThatIsNoFileIsDamaged(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"folder", "fifo"} {
		gitDir := t.TempDir()
		ref := filepath.Join(gitDir, "refs", "heads", "main")
		if err := os.MkdirAll(filepath.Dir(ref), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if kind == "folder" {
			err = os.Mkdir(ref, 0o755)
		} else {
			err = unix.Mkfifo(ref, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		noHang(t, "ReadRef of a "+kind, func() { _, err = ReadRef(gitDir, "refs/heads/main") })
		var d *Damaged
		if !errors.As(err, &d) || strings.Contains(err.Error(), gitDir) {
			t.Fatalf("a branch that is a %s: %v, want it named damaged, without the host path", kind, err)
		}
	}
}

// A lock whose second name carries this process's pid but another
// random part is an earlier process's (one pid is never two running
// processes): in a container every start has the same pid, and a lock a
// killed gitmem left was never removed there (the branch's lock refused
// every change until it was deleted by hand). This process's own lock
// stays.
func TestALockOfAnEarlierProcessWithThisPidIsRemoved(t *testing.T) {
	gitDir := t.TempDir()
	heads := filepath.Join(gitDir, "refs", "heads")
	if err := os.MkdirAll(heads, 0o755); err != nil {
		t.Fatal(err)
	}
	other := fmt.Sprintf("%d.%08x", os.Getpid(), 0xdeadbeef)
	if other == ProcTag {
		other = fmt.Sprintf("%d.%08x", os.Getpid(), 0xfeedface)
	}
	for name, tag := range map[string]string{"main": other, "mine": ProcTag} {
		lock := filepath.Join(heads, name+".lock")
		own := filepath.Join(heads, name+".gitmem-"+tag+"-1.lock")
		if err := os.WriteFile(own, []byte("h\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(own, lock); err != nil {
			t.Fatal(err)
		}
	}
	removed := ClearOwnLocks(nil, gitDir, nil, nil, nil)
	if len(removed) != 1 || removed[0] != "refs/heads/main.lock" {
		t.Fatalf("removed %q, want the earlier process's refs/heads/main.lock alone", removed)
	}
	if _, err := os.Lstat(filepath.Join(heads, "mine.lock")); err != nil {
		t.Fatalf("this process's own lock was removed: %v", err)
	}
}

// A lock whose second name's pid runs again, in a process that started
// at another time than the one recorded in the name (the owner died and
// the pid wrapped round to an unrelated process on a long-running host),
// is the dead owner's: removed. One whose pid runs with the start time
// recorded, or whose start time cannot be read (no /proc), or whose name
// records none (an older gitmem's), stays, as before. The start time is
// read through the instance's reader (Env.SetProcStart): a live child
// process plays the pid's new owner.
func TestALockOfAPidStartedAgainIsRemoved(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep to run:", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	gitDir := t.TempDir()
	heads := filepath.Join(gitDir, "refs", "heads")
	if err := os.MkdirAll(heads, 0o755); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("%d.%08x", pid, 0xdeadbeef)
	locks := map[string]string{ // branch -> the number after the tag
		"wrapped": fmt.Sprintf("%020d%d", 1000, 1), // started at 1000, the pid's process at 2000
		"owner":   fmt.Sprintf("%020d%d", 2000, 2),
		"older":   "3", // no start time recorded
	}
	for name, seq := range locks {
		own := filepath.Join(heads, name+".gitmem-"+tag+"-"+seq+".lock")
		if err := os.WriteFile(own, []byte("h\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(own, filepath.Join(heads, name+".lock")); err != nil {
			t.Fatal(err)
		}
	}
	env := new(Env)
	env.SetProcStart(func(p int) (uint64, bool) { return 0, false }) // no /proc: as before
	if removed := ClearOwnLocks(env, gitDir, nil, nil, nil); len(removed) != 0 {
		t.Fatalf("without the start time, removed %q", removed)
	}
	env.SetProcStart(func(p int) (uint64, bool) { return 2000, p == pid })
	removed := ClearOwnLocks(env, gitDir, nil, nil, nil)
	if len(removed) != 1 || removed[0] != "refs/heads/wrapped.lock" {
		t.Fatalf("removed %q, want refs/heads/wrapped.lock alone", removed)
	}
	for _, name := range []string{"owner", "older"} {
		if _, err := os.Lstat(filepath.Join(heads, name+".lock")); err != nil {
			t.Errorf("%s.lock was removed: %v", name, err)
		}
	}
	// This process's own names record its start time where /proc has it,
	// and an older gitmem's pattern reads them as before.
	name := ownLockName(filepath.Join(heads, "x"))
	if start, ok := readProcStart(os.Getpid()); ok {
		m := ownLockRE().FindStringSubmatch(name)
		if m == nil || m[4][:startDigits] != fmt.Sprintf("%020d", start) {
			t.Errorf("ownLockName records %q, want the start time %d", m, start)
		}
	}
	older := regexp.MustCompile(`^(.+)\.gitmem-(([0-9]+)\.[0-9a-f]{8})-[0-9]+\.lock$`)
	if m := older.FindStringSubmatch(name); m == nil || m[1] != filepath.Join(heads, "x") || m[2] != ProcTag {
		t.Errorf("an older gitmem reads %q as %q", name, m)
	}
}

// OpenRead is os.Open without the poller: the same errors (what callers
// test with errors.Is, and the path in a *fs.PathError), the same reads,
// and a descriptor left blocking.
func TestOpenReadIsOsOpen(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	_, err := OpenRead(missing)
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Op != "open" || pe.Path != missing {
		t.Fatalf("OpenRead of a missing file: %#v, want os.Open's *fs.PathError", err)
	}
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenRead(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rc, err := f.SyscallConn() // not Fd, which makes the descriptor blocking
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	var ferr error
	if err := rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil || ferr != nil || flags&unix.O_NONBLOCK != 0 {
		t.Fatalf("flags %#x, %v, %v: want a blocking descriptor", flags, err, ferr)
	}
	buf := make([]byte, 4)
	if n, err := f.ReadAt(buf, 3); n != 4 || err != nil || string(buf) != "3456" {
		t.Fatalf("ReadAt: %d %v %q", n, err, buf)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != 10 || f.Name() != path {
		t.Fatalf("Stat: %v %v, name %q", fi, err, f.Name())
	}
}

// OpenRead and OpenFile open only a regular file, without waiting on
// what else stands there: a named pipe (a blocking open waits for a
// writer; .git/index, a loose object, a pack's index were opened so) is
// ErrNotRegular (opened for writing only too, where the system says ENXIO), a folder EISDIR; a regular file
// opened with O_APPEND keeps it, and every descriptor is left blocking.
func TestOpenReadAndOpenFileTakeOnlyRegularFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "index")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	opens := []struct {
		name string
		open func(string) (*os.File, error)
	}{
		{"OpenRead", OpenRead},
		{"OpenFile read-write", func(p string) (*os.File, error) { return OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600) }},
		{"OpenFile write-only", func(p string) (*os.File, error) { return OpenFile(p, os.O_WRONLY|os.O_APPEND, 0) }},
	}
	for _, o := range opens {
		var err error
		noHang(t, o.name+" of a FIFO", func() {
			var f *os.File
			if f, err = o.open(fifo); err == nil {
				f.Close()
			}
		})
		var pe *fs.PathError
		// Opened for writing only, without waiting, a FIFO no one reads
		// is refused by the system (ENXIO), which says no more than "no
		// such device or address": ErrNotRegular too.
		if !errors.Is(err, ErrNotRegular) || !errors.As(err, &pe) || pe.Path != fifo {
			t.Errorf("%s of a FIFO: %v, want ErrNotRegular in a *fs.PathError naming it", o.name, err)
		}
		if f, err := o.open(dir); !errors.Is(err, unix.EISDIR) {
			if err == nil {
				f.Close()
			}
			t.Errorf("%s of a folder: %v, want EISDIR", o.name, err)
		}
	}
	path := filepath.Join(dir, "log")
	if err := os.WriteFile(path, []byte("one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	var ferr error
	if err := rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil || ferr != nil || flags&unix.O_NONBLOCK != 0 || flags&unix.O_APPEND == 0 {
		t.Fatalf("flags %#x, %v, %v: want a blocking descriptor, appending", flags, err, ferr)
	}
	if _, err := f.WriteString("two\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got, _ := os.ReadFile(path); string(got) != "one\ntwo\n" {
		t.Fatalf("appended: %q", got)
	}
}

// A lock file that is a FIFO (put there by hand) is an error to a
// reader's look at it (HeldElsewhere, OpenReadLock), not a wait for a
// writer that never comes: gitmem log hung on it.
func TestReaderLockOpensTakeOnlyRegularFiles(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "lock")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	var err error
	noHang(t, "HeldElsewhere of a FIFO", func() { _, err = HeldElsewhere(fifo) })
	if !errors.Is(err, ErrNotRegular) {
		t.Fatalf("HeldElsewhere of a FIFO: %v, want ErrNotRegular", err)
	}
	noHang(t, "OpenReadLock of a FIFO", func() {
		var l *FileLock
		if l, err = OpenReadLock(fifo); err == nil {
			l.Close()
		}
	})
	if !errors.Is(err, ErrNotRegular) {
		t.Fatalf("OpenReadLock of a FIFO: %v, want ErrNotRegular", err)
	}
}

// A cache file gets the mode it is written with: made new, replaced, or
// written over in place where an earlier gitmem made it 0644 (gitmem's
// own files in .git/gitmem are OwnFileMode; index-head was 0644).
func TestCacheFilesGetTheirMode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := filepath.Join(dir, "index-head")
	if err := os.WriteFile(old, []byte("older, longer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path  string
		write func(string, []byte, os.FileMode) error
	}{
		{old, RewriteCache},
		{filepath.Join(dir, "made"), RewriteCache},
		{filepath.Join(dir, "clean"), func(path string, data []byte, mode os.FileMode) error {
			return ReplaceCache(context.Background(), path, data, mode)
		}},
	} {
		if err := tc.write(tc.path, []byte("new\n"), OwnFileMode); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(tc.path); fi.Mode() != OwnFileMode || string(got) != "new\n" {
			t.Errorf("%s: %v %q, want %v %q", filepath.Base(tc.path), fi.Mode(), got, OwnFileMode, "new\n")
		}
	}
}

// A named pipe where gitmem opens a folder (to make its entries durable,
// to list it) is not waited on: the open says it is no folder (ENOTDIR).
// Before, SyncDir, syncFS and dirNames opened it with a blocking open,
// which waited for a writer.
func TestFolderOpensDoNotWaitOnAPipe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "tmp")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	var err error
	noHang(t, "SyncDir of a FIFO", func() { err = SyncDir(fifo) })
	if !errors.Is(err, unix.ENOTDIR) {
		t.Errorf("SyncDir of a FIFO: %v, want ENOTDIR", err)
	}
	noHang(t, "syncFS of a FIFO", func() { err = syncFS(fifo, nil) })
	if err == nil {
		t.Errorf("syncFS of a FIFO: no error")
	}
	var names map[string]bool
	noHang(t, "dirNames of a FIFO", func() { names = dirNames(fifo) })
	if names != nil {
		t.Errorf("dirNames of a FIFO: %v, want nil (cannot be read)", names)
	}
	if err := SyncDir(dir); err != nil {
		t.Errorf("SyncDir of a folder: %v", err)
	}
	if names := dirNames(dir); !names["tmp"] {
		t.Errorf("dirNames of a folder: %v", names)
	}
}
