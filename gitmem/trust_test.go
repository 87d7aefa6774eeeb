package gitmem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// Regression tests for issue 6 ("gitmem keeps faith"): each failed on the
// code before the fix.

// failAt makes every write step of r whose path contains one of the
// given substrings fail with ENOSPC until the returned function is called.
func failAt(t *testing.T, r *Repo, step string, paths ...string) (stop func()) {
	t.Helper()
	env := r.objects.st.Env
	env.SetFault(func(s, p string) error {
		if s != step {
			return nil
		}
		for _, want := range paths {
			if strings.Contains(p, want) {
				return &os.PathError{Op: "write", Path: p, Err: syscall.ENOSPC}
			}
		}
		return nil
	})
	t.Cleanup(func() { env.SetFault(nil) })
	return func() { env.SetFault(nil) }
}

// handGit is the real git in dir as an operator named "hand" runs it.
func handGit(t *testing.T, dir string, args ...string) *exec.Cmd {
	return gittest.Command(t, dir, append([]string{"-c", "user.name=hand", "-c", "user.email=hand@example.com"}, args...)...)
}

func subjects(t *testing.T, dir string) string {
	t.Helper()
	return gittest.Git(t, dir, "log", "--format=%s")
}

// writeDisk writes the file p (relative to memories/) in dir's worktree
// by hand, with the folders it is in.
func writeDisk(t *testing.T, dir, p, content string) {
	t.Helper()
	full := filepath.Join(dir, "memories", filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readDisk(t *testing.T, dir, p string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "memories", filepath.FromSlash(p)))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(data)
}

// Item 1: a worktree write that fails after the commit point (a full disk
// where the object fits but the file does not) must not let the
// acknowledged change be erased: the repair record survives later
// commits and restarts until the worktree matches HEAD, and the stale
// worktree is never adopted.
func TestMirrorFailureIsRepairedNeverAdopted(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	opt := testOptions(t) // the restart below carries the fault too
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t0", "a.md", "old\n")
	settle(t, r)
	stop := failAt(t, r, gd.StepWorktree, "memories/a.md")
	acked := write(t, r, "t1", "a.md", "acknowledged\n") // the commit point passed: acknowledged
	settle(t, r)
	if got := readDisk(t, dir, "a.md"); got != "old\n" {
		t.Fatalf("the fault did not stop the worktree write: %q", got)
	}
	write(t, r, "t2", "b.md", "b\n") // used to overwrite the journal
	r.Close()
	// Restart while the fault persists: start works, adopts nothing.
	r, err = Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatalf("start with a worktree that cannot be repaired yet: %v", err)
	}
	if got := read(t, r, "a.md"); got != "acknowledged\n" {
		t.Fatalf("HEAD lost the acknowledged change: %q", got)
	}
	r.Close()
	stop()
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := readDisk(t, dir, "a.md"); got != "acknowledged\n" {
		t.Fatalf("the worktree was not repaired: %q", got)
	}
	if s := subjects(t, dir); strings.Contains(s, "adopt") {
		t.Fatalf("gitmem's unfinished mirror was adopted as a hand edit:\n%s", s)
	}
	if head, _ := r.Commit(context.Background(), "HEAD"); head.Trailer(TrailerToolUseID) != "t2" || acked.Hash == "" {
		t.Fatalf("HEAD is %q", head.Subject)
	}
	if _, err := os.Stat(r.mirror.journalPath()); !os.IsNotExist(err) {
		t.Fatal("the journal is still there after a complete repair")
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status after repair:\n%s", st)
	}
}

// Item 1, while running: the next change repairs what the last one could
// not mirror, and keeps the record while it cannot.
func TestMirrorFailureRepairedByTheNextChange(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	stop := failAt(t, r, gd.StepWorktree, "memories/a.md")
	write(t, r, "t1", "a.md", "one\n")
	settle(t, r)
	if got := readDisk(t, dir, "a.md"); got == "one\n" {
		t.Fatal("the fault did not stop the worktree write")
	}
	stop()
	write(t, r, "t2", "b.md", "two\n")
	settle(t, r)
	if got := readDisk(t, dir, "a.md"); got != "one\n" {
		t.Fatalf("a.md not repaired by the next change: %q", got)
	}
	if _, err := os.Stat(r.mirror.journalPath()); !os.IsNotExist(err) {
		t.Fatal("journal left after the repair")
	}
}

// Item 2: a hand edit made while gitmem runs is committed (adopt, by the
// operator) before the model's change to that file, which then applies
// to the edited text; a view of the file shows it.
func TestHandEditWhileRunningIsAdoptedFirst(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "line one\n")
	settle(t, r)
	f, _ := os.OpenFile(filepath.Join(dir, "memories", "a.md"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("fix by hand\n")
	f.Close()
	_, err := r.Update(context.Background(), Meta{Subject: "insert", Trailers: []Trailer{{TrailerToolUseID, "t2"}}}, func(tx *Tx) error {
		data, err := tx.ReadFile("a.md")
		if err != nil {
			return err
		}
		return tx.WriteFile("a.md", append([]byte("model line\n"), data...))
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := read(t, r, "a.md"), "model line\nline one\nfix by hand\n"; got != want {
		t.Fatalf("a.md = %q, want %q", got, want)
	}
	settle(t, r)
	if got := readDisk(t, dir, "a.md"); got != "model line\nline one\nfix by hand\n" {
		t.Fatalf("disk: %q", got)
	}
	log := gittest.Git(t, dir, "log", "--format=%s|%an")
	if !strings.HasPrefix(log, "insert|Claude\nmemory: adopt changes made outside gitmem|op\n") {
		t.Fatalf("want the adopt commit by the operator right before the change:\n%s", log)
	}
	// A view of a file edited by hand shows the edit.
	os.WriteFile(filepath.Join(dir, "memories", "a.md"), []byte("rewritten\n"), 0o600)
	v, err := r.Snapshot(context.Background(), "a.md")
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := v.ReadFile("a.md"); string(data) != "rewritten\n" {
		t.Fatalf("view shows %q, not the hand edit", data)
	}
	// A file created by hand where the model creates one: the model is
	// told it exists, and the operator's file stays.
	os.WriteFile(filepath.Join(dir, "memories", "new.md"), []byte("mine\n"), 0o600)
	_, err = r.Update(context.Background(), Meta{Subject: "create"}, func(tx *Tx) error {
		if _, err := tx.Stat("new.md"); err == nil {
			return ErrExist
		}
		return tx.WriteFile("new.md", []byte("model\n"))
	})
	if !errors.Is(err, ErrExist) || readDisk(t, dir, "new.md") != "mine\n" {
		t.Fatalf("create over a hand-made file: %v, disk %q", err, readDisk(t, dir, "new.md"))
	}
	// A file deleted by hand: the deletion is adopted, the model's edit
	// finds no file.
	os.Remove(filepath.Join(dir, "memories", "a.md"))
	_, err = r.Update(context.Background(), Meta{Subject: "edit"}, func(tx *Tx) error {
		if _, err := tx.ReadFile("a.md"); err != nil {
			return err
		}
		return tx.WriteFile("a.md", []byte("resurrected\n"))
	})
	if !errors.Is(err, ErrNotExist) {
		t.Fatalf("edit of a file deleted by hand: %v", err)
	}
	r.Flush(context.Background())
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
}

// Item 2, stopped: edits made while gitmem is stopped are adopted at start.
func TestHandEditWhileStoppedIsAdoptedAtStart(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "a.md", "one\n")
	r.Close()
	os.WriteFile(filepath.Join(dir, "memories", "a.md"), []byte("two\n"), 0o600)
	os.MkdirAll(filepath.Join(dir, "memories", "d"), 0o700)
	os.WriteFile(filepath.Join(dir, "memories", "d", "b.md"), []byte("b\n"), 0o600)
	os.Symlink("/etc/passwd", filepath.Join(dir, "memories", "link.md"))
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	head, _ := r.Commit(context.Background(), "HEAD")
	if head.Subject != "memory: adopt changes made outside gitmem" || read(t, r, "a.md") != "two\n" || read(t, r, "d/b.md") != "b\n" {
		t.Fatalf("HEAD %q", head.Subject)
	}
	if v, _ := r.Snapshot(context.Background()); func() bool { _, err := v.Stat("link.md"); return err == nil }() {
		t.Fatal("a symlink was adopted")
	}
}

// Files a hand made under names git reads as .git or .gitmodules on some
// file system (git~1, GITMOD~1, .g\u200cit) are never adopted: the adopt
// commit of git~1/x made a tree `git fsck --strict` refuses (hasDotgit),
// and GITMOD~1 a blob git checks as a .gitmodules (gitmodulesUrl). The
// files stay on disk, as other names gitmem never tracks do.
func TestHandMadeGitSpellingsAreNeverAdopted(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	mem := filepath.Join(dir, "memories")
	os.MkdirAll(filepath.Join(mem, "git~1"), 0o700)
	os.WriteFile(filepath.Join(mem, "git~1", "x.md"), []byte("x\n"), 0o600)
	os.WriteFile(filepath.Join(mem, "GITMOD~1"), []byte("[submodule \"x\"]\n\tpath = x\n\turl = -upload-pack=evil\n"), 0o600)
	os.WriteFile(filepath.Join(mem, ".g\u200cit"), []byte("x\n"), 0o600)
	os.WriteFile(filepath.Join(mem, "kept.md"), []byte("kept\n"), 0o600)
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	settle(t, r) // the start's look, after Open returned, and its commit in git's files
	if got := gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "-z", "HEAD"); got != "memories/kept.md\x00" {
		t.Fatalf("HEAD holds %q, want kept.md only", got)
	}
	if _, err := os.Stat(filepath.Join(mem, "GITMOD~1")); err != nil {
		t.Fatalf("the hand-made file is gone: %v", err)
	}
}

// Item 3: a broken branch is refused with the repair, never orphaned by a
// new root commit; fsck --repair brings the history back.
func TestBrokenBranchIsRefusedAndRepaired(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		break_ func(dir string)
		want   string
	}{
		{"empty ref", func(dir string) { os.WriteFile(filepath.Join(dir, ".git", "refs", "heads", "main"), nil, 0o644) }, "is damaged"},
		{"garbage ref", func(dir string) {
			os.WriteFile(filepath.Join(dir, ".git", "refs", "heads", "main"), []byte("not a hash\n"), 0o644)
		}, "is damaged"},
		{"missing branch", func(dir string) {
			os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte("ref: refs/heads/master\n"), 0o644)
		}, "does not exist, but the repository holds commits"},
		{"deleted branch", func(dir string) { os.Remove(filepath.Join(dir, ".git", "refs", "heads", "main")) }, "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := gittest.TempDir(t)
			r, _, err := Init(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			write(t, r, "t1", "a.md", "a\n")
			want := write(t, r, "t2", "b.md", "b\n")
			r.GC(context.Background(), false)
			r.Close()
			tc.break_(dir)
			_, err = Open(context.Background(), dir, testOptions(t))
			var de *DamagedError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(de.Repair, "gitmem fsck --repair") {
				t.Fatalf("Open: %v", err)
			}
			if rep, err := Fsck(context.Background(), dir, Options{ReadOnly: true, Logf: t.Logf}, false); err != nil || len(rep.Problems) == 0 {
				t.Fatalf("fsck found nothing: %+v %v", rep, err)
			}
			rep, err := Fsck(context.Background(), dir, testOptions(t), true)
			if err != nil {
				t.Fatalf("fsck --repair: %v", err)
			}
			if rep.Head != want.Hash {
				t.Fatalf("repaired to %s, want %s", rep.Head, want.Hash)
			}
			r, err = Open(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := r.Update(context.Background(), Meta{Trailers: []Trailer{{TrailerToolUseID, "t1"}}}, func(tx *Tx) error { return nil }); !errors.As(err, new(*AppliedError)) {
				t.Fatalf("an old tool_use id is not recognised after repair: %v", err)
			}
			if n := strings.Count(gittest.Git(t, dir, "log", "--format=%H"), "\n"); n != 3 {
				t.Fatalf("%d commits after repair, want 3", n)
			}
		})
	}
}

