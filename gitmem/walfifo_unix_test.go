//go:build unix

package gitmem

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A FIFO (or a socket, a device) put at the write-ahead log's path is
// damage the open names, as a folder there is, and fsck reports it in the
// open's words: neither waits on it. Before, the open read the FIFO for
// its header for ever (serve hung, a first SIGTERM did not stop it), and
// fsck's read of the log waited in its open for a writer.
func TestAFIFOAtTheLogsPathIsDamageNotAWait(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		run  func(dir string) string // "" when it says what it should
	}{
		{"open", func(dir string) string {
			_, err := Open(context.Background(), dir, testOptions(t))
			var de *DamagedError
			if !errors.As(err, &de) || de.Problem != "the write-ahead log .git/gitmem/wal is not a regular file" {
				return errString(err)
			}
			return ""
		}},
		{"fsck", func(dir string) string {
			rep, err := Fsck(context.Background(), dir, Options{ReadOnly: true, Logf: t.Logf}, false)
			if err != nil || len(rep.Problems) != 1 || rep.Problems[0].What != "the write-ahead log .git/gitmem/wal is not a regular file" {
				return errString(err) + " " + strings.Join(problemTexts(rep), "; ")
			}
			return ""
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := repoWithAFIFOAt(t, ".git/gitmem/wal")
			done := make(chan string, 1)
			go func() { done <- c.run(dir) }()
			select {
			case msg := <-done:
				if msg != "" {
					t.Error(msg)
				}
			case <-time.After(time.Minute): // a bound for a hang, not a timing
				t.Fatal("waits on the FIFO")
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func problemTexts(rep FsckReport) []string {
	var out []string
	for _, p := range rep.Problems {
		out = append(out, p.What)
	}
	return out
}

// A FIFO at .git/packed-refs: a server's start, a write and its close
// wait on nothing (packed-refs is read only as a regular file; a FIFO
// there is damage where it is read). Before, a read of packed-refs (the
// refs listed) waited on it for ever: serve hung, a SIGTERM did not stop
// it, fsck too (N7 G9). fsck reports it as damage, naming the file, with
// or without --repair (which does not move it): it reported nothing.
func TestAFIFOAtPackedRefsIsNoWait(t *testing.T) {
	t.Parallel()
	dir := repoWithAFIFOAt(t, ".git/packed-refs")
	done := make(chan error, 1)
	go func() {
		r, err := Open(context.Background(), dir, testOptions(t))
		if err != nil {
			done <- err
			return
		}
		_, err = r.Update(context.Background(), Meta{Subject: "w"}, func(tx *Tx) error { return tx.WriteFile("a.md", []byte("a\n")) })
		if err == nil {
			err = r.Flush(context.Background())
		}
		done <- errors.Join(err, r.Close())
	}()
	select {
	case err := <-done:
		var de *DamagedError
		if err != nil && !(errors.As(err, &de) && strings.Contains(de.Problem, ".git/packed-refs is not a file")) {
			t.Errorf("open, a write, close: %v", err)
		}
	case <-time.After(time.Minute): // a bound for a hang, not a timing
		t.Fatal("waits on the FIFO")
	}
	for _, repair := range []bool{false, true} {
		rep, err := Fsck(context.Background(), dir, Options{ReadOnly: !repair, Logf: t.Logf}, repair)
		if err != nil || len(rep.Problems) != 1 || rep.Problems[0].What != "the repository is damaged (.git/packed-refs is not a file)" ||
			rep.Problems[0].Repaired || !strings.HasPrefix(rep.Problems[0].Repair, "move .git/packed-refs aside") {
			t.Errorf("fsck (repair %v): %v %+v", repair, err, rep.Problems)
		}
	}
}

// repoWithAFIFOAt is a new repository, closed, with a FIFO in place of
// the file at rel (made if there was none).
func repoWithAFIFOAt(t *testing.T, rel string) string {
	t.Helper()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	gittest.Damaged(t, dir, "a FIFO at "+rel)
	path := filepath.Join(dir, filepath.FromSlash(rel))
	if err := syscall.Unlink(path); err != nil && err != syscall.ENOENT {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A FIFO put at .git/HEAD while a server holds the repository: its
// close (which looks whether git moved HEAD before it lets the writer
// lock go) waits on nothing. Before, the look at HEAD (headMoved) read
// it with os.ReadFile, which waits in the open for a writer: Close hung
// (the test failed at its one-minute bound); gd.ReadFile opens without
// waiting and reads only a regular file.
func TestAFIFOAtHEADWhileOpenIsNoWait(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	gittest.Damaged(t, dir, "a FIFO at .git/HEAD")
	head := filepath.Join(dir, ".git", "HEAD")
	if err := syscall.Unlink(head); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(head, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Close() }()
	select {
	case <-done:
	case <-time.After(time.Minute): // a bound for a hang, not a timing
		t.Fatal("Close waits on the FIFO at .git/HEAD")
	}
}
