//go:build unix

package gitmem

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// .git/gitmem/holder is only ever a regular file: a named pipe there is
// no record (read at once, not waited on: a reading command and the
// bound of --lock-wait would hang), and a symbolic link is not followed
// (a serve run as root would write its record, then zeros, over the
// link's target).
func TestHolderFileOnlyRegular(t *testing.T) {
	t.Parallel()
	gitDir := filepath.Join(t.TempDir(), ".git")
	if err := os.MkdirAll(filepath.Join(gitDir, "gitmem"), 0o700); err != nil {
		t.Fatal(err)
	}
	rec := func() *holderRecord {
		r := &holderRecord{Pid: os.Getpid(), Process: "gitmem serve", Since: time.Unix(0, 0), Failing: "write: no space left on device"}
		r.Start, _ = gd.ProcessStart(r.Pid)
		return r
	}

	if err := syscall.Mkfifo(holderPath(gitDir), 0o600); err != nil {
		t.Fatal(err)
	}
	if h := readHolder(gitDir); h != (Holder{}) {
		t.Fatalf("a FIFO read as %+v", h)
	}
	if err := writeHolder(gitDir, rec()); err == nil {
		t.Fatal("a record written into a FIFO")
	}
	makeHolderFile(gitDir, noSpare)
	if fi, err := os.Lstat(holderPath(gitDir)); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO became %v, %v", fi, err)
	}
	os.Remove(holderPath(gitDir))

	victim := filepath.Join(t.TempDir(), "victim")
	want := bytes.Repeat([]byte("v"), 2*holderBytes)
	if err := os.WriteFile(victim, want, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, holderPath(gitDir)); err != nil {
		t.Fatal(err)
	}
	makeHolderFile(gitDir, noSpare)
	if err := writeHolder(gitDir, rec()); err == nil {
		t.Error("a record written through a symbolic link")
	}
	writeHolder(gitDir, nil)
	if got, _ := os.ReadFile(victim); !bytes.Equal(got, want) {
		t.Fatalf("the link's target was written: %q", got[:40])
	}
	if h := readHolder(gitDir); h != (Holder{}) {
		t.Fatalf("a link read as %+v", h)
	}
}