// Item 4: paths read from the journal are checked like a model's.
func TestJournalPathsAreValidated(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{".git", "memories/../.git", "memories/.git/config", "/etc", "memories/a/../../.git"} {
		dir := gittest.TempDir(t)
		r, _, err := Init(context.Background(), dir, testOptions(t))
		if err != nil {
			t.Fatal(err)
		}
		write(t, r, "t1", "a.md", "a\n")
		r.Close()
		os.WriteFile(filepath.Join(dir, ".git", "gitmem", "pending"), []byte(fmt.Sprintf(`{"paths":[%q]}`, bad)), 0o600)
		r, err = Open(context.Background(), dir, testOptions(t))
		if err != nil {
			t.Fatalf("%s: %v", bad, err)
		}
		r.Close()
		if _, err := os.Stat(filepath.Join(dir, ".git", "HEAD")); err != nil {
			t.Fatalf("journal path %q deleted .git", bad)
		}
		gittest.Fsck(t, dir)
	}
}

// Item 5: on a full disk gitmem still starts and reads; a change that
// does not fit fails cleanly (no commit); the changes acknowledged before
// are kept; gc frees space (loose objects, and small packs, into a pack),
// and then changes work again. Needs a small tmpfs (root); skipped
// otherwise.
func TestFullDisk(t *testing.T) {
	t.Parallel()
	mnt := t.TempDir()
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt).Run(); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v", err)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	gittest.FsckAtEnd(t, mnt) // before the unmount
	dir := filepath.Join(mnt, "repo")
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	update := func(i int) error {
		_, err := r.Update(context.Background(), Meta{Subject: fmt.Sprint("c", i)}, func(tx *Tx) error {
			return tx.WriteFile(fmt.Sprintf("d%d/f%d.md", i%10, i), []byte(strings.Repeat(fmt.Sprint(i), 100)))
		})
		return err
	}
	var acked []string
	for i := range 100 { // a small pack each (two pages), which a checkpoint may fold into one
		if err := update(i); err != nil {
			t.Fatal(err)
		}
		settle(t, r)
		acked = append(acked, fmt.Sprint("c", i))
	}
	// What an earlier gitmem left loose (it wrote a file per object): a
	// page (4 KiB) each on this file system, for gc to pack.
	ow := gd.NewObjectWriter(nil, r.gitDir)
	for i := range 400 {
		if _, err := ow.Write(plumbing.BlobObject, []byte(fmt.Sprintf("an object an earlier gitmem left loose %d\n", i))); err != nil {
			t.Fatal(err)
		}
	}
	// Fill the disk.
	filler, _ := os.Create(filepath.Join(mnt, "filler"))
	for {
		if _, err := filler.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	filler.Close()
	failedAt := -1
	for i := 100; i < 3000; i++ {
		err := update(i)
		if err != nil {
			var se *StorageError
			if !errors.As(err, &se) {
				t.Fatalf("a full disk gave %v, want a StorageError", err)
			}
			failedAt = i
			break
		}
		acked = append(acked, fmt.Sprint("c", i))
	}
	if failedAt < 0 {
		t.Fatal("the disk never filled")
	}
	r.Close() // the acknowledged changes that do not fit stay in the log
	// A new process starts and reads on the full disk.
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatalf("start on a full disk: %v", err)
	}
	defer r.Close()
	for _, i := range []int{0, failedAt - 1} {
		if got := read(t, r, fmt.Sprintf("d%d/f%d.md", i%10, i)); !strings.HasPrefix(got, fmt.Sprint(i)) {
			t.Fatalf("read on a full disk: %q", got)
		}
	}
	if st, err := r.GC(context.Background(), false); err != nil {
		out, _ := exec.Command("df", "-k", mnt).Output()
		du, _ := exec.Command("du", "-ak", dir).Output()
		t.Fatalf("gc on a full disk: %+v %v (%v)\n%s\n%s", st, err, errors.Unwrap(err), out, du)
	}
	write(t, r, "after", "after.md", "there is room again\n")
	settle(t, r)
	subjects := strings.Fields(gittest.Git(t, dir, "log", "--format=%s"))
	for _, s := range acked {
		if !slices.Contains(subjects, s) {
			t.Fatalf("acknowledged %s is not in the history", s)
		}
	}
	if slices.Contains(subjects, fmt.Sprint("c", failedAt)) {
		t.Fatalf("the refused c%d is in the history", failedAt)
	}
	gittest.Fsck(t, dir)
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
}

// Item 7: a git repository gitmem did not create is refused, read-only
// or not, unless adopted; read-only opens write nothing.
func TestForeignRepositoryIsRefused(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	gittest.Git(t, dir, "init", "-q", "-b", "master")
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n"), 0o644)
	gittest.Git(t, dir, "add", ".")
	gittest.Git(t, dir, "-c", "user.name=dev", "-c", "user.email=dev@x", "commit", "-qm", "code")
	before := tree(t, dir)
	for _, ro := range []bool{false, true} {
		if _, err := Open(context.Background(), dir, Options{ReadOnly: ro, Logf: t.Logf}); !errors.Is(err, ErrForeign) {
			t.Fatalf("read-only %v: %v", ro, err)
		}
		if _, _, err := Init(context.Background(), dir, Options{ReadOnly: ro, Logf: t.Logf}); !errors.Is(err, ErrForeign) {
			t.Fatalf("Init read-only %v: %v", ro, err)
		}
	}
	if after := tree(t, dir); after != before {
		t.Fatalf("a refused open changed files:\n%s\nvs\n%s", before, after)
	}
	opt := testOptions(t)
	opt.Adopt = true
	r, err := Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	if branch, ok := r.Adopted(); !ok || branch != "master" {
		t.Fatalf("Adopted() = %q, %v; want master, true", branch, ok)
	}
	r.Close()
	if out := gittest.Git(t, dir, "config", "gitmem.version"); out != "1\n" {
		t.Fatalf("not marked: %q", out)
	}
	r, err = Open(context.Background(), dir, opt) // adopted already: this open adopts nothing
	if err != nil {
		t.Fatalf("an adopted repository: %v", err)
	}
	if branch, ok := r.Adopted(); ok {
		t.Fatalf("a second open reports adopting %q", branch)
	}
	r.Close()
	r, created, err := Init(context.Background(), gittest.TempDir(t), opt) // gitmem's own: nothing to adopt
	if err != nil || !created {
		t.Fatal(created, err)
	}
	if _, ok := r.Adopted(); ok {
		t.Fatal("a new repository reports being adopted")
	}
	r.Close()
}

// tree lists every file under dir with its size and modification time.
func tree(t *testing.T, dir string) string {
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			fmt.Fprintf(&b, "%s %d %d\n", p[len(dir):], fi.Size(), fi.ModTime().UnixNano())
		}
		return nil
	})
	return b.String()
}

// Item 7: read-only operations on a gitmem repository write nothing but
// the history index, a cache, when they had to rebuild it (issue 21 item
// 32): the same file a writer writes.
func TestReadOnlyWritesNothing(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		write(t, r, fmt.Sprint("t", i), "a.md", fmt.Sprint(i))
	}
	r.Close()
	index := filepath.Join(dir, ".git", "gitmem", "history")
	written, _ := os.ReadFile(index)
	os.Remove(index) // a read rebuilds it, and saves it
	// The folder that holds the index changes with it; nothing else.
	others := func(tree string) string {
		var keep []string
		for _, l := range strings.SplitAfter(tree, "\n") {
			if !strings.HasPrefix(l, "/.git/gitmem ") && !strings.HasPrefix(l, "/.git/gitmem/history ") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "")
	}
	before := others(tree(t, dir))
	ro, err := Open(context.Background(), dir, Options{ReadOnly: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ro.Log(context.Background(), LogOptions{}, nil, func(Commit) error { n++; return nil })
	ro.Blame(context.Background(), "a.md")
	ro.StaleFiles(context.Background(), ro.opt.Now(), nil, nil)
	ro.Close()
	if n != 6 {
		t.Fatalf("log gave %d commits", n)
	}
	if after := others(tree(t, dir)); after != before {
		t.Fatalf("read-only operations changed files:\n%s\nvs\n%s", before, after)
	}
	if rebuilt, _ := os.ReadFile(index); string(rebuilt) != string(written) {
		t.Fatalf("the history index a reader saved:\n%s\nis not the writer's:\n%s", rebuilt, written)
	}
}

// Item 8: a pattern redaction also covers file names (the entry is
// renamed), commit messages, trailers, identities, .git/index and the
// history index.
func TestRedactCoversNamesAndMessages(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	secret := "sk-live42secret"
	write(t, r, "t1", "keep.md", "fine\n")
	if _, err := r.Update(context.Background(), Meta{Subject: "memory: create /memories/keys/" + secret + ".md", Author: Signature{"agent " + secret, "a@x"},
		Trailers: []Trailer{{TrailerToolUseID, "t2"}, {TrailerPath, "/memories/keys/" + secret + ".md"}}}, func(tx *Tx) error {
		return tx.WriteFile("keys/"+secret+".md", []byte("token "+secret+"\n"))
	}); err != nil {
		t.Fatal(err)
	}
	write(t, r, "t3", "keep.md", "still fine\n")
	r.Flush(context.Background())
	rep, err := r.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Renamed) != 1 || rep.Renamed[0] != "keys/[REDACTED].md" {
		t.Fatalf("renamed: %v", rep.Renamed)
	}
	assertNoSecret(t, dir, secret)
	if got := read(t, r, "keys/[REDACTED].md"); got != "token [REDACTED]\n" {
		t.Fatalf("renamed file holds %q", got)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
}

// assertNoSecret checks every object git can find and every plain file
// under .git and memories/ for the secret.
func assertNoSecret(t *testing.T, dir, secret string) {
	t.Helper()
	if strings.Contains(gittest.Git(t, dir, "cat-file", "--batch-all-objects", "--batch"), secret) {
		t.Errorf("an object git can find holds the secret")
	}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return nil
		}
		if strings.Contains(p, secret) {
			t.Errorf("a file is named with the secret: %s", p)
		}
		if data, _ := os.ReadFile(p); strings.Contains(string(data), secret) {
			t.Errorf("%s holds the secret", p[len(dir):])
		}
		return nil
	})
	if log := gittest.Git(t, dir, "log", "--all", "--format=%B%an%ae%cn%ce"); strings.Contains(log, secret) {
		t.Errorf("a commit message or identity holds the secret")
	}
}

