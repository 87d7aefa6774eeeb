package gitmem

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// A file edited by hand before gitmem writes an acknowledged change to
// it stays in place as it is, never taken aside: a program that reads it
// meanwhile finds its own edit. (Taken aside, gitmem's version was there
// until gitmem put the edit back, and a program that appended to the file
// then wrote back a file without its earlier line, which the adopt could
// only keep between conflict markers: TestTruncatingHandEditsBesideTheModel,
// about 1 run in 60 under load.) Here the edit lands after the
// materialiser's look for hand edits, before its write. An inotify watch on the folder sees
// whether anything was moved to or from the file's name. The next adopt
// merges both.
func TestHandEditBeforeAWriteStaysInPlace(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	keepWriterLock(t, r)
	write(t, r, "t1", "a.md", "one\ntwo\n")
	settle(t, r)
	r.disk.hold() // the worktree has not caught up yet
	write(t, r, "t2", "a.md", "ONE\ntwo\n")
	// The edit lands after the materialiser's look for hand edits
	// (keepHandEdits), before it writes the file.
	var once sync.Once
	r.objects.st.Env.SetFault(func(step, p string) error {
		if step == gd.StepWorktree && strings.HasSuffix(p, "a.md") {
			once.Do(func() { appendHand(t, dir, "a.md", "by hand") })
		}
		return nil
	})
	defer r.objects.st.Env.SetFault(nil)
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, filepath.Join(dir, "memories"), unix.IN_MOVED_TO|unix.IN_MOVED_FROM|unix.IN_CREATE|unix.IN_DELETE); err != nil {
		t.Fatal(err)
	}
	r.disk.mu.Unlock()
	settle(t, r)
	var moved []string
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil || n <= 0 {
			break
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
			if name == "a.md" {
				moved = append(moved, name)
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
	if len(moved) > 0 {
		t.Errorf("the file edited by hand was replaced %d time(s) while gitmem wrote its change", len(moved)/2)
	}
	if got := readDisk(t, dir, "a.md"); got != "one\ntwo\nby hand\n" {
		t.Errorf("worktree a.md = %q before the adopt", got)
	}
	if _, err := r.Adopt(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	if got := read(t, r, "a.md"); got != "ONE\ntwo\nby hand\n" {
		t.Errorf("HEAD's a.md = %q after the adopt", got)
	}
	if disk := readDisk(t, dir, "a.md"); disk != "ONE\ntwo\nby hand\n" {
		t.Errorf("worktree a.md = %q after the adopt", disk)
	}
}
