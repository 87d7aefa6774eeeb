//go:build unix

package gitmem

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A writer with OwnerOnly refuses a repository whose .git is another
// user's, before writing anything (issue 21 N8: gitmem revert run as
// root left root's files in .git and memories/, and the owner's serve
// could no longer write); a reader, and a writer without OwnerOnly, open
// it. Needs root, to give the repository away.
func TestWriterRefusesAnotherUsersRepository(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("giving a repository to another user needs root")
	}
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "a.md", "a\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	const other = 65534 // nobody
	chownAll := func(uid int) {
		t.Helper()
		if err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, -1)
		}); err != nil {
			t.Fatal(err)
		}
	}
	chownAll(other)
	defer chownAll(os.Geteuid()) // for the fsck at the end
	os.WriteFile(filepath.Join(dir, "memories", "a.md"), []byte("hand\n"), 0o600)
	os.Chown(filepath.Join(dir, "memories", "a.md"), other, -1)
	opt := testOptions(t)
	opt.OwnerOnly = true
	if _, err := Open(context.Background(), dir, opt); !errors.Is(err, ErrOtherOwner) {
		t.Fatalf("Open of another user's repository: %v, want ErrOtherOwner", err)
	}
	if _, err := Fsck(context.Background(), dir, opt, true); !errors.Is(err, ErrOtherOwner) {
		t.Fatalf("Fsck --repair of another user's repository: %v, want ErrOtherOwner", err)
	}
	mine := ""
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if fi, err := os.Lstat(p); err == nil && int(fi.Sys().(*syscall.Stat_t).Uid) != other {
			mine += p[len(dir):] + "\n"
		}
		return nil
	})
	if mine != "" {
		t.Fatalf("the refused writer left files of its own user:\n%s", mine)
	}
	opt.ReadOnly = true
	rr, err := Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatalf("a reader of another user's repository: %v", err)
	}
	rr.Close()
	opt.ReadOnly, opt.OwnerOnly = false, false
	w, err := Open(context.Background(), dir, opt) // allowed: takes the hand edit, as root
	if err != nil {
		t.Fatalf("a writer without OwnerOnly: %v", err)
	}
	w.Close()
}