// Item 9: a redaction killed after the refs moved is finished at the next
// start: the old worktree is never adopted back (it held the secret).
func TestRedactInterruptedAfterRefsMovedIsFinished(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	secret := "sk-live42secret"
	write(t, r, "t1", "prefs.md", "key: "+secret+"\n")
	write(t, r, "t2", "other.md", "x\n")
	settle(t, r)
	stop := failAt(t, r, gd.StepWorktree, "memories")
	if _, err := r.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)}, false, nil); err == nil {
		t.Fatal("the fault did not interrupt the redaction")
	}
	stop()
	// The process dies here: the worktree still holds the secret.
	if got := readDisk(t, dir, "prefs.md"); !strings.Contains(got, secret) {
		t.Fatalf("test setup: worktree %q", got)
	}
	crash(r)
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if s := subjects(t, dir); strings.Contains(s, "adopt") {
		t.Fatalf("the old worktree was adopted:\n%s", s)
	}
	assertNoSecret(t, dir, secret)
	if _, err := os.Stat(redactPath(r.gitDir)); !os.IsNotExist(err) {
		t.Fatal("the redaction record is still there")
	}
}

// Item 10: after a redaction no process keeps a deleted pack open (a
// server that read packed objects before), and half-written packs a
// killed gc left are deleted.
func TestRedactLeavesNoOpenOrTemporaryPacks(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	server, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	secret := "sk-live42secret"
	write(t, server, "t1", "prefs.md", "key: "+secret+"\n")
	for i := range 5 {
		write(t, server, fmt.Sprint("n", i), fmt.Sprintf("n%d.md", i), "n\n")
	}
	if _, err := server.GC(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	read(t, server, "prefs.md") // the server reads from the pack
	os.WriteFile(filepath.Join(dir, ".git", "objects", "pack", "tmp_pack_killed"), []byte("token "+secret), 0o444)
	operator, err := Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := operator.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)}, false, nil); err != nil {
		t.Fatal(err)
	}
	operator.Close()
	if got := read(t, server, "prefs.md"); got != "key: [REDACTED]\n" {
		t.Fatalf("the server reads %q after the redaction", got)
	}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && strings.Contains(target, dir) && strings.Contains(target, "(deleted)") {
			t.Errorf("a deleted file is still open: %s", target)
		}
	}
	assertNoSecret(t, dir, secret)
}

// Item 15: a damaged object is named (with its path) when gitmem cannot
// start, and a write of identical content replaces a damaged copy rather
// than pointing at it.
func TestDamagedObjectIsNamedAndNotReused(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	c := write(t, r, "t1", "notes/a.md", "hello\n")
	r.Close()
	explode(t, dir)
	blob := strings.Fields(gittest.Git(t, dir, "rev-parse", c.Hash+":memories/notes/a.md"))[0]
	obj := filepath.Join(dir, ".git", "objects", blob[:2], blob[2:])
	os.Chmod(obj, 0o644)
	os.WriteFile(obj, []byte("garbage, not zlib"), 0o444)
	// Without .git/index the start reads HEAD's tree from the objects, the
	// blob's size with it. (With it, the start takes the tree from the
	// index when its lstat data vouches for the file, and reads no blob:
	// whether it did depended on the machine's speed, the entry being
	// racy or not; CI failed so once.)
	os.Remove(filepath.Join(dir, ".git", "index"))
	_, err = Open(context.Background(), dir, testOptions(t))
	if err == nil || !strings.Contains(err.Error(), blob) || !strings.Contains(err.Error(), "memories/notes/a.md") {
		t.Fatalf("Open: %v (want the object %s and its path named)", err, blob)
	}
	// The same content written again (here through a fresh repository
	// sharing the object folder would be contrived; write it directly).
	ow := gd.NewObjectWriter(nil, filepath.Join(dir, ".git"))
	if _, err := ow.Write(plumbing.BlobObject, []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if !gd.LooseIntact(obj, plumbingHash(blob)) {
		t.Fatal("a damaged object was kept when identical content was written")
	}
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	gittest.Fsck(t, dir)
}

// explode turns every pack of the repository into loose objects, which
// a test can then damage one by one.
func explode(t *testing.T, dir string) {
	t.Helper()
	packs, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "pack-*.pack"))
	for _, p := range packs {
		aside := filepath.Join(t.TempDir(), filepath.Base(p))
		if err := os.Rename(p, aside); err != nil {
			t.Fatal(err)
		}
		os.Remove(strings.TrimSuffix(p, ".pack") + ".idx")
		f, err := os.Open(aside)
		if err != nil {
			t.Fatal(err)
		}
		cmd := gittest.Command(t, dir, "unpack-objects", "-q")
		cmd.Stdin = f
		out, err := cmd.CombinedOutput()
		f.Close()
		if err != nil {
			t.Fatalf("git unpack-objects: %v\n%s", err, out)
		}
	}
}

// A damaged blob of an older version is named, with its path, by every
// reader of history; listing a commit's files reads no blob. (A
// newcomer's pass found show and diff saying "read tree failed: zlib ...",
// naming neither.)
func TestDamagedObjectIsNamedByHistoryReaders(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	first := write(t, r, "t1", "notes/a.md", "hello\n")
	second := write(t, r, "t2", "notes/a.md", "hello\nworld\n")
	// Another process reads them from git's files, not from memory.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	explode(t, dir)
	r, err := Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	blob := strings.Fields(gittest.Git(t, dir, "rev-parse", first.Hash+":memories/notes/a.md"))[0]
	obj := filepath.Join(dir, ".git", "objects", blob[:2], blob[2:])
	os.Chmod(obj, 0o644)
	if err := os.WriteFile(obj, []byte("garbage, not zlib"), 0o444); err != nil {
		t.Fatal(err)
	}
	gittest.Damaged(t, dir, "a blob of the history is overwritten with garbage")
	r.objects.st.Reindex()
	if fs, err := r.Files(first.Hash); err != nil || fs["notes/a.md"] != blob {
		t.Fatalf("Files: %v %v", fs, err)
	}
	named := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "read the blob "+blob+" (memories/notes/a.md)") {
			t.Errorf("%s: %v (want the blob %s and its path named)", what, err, blob)
		}
	}
	_, err = r.Diff(first.Hash, second.Hash)
	named("Diff", err)
	_, err = r.ReadFileAt(context.Background(), first.Hash, "notes/a.md")
	named("ReadFileAt", err)
	_, err = r.Blame(context.Background(), "notes/a.md")
	named("Blame", err)
	_, _, err = r.Restore(context.Background(), first, RestoreOptions{DryRun: true})
	named("Restore", err)
}

// Item 6: nothing to do makes no commit; restoring a path absent then is
// refused unless Delete; dry runs change nothing.
func TestOperatorCommandsRefuseEmptyChanges(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	first := write(t, r, "t1", "a.md", "one\n")
	write(t, r, "t2", "a.md", "two\n")
	write(t, r, "t3", "b.md", "b\n")
	head := func() string { c, _ := r.Commit(context.Background(), "HEAD"); return c.Hash }
	h := head()
	_, changes, err := r.Revert(context.Background(), []string{"t2"}, RevertOptions{DryRun: true})
	if err != nil || len(changes) != 1 || string(changes[0].New) != "one\n" || head() != h {
		t.Fatalf("dry revert: %+v %v", changes, err)
	}
	if _, _, err := r.Revert(context.Background(), []string{"t2"}, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	h = head()
	if _, _, err := r.Revert(context.Background(), []string{"t2"}, RevertOptions{}); !errors.Is(err, ErrNoChange) || head() != h {
		t.Fatalf("second revert: %v", err)
	}
	if _, _, err := r.Restore(context.Background(), first, RestoreOptions{Paths: []string{"b.md"}}); !errors.As(err, new(*AbsentError)) || head() != h {
		t.Fatalf("restore of a path absent then: %v", err)
	}
	// The whole memory, or a folder, deletes no file without Delete either:
	// every file it would delete is named.
	write(t, r, "t4", "notes/c.md", "c\n")
	h = head()
	var ae *AbsentError
	if _, _, err := r.Restore(context.Background(), first, RestoreOptions{}); !errors.As(err, &ae) || !slices.Equal(ae.Paths, []string{"b.md", "notes/c.md"}) || head() != h {
		t.Fatalf("restore of all memory deleting files: %v", err)
	}
	if _, _, err := r.Restore(context.Background(), first, RestoreOptions{Paths: []string{"notes"}}); !errors.As(err, &ae) || !slices.Equal(ae.Paths, []string{"notes"}) || head() != h {
		t.Fatalf("restore of a folder absent then: %v", err)
	}
	if _, changes, err := r.Restore(context.Background(), first, RestoreOptions{Delete: true, DryRun: true}); err != nil || len(changes) != 2 || head() != h {
		t.Fatalf("dry restore of all memory --delete: %+v %v", changes, err)
	}
	if _, _, err := r.Restore(context.Background(), first, RestoreOptions{Paths: []string{"never.md"}, Delete: true}); !errors.Is(err, ErrNoChange) || head() != h {
		t.Fatalf("restore of a path that never existed: %v", err)
	}
	if _, changes, err := r.Restore(context.Background(), first, RestoreOptions{Paths: []string{"b.md"}, Delete: true, DryRun: true}); err != nil || len(changes) != 1 || changes[0].NewFile || head() != h {
		t.Fatalf("dry restore --delete: %+v %v", changes, err)
	}
	if _, _, err := r.Restore(context.Background(), first, RestoreOptions{Paths: []string{"b.md"}, Delete: true}); err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Snapshot(context.Background()); func() bool { _, err := v.Stat("b.md"); return err == nil }() {
		t.Fatal("restore --delete kept b.md")
	}
}

func plumbingHash(s string) plumbing.Hash { return plumbing.NewHash(s) }

// crash drops a Repo as a killed process would: no index write, no
// cleanup; its lock and files are released.
func crash(r *Repo) {
	r.shutdown(holdTurn(r))
}

// commitByHand commits what is in the worktree with the git CLI, as an
// operator would, and returns the new commit's hash.
func commitByHand(t *testing.T, dir, msg string) string {
	t.Helper()
	gittest.Git(t, dir, "add", "-A")
	gittest.Git(t, dir, "-c", "user.name=hand", "-c", "user.email=hand@example.com", "commit", "-q", "-m", msg)
	return strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD"))
}

// A git commit made by hand while gitmem holds the writer lock: the
// model's next change still lands, and so does the operator's commit — it
// is merged back (the branch never loses either), and the repository
// stays whole.
func TestHandCommitWhileRunningIsMerged(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "one\n")
	settle(t, r)
	os.WriteFile(filepath.Join(dir, "memories", "b.md"), []byte("by hand\n"), 0o600)
	hand := commitByHand(t, dir, "by hand")
	write(t, r, "t2", "a.md", "two\n")
	settle(t, r)
	if err := r.Flush(context.Background()); err != nil { // the merge is done by then
		t.Fatal(err)
	}
	log := gittest.Git(t, dir, "log", "--format=%s|%an")
	if !strings.Contains(log, "by hand|hand\n") || !strings.Contains(log, "w a.md|Claude\n") {
		t.Fatalf("history:\n%s", log)
	}
	if _, err := gittest.Command(t, dir, "merge-base", "--is-ancestor", hand, "HEAD").Output(); err != nil {
		t.Fatalf("the hand commit %s is not on the branch:\n%s", hand, log)
	}
	ids := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)")
	if !strings.Contains(ids, "t1\n") || !strings.Contains(ids, "t2\n") {
		t.Fatalf("acknowledged calls missing:\n%s", ids)
	}
	if read(t, r, "a.md") != "two\n" || read(t, r, "b.md") != "by hand\n" {
		t.Fatalf("a.md %q b.md %q", read(t, r, "a.md"), read(t, r, "b.md"))
	}
	if readDisk(t, dir, "a.md") != "two\n" || readDisk(t, dir, "b.md") != "by hand\n" {
		t.Fatal("the worktree does not hold both")
	}
	if refs := gittest.Git(t, dir, "for-each-ref", "refs/gitmem/displaced"); refs != "" {
		t.Fatalf("a displaced ref is left after the merge:\n%s", refs)
	}
	gittest.Fsck(t, dir)
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
	write(t, r, "t3", "c.md", "three\n") // and gitmem goes on
}

