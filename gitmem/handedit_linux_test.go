package gitmem

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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
// materialiser's look for hand edits, before its write (syncChecked's
// editedBefore): an edit written, or one under way, a program holding the
// file open for writing that has written nothing yet (`exec 3>>a.md`, an
// editor; taken aside, it was put back only once the wait for its writer
// ran out). An inotify watch on the folder sees whether anything was
// moved to or from the file's name. The next adopt merges both.
func TestHandEditBeforeAWriteStaysInPlace(t *testing.T) {
	t.Parallel()
	for _, open := range []bool{false, true} {
		t.Run(map[bool]string{false: "written", true: "open for writing"}[open], func(t *testing.T) {
			t.Parallel()
			r, dir := newRepo(t)
			keepWriterLock(t, r)
			// The edit lands after the materialiser's look for hand edits
			// (keepHandEdits), before it writes the file.
			var f *os.File
			var once sync.Once
			defer r.objects.st.Env.SetFault(nil)
			var moves func() int
			changeBehindTheWorktree(t, r, func() {
				r.objects.st.Env.SetFault(func(step, p string) error {
					if step == gd.StepWorktree && strings.HasSuffix(p, "a.md") {
						once.Do(func() {
							if !open {
								appendHand(t, dir, "a.md", "by hand")
								return
							}
							var err error
							if f, err = os.OpenFile(filepath.Join(dir, "memories", "a.md"), os.O_WRONLY|os.O_APPEND, 0); err != nil {
								t.Error(err)
							}
						})
					}
					return nil
				})
				moves = watchMoves(t, filepath.Join(dir, "memories"), "a.md")
			})
			if n := moves(); n > 0 {
				t.Errorf("the file edited by hand was replaced %d time(s) while gitmem wrote its change", n/2)
			}
			if open {
				if f == nil {
					t.Fatal("the file was not opened")
				}
				if got := readDisk(t, dir, "a.md"); got != "one\ntwo\n" {
					t.Errorf("worktree a.md = %q while the program held it open", got)
				}
				f.WriteString("by hand\n")
				f.Close()
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
		})
	}
}

// A descriptor of gitmem's own file open for writing elsewhere only for
// a moment is no edit under way: a child process this one forks (git)
// holds a copy of every descriptor it has open until its exec closes
// them, among them the spare file (recycle) or temporary file that
// became a worktree file. A follow that looked at that file then took it
// for a hand edit under way (editedBefore), kept it, and the worktree
// stayed on the older version until an adopt: a hand edit made after the
// settle merged with that version, a conflict of the model's change and
// the edit (TestHalfFailedGitCheckoutIsNoHandEdit, once under the whole
// package's -race run, which forks git all along; 2 runs in 56 with a
// goroutine forking git beside it). The test opens the file for writing
// once the follow begins and closes it (the child's exec) at the
// follow's first wait for the writer.
func TestAWriterThatLeavesAtOnceIsNoHandEdit(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	keepWriterLock(t, r)
	var f *os.File
	var once sync.Once
	waited := false
	defer r.objects.st.Env.SetFault(nil)
	changeBehindTheWorktree(t, r, func() {
		r.objects.st.Env.SetFault(func(step, p string) error {
			if !strings.HasSuffix(p, "a.md") {
				return nil
			}
			switch step {
			case gd.StepWorktree:
				once.Do(func() {
					var err error
					if f, err = os.OpenFile(filepath.Join(dir, "memories", "a.md"), os.O_WRONLY, 0); err != nil {
						t.Error(err)
					}
				})
			case gd.StepWriterWait:
				if f != nil {
					f.Close()
					f, waited = nil, true
				}
			}
			return nil
		})
	})
	if f != nil {
		f.Close()
	}
	if !waited {
		t.Error("the follow did not wait for the writer")
	}
	if r.mirror.repairs.handKept() {
		t.Errorf("a hand edit is kept: %v", r.mirror.repairs.bases())
	}
	if got := readDisk(t, dir, "a.md"); got != "ONE\ntwo\n" {
		t.Errorf("worktree a.md = %q, want the acknowledged version", got)
	}
	if _, err := r.Adopt(context.Background()); !errors.Is(err, ErrNoChange) {
		t.Errorf("adopt: %v, want ErrNoChange", err)
	}
}

// watchMoves watches the folder dir with inotify from now on, and returns
// how many times, so far, a file was moved to or from, created or deleted
// at name there.
func watchMoves(t *testing.T, dir, name string) func() int {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_MOVED_TO|unix.IN_MOVED_FROM|unix.IN_CREATE|unix.IN_DELETE); err != nil {
		t.Fatal(err)
	}
	n := 0
	buf := make([]byte, 64<<10)
	return func() int {
		for {
			k, err := unix.Read(fd, buf)
			if err != nil || k <= 0 {
				return n
			}
			for off := 0; off+unix.SizeofInotifyEvent <= k; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				if strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00") == name {
					n++
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}
}

// The record of the files gitmem placed vouches for a file it put there
// and nobody replaced since, as the worktree's own lstat sees it (an
// openat2 lookup, whose stat data is no *os.fileStat): else every write
// of a file gitmem wrote last read it first (editedBefore), a pull of a
// thousand files a thousand reads. A file put there by another program
// (a new inode of the same size) is not vouched for.
func TestPlacedFileVouchedForByItsLstat(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	ctx := context.Background()
	if _, err := r.Update(ctx, Meta{Subject: "write"}, func(tx *Tx) error {
		return tx.WriteFile("a.md", []byte("one\n"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	const q = "memories/a.md"
	fi, err := r.mirror.wt.lstat(q)
	if err != nil {
		t.Fatal(err)
	}
	if !r.mirror.wt.asPlaced(q, fi) {
		t.Fatalf("the file gitmem placed is not vouched for by its lstat (%T)", fi)
	}
	tmp := filepath.Join(dir, "memories", "a.md.new")
	if err := os.WriteFile(tmp, []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "memories", "a.md")); err != nil {
		t.Fatal(err)
	}
	if fi, err = r.mirror.wt.lstat(q); err != nil {
		t.Fatal(err)
	}
	if r.mirror.wt.asPlaced(q, fi) {
		t.Fatal("a file put there by another program is vouched for as gitmem's")
	}
}

// A child process this one is forking holds a copy of each of its
// descriptors until its exec, and Go holds syscall.ForkLock for writing
// until then: a file this process wrote and closed, whose descriptor such
// a child still holds, is no file a program writes (forksDone). Under load
// the child can wait longer than writerWait to run: an adopt then left a
// file the test had written by hand out, as one still being written
// (TestHandEditInAFolderRenamedAwayGoesWithIt/deleted, once, load 17: its
// new.md in a git child of a parallel test). Here the fork under way is
// the test's hold of ForkLock and the child's copy its open file.
func TestAChildNotYetExecedIsNoWriter(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	defer r.Close()
	write(t, r, "t1", "a.md", "one\n")
	settle(t, r)
	waited := false
	r.objects.st.Env.SetFault(func(step, p string) error {
		if step == gd.StepWriterWait {
			waited = true
		}
		return nil
	})
	defer r.objects.st.Env.SetFault(nil)

	syscall.ForkLock.Lock() // a fork under way
	f, err := os.OpenFile(filepath.Join(dir, "memories", "a.md"), os.O_WRONLY, 0)
	if err != nil {
		syscall.ForkLock.Unlock()
		t.Fatal(err)
	}
	writing := make(chan bool)
	go func() { writing <- r.mirror.wt.writing("memories/a.md") }()
	// Time for the look to reach its wait for the fork; were it to come
	// later, the test would pass whatever the look does, never fail.
	time.Sleep(50 * time.Millisecond)
	f.Close()
	syscall.ForkLock.Unlock() // the child has exec'd: its copy is closed
	if <-writing || waited {
		t.Errorf("a descriptor of this process's, held by a child until its exec, taken for a writer (writing: waited %v)", waited)
	}
}
