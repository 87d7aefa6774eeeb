package gitmem

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A journal that cannot be read for a reason of the moment (the process
// out of file descriptors, EMFILE; a disk error, EIO; EACCES) is not a
// damaged journal: the start fails (EMFILE as OutOfFiles, which a server
// answers 503 and a client retries) and changes nothing, and the next
// start adopts the hand edits. Before, any read error but "not there"
// made the journal "unreadable", and the whole memory folder was brought
// back to HEAD: a file made by hand deleted and an edit made by hand
// reverted, in no commit (N4, F7). The journal here names another path,
// which the next start repairs as usual.
func TestJournalReadFailureFailsTheStart(t *testing.T) {
	t.Parallel()
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.EIO, syscall.EACCES} {
		t.Run(errno.Error(), func(t *testing.T) {
			t.Parallel()
			dir := gittest.TempDir(t)
			r, _, err := Init(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			write(t, r, "a", "a.md", "x\n")
			write(t, r, "b", "b.md", "b\n")
			r.Close()
			if err := os.WriteFile(filepath.Join(dir, ".git", "gitmem", "pending"), []byte(`{"paths":["memories/b.md"]}`), 0o600); err != nil {
				t.Fatal(err)
			}
			hand := map[string]string{"a.md": "x\nedit by hand\n", "hand.md": "hand made\n"}
			for p, s := range hand {
				if err := os.WriteFile(filepath.Join(dir, "memories", p), []byte(s), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			opt := testOptions(t)
			opt.hooks.env.SetFault(func(step, p string) error {
				if step == "journal-read" {
					return &fs.PathError{Op: "open", Path: filepath.Join(dir, ".git", "gitmem", "pending"), Err: errno}
				}
				return nil
			})
			r, err = Open(context.Background(), dir, opt)
			if err == nil {
				r.Close()
				t.Errorf("the start with the journal unread succeeded")
			} else if OutOfFiles(err) != (errno == syscall.EMFILE) || !errors.Is(err, errno) || strings.Contains(err.Error(), dir) {
				t.Errorf("the start with the journal unread: %v (OutOfFiles %v)", err, OutOfFiles(err))
			}
			for p, want := range hand {
				if got, err := os.ReadFile(filepath.Join(dir, "memories", p)); string(got) != want {
					t.Errorf("after the failed start %s = %q, %v; want the hand edit %q", p, got, err, want)
				}
			}

			r, err = Open(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Adopt(context.Background()); err != nil && !errors.Is(err, ErrNoChange) {
				t.Fatal(err)
			}
			r.Close()
			if _, err := os.Stat(filepath.Join(dir, ".git", "gitmem", "pending")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the journal is left: %v", err)
			}
			for p, want := range hand {
				if got := gittest.Git(t, dir, "show", "HEAD:memories/"+p); got != want {
					t.Errorf("HEAD:memories/%s = %q, want the hand edit adopted %q", p, got, want)
				}
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status: %s", st)
			}
		})
	}
}

// A journal that was read and cannot be parsed (garbage bytes, a record
// cut short by hand), that names a path no model could write, or a folder
// at its path, cannot say which paths gitmem was writing. The next start
// brings back to HEAD only the files that hold a version gitmem committed
// at their path (its own unfinished work: b.md left at its older version,
// d.md a delete did not remove) and the files HEAD has that are missing
// (c.md); a file edited (a.md) or made (hand.md) by hand holds no such
// version: it is kept and taken by one adopt commit. Before, the whole
// memory folder was brought back to HEAD: hand.md deleted, a.md reverted,
// in no commit. A folder there is damage fsck names, and --repair moves
// it aside.
func TestUnreadableJournalKeepsHandEdits(t *testing.T) {
	t.Parallel()
	for name, damage := range map[string]func(path string) error{
		"garbage":   func(p string) error { return os.WriteFile(p, []byte("\x00\xff\x13garbage"), 0o600) },
		"truncated": func(p string) error { return os.WriteFile(p, []byte(`{"paths":["memories/b.m`), 0o600) },
		"not a memory path": func(p string) error {
			return os.WriteFile(p, []byte(`{"paths":["memories/b.md",".git/config"]}`), 0o600)
		},
		"folder": func(p string) error {
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(p, "x"), []byte("x"), 0o600)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := gittest.TempDir(t)
			r, _, err := Init(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			write(t, r, "a", "a.md", "a\n")
			write(t, r, "b1", "b.md", "b1\n")
			write(t, r, "b2", "b.md", "b2\n")
			write(t, r, "c", "c.md", "c\n")
			write(t, r, "d", "d.md", "d\n")
			del(t, r, "d-", "d.md")
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			before := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD"))
			journal := filepath.Join(dir, ".git", "gitmem", "pending")
			if err := damage(journal); err != nil {
				t.Fatal(err)
			}
			mem := filepath.Join(dir, "memories")
			for p, s := range map[string]string{
				"a.md":    "a\nedit by hand\n", // by hand
				"hand.md": "hand made\n",       // by hand
				"b.md":    "b1\n",              // gitmem's, the worktree left behind
				"d.md":    "d\n",               // gitmem's, a delete not done
			} {
				if err := os.WriteFile(filepath.Join(mem, p), []byte(s), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Remove(filepath.Join(mem, "c.md")); err != nil { // a write not done
				t.Fatal(err)
			}

			r, err = Open(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Adopt(context.Background()); err != nil && !errors.Is(err, ErrNoChange) {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"a.md": "a\nedit by hand\n", "hand.md": "hand made\n", "b.md": "b2\n", "c.md": "c\n"}
			for p, s := range want {
				if got, err := os.ReadFile(filepath.Join(mem, p)); string(got) != s {
					t.Errorf("memories/%s = %q, %v; want %q", p, got, err, s)
				}
				if got := gittest.Git(t, dir, "show", "HEAD:memories/"+p); got != s {
					t.Errorf("HEAD:memories/%s = %q, want %q", p, got, s)
				}
			}
			if _, err := os.Lstat(filepath.Join(mem, "d.md")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("memories/d.md, deleted in HEAD, is left: %v", err)
			}
			if n := strings.TrimSpace(gittest.Git(t, dir, "rev-list", "--count", before+"..HEAD")); n != "1" {
				t.Errorf("%s commits after the start, want one adopt commit", n)
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status: %s", st)
			}
			rep, err := Fsck(context.Background(), dir, testOptions(t), false)
			if err != nil {
				t.Fatal(err)
			}
			if name != "folder" {
				if len(rep.Problems) > 0 {
					t.Errorf("fsck after the start: %+v", rep.Problems)
				}
				if _, err := os.Lstat(journal); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("the journal is left: %v", err)
				}
				return
			}
			if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].What, "not a regular file") || strings.Contains(rep.Problems[0].What, dir) {
				t.Fatalf("fsck with a folder at the journal's path: %+v", rep.Problems)
			}
			if rep, err = Fsck(context.Background(), dir, testOptions(t), true); err != nil || len(rep.Problems) != 1 || !rep.Problems[0].Repaired {
				t.Fatalf("fsck --repair: %+v, %v", rep.Problems, err)
			}
			if _, err := os.Lstat(journal); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("fsck --repair left the folder at the journal's path: %v", err)
			}
			if rep, err = Fsck(context.Background(), dir, testOptions(t), false); err != nil || len(rep.Problems) != 0 {
				t.Errorf("fsck after the repair: %+v, %v", rep.Problems, err)
			}
		})
	}
}

// A tree made by hand can hold a path of any length: checkRel's error
// quotes at most its first 64 bytes, cut on a character boundary, and
// says it was cut; a short path is quoted whole. Before, a path of 100 KB
// made an error of 100 KB (and a JSON quoting of it at every check).
func TestCheckRelQuotesALongPathsPrefixOnly(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ rel, want string }{
		{strings.Repeat("a", 100<<10), `refusing the path "` + strings.Repeat("a", 64) + `"...: not a valid memory path`},
		{"x" + strings.Repeat("é", 50<<10), `refusing the path "x` + strings.Repeat("é", 31) + `"...: not a valid memory path`},
		{"a/../b.md", `refusing the path "a/../b.md": not a valid memory path`},
		{"a\x00b", `refusing the path "a\u0000b": not a valid memory path`},
	} {
		err := checkRel(c.rel)
		var d *DamagedError
		if !errors.As(err, &d) {
			t.Fatalf("checkRel(%.20q...) = %v, not a DamagedError", c.rel, err)
		}
		if d.Problem != c.want {
			t.Errorf("checkRel(%.20q...): %.200q, want %q", c.rel, d.Problem, c.want)
		}
		if !utf8.ValidString(err.Error()) {
			t.Errorf("checkRel(%.20q...): not valid UTF-8: %q", c.rel, err.Error())
		}
	}
}