// The branch moved by hand after a crash left acknowledged changes in the
// log only: both the recovered changes and the hand commit end on the
// branch; a commit made on top of recovered changes that were already in
// git's files is simply kept. Either way the next start is a plain one.
func TestHandCommitAfterCrash(t *testing.T) {
	t.Parallel()
	t.Run("log only", func(t *testing.T) {
		dir := gittest.TempDir(t)
		r, _, err := Init(context.Background(), dir, testOptions(t))
		if err != nil {
			t.Fatal(err)
		}
		write(t, r, "t1", "a.md", "one\n")
		settle(t, r)
		stop := failAt(t, r, gd.StepPack, "") // t2 stays in the log
		write(t, r, "t2", "a.md", "two\n")
		crash(r)
		stop()
		os.WriteFile(filepath.Join(dir, "memories", "b.md"), []byte("by hand\n"), 0o600)
		hand := commitByHand(t, dir, "by hand")
		for range 2 {
			r, err = Open(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if read(t, r, "a.md") != "two\n" || read(t, r, "b.md") != "by hand\n" {
				t.Fatalf("a.md %q b.md %q", read(t, r, "a.md"), read(t, r, "b.md"))
			}
			r.Close()
		}
		if _, err := gittest.Command(t, dir, "merge-base", "--is-ancestor", hand, "HEAD").Output(); err != nil {
			t.Fatal("the hand commit is not on the branch")
		}
		if ids := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)"); !strings.Contains(ids, "t2\n") {
			t.Fatalf("t2 lost:\n%s", ids)
		}
		gittest.Fsck(t, dir)
	})
	t.Run("already in git", func(t *testing.T) {
		dir := gittest.TempDir(t)
		r, _, err := Init(context.Background(), dir, testOptions(t))
		if err != nil {
			t.Fatal(err)
		}
		write(t, r, "t1", "a.md", "one\n")
		if err := r.materialize(); err != nil { // in git's files, still in the log
			t.Fatal(err)
		}
		crash(r)
		os.WriteFile(filepath.Join(dir, "memories", "b.md"), []byte("by hand\n"), 0o600)
		hand := commitByHand(t, dir, "by hand")
		r, err = Open(context.Background(), dir, testOptions(t))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if err := r.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if head := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD")); head != hand {
			t.Fatalf("HEAD %s, want the hand commit %s kept as it is:\n%s", head, hand, gittest.Git(t, dir, "log", "--format=%s"))
		}
		if read(t, r, "a.md") != "one\n" {
			t.Fatal("t1 lost")
		}
	})
}

// A commit kept under refs/gitmem/displaced/ (waiting to be merged back)
// is memory: redact covers it, and the redacted commit is what is merged.
func TestRedactCoversDisplacedCommits(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "one\n")
	settle(t, r)
	// The lock let go first: a holder puts a commit made with git aside
	// itself before it lets go (release), and the reset below, as git
	// checks the branch is where it read it, was refused then.
	waitReleased(t, r)
	secret := "sk-live42secret"
	os.WriteFile(filepath.Join(dir, "memories", "b.md"), []byte("token "+secret+"\n"), 0o600)
	hand := commitByHand(t, dir, "by hand")
	gittest.Git(t, dir, "update-ref", "refs/gitmem/displaced/"+hand, hand) // as moveBranch keeps it
	gittest.Git(t, dir, "reset", "-q", "--hard", "HEAD~1")
	gittest.Git(t, dir, "pack-refs", "--all") // as git gc does
	if _, err := r.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)}, false, nil); err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, dir, secret)
	r.outside.wait()
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := read(t, r, "b.md"); got != "token [REDACTED]\n" {
		t.Fatalf("b.md = %q after the merge of the redacted commit", got)
	}
	if refs := gittest.Git(t, dir, "for-each-ref", "refs/gitmem/displaced"); refs != "" {
		t.Fatalf("left: %s", refs)
	}
}

// A file edited by hand before gitmem's worktree caught up with an
// acknowledged change to it — while serve runs (the worktree lags a
// change by milliseconds, or longer on a full disk), or after a crash, the
// edit made while gitmem was stopped — is neither overwritten nor taken
// whole: the adopt commit merges the hand edit into the acknowledged
// version, conflicts marked.
func TestHandEditBeforeTheWorktreeCaughtUp(t *testing.T) {
	t.Parallel()
	const base = "one\ntwo\nthree\n"
	for _, tc := range []struct {
		name, hand, want string
	}{
		{"merged", "one\ntwo\nthree\nfour by hand\n", "ONE\ntwo\nthree\nfour by hand\n"},
		{"conflict", "uno\ntwo\nthree\n", "<<<<<<< gitmem\nONE\n=======\nuno\n>>>>>>> edited by hand\ntwo\nthree\n"},
	} {
		for _, then := range []string{"adopt", "close", "crash"} {
			crashed := then == "crash"
			t.Run(tc.name+"/"+then, func(t *testing.T) {
				t.Parallel()
				dir := gittest.TempDir(t)
				r, _, err := Init(context.Background(), dir, testOptions(t))
				if err != nil {
					t.Fatal(err)
				}
				keepWriterLock(t, r) // it writes with the disk lock held
				write(t, r, "t1", "a.md", base)
				settle(t, r)
				hand := func() {
					os.WriteFile(filepath.Join(dir, "memories", "a.md"), []byte(tc.hand), 0o600)
				}
				if crashed {
					stop := failAt(t, r, gd.StepPack, "") // t2 stays in the log
					write(t, r, "t2", "a.md", "ONE\ntwo\nthree\n")
					crash(r)
					stop()
					hand()
					if r, err = Open(context.Background(), dir, testOptions(t)); err != nil {
						t.Fatal(err)
					}
				} else {
					r.disk.hold() // the worktree has not caught up yet
					write(t, r, "t2", "a.md", "ONE\ntwo\nthree\n")
					hand()
					r.disk.mu.Unlock()
					settle(t, r)
					if then == "adopt" {
						if _, err := r.Adopt(context.Background()); err != nil { // serve does it every --adopt-every
							t.Fatal(err)
						}
					} else { // stopped before it: Close does it
						r.Close()
						if r, err = Open(context.Background(), dir, testOptions(t)); err != nil {
							t.Fatal(err)
						}
					}
				}
				defer r.Close()
				settle(t, r)
				if got := read(t, r, "a.md"); got != tc.want {
					t.Fatalf("a.md = %q, want %q", got, tc.want)
				}
				if got := readDisk(t, dir, "a.md"); got != tc.want {
					t.Fatalf("worktree a.md = %q, want %q", got, tc.want)
				}
				if log := subjects(t, dir); !strings.HasPrefix(log, "memory: adopt changes made outside gitmem\nw a.md\nw a.md\n") {
					t.Fatalf("history:\n%s", log)
				}
				if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
					t.Fatalf("git status:\n%s", st)
				}
			})
		}
	}
}

