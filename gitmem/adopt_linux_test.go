//go:build linux

package gitmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A program that writes a whole file opens it with O_TRUNC, then writes:
// between the two the file is empty. An adopt that runs then must not
// take the empty file (it deleted every line, and the acknowledged values
// with them, until the next adopt); the completed write is adopted.
//
// The file is open for writing in this process alone: a child that
// another parallel test forks (git) holds a copy of every descriptor
// until it execs, and with one of the writer's, the adopt after the
// close found the file still open for writing and adopted nothing (a
// loaded machine drew that out). syscall.ForkLock, held for reading
// from the open to the close, lets no fork begin meanwhile (one under
// way has exec'd when the lock is taken: Linux's vfork); gitmem forks
// nothing.
func TestAdoptWaitsForATruncatedFileToBeWritten(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "one\ntwo\n")
	settle(t, r)
	syscall.ForkLock.RLock()
	noForkEnds := sync.OnceFunc(syscall.ForkLock.RUnlock)
	defer noForkEnds() // a failure on the way
	f, err := os.OpenFile(filepath.Join(dir, "memories", "a.md"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Adopt(context.Background()); !errors.Is(err, ErrNoChange) {
		t.Fatalf("adopt of a file being written: %v, want ErrNoChange", err)
	}
	if got := read(t, r, "a.md"); got != "one\ntwo\n" {
		t.Fatalf("HEAD's a.md = %q while the file was being written", got)
	}
	f.WriteString("one\ntwo\nthree by hand\n")
	f.Close()
	noForkEnds()
	if _, err := r.Adopt(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	if got := read(t, r, "a.md"); got != "one\ntwo\nthree by hand\n" {
		t.Fatalf("a.md = %q", got)
	}
	if log := subjects(t, dir); log != "memory: adopt changes made outside gitmem\nw a.md\nmemory: init\n" {
		t.Fatalf("history:\n%s", log)
	}
	gittest.Fsck(t, dir)
}

// A program opened a file (O_TRUNC) just before gitmem replaced it with
// an acknowledged change, and writes after: its write goes to the file
// gitmem took aside. gitmem waits for such a write, and when the program
// holds the file open longer than that, puts its file back in place, so
// that the write lands in the memory folder and the next adopt merges it
// with the acknowledged change. (The write was lost with the file taken
// aside.)
func TestWriteThroughADescriptorOpenWhileGitmemReplacesIsKept(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "one\ntwo\nthree\n")
	settle(t, r)
	var f *os.File
	var once sync.Once
	r.objects.st.Env.SetFault(func(step, p string) error {
		if step == gd.StepWorktree && strings.HasSuffix(p, "a.md") {
			once.Do(func() {
				var err error
				if f, err = os.OpenFile(filepath.Join(dir, "memories", "a.md"), os.O_WRONLY|os.O_TRUNC, 0); err != nil {
					t.Error(err)
				}
			})
		}
		return nil
	})
	defer r.objects.st.Env.SetFault(nil)
	write(t, r, "t2", "a.md", "ONE\ntwo\nthree\n")
	settle(t, r) // the acknowledged change reaches the worktree, the descriptor still open
	r.objects.st.Env.SetFault(nil)
	if f == nil {
		t.Fatal("the descriptor was not opened")
	}
	f.WriteString("one\ntwo\nthree\nfour by hand\n")
	f.Close()
	notWrittenElsewhere(t, filepath.Join(dir, "memories", "a.md"))
	if _, err := r.Adopt(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	want := "ONE\ntwo\nthree\nfour by hand\n"
	if got := read(t, r, "a.md"); got != want {
		t.Fatalf("a.md = %q, want %q\n%s", got, want, gittest.Git(t, dir, "log", "-p", "--format=%s"))
	}
	if got := readDisk(t, dir, "a.md"); got != want {
		t.Fatalf("worktree a.md = %q, want %q", got, want)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
	gittest.Fsck(t, dir)
}

// A program holds a memory file open for writing (exec 3>>a.md, an
// editor) while the model changes it, and still holds it when gitmem
// stops cleanly: gitmem kept the program's file in place (what it writes
// stays in the memory folder), to be merged with the acknowledged changes
// once the program is done — and at exit the program was not done. The
// next start took the file as it was, a hand edit, and rolled every
// acknowledged change to it back (repro-held.sh, repro-exec3.sh). The
// next start merges it with them from the version it was kept on: a
// program that wrote nothing changes nothing (and makes no commit), one
// that wrote keeps its lines beside the acknowledged change.
func TestFileHeldOpenAtACleanStopIsMergedAtTheNextStart(t *testing.T) {
	for _, wrote := range []string{"", "by hand\n"} {
		t.Run(fmt.Sprintf("wrote %q", wrote), func(t *testing.T) {
			dir := gittest.TempDir(t)
			opt := testOptions(t)
			var mu sync.Mutex
			var said []string
			opt.Logf = func(format string, args ...any) {
				t.Logf(format, args...)
				mu.Lock()
				said = append(said, fmt.Sprintf(format, args...))
				mu.Unlock()
			}
			r, _, err := Init(context.Background(), dir, opt)
			if err != nil {
				t.Fatal(err)
			}
			write(t, r, "t0", "a.md", "value: 0\nsome\nnotes\n")
			settle(t, r)
			f := holdOpen(t, dir, "a.md")
			for i := 1; i <= 5; i++ {
				write(t, r, fmt.Sprintf("t%d", i), "a.md", fmt.Sprintf("value: %d\nsome\nnotes\n", i))
			}
			settle(t, r)
			mu.Lock()
			if n := len(slices.DeleteFunc(slices.Clone(said), func(s string) bool { return !strings.Contains(s, "memories/a.md was") })); n != 1 {
				t.Errorf("the kept file was logged %d times, not once:\n%s", n, strings.Join(said, "\n"))
			}
			mu.Unlock()
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			f.WriteString(wrote)
			f.Close()
			r, err = Open(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			settle(t, r)
			want := "value: 5\nsome\nnotes\n" + wrote
			if got := read(t, r, "a.md"); got != want {
				t.Errorf("a.md in HEAD = %q, want %q", got, want)
			}
			if got := readDisk(t, dir, "a.md"); got != want {
				t.Errorf("a.md on disk = %q, want %q", got, want)
			}
			log := subjects(t, dir)
			if n := strings.Count(log, "adopt"); n != min(len(wrote), 1) {
				t.Errorf("%d adopt commit(s):\n%s", n, log)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status:\n%s", st)
			}
			if _, err := os.Stat(r.mirror.keptPath()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the record of the kept edit is left (%v)", err)
			}
		})
	}
}

// A file another program holds open for writing while the model renames
// it, and still at a clean stop: the program's file stays at the old path,
// and the next start merges what it wrote into the file at the new path
// (the record of the kept edit says where it went); the old path goes.
func TestFileHeldOpenAtACleanStopFollowsARename(t *testing.T) {
	r, dir := newRepo(t)
	write(t, r, "t0", "a.md", "some\nnotes\n")
	settle(t, r)
	f := holdOpen(t, dir, "a.md")
	mv(t, r, "t1", "a.md", "b.md")
	settle(t, r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	f.WriteString("by hand\n")
	f.Close()
	r, err := Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	settle(t, r)
	onlyFile(t, r, dir, "b.md", "some\nnotes\nby hand\n", "a.md")
}

// holdOpen opens memories/p for appending, as a program that holds it.
func holdOpen(t *testing.T, dir, p string) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "memories", p), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// Another program holds a Linux lease (fcntl F_SETLEASE) on a memory
// file: any open that conflicts with it waits until the holder gives it
// back, or for the kernel's lease-break-time (45 s) — and gitmem's open
// of that file, with the writer lock held, made every call wait that
// long (attack4-outside-lease.sh: 45 s for the str_replace of a.md, and
// for a str_replace of b.md behind it). gitmem opens such files without
// waiting and takes a file it cannot open at once as a program's that is
// busy with it, as one held open for writing: the call completes, and the
// program's file gets no write of gitmem's. Once the lease is gone, the
// file gets the acknowledged version back (the program wrote nothing).
func TestCallsNeverWaitOnAnOutsideLease(t *testing.T) {
	sigio := make(chan os.Signal, 8) // a lease break is signalled to the holder: this process
	signal.Notify(sigio, syscall.SIGIO)
	defer signal.Stop(sigio)
	for _, lease := range []string{"read", "write"} {
		t.Run(lease, func(t *testing.T) {
			r, dir := newRepo(t)
			write(t, r, "c1", "a.md", "value: 0\n")
			write(t, r, "c2", "b.md", "other: 0\n")
			settle(t, r)
			waitReleased(t, r) // gitmem holds no descriptor of a.md
			flag, typ := os.O_RDONLY, unix.F_RDLCK
			if lease == "write" {
				flag, typ = os.O_RDWR, unix.F_WRLCK
			}
			f, err := os.OpenFile(filepath.Join(dir, "memories", "a.md"), flag, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := unix.FcntlInt(f.Fd(), unix.F_SETLEASE, typ); err != nil {
				t.Skipf("no %s lease here: %v", lease, err)
			}
			unlease := func() { unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_UNLCK) }
			done := make(chan error, 1)
			go func() {
				_, err := r.Update(context.Background(), Meta{Subject: "str_replace", Trailers: []Trailer{{TrailerToolUseID, "s1"}}}, func(tx *Tx) error {
					return tx.WriteFile("a.md", []byte("value: 1\n"))
				})
				if err == nil {
					var v *View
					if v, err = r.Snapshot(context.Background(), "a.md"); err == nil {
						_, err = v.ReadFile("a.md")
					}
				}
				if err == nil {
					_, err = r.Update(context.Background(), Meta{Subject: "str_replace", Trailers: []Trailer{{TrailerToolUseID, "b1"}}}, func(tx *Tx) error {
						return tx.WriteFile("b.md", []byte("other: 1\n"))
					})
				}
				if err == nil {
					err = r.Flush(context.Background()) // the worktree follows, a.md's too
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second): // a hang detector: the kernel's lease-break-time is 45 s
				unlease()
				t.Fatal("the calls waited for the lease another program holds on a.md")
			}
			held := make([]byte, 64)
			n, _ := f.ReadAt(held, 0)
			if got := string(held[:n]); got != "value: 0\n" {
				t.Errorf("the lease holder's file was written: %q", got)
			}
			unlease()
			f.Close()
			if got := read(t, r, "a.md"); got != "value: 1\n" {
				t.Errorf("a.md in HEAD = %q", got)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			for p, want := range map[string]string{"a.md": "value: 1\n", "b.md": "other: 1\n"} {
				if got := readDisk(t, dir, p); got != want {
					t.Errorf("%s on disk = %q, want %q", p, got, want)
				}
			}
			if log := subjects(t, dir); strings.Contains(log, "adopt") {
				t.Errorf("an adopt commit:\n%s", log)
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status:\n%s", st)
			}
		})
	}
}

// notWrittenElsewhere waits until no one holds the file at p open for
// writing (a read lease can be taken), as after the test's own writer
// closed it: a child another parallel test forks holds a copy of every
// descriptor of this process until it execs, and an adopt reads no file
// open for writing (it is the next adopt's). A fresh clone's CI run failed
// so once: "nothing to change"; a dup of the writer held across the
// adopt fails the test the same way every time.
func notWrittenElsewhere(t *testing.T, p string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) { // a bound for a hang, not a timing
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_RDLCK)
		if err == nil {
			unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_UNLCK)
		}
		f.Close()
		if err != unix.EAGAIN { // taken, or leases cannot tell here (nor can the adopt)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still open for writing: %v", p, err)
		}
	}
}

// Close could not save the record of a hand edit kept from acknowledged
// changes (a folder stands at .git/gitmem/kept, so the rename onto it
// fails): the log says so, naming no host path (the rename's error named
// the temporary file and .git/gitmem/kept from the root of the disk).
func TestUnsavedKeptEditsAreLoggedWithoutHostPaths(t *testing.T) {
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	logged := captureLogs(t, &opt)
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t0", "a.md", "value: 0\n")
	settle(t, r)
	f := holdOpen(t, dir, "a.md")
	write(t, r, "t1", "a.md", "value: 1\n")
	settle(t, r)
	if err := os.MkdirAll(filepath.Join(dir, ".git", "gitmem", "kept", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	r.Close()
	f.Close()
	said := strings.Join(logged(), "\n")
	if !strings.Contains(said, "could not save the hand edits kept for the next start") {
		t.Fatalf("the failed save was not logged:\n%s", said)
	}
	for _, host := range []string{dir, filepath.Base(filepath.Dir(dir))} { // the repository's folder, and the test's temporary folder's name
		if strings.Contains(said, host) {
			t.Errorf("a log line names %s:\n%s", host, said)
		}
	}
}