// A hand edit of a file that an acknowledged rename moved away before the
// worktree caught up with it goes with the file: the adopt commit merges
// it into the file at its new path, and the old path is not brought back
// (it was: whole, the version from before the rename plus the edit, a
// second stale copy of the memory on which every later rename of the
// model failed, "already exists"). The edit lands before the worktree
// follows the rename, or at the worktree's write (after its look for hand
// edits, before the old file is removed); it is committed by the next
// adopt, by Close, or, after a crash, by the next start; or by the
// model's next rename, which takes it back to its old path. An edit of
// the file at the new path is merged with it.
func TestHandEditOfAFileRenamedAwayGoesWithIt(t *testing.T) {
	t.Parallel()
	for _, then := range []string{"adopt", "close", "crash", "at the write", "renamed back", "both edited"} {
		t.Run(then, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r, dir := newRepo(t)
			keepWriterLock(t, r) // it writes with the disk lock held
			var err error
			write(t, r, "t1", "a.md", "one\ntwo\n")
			settle(t, r)
			// The model renames a.md to b.md, then inserts a line there
			// (after a crash, one change stays in the log: the rename).
			want, at, gone := "zero\none\ntwo\nby hand\n", "b.md", "a.md"
			model := func() {
				mv(t, r, "t2", "a.md", "b.md")
				if then == "crash" {
					want = "one\ntwo\nby hand\n"
					return
				}
				write(t, r, "t3", "b.md", "zero\none\ntwo\n")
			}
			switch then {
			case "crash":
				stop := failAt(t, r, gd.StepPack, "") // the rename stays in the log
				model()
				crash(r)
				stop()
				appendHand(t, dir, "a.md", "by hand")
				if r, err = Open(ctx, dir, testOptions(t)); err != nil {
					t.Fatal(err)
				}
			case "at the write":
				var once sync.Once
				r.objects.st.Env.SetFault(func(step, p string) error {
					if step == gd.StepWorktree && strings.HasSuffix(p, "a.md") {
						once.Do(func() { appendHand(t, dir, "a.md", "by hand") })
					}
					return nil
				})
				r.disk.hold()
				model()
				r.disk.mu.Unlock()
				settle(t, r)
				r.objects.st.Env.SetFault(nil)
			default:
				r.disk.hold() // the worktree has not caught up yet
				model()
				appendHand(t, dir, "a.md", "by hand")
				r.disk.mu.Unlock()
				settle(t, r)
			}
			if then == "both edited" { // b.md too, once the worktree has it: both edits merged
				if err := os.WriteFile(filepath.Join(dir, "memories", "b.md"), []byte("top by hand\nzero\none\ntwo\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				want = "top by hand\n" + want
			}
			if then == "renamed back" {
				mv(t, r, "t4", "b.md", "a.md")
				settle(t, r)
				at, gone = gone, at
			}
			if then == "close" {
				r.Close()
				if r, err = Open(ctx, dir, testOptions(t)); err != nil {
					t.Fatal(err)
				}
			} else if then != "crash" {
				// serve does it every --adopt-every (renamed back: the
				// model's rename took the edit first, as any command does
				// with the files it changes)
				if _, err := r.Adopt(ctx); err != nil && !(then == "renamed back" && errors.Is(err, ErrNoChange)) {
					t.Fatal(err)
				}
			}
			defer r.Close()
			settle(t, r)
			onlyFile(t, r, dir, at, want, gone)
		})
	}
}

// A hand edit of a file inside a folder the model renames (or deletes),
// made before the worktree follows the change (serve's milliseconds of
// lag) or at its write, is kept as a file's is: the folder's files are
// each taken aside and compared, not removed with the folder. Renamed,
// the edit (and a file made by hand in the folder) is merged at the new
// path; deleted, the edited file is adopted back.
func TestHandEditInAFolderRenamedAwayGoesWithIt(t *testing.T) {
	t.Parallel()
	for _, then := range []string{"adopt", "at the write", "deleted"} {
		t.Run(then, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r, dir := newRepo(t)
			defer r.Close()
			// The rename below is made with the disk lock held: a release
			// of the idle lock meanwhile (a stall of a loaded machine after
			// settle) took the turn and waited for the disk lock, the
			// rename for the turn: the package hung (-test.cpu 1
			// -test.parallel 16).
			keepWriterLock(t, r)
			write(t, r, "t1", "d/a.md", "one\ntwo\n")
			settle(t, r)
			hand := func() {
				appendHand(t, dir, "d/a.md", "by hand")
				if then != "at the write" { // made after the folder's files were looked at: left for a later adopt
					if err := os.WriteFile(filepath.Join(dir, "memories", "d", "new.md"), []byte("new by hand\n"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			if then == "at the write" {
				var once sync.Once
				r.objects.st.Env.SetFault(func(step, p string) error {
					if step == gd.StepWorktree && (p == "memories/d" || strings.HasPrefix(p, "memories/d/")) {
						once.Do(hand)
					}
					return nil
				})
				defer r.objects.st.Env.SetFault(nil)
			}
			r.disk.hold() // the worktree has not caught up yet
			if then == "deleted" {
				del(t, r, "t2", "d")
			} else {
				mv(t, r, "t2", "d", "e")
			}
			if then != "at the write" {
				hand()
			}
			r.disk.mu.Unlock()
			settle(t, r)
			if _, err := r.Adopt(ctx); err != nil {
				t.Fatal(err)
			}
			settle(t, r)
			at, gone := "e", "d"
			want := map[string]string{"a.md": "one\ntwo\nby hand\n", "new.md": "new by hand\n"}
			switch then {
			case "at the write":
				delete(want, "new.md")
			case "deleted":
				at, gone = "d", "e"
			}
			got := files(t, r)
			for name, text := range want {
				if got[at+"/"+name] != text {
					t.Errorf("%s/%s = %q, want %q", at, name, got[at+"/"+name], text)
				}
				if disk := readDisk(t, dir, at+"/"+name); disk != text {
					t.Errorf("worktree %s/%s = %q, want %q", at, name, disk, text)
				}
			}
			if len(got) != len(want) {
				t.Errorf("HEAD holds %v", got)
			}
			if _, err := os.Lstat(filepath.Join(dir, "memories", gone)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("worktree %s: %v, want none", gone, err)
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status:\n%s", st)
			}
		})
	}
}

// A hand edit of a file the model replaces within one group of commits
// (the worktree follows them in one pass) — a folder replaced by a file
// at its path, or a file by a folder — made before the worktree follows
// the change or at its write, is kept as in a folder the model deletes:
// the replaced files are each checked, an edited one stays where it is,
// and the adopt takes it back there. The model's file (folder) there
// makes way for it: it stays in history (the model's commit), and HEAD,
// the worktree and git agree.
func TestHandEditInAReplacedFolderOrFileIsKept(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, edited, with, then string }{
		{"folder by a file", "d/a.md", "d", "adopt"},
		{"folder by a file at the write", "d/a.md", "d", "at the write"},
		{"file by a folder", "d", "d/x.md", "adopt"},
		{"file by a folder at the write", "d", "d/x.md", "at the write"},
		{"folder by a file, taken at close", "d/a.md", "d", "close"},
		{"file by a folder, taken at close", "d", "d/x.md", "close"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r, dir := newRepo(t)
			keepWriterLock(t, r) // it writes with the disk lock held
			defer r.Close()
			write(t, r, "t1", c.edited, "one\ntwo\n")
			settle(t, r)
			made := false
			hand := func() { appendHand(t, dir, c.edited, "by hand"); made = true }
			if c.then == "at the write" {
				var once sync.Once
				r.objects.st.Env.SetFault(func(step, p string) error {
					if step == gd.StepWorktree && p == "memories/"+c.edited {
						once.Do(hand)
					}
					return nil
				})
				defer r.objects.st.Env.SetFault(nil)
			}
			r.disk.hold() // the worktree has not caught up yet: it follows both commits in one pass
			del(t, r, "t2", "d")
			write(t, r, "t3", c.with, "the model's\n")
			if c.then != "at the write" {
				hand()
			}
			r.disk.mu.Unlock()
			settle(t, r)
			if !made {
				t.Fatalf("%s was replaced unchecked", c.edited)
			}
			write(t, r, "t4", "other.md", "other\n") // a change the worktree follows before the adopt
			settle(t, r)
			if c.then == "close" { // it adopts the edits kept
				r.Close()
				if got := gittest.Git(t, dir, "log", "-1", "--format=%s"); got != "memory: adopt changes made outside gitmem\n" {
					t.Errorf("close left HEAD at %q", got)
				}
				var err error
				if r, err = Open(ctx, dir, testOptions(t)); err != nil {
					t.Fatal(err)
				}
				defer r.Close()
			} else if _, err := r.Adopt(ctx); err != nil {
				t.Fatal(err)
			}
			settle(t, r)
			want := map[string]string{c.edited: "one\ntwo\nby hand\n", "other.md": "other\n"}
			if got := files(t, r); !maps.Equal(got, want) {
				t.Errorf("HEAD holds %q, want %q", got, want)
			}
			if disk := readDisk(t, dir, c.edited); disk != want[c.edited] {
				t.Errorf("worktree %s = %q, want %q", c.edited, disk, want[c.edited])
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status:\n%s", st)
			}
			// The model's file is in its commit, the edit in the adopt's.
			if got := gittest.Git(t, dir, "show", "HEAD~2:memories/"+c.with); got != "the model's\n" {
				t.Errorf("HEAD~2:%s = %q", c.with, got)
			}
			if got := gittest.Git(t, dir, "log", "-1", "--format=%(trailers:key=Memory-Command,valueonly)"); strings.TrimSpace(got) != "adopt" {
				t.Errorf("HEAD is no adopt commit: %q", got)
			}
		})
	}
}

// A file made by hand in a folder the model replaced by a file is kept
// there, and holds the folder (the model's file waits for the adopt);
// the trees then say d is a file while the disk holds a folder. When the
// worktree lags (serve under load), a later chunk of commits that ends
// with d a file again (replaced by a file, or by a folder and a file)
// must check the folder's files as one that removes the folder, not take
// the folder for the file. So must a write of d that finds a folder made
// by hand there at the write. (serve --adopt-every 50ms lost 0-50 of
// ~1,100 files made by hand so in 8 s of the model replacing d.)
func TestHandFilesInAFolderWhereAFileIsWrittenAreKept(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		chunk int
		later func(t *testing.T, r *Repo) // the commits after the first chunk, d a file at their end
	}{
		{"replaced by a file again", 2, func(t *testing.T, r *Repo) {
			del(t, r, "t4", "d")
			write(t, r, "t5", "d", "file 2\n")
		}},
		{"replaced by a folder and a file", 4, func(t *testing.T, r *Repo) {
			write(t, r, "t4", "o.md", "o\n")
			write(t, r, "t5", "p.md", "p\n")
			del(t, r, "t6", "d")
			write(t, r, "t7", "d/m.md", "the model's\n")
			del(t, r, "t8", "d")
			write(t, r, "t9", "d", "file 2\n")
		}},
		{"a folder made at the write", 0, nil},
		{"a file made in the folder at its write", 0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r, dir := newRepoWith(t, &testHooks{chunkMax: c.chunk, env: new(gd.Env)})
			keepWriterLock(t, r) // it writes with the disk lock held
			defer r.Close()
			d := filepath.Join(dir, "memories", "d")
			byHand := func() {
				if err := os.WriteFile(filepath.Join(d, "h.md"), []byte("by hand\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			want := map[string]string{"d/h.md": "by hand\n"}
			model := "d" // the model's last file, the adopt's parent holds
			if c.name == "a file made in the folder at its write" {
				// The file d the model replaces by a folder: the folder is
				// made, and a file made by hand in it before gitmem looks
				// in it stays.
				write(t, r, "t1", "d", "file 1\n")
				settle(t, r)
				var once sync.Once
				made := false
				r.objects.st.Env.SetFault(func(step, p string) error {
					if fi, err := os.Lstat(d); err == nil && fi.IsDir() && step == gd.StepWorktree && p == "memories/d" {
						once.Do(func() { byHand(); made = true })
					}
					return nil
				})
				defer r.objects.st.Env.SetFault(nil)
				func() {
					r.disk.hold()
					defer r.disk.mu.Unlock()
					del(t, r, "t2", "d")
					write(t, r, "t3", "d/m.md", "file 2\n")
				}()
				settle(t, r)
				if !made { // a file made then would be removed unchecked
					t.Fatal("gitmem made the folder d and read it with no step between")
				}
				model, want["d/m.md"] = "d/m.md", "file 2\n"
			} else if c.later == nil {
				write(t, r, "t1", "d", "file 1\n")
				settle(t, r)
				var once sync.Once
				r.objects.st.Env.SetFault(func(step, p string) error {
					if step == gd.StepWorktree && p == "memories/d" {
						once.Do(func() { // the file d deleted by hand, a folder made there
							if err := os.Remove(d); err != nil {
								t.Fatal(err)
							}
							if err := os.Mkdir(d, 0o700); err != nil {
								t.Fatal(err)
							}
							byHand()
						})
					}
					return nil
				})
				defer r.objects.st.Env.SetFault(nil)
				write(t, r, "t2", "d", "file 2\n")
			} else {
				write(t, r, "t1", "d/a.md", "one\n")
				settle(t, r)
				// The worktree lags: it follows t2 and t3 (d/a.md checked,
				// d/h.md kept), then the later commits in a chunk of their own.
				func() {
					r.disk.hold()
					defer r.disk.mu.Unlock()
					del(t, r, "t2", "d")
					write(t, r, "t3", "d", "file 1\n")
					byHand()
					c.later(t, r)
				}()
				if c.chunk == 4 {
					want["o.md"], want["p.md"] = "o\n", "p\n"
				}
			}
			settle(t, r)
			if _, err := r.Adopt(ctx); err != nil {
				t.Fatal(err)
			}
			settle(t, r)
			adoptedAs(t, r, want)
			// The model's file is in its commit, the hand's in the adopt's.
			if got := gittest.Git(t, dir, "show", "HEAD~1:memories/"+model); got != "file 2\n" {
				t.Errorf("HEAD~1:memories/%s = %q", model, got)
			}
		})
	}
}

// A pull that fast-forwards over another agent's rename of a file this
// agent's operator edited by hand (before the worktree followed the pull,
// or at its write) moves the kept edit as the model's own rename does
// (TestHandEditOfAFileRenamedAwayGoesWithIt): the adopt merges it into
// the file at the new path, and the old path does not come back, also
// when the commit the pull lands on is no rename.
func TestHandEditOfAFileRenamedByAPullGoesWithIt(t *testing.T) {
	t.Parallel()
	for _, then := range []string{"adopt", "at the write", "lands on the rename", "merged"} {
		t.Run(then, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			_, a, b := twoAgents(t)
			put(t, a, "ta1", "a.md", "one\ntwo\n")
			syncOK(t, a)
			syncOK(t, b)
			settle(t, b)
			mv(t, a, "ta2", "a.md", "b.md")
			text := "one\ntwo\nby hand\n"
			if then != "lands on the rename" {
				put(t, a, "ta3", "b.md", "zero\none\ntwo\n")
				text = "zero\n" + text
			}
			syncOK(t, a)
			want := map[string]string{"b.md": text}
			if then == "merged" { // b has a commit of its own: the pull merges
				put(t, b, "tb1", "c.md", "c\n")
				settle(t, b)
				want["c.md"] = "c\n"
			}
			dir := b.Dir()
			// The edit is made as the branch moves to the pulled commit
			// (the worktree has not followed it yet), or at the write of
			// a.md.
			step, at := gd.StepRef, "refs/heads/main"
			if then == "at the write" {
				step, at = gd.StepWorktree, "memories/a.md"
			}
			made := false
			b.objects.st.Env.SetFault(func(s, p string) error {
				if s == step && p == at && !made {
					made = true
					appendHand(t, dir, "a.md", "by hand")
				}
				return nil
			})
			res, err := b.Pull(ctx, "origin", SyncOptions{})
			if err != nil || (res.FastForward == "") != (then == "merged") || len(res.Conflicts) > 0 {
				t.Fatalf("pull: %+v %v", res, err)
			}
			settle(t, b)
			b.objects.st.Env.SetFault(nil)
			if !made {
				t.Fatal("no edit was made")
			}
			if _, err := b.Adopt(ctx); err != nil {
				t.Fatal(err)
			}
			settle(t, b)
			adoptedAs(t, b, want)
		})
	}
}

// onlyFile checks that HEAD holds one memory file, at, as want, and so
// does the worktree, where gone is no file (git finds it clean).
func onlyFile(t *testing.T, r *Repo, dir, at, want, gone string) {
	t.Helper()
	if got := read(t, r, at); got != want {
		t.Errorf("%s = %q, want %q", at, got, want)
	}
	if got := readDisk(t, dir, at); got != want {
		t.Errorf("worktree %s = %q, want %q", at, got, want)
	}
	if got := strings.TrimSpace(gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD")); got != "memories/"+at {
		t.Errorf("HEAD holds:\n%s", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, "memories", gone)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("worktree %s: %v, want none", gone, err)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("git status:\n%s", st)
	}
}

// A git commit made from the .git/index gitmem last wrote, after gitmem
// moved the branch on without rewriting it (the index follows a second
// after the last change): git builds the commit from the index, so its
// tree holds the older versions of what gitmem changed since — a.md's old
// text, gone.md back, c.md missing. Merged back, the commit brings only
// what the operator changed (op.md); every acknowledged change stays. The
// same after a crash, the commit made before the next start.
func TestHandCommitFromAStaleIndex(t *testing.T) {
	t.Parallel()
	for _, crashed := range []bool{false, true} {
		t.Run(map[bool]string{false: "running", true: "after a crash"}[crashed], func(t *testing.T) {
			dir := gittest.TempDir(t)
			opt := testOptions(t)
			opt.IndexDelay = time.Hour // stale until Flush, however slow the test runs
			r, _, err := Init(context.Background(), dir, opt)
			if err != nil {
				t.Fatal(err)
			}
			write(t, r, "t1", "a.md", "one\n")
			write(t, r, "t2", "gone.md", "x\n")
			settle(t, r) // .git/index holds this
			write(t, r, "t3", "a.md", "two\n")
			write(t, r, "t4", "c.md", "three\n")
			if _, err := r.Update(context.Background(), Meta{Subject: "rm gone.md", Trailers: []Trailer{{TrailerToolUseID, "t5"}}}, func(tx *Tx) error {
				return tx.Remove("gone.md")
			}); err != nil {
				t.Fatal(err)
			}
			if err := r.materialize(); err != nil { // the branch moves; the index stays
				t.Fatal(err)
			}
			want := "memories/a.md\nmemories/c.md\nmemories/d.md\nmemories/op.md\n"
			if crashed { // e.md is in the log only
				stop := failAt(t, r, gd.StepPack, "")
				write(t, r, "t7", "e.md", "five\n")
				crash(r)
				stop()
				want = "memories/a.md\nmemories/c.md\nmemories/d.md\nmemories/e.md\nmemories/op.md\n"
			}
			os.WriteFile(filepath.Join(dir, "memories", "op.md"), []byte("by hand\n"), 0o600)
			gittest.Git(t, dir, "add", "memories/op.md")
			gittest.Git(t, dir, "-c", "user.name=hand", "-c", "user.email=hand@example.com", "commit", "-q", "-m", "op")
			if crashed {
				if r, err = Open(context.Background(), dir, testOptions(t)); err != nil {
					t.Fatal(err)
				}
			}
			defer r.Close()
			write(t, r, "t6", "d.md", "four\n")
			if err := r.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			files := gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD")
			if files != want {
				t.Fatalf("HEAD holds:\n%s\n%s", files, gittest.Git(t, dir, "log", "--stat", "--format=%s"))
			}
			if a := gittest.Git(t, dir, "show", "HEAD:memories/a.md"); a != "two\n" {
				t.Fatalf("a.md: %q", a)
			}
			if readDisk(t, dir, "a.md") != "two\n" || readDisk(t, dir, "op.md") != "by hand\n" {
				t.Fatal("the worktree lost a change")
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Fatalf("git status:\n%s", st)
			}
		})
	}
}

// git commit -a reads .git/index before it takes .git/index.lock: gitmem
// may write the index for a later commit in between (here: new.md, made
// after the index git read), and git builds its commit from the index it
// read, without new.md. Merged back, that commit must not delete new.md:
// the index gitmem wrote last is not the one the commit was made from,
// so every index written about the commit's time is a candidate. (A run
// of TestPlainGitBesideAWritingRepo lost six acknowledged files so.)
func TestHandCommitFromAnIndexWrittenOverMeanwhile(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The writer lock stays held, as while calls come: let go (200 ms
	// idle, a slow machine under -race), the commit was another's to
	// take at the next change, which knows nothing of the indexes
	// written before it.
	defer r.collector.running()()
	write(t, r, "t1", "a.md", "one\n")
	settle(t, r)
	read, err := os.ReadFile(filepath.Join(dir, ".git", "index")) // what git reads
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t2", "new.md", "made after\n")
	settle(t, r) // gitmem writes the index for new.md's commit before git takes the lock
	stale := filepath.Join(t.TempDir(), "index")
	if err := os.WriteFile(stale, read, 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "memories", "a.md"), []byte("by hand\n"), 0o600)
	cmd := handGit(t, dir, "commit", "-q", "-am", "by hand")
	cmd.Env = append(cmd.Environ(), "GIT_INDEX_FILE="+stale)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git commit -am: %v\n%s", err, out)
	}
	write(t, r, "t3", "d.md", "four\n")                   // the branch is taken back
	if err := r.Flush(context.Background()); err != nil { // and the commit merged back
		t.Fatal(err)
	}
	if files := gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD"); files != "memories/a.md\nmemories/d.md\nmemories/new.md\n" {
		t.Fatalf("HEAD holds:\n%s\n%s", files, gittest.Git(t, dir, "log", "--stat", "--format=%s"))
	}
	if a := gittest.Git(t, dir, "show", "HEAD:memories/a.md"); a != "by hand\n" {
		t.Fatalf("a.md: %q", a)
	}
	if readDisk(t, dir, "new.md") != "made after\n" {
		t.Fatal("the worktree lost new.md")
	}
}

// The branch moved forward by git alone (git fetch + git update-ref, as
// a script syncing by hand would do) while gitmem was stopped or idle:
// the worktree still holds the old commit's files. They are checked out
// to the new commit, not adopted as hand edits that would undo it; a hand
// edit made meanwhile is kept, merged with the new commit's change.
func TestBranchMovedByGitIsCheckedOut(t *testing.T) {
	t.Parallel()
	for _, stopped := range []bool{true, false} {
		t.Run(map[bool]string{true: "stopped", false: "idle"}[stopped], func(t *testing.T) {
			dir := gittest.TempDir(t)
			r, _, err := Init(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			write(t, r, "t1", "a.md", "one\n")
			write(t, r, "t2", "b.md", "b\n")
			write(t, r, "t3", "e.md", "1\n2\n3\n4\n")
			settle(t, r)
			if stopped {
				r.Close()
			} else {
				waitReleased(t, r)
			}
			// Another agent's clone moves on; this repository takes its
			// commit with git alone, leaving the worktree as it was.
			other := gittest.TempDir(t)
			gittest.Git(t, "", "clone", "-q", dir, other)
			os.WriteFile(filepath.Join(other, "memories", "a.md"), []byte("two\n"), 0o600)
			os.Remove(filepath.Join(other, "memories", "b.md"))
			os.WriteFile(filepath.Join(other, "memories", "c.md"), []byte("c\n"), 0o600)
			os.WriteFile(filepath.Join(other, "memories", "e.md"), []byte("1\n2\n3\n4\nremote\n"), 0o600)
			theirs := commitByHand(t, other, "elsewhere")
			gittest.Git(t, dir, "fetch", "-q", other, "HEAD")
			gittest.Git(t, dir, "update-ref", "refs/heads/main", theirs)
			// A hand edit meanwhile, to a file the new commit changed too.
			os.WriteFile(filepath.Join(dir, "memories", "e.md"), []byte("hand\n1\n2\n3\n4\n"), 0o600)
			if stopped {
				if r, err = Open(context.Background(), dir, testOptions(t)); err != nil {
					t.Fatal(err)
				}
			}
			defer r.Close()
			write(t, r, "t4", "x.md", "x\n")
			if _, err := r.Adopt(context.Background()); err != nil && !errors.Is(err, ErrNoChange) { // as serve does every few seconds
				t.Fatal(err)
			}
			settle(t, r)
			want := map[string]string{"a.md": "two\n", "c.md": "c\n", "x.md": "x\n", "e.md": "hand\n1\n2\n3\n4\nremote\n"}
			for p, content := range want {
				if got := read(t, r, p); got != content {
					t.Errorf("%s in HEAD: %q, want %q", p, got, content)
				}
				if got := readDisk(t, dir, p); got != content {
					t.Errorf("%s on disk: %q, want %q", p, got, content)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "memories", "b.md")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("b.md, deleted by the new commit, is still on disk (%v)", err)
			}
			if _, err := gittest.Command(t, dir, "merge-base", "--is-ancestor", theirs, "HEAD").Output(); err != nil {
				t.Fatal("the new commit is not on the branch")
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Fatalf("git status:\n%s", st)
			}
			if diff := gittest.Git(t, dir, "diff", "--stat", theirs, "HEAD", "--", "memories/a.md", "memories/b.md", "memories/c.md"); diff != "" {
				t.Fatalf("a later commit undid the new commit:\n%s\n%s", diff, gittest.Git(t, dir, "log", "--format=%s", "--stat"))
			}
		})
	}
}

// The same when another gitmem process held the lock in between (it left
// the worktree, and .git/index, at its own last commit): the files are
// checked out from where that process left them, not merged as hand edits.
func TestBranchMovedAfterAnotherProcessIsCheckedOut(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "1\n2\n3\n")
	settle(t, r)
	waitReleased(t, r)
	other, err := Open(context.Background(), dir, testOptions(t)) // as `gitmem revert` would, in its own process
	if err != nil {
		t.Fatal(err)
	}
	write(t, other, "t2", "a.md", "1\n2\n3\nother\n")
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	clone := gittest.TempDir(t)
	gittest.Git(t, "", "clone", "-q", dir, clone)
	os.WriteFile(filepath.Join(clone, "memories", "a.md"), []byte("1\n2\n3\nother\nremote\n"), 0o600)
	theirs := commitByHand(t, clone, "elsewhere")
	gittest.Git(t, dir, "fetch", "-q", clone, "HEAD")
	gittest.Git(t, dir, "update-ref", "refs/heads/main", theirs)
	write(t, r, "t3", "x.md", "x\n")
	if _, err := r.Adopt(context.Background()); err != nil && !errors.Is(err, ErrNoChange) {
		t.Fatal(err)
	}
	settle(t, r)
	if got := read(t, r, "a.md"); got != "1\n2\n3\nother\nremote\n" {
		t.Fatalf("a.md %q", got)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
}

// waitReleased waits until r has given the writer lock up, idle.
func waitReleased(t *testing.T, r *Repo) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.lease.Held() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if r.lease.Held() {
		t.Fatal("the writer lock was not released when idle")
	}
}

// A hand edit landing between checkoutMoved's check of a file and its
// replacement by the branch's version is kept, merged with it.
func TestBranchMovedHandEditInTheWindowIsKept(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "a.md", "1\n2\n3\n4\n")
	r.Close()
	other := gittest.TempDir(t)
	gittest.Git(t, "", "clone", "-q", dir, other)
	os.WriteFile(filepath.Join(other, "memories", "a.md"), []byte("1\n2\n3\n4\nremote\n"), 0o600)
	theirs := commitByHand(t, other, "elsewhere")
	gittest.Git(t, dir, "fetch", "-q", other, "HEAD")
	gittest.Git(t, dir, "update-ref", "refs/heads/main", theirs)
	var once sync.Once
	opt := testOptions(t)
	opt.hooks.env.SetFault(func(step, p string) error {
		if step == gd.StepWorktree && strings.HasSuffix(p, "a.md") {
			once.Do(func() {
				os.WriteFile(filepath.Join(dir, "memories", "a.md"), []byte("hand\n1\n2\n3\n4\n"), 0o600)
			})
		}
		return nil
	})
	defer opt.hooks.env.SetFault(nil)
	if r, err = Open(context.Background(), dir, opt); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	opt.hooks.env.SetFault(nil)
	if _, err := r.Adopt(context.Background()); err != nil && !errors.Is(err, ErrNoChange) {
		t.Fatal(err)
	}
	settle(t, r)
	if got, want := read(t, r, "a.md"), "hand\n1\n2\n3\n4\nremote\n"; got != want {
		t.Fatalf("a.md = %q, want %q", got, want)
	}
}

// Reverting a delete or a rename twice: the second finds the memory as the
// undo would make it and says so (ErrNoChange), where it took the file
// brought back for an overlapping later edit and sent the operator to
// --strategy=theirs, which then said there was nothing to revert.
func TestRevertTwiceOfDeleteAndRename(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	write(t, r, "t1", "gone.md", "x\n")
	del, err := r.Update(context.Background(), Meta{Subject: "delete", Trailers: []Trailer{{TrailerToolUseID, "t2"}, {TrailerCommand, "delete"}, {TrailerPath, "/memories/gone.md"}}}, func(tx *Tx) error {
		return tx.Remove("gone.md")
	})
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t3", "r.md", "r\n")
	if _, err := r.Update(context.Background(), Meta{Subject: "rename", Trailers: []Trailer{{TrailerToolUseID, "t4"}, {TrailerCommand, "rename"}, {TrailerPath, "/memories/r.md"}, {TrailerNewPath, "/memories/s.md"}}}, func(tx *Tx) error {
		return tx.Rename("r.md", "s.md")
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{del.Hash, "t4"} {
		if _, _, err := r.Revert(context.Background(), []string{id}, RevertOptions{}); err != nil {
			t.Fatalf("revert %s: %v", id, err)
		}
		c, _ := r.Commit(context.Background(), "HEAD")
		if _, _, err := r.Revert(context.Background(), []string{id}, RevertOptions{}); !errors.Is(err, ErrNoChange) {
			t.Fatalf("second revert of %s: %v", id, err)
		}
		if h, _ := r.Commit(context.Background(), "HEAD"); h.Hash != c.Hash {
			t.Fatalf("second revert of %s made a commit", id)
		}
	}
	if read(t, r, "gone.md") != "x\n" || read(t, r, "r.md") != "r\n" {
		t.Fatal("the reverts did not bring the files back")
	}
}

// A folder the moved branch replaced by a file: the folder's files go,
// then the file comes (it was skipped while the folder was there, and the
// empty folder was then adopted as the file's deletion).
func TestBranchMovedFolderToFileIsCheckedOut(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "x/y.md", "y\n")
	r.Close()
	other := gittest.TempDir(t)
	gittest.Git(t, "", "clone", "-q", dir, other)
	os.RemoveAll(filepath.Join(other, "memories", "x"))
	os.WriteFile(filepath.Join(other, "memories", "x"), []byte("a file now\n"), 0o600)
	theirs := commitByHand(t, other, "folder to file")
	gittest.Git(t, dir, "fetch", "-q", other, "HEAD")
	gittest.Git(t, dir, "update-ref", "refs/heads/main", theirs)
	if r, err = Open(context.Background(), dir, testOptions(t)); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	settle(t, r)
	if got := read(t, r, "x"); got != "a file now\n" {
		t.Fatalf("x in HEAD: %q (log:\n%s)", got, gittest.Git(t, dir, "log", "--format=%s", "--stat"))
	}
	if got := readDisk(t, dir, "x"); got != "a file now\n" {
		t.Fatalf("x on disk: %q", got)
	}
}

// The commit gitmem last left the worktree at is gone (the branch moved
// to another history, then git gc pruned the old one): .git/index, which
// gitmem wrote last, says what the worktree holds, and the new history's
// files are checked out, not undone by an adopt.
func TestBranchMovedIndexHeadGoneUsesTheIndex(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "a.md", "old\n")
	write(t, r, "t2", "old-only.md", "o\n")
	r.Close()
	other := gittest.TempDir(t)
	gittest.Git(t, other, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(other, "memories"), 0o700)
	os.WriteFile(filepath.Join(other, "memories", "a.md"), []byte("new\n"), 0o600)
	os.WriteFile(filepath.Join(other, "memories", "new-only.md"), []byte("n\n"), 0o600)
	theirs := commitByHand(t, other, "another history")
	gittest.Git(t, dir, "fetch", "-q", other, "main")
	gittest.Git(t, dir, "update-ref", "refs/heads/main", theirs)
	gittest.Git(t, dir, "reflog", "expire", "--expire=now", "--all")
	gittest.Git(t, dir, "gc", "-q", "--prune=now")
	if r, err = Open(context.Background(), dir, testOptions(t)); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	settle(t, r)
	if got := read(t, r, "a.md"); got != "new\n" {
		t.Fatalf("a.md %q:\n%s", got, gittest.Git(t, dir, "log", "--format=%s", "--stat"))
	}
	if v, _ := r.Snapshot(context.Background()); func() bool { _, err := v.Stat("old-only.md"); return err == nil }() {
		t.Fatal("old-only.md came back")
	}
	if got := read(t, r, "new-only.md"); got != "n\n" {
		t.Fatalf("new-only.md %q", got)
	}
}

// A base noted for a hand edit (keepHandEdits) that the adopt commit did
// not need (HEAD still held it, so the edit was taken as it was) is
// dropped with that commit: kept, it made the next hand edit a conflict
// with lines the adopt had already committed (the attacker's repro 09:
// conflict blocks in a file only the operator edited).
func TestAdoptDropsTheBaseOfAnEditItTook(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "1\n")
	settle(t, r)
	r.mirror.repairs.noteBase(full("a.md"), handBase{hash: plumbing.ComputeHash(plumbing.BlobObject, []byte("1\n"))})
	for _, text := range []string{"1\n2\n", "1\n2\n3\n"} {
		os.WriteFile(filepath.Join(dir, "memories", "a.md"), []byte(text), 0o600)
		if _, err := r.Adopt(context.Background()); err != nil {
			t.Fatal(err)
		}
		settle(t, r)
		if got := read(t, r, "a.md"); got != text {
			t.Fatalf("a.md = %q, want %q", got, text)
		}
	}
}

// A hand-edit check that began before Close and commits after it (a
// Snapshot racing Close) is told ErrClosed; it took the closed lock files
// up again ("bad file descriptor").
func TestAdoptAfterCloseIsClosed(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	write(t, r, "t0", "a.md", "before\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.adoptNow(context.Background(), repoPaths([]string{"a.md"})); !errors.Is(err, ErrClosed) {
		t.Fatalf("adopt after Close: %v, want ErrClosed", err)
	}
}

// One commit named twice (twice the same name, or its tool_use id and its
// hash) is reverted once, and the revert records one change: one Reverts
// trailer, its subject that of a revert of one commit. Before, it was
// "memory: revert 2 changes" with two identical Reverts trailers.
func TestRevertOfOneCommitNamedTwice(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	write(t, r, "c1", "x.md", "x\ny\n")
	c, err := r.Update(context.Background(), Meta{Subject: "memory: str_replace /memories/x.md", Trailers: []Trailer{{TrailerToolUseID, "i1"}, {TrailerCommand, "str_replace"}, {TrailerPath, "/memories/x.md"}}}, func(tx *Tx) error {
		return tx.WriteFile("x.md", []byte("x\ny\nx\n"))
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, revs := range [][]string{{"i1", "i1"}, {"i1", c.Hash[:9], c.Hash}} {
		rc, _, err := r.Revert(context.Background(), revs, RevertOptions{})
		if err != nil {
			t.Fatalf("revert %q: %v", revs, err)
		}
		if want := "memory: revert " + c.Hash[:7] + " (memory: str_replace /memories/x.md)"; rc.Subject != want {
			t.Errorf("revert %q: subject %q, want %q", revs, rc.Subject, want)
		}
		var reverts []string
		for _, tr := range rc.Trailers {
			if tr.Key == "Reverts" || tr.Key == "Reverts-Tool-Use-Id" {
				reverts = append(reverts, tr.Key+": "+tr.Value)
			}
		}
		if want := []string{"Reverts: " + c.Hash, "Reverts-Tool-Use-Id: i1"}; !slices.Equal(reverts, want) {
			t.Errorf("revert %q: trailers %q, want %q", revs, reverts, want)
		}
		if got := read(t, r, "x.md"); got != "x\ny\n" {
			t.Errorf("revert %q: x.md = %q", revs, got)
		}
		// Back to the change, for the next names.
		if _, _, err := r.Revert(context.Background(), []string{rc.Hash}, RevertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// A revert records only the commits whose undo changed something: a
// target already undone, or one whose undo is empty (the memory's init
// commit), is left out of its subject and Reverts trailers; a revert of
// such targets only changes nothing (ErrNoChange). Before, `revert i1
// i2` with i1 already undone was "memory: revert 2 changes" with i1's
// Reverts and Reverts-Tool-Use-Id trailers, as if i1 were undone again.
func TestRevertRecordsOnlyTheChangesItUndoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, _ := newRepo(t)
	init, err := r.Resolve(ctx, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	c := map[string]Commit{}
	for _, id := range []string{"i1", "i2", "i3", "i4", "i5"} {
		c[id] = write(t, r, id, id+".md", id+"\n")
	}
	revert := func(revs ...string) Commit {
		t.Helper()
		rc, _, err := r.Revert(ctx, revs, RevertOptions{})
		if err != nil {
			t.Fatalf("revert %q: %v", revs, err)
		}
		return rc
	}
	reverted := func(rc Commit) []string {
		var out []string
		for _, tr := range rc.Trailers {
			if tr.Key == "Reverts" || tr.Key == "Reverts-Tool-Use-Id" {
				out = append(out, tr.Key+": "+tr.Value)
			}
		}
		return out
	}
	one := func(id string) []string { return []string{"Reverts: " + c[id].Hash, "Reverts-Tool-Use-Id: " + id} }
	revert("i1")
	for _, step := range []struct {
		revs    []string
		subject string
		trailer []string
	}{
		{[]string{"i1", "i2"}, "memory: revert " + c["i2"].Hash[:7] + " (w i2.md)", one("i2")},
		{[]string{"i3", init.Hash}, "memory: revert " + c["i3"].Hash[:7] + " (w i3.md)", one("i3")},
		{[]string{"i1", "i4", init.Hash[:9], "i5"}, "memory: revert 2 changes", append(one("i5"), one("i4")...)},
	} {
		rc := revert(step.revs...)
		if rc.Subject != step.subject {
			t.Errorf("revert %q: subject %q, want %q", step.revs, rc.Subject, step.subject)
		}
		if got := reverted(rc); !slices.Equal(got, step.trailer) {
			t.Errorf("revert %q: trailers %q, want %q", step.revs, got, step.trailer)
		}
	}
	for _, revs := range [][]string{{"i1", "i2"}, {"i1", init.Hash}, {init.Hash}} {
		if _, _, err := r.Revert(ctx, revs, RevertOptions{}); !errors.Is(err, ErrNoChange) {
			t.Errorf("revert %q: %v, want ErrNoChange", revs, err)
		}
	}
	if files, err := r.Files("HEAD"); err != nil || len(files) != 0 {
		t.Errorf("files left: %v (%v)", files, err)
	}
}

// A file the model deletes under a folder that an operator has meanwhile
// replaced by a file of the same name (memories/d, made by hand) is
// absent from the worktree already: the worktree follows the delete
// without a failure, instead of an ENOTDIR noted for repair and retried
// at every change (78 "could not follow" lines in one race of helper
// E2's), and the hand-made file is kept.
func TestDeleteUnderAFileMadeByHandIsFollowed(t *testing.T) {
	t.Parallel()
	r, dir, followed := newFollowedRepo(t)
	keepWriterLock(t, r) // the test takes the disk lock before a change: see TestIndexNeverVouchesForAFileNotYetWritten
	write(t, r, "t1", "d/m.md", "model\n")
	settle(t, r)
	r.disk.hold() // the worktree lags: the delete is published, not yet followed
	del(t, r, "t2", "d/m.md")
	fileByHandAtD(t, r, dir)
	settle(t, r)
	followed(map[string]string{"d": "by hand\n"})
	adopt(t, r)
	adoptedAs(t, r, map[string]string{"d": "by hand\n"})
}

// A file the model writes under a folder that an operator has meanwhile
// replaced by a file of the same name (memories/d, made by hand): the
// hand-made file holds the way, kept for the adopt commit, which takes
// it where it is; the model's files under d make way (in the history,
// as for a folder replaced by a file by hand). The write failed
// (ENOTDIR), was queued for repair, and the repair made the folder,
// removing the hand-made file unchecked: it was in no commit.
func TestWriteUnderAFileMadeByHandKeepsTheFile(t *testing.T) {
	t.Parallel()
	r, dir, followed := newFollowedRepo(t)
	keepWriterLock(t, r) // the test takes the disk lock before a change: see TestIndexNeverVouchesForAFileNotYetWritten
	write(t, r, "t1", "d/m.md", "model\n")
	settle(t, r)
	r.disk.hold() // the worktree lags: the write is published, not yet followed
	write(t, r, "t2", "d/x.md", "model x\n")
	fileByHandAtD(t, r, dir)
	settle(t, r)
	write(t, r, "t3", "e.md", "later\n") // a repair would be retried here
	settle(t, r)
	followed(map[string]string{"d": "by hand\n", "e.md": "later\n"})
	adopt(t, r)
	adoptedAs(t, r, map[string]string{"d": "by hand\n", "e.md": "later\n"})
	if got := gittest.Git(t, dir, "show", "HEAD~1:memories/d/x.md"); got != "model x\n" {
		t.Errorf("the model's d/x.md before the adopt: %q", got)
	}
}

// fileByHandAtD replaces memories/d (the model's folder) by a file made
// by hand, "by hand\n", while the test holds the disk lock (r.disk.hold),
// and lets the lock go.
func fileByHandAtD(t *testing.T, r *Repo, dir string) {
	t.Helper()
	defer r.disk.mu.Unlock()
	d := filepath.Join(dir, "memories", "d")
	if err := os.RemoveAll(d); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d, []byte("by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// adopt commits the hand edits now and lets the worktree settle.
func adopt(t *testing.T, r *Repo) {
	t.Helper()
	if _, err := r.Adopt(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
}

// A path the worktree could not follow (a full disk) is repaired later:
// at the next change, or by the next start from the journal. A folder an
// operator made meanwhile where the repair writes the model's file (or
// removes it) holds files in no commit: they are checked as those of a
// folder the model replaces, kept, and adopted, the model's file making
// way (it stays in its commit); never removed with the folder unchecked.
// So is a folder made in the moment between the removal of the model's
// folder and the write of the file that replaces it (syncFolder).
func TestHandFilesInAFolderWhereARepairWritesAreKept(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"the next change", "the model deletes it", "the next start", "made at the write", "a folder to repair", "a folder to repair at the start"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := gittest.TempDir(t)
			r, _, err := Init(ctx, dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			keepWriterLock(t, r) // it writes with the disk lock held
			defer func() { r.Close() }()
			x := filepath.Join(dir, "memories", "x")
			byHand := func() {
				if err := os.MkdirAll(x, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(x, "h.md"), []byte("by hand\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			want := map[string]string{"x/h.md": "by hand\n"}
			fails := func(change func()) { // the worktree cannot follow it at x
				stop := failAt(t, r, gd.StepWorktree, "memories/x")
				change()
				settle(t, r)
				stop()
				if got := r.mirror.pending(); !slices.Equal(got, []string{"memories/x"}) {
					t.Fatalf("waiting for repair: %q", got)
				}
				byHand()
			}
			repaired := func() { // by the next change, or by the next start
				if strings.HasSuffix(c, "start") {
					r.Close()
					if r, err = Open(ctx, dir, testOptions(t)); err != nil {
						t.Fatal(err)
					}
				} else {
					write(t, r, "t3", "y.md", "y\n")
					want["y.md"] = "y\n"
				}
				settle(t, r)
			}
			if strings.HasPrefix(c, "a folder to repair") {
				// The model renames d to x, and the folder x cannot be
				// written: the file made in it by hand is not the model's.
				write(t, r, "t1", "d/a.md", "the model's\n")
				settle(t, r)
				fails(func() { mv(t, r, "t2", "d", "x") })
				repaired()
				want["x/a.md"] = "the model's\n"
			} else if c == "made at the write" {
				write(t, r, "t1", "x/a.md", "the model's folder\n")
				settle(t, r)
				var once sync.Once
				made := false
				r.objects.st.Env.SetFault(func(step, p string) error {
					if _, err := os.Lstat(x); step == gd.StepWorktree && p == "memories/x" && errors.Is(err, fs.ErrNotExist) {
						once.Do(func() { byHand(); made = true }) // the model's folder is gone, its file not yet written
					}
					return nil
				})
				func() {
					r.disk.hold()
					defer r.disk.mu.Unlock()
					del(t, r, "t2", "x")
					write(t, r, "t3", "x", "the model's\n")
				}()
				settle(t, r)
				r.objects.st.Env.SetFault(nil)
				if !made {
					t.Fatal("no folder was made at the write")
				}
			} else {
				fails(func() { write(t, r, "t1", "x", "the model's\n") })
				if c == "the model deletes it" {
					del(t, r, "t2", "x")
					settle(t, r)
				} else {
					repaired()
				}
			}
			if got := readDisk(t, dir, "x/h.md"); got != "by hand\n" {
				t.Fatalf("the file made by hand is gone: %s", got)
			}
			// (The start adopts what it finds: nothing is left then.)
			if _, err := r.Adopt(ctx); err != nil && (!strings.HasSuffix(c, "start") || !errors.Is(err, ErrNoChange)) {
				t.Fatal(err)
			}
			settle(t, r)
			adoptedAs(t, r, want)
			if c == "the model deletes it" || strings.HasPrefix(c, "a folder to repair") {
				// nothing of the model's made way
			} else { // the model's file is in its commit
				if got := gittest.Git(t, dir, "show", "HEAD~1:memories/x"); got != "the model's\n" {
					t.Errorf("HEAD~1:memories/x = %q", got)
				}
			}
		})
	}
}

// adoptedAs checks that HEAD and the worktree hold want (memory paths:
// contents), that git finds the worktree clean, and that HEAD is an adopt
// commit: what an operator made by hand was kept and committed.
func adoptedAs(t *testing.T, r *Repo, want map[string]string) {
	t.Helper()
	if got := files(t, r); !maps.Equal(got, want) {
		t.Errorf("HEAD holds %q, want %q", got, want)
	}
	if got := onDisk(t, r); !maps.Equal(got, want) {
		t.Errorf("the worktree holds %q, want %q", got, want)
	}
	if st := gittest.Git(t, r.Dir(), "status", "--porcelain"); st != "" {
		t.Errorf("git status:\n%s", st)
	}
	if got := gittest.Git(t, r.Dir(), "log", "-1", "--format=%(trailers:key=Memory-Command,valueonly)"); strings.TrimSpace(got) != "adopt" {
		t.Errorf("HEAD is no adopt commit: %q", got)
	}
}
