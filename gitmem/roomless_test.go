package gitmem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A process that keeps making files by hand in a memory that has no room
// for them: each adopt finds a new one, and named it at ERROR, one line
// per adopt for as long as the process ran. The left files are named
// when there were none before, and again each time their count doubles
// since the last line: 1, 2, 4, 8 of ten.
func TestFilesMadeByHandOneAtATimePastTheLimitAreNamedAsTheirCountDoubles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt := testOptions(t)
	opt.MaxFiles = 1
	logs := captureErrorLogs(t, &opt)
	r, dir := newRepoOpts(t, opt)
	write(t, r, "t1", "a.md", "a\n")
	settle(t, r)
	for i := range 10 {
		writeDisk(t, dir, fmt.Sprintf("n%d.md", i), "by hand\n")
		if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
			t.Fatalf("adopt %d: %v, want ErrNoChange", i, err)
		}
	}
	var named []string
	for _, l := range logs() {
		if strings.HasPrefix(l, "ERROR") {
			named = append(named, l)
		}
	}
	want := []string{"1 file(s) made by hand in memories/ (memories/n0.md first)", "2 file(s) made by hand in memories/ (memories/n0.md first)",
		"4 file(s) made by hand in memories/ (memories/n0.md first)", "8 file(s) made by hand in memories/ (memories/n0.md first)"}
	if len(named) != len(want) {
		t.Fatalf("%d ERROR lines, want %d:\n%s", len(named), len(want), strings.Join(named, "\n"))
	}
	for i, l := range named {
		if !strings.HasPrefix(l, "ERROR gitmem: "+want[i]+" are not committed") {
			t.Errorf("ERROR line %d: %s, want %s ...", i, l, want[i])
		}
	}
}

// Files made by hand are held to the largest memory in all (Options.
// MaxTotalBytes, serve --max-total-bytes) as to the most files: in path
// order, each one that would take the memory past it is left on disk,
// neither read nor committed, and named once at ERROR, with the limit; a
// smaller one after it that fits is taken. The adopts after it take
// nothing, and name nothing again.
func TestHandMadeFilesPastTheTotalSizeAreLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt := testOptions(t)
	opt.MaxTotalBytes = 10
	logs := captureErrorLogs(t, &opt)
	r, dir := newRepoOpts(t, opt)
	write(t, r, "t1", "a.md", "aaaa\n")
	settle(t, r)
	made := map[string]string{"n1.md": "bb\n", "n2.md": "cccc\n", "n3.md": "d\n"}
	for p, text := range made {
		writeDisk(t, dir, p, text)
	}
	if _, err := r.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
			t.Fatalf("adopt: %v, want ErrNoChange", err)
		}
	}
	settle(t, r)
	if got, want := strings.Join(strings.Fields(gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD")), " "), "memories/a.md memories/n1.md memories/n3.md"; got != want {
		t.Fatalf("HEAD holds %s, want %s", got, want)
	}
	for p, text := range made {
		if got := readDisk(t, dir, p); got != text {
			t.Errorf("%s on disk = %q, want %q", p, got, text)
		}
	}
	var named []string
	for _, l := range logs() {
		if strings.HasPrefix(l, "ERROR") {
			named = append(named, l)
		}
	}
	want := "ERROR gitmem: 1 file(s) made by hand in memories/ (memories/n2.md first) are not committed, nor shown to the model: the memory holds 10 bytes, the limit is 10 bytes in all; they are taken once it has room (remove them, delete other memories, or raise the limit)"
	if len(named) != 1 || named[0] != want {
		t.Fatalf("ERROR lines:\n%s\nwant one:\n%s", strings.Join(named, "\n"), want)
	}
}

// A file moved by hand (mv a.md z.md) in a full memory, beside files made
// by hand that wait for room: the move removes a.md and makes z.md, and
// the removal's room went to the first file made by hand in path order
// (n.md), z.md left for want of room: a.md's memory was deleted from
// HEAD, its text left uncommitted. A file made by hand that is a file the
// same adopt removes (its blob) was moved, not made: it is taken first,
// in the room it had.
func TestAFileMovedByHandKeepsItsRoom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	opt.MaxFiles = 2
	r, _, err := Init(ctx, dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "a.md", "a, moved\n")
	write(t, r, "t2", "b.md", "b\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join(dir, "memories")
	if err := os.WriteFile(filepath.Join(mem, "n.md"), []byte("made by hand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(mem, "a.md"), filepath.Join(mem, "z.md")); err != nil {
		t.Fatal(err)
	}
	r, err = Open(ctx, dir, opt) // the start's adopt looks at every file
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Adopt(ctx); err != nil && !errors.Is(err, ErrNoChange) {
		t.Fatal(err)
	}
	settle(t, r)
	if got, want := strings.Join(strings.Fields(gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD")), " "), "memories/b.md memories/z.md"; got != want {
		t.Fatalf("HEAD holds %s, want %s", got, want)
	}
	if got := readDisk(t, dir, "n.md"); got != "made by hand\n" {
		t.Fatalf("n.md on disk = %q", got)
	}
}

// One file made by hand is left for the total size (and stays), and a
// program writes a temporary file beside it, then removes it, again and
// again (sed -i, an editor's save). Files left for their size are looked
// at at every adopt, so each removal was seen and the count named dropped
// back; each new temporary file doubled it again: one ERROR line per
// adopt, "2 file(s) ..." every time (attacker A6). A line comes again
// only when twice as many are left as the last line said.
func TestATemporaryFileBesideOneLeftIsNotNamedAtEveryAdopt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt := testOptions(t)
	opt.MaxTotalBytes = 100
	logs := captureErrorLogs(t, &opt)
	r, dir := newRepoOpts(t, opt)
	write(t, r, "t1", "a.md", strings.Repeat("a", 80)+"\n")
	settle(t, r)
	mem := filepath.Join(dir, "memories")
	if err := os.WriteFile(filepath.Join(mem, "left.md"), []byte(strings.Repeat("x", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
		t.Fatalf("adopt: %v, want ErrNoChange", err)
	}
	for i := range 10 {
		p := filepath.Join(mem, fmt.Sprintf("tmp%d.md", i))
		if err := os.WriteFile(p, []byte(strings.Repeat("t", 30)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
			t.Fatalf("adopt %d: %v, want ErrNoChange", i, err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
			t.Fatalf("adopt %d after the removal: %v, want ErrNoChange", i, err)
		}
	}
	var named []string
	for _, l := range logs() {
		if strings.HasPrefix(l, "ERROR") {
			named = append(named, l)
		}
	}
	if len(named) > 2 {
		t.Errorf("%d ERROR lines, want at most 2:\n%s", len(named), strings.Join(named, "\n"))
	}
}

// A revert of a delete, or a restore, brings a file back where a file
// made by hand sits that no commit holds (over the largest file size, as
// here, or left for want of room): it was committed, and once the hand
// file was shrunk the adopt merged the two between conflict markers
// (attacker A6). The revert gets a conflict for that file, as a rename
// moved back onto one; the restore a *HandMadeError; neither commits,
// and the hand file is taken as it is once it fits.
func TestRevertAndRestoreWriteNoFileOverOneMadeByHand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt := testOptions(t)
	opt.MaxFileBytes = 10
	r, dir := newRepoOpts(t, opt)
	write(t, r, "t1", "a.md", "model\n")
	del(t, r, "t2", "a.md")
	settle(t, r)
	p := filepath.Join(dir, "memories", "a.md")
	if err := os.WriteFile(p, []byte("made by hand, over the limit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	head := gittest.Git(t, dir, "rev-parse", "HEAD")
	_, _, err := r.Revert(ctx, []string{"t2"}, RevertOptions{Theirs: true})
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Files) != 1 || ce.Files[0].Path != "a.md" || !strings.Contains(ce.Files[0].Reason, "made by hand") {
		t.Errorf("revert of the delete onto a file made by hand: %v, want a conflict for a.md", err)
	}
	t1, err := r.Resolve(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = r.Restore(ctx, t1, RestoreOptions{Paths: []string{"a.md"}})
	var he *HandMadeError
	if !errors.As(err, &he) || he.Path != "a.md" || strings.Contains(err.Error(), dir) {
		t.Errorf("restore onto a file made by hand: %v, want a *HandMadeError for a.md, no host path", err)
	}
	if got := gittest.Git(t, dir, "rev-parse", "HEAD"); got != head {
		t.Fatalf("HEAD moved: %s, was %s", got, head)
	}
	if err := os.WriteFile(p, []byte("by hand\n"), 0o644); err != nil { // shrunk: now adopted
		t.Fatal(err)
	}
	if _, err := r.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	if got := gittest.Git(t, dir, "show", "HEAD:memories/a.md"); got != "by hand\n" {
		t.Errorf("HEAD's a.md: %q, want the hand file as it is", got)
	}
}

// A revert of a rename moves the file back where a file made by hand now
// sits that no commit holds: the conflict names that path and the hand
// file, as a revert of a delete does, not "moved, or that path is taken"
// of a path the revert does not say is the one in the way.
func TestARevertedRenameNamesTheFileMadeByHandInItsWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt := testOptions(t)
	opt.MaxFileBytes = 10
	r, dir := newRepoOpts(t, opt)
	write(t, r, "t1", "a.md", "model\n")
	mv(t, r, "t2", "a.md", "b.md")
	settle(t, r)
	writeDisk(t, dir, "a.md", "made by hand, over the limit\n")
	head := gittest.Git(t, dir, "rev-parse", "HEAD")
	_, _, err := r.Revert(ctx, []string{"t2"}, RevertOptions{Theirs: true})
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Files) != 1 || ce.Files[0].Path != "a.md" || !strings.Contains(ce.Files[0].Reason, "made by hand") {
		t.Errorf("revert of the rename onto a file made by hand: %v (%+v), want a conflict for a.md naming the hand file", err, ce)
	}
	if got := gittest.Git(t, dir, "rev-parse", "HEAD"); got != head {
		t.Fatalf("HEAD moved: %s, was %s", got, head)
	}
}

// A file made by hand over the largest file size, left by an adopt, in a
// folder the model renames after: no commit holds it, so it is no edit of
// a file the rename moved, and stays where it was made, noted nowhere
// (not in the kept edits, which outlive a crash). It was noted as a hand edit bound for the
// folder's new place, and once shrunk, the adopt merged it between
// conflict markers into the file the model made there since. Shrunk, it
// is taken where it is, as any file made by hand, and the model's file
// stays as made.
func TestAFileLeftOverTheSizeLimitStaysWhereItIsWhenItsFolderIsRenamed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt := testOptions(t)
	opt.MaxFileBytes = 50
	logs := captureErrorLogs(t, &opt)
	r, dir := newRepoOpts(t, opt)
	write(t, r, "t1", "d/b.md", "b\n")
	settle(t, r)
	big := strings.Repeat("x", 59) + "\n"
	writeDisk(t, dir, "d/big.md", big)
	if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
		t.Fatalf("adopt: %v, want ErrNoChange (over the size limit)", err)
	}
	if _, err := r.Update(ctx, Meta{Subject: "mv d e"}, func(tx *Tx) error { return tx.Rename("d", "e") }); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	if got := readDisk(t, dir, "d/big.md"); got != big {
		t.Fatalf("d/big.md on disk = %q after the rename, want it as made", got)
	}
	if kept := r.mirror.repairs.bases(); len(kept) > 0 {
		t.Fatalf("hand edits kept after the rename: %v, want none", kept)
	}
	for _, l := range logs() {
		if strings.Contains(l, "edited by hand") {
			t.Fatalf("logged: %s", l)
		}
	}
	write(t, r, "t2", "e/big.md", "the model's\n")
	writeDisk(t, dir, "d/big.md", "shrunk by hand\n")
	if _, err := r.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	if got := read(t, r, "e/big.md"); got != "the model's\n" {
		t.Errorf("e/big.md = %q, want the model's file as made", got)
	}
	if got := read(t, r, "d/big.md"); got != "shrunk by hand\n" {
		t.Errorf("d/big.md = %q, want the hand file as shrunk", got)
	}
	if out := gittest.Git(t, dir, "log", "-p", "HEAD"); strings.Contains(out, "<<<<<<<") {
		t.Errorf("a commit holds conflict markers:\n%s", out)
	}
}

// A file made by hand in a folder while the model renames it (before the
// worktree follows) goes with the folder, to a path the memory does not
// hold: a new file, which needs room there as any other. It was taken
// past --max-files and --max-total-bytes (attacker A7); it is left on
// disk while there is no room.
func TestAFileMadeInAFolderWhileItIsRenamedIsNotCommittedPastTheFileLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt := testOptions(t)
	opt.MaxFiles = 3
	r, dir := newRepoOpts(t, opt)
	keepWriterLock(t, r) // it writes with the disk lock held
	write(t, r, "t1", "d/a.md", "A\n")
	write(t, r, "t2", "d/b.md", "B\n")
	write(t, r, "t3", "c.md", "C\n")
	settle(t, r)
	r.disk.hold() // the worktree has not caught up yet
	mv(t, r, "t4", "d", "e")
	writeDisk(t, dir, "d/h.md", "HAND\n")
	r.disk.mu.Unlock()
	settle(t, r)
	if _, err := r.Adopt(ctx); err != nil && err != ErrNoChange {
		t.Fatal(err)
	}
	settle(t, r)
	got := files(t, r)
	if len(got) > 3 {
		t.Errorf("the memory holds %d files, the limit is 3: %v", len(got), got)
	}
	if _, ok := got["e/h.md"]; !ok {
		if b, err := os.ReadFile(filepath.Join(dir, "memories", "e", "h.md")); err != nil || string(b) != "HAND\n" {
			if b2, err2 := os.ReadFile(filepath.Join(dir, "memories", "d", "h.md")); err2 != nil || string(b2) != "HAND\n" {
				t.Errorf("hand file neither committed nor on disk: e %q %v, d %q %v", b, err, b2, err2)
			}
		}
	}
}

// As above, a file over --max-file-bytes: not committed either.
func TestAFileMadeInAFolderWhileItIsRenamedIsNotCommittedOverTheSizeLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt := testOptions(t)
	opt.MaxFileBytes = 50
	r, dir := newRepoOpts(t, opt)
	keepWriterLock(t, r) // it writes with the disk lock held
	write(t, r, "t1", "d/a.md", "A\n")
	settle(t, r)
	big := "0123456789012345678901234567890123456789012345678901234567890123456789\n"
	r.disk.hold()
	mv(t, r, "t4", "d", "e")
	writeDisk(t, dir, "d/big.md", big)
	r.disk.mu.Unlock()
	settle(t, r)
	if _, err := r.Adopt(ctx); err != nil && err != ErrNoChange {
		t.Fatal(err)
	}
	settle(t, r)
	got := files(t, r)
	for p, c := range got {
		if len(c) > 50 {
			t.Errorf("%s committed with %d bytes, over the limit of 50", p, len(c))
		}
	}
	e, _ := os.ReadFile(filepath.Join(dir, "memories", "e", "big.md"))
	d, _ := os.ReadFile(filepath.Join(dir, "memories", "d", "big.md"))
	if string(e) != big && string(d) != big {
		t.Errorf("the hand file is on disk at neither e/big.md (%q) nor d/big.md (%q)", e, d)
	}
}

// As above, past --max-total-bytes.
func TestAFileMadeInAFolderWhileItIsRenamedIsNotCommittedPastTheTotalSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt := testOptions(t)
	opt.MaxTotalBytes = 40
	r, dir := newRepoOpts(t, opt)
	keepWriterLock(t, r)                                             // it writes with the disk lock held
	write(t, r, "t1", "d/a.md", "0123456789012345678901234567890\n") // 32 bytes
	settle(t, r)
	r.disk.hold()
	mv(t, r, "t4", "d", "e")
	writeDisk(t, dir, "d/h.md", "0123456789012345678\n")
	r.disk.mu.Unlock()
	settle(t, r)
	if _, err := r.Adopt(ctx); err != nil && err != ErrNoChange {
		t.Fatal(err)
	}
	settle(t, r)
	n := 0
	for _, c := range files(t, r) {
		n += len(c)
	}
	if n > 40 {
		t.Errorf("the memory holds %d bytes, the limit is 40: %v", n, files(t, r))
	}
}

// A file made by hand in a folder while the model deletes it (before
// the worktree follows), the memory at --max-files: left where it is,
// not taken past the limit.
func TestAFileMadeInAFolderWhileItIsDeletedIsNotCommittedPastTheFileLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt := testOptions(t)
	opt.MaxFiles = 2
	r, dir := newRepoOpts(t, opt)
	keepWriterLock(t, r) // it writes with the disk lock held
	write(t, r, "t1", "d/a.md", "A\n")
	write(t, r, "t2", "c.md", "C\n")
	settle(t, r)
	r.disk.hold()
	del(t, r, "t4", "d")
	write(t, r, "t5", "g.md", "G\n") // the room the delete made: 2 files again
	writeDisk(t, dir, "d/h.md", "HAND\n")
	r.disk.mu.Unlock()
	settle(t, r)
	if _, err := r.Adopt(ctx); err != nil && err != ErrNoChange {
		t.Fatal(err)
	}
	settle(t, r)
	if got := files(t, r); len(got) > 2 {
		t.Errorf("the memory holds %d files, the limit is 2: %v", len(got), got)
	}
}

// create is the model's create of the file p, as the handler makes it:
// ErrExist where the memory holds p or a file made by hand is there
// (Tx.HandMade), ErrNotDir where one is in its way.
func create(p string) func(tx *Tx) error {
	return func(tx *Tx) error {
		if _, err := tx.Stat(p); err == nil {
			return ErrExist
		}
		if made, err := tx.HandMade(p); err != nil {
			return err
		} else if made {
			return ErrExist
		}
		return tx.WriteFile(p, []byte("the model's\n"))
	}
}

// crashRightAfterRename renames the folder from to to in r, and drops r
// as a process killed between the rename's answer and the worktree's
// follow of it (the rename stays in the write-ahead log); then opens the
// repository again with opt, which replays the log.
func crashRightAfterRename(t *testing.T, r *Repo, dir string, opt Options, from, to string) *Repo {
	t.Helper()
	stop := failAt(t, r, gd.StepPack, "")
	mv(t, r, "mv-"+from, from, to)
	crash(r)
	stop()
	r, err := Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	settle(t, r)
	return r
}

// A file made by hand that an adopt left for want of room, in a folder
// the model renames; gitmem is killed before the worktree follows the
// rename. The list of the files left was in memory only: the start's
// replay took the file for one made in the folder as it was renamed, and
// bound it for the folder's new place, where it was committed once there
// was room (attacker A7). It stays where it is, as without the crash,
// and is taken there.
func TestAFileLeftForWantOfRoomStaysWhereItIsAfterACrashRightAfterTheRename(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt := testOptions(t)
	opt.MaxFiles = 3
	r, dir := newRepoOpts(t, opt)
	write(t, r, "t1", "d/a.md", "A\n")
	write(t, r, "t2", "d/b.md", "B\n")
	write(t, r, "t3", "c.md", "C\n")
	settle(t, r)
	writeDisk(t, dir, "d/h.md", "HAND\n")
	if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
		t.Fatalf("adopt: %v, want ErrNoChange (no room)", err)
	}
	r = crashRightAfterRename(t, r, dir, opt, "d", "e")
	if kept := r.mirror.repairs.bases(); len(kept) > 0 {
		t.Errorf("hand edits kept after the replay: %v, want none", kept)
	}
	if got := files(t, r); len(got) != 3 {
		t.Errorf("the memory holds %d files, the limit is 3: %v", len(got), got)
	}
	del(t, r, "t5", "c.md") // room for one
	if _, err := r.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	got := files(t, r)
	if got["d/h.md"] != "HAND\n" {
		t.Errorf("d/h.md = %q, want the hand file taken where it was made: %v", got["d/h.md"], got)
	}
	if _, ok := got["e/h.md"]; ok {
		t.Errorf("the left file was committed at the folder's new place e/h.md: %v", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".git", "gitmem", "left")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf(".git/gitmem/left with no file left: %v, want none", err)
	}
}

// As above, a file left over the largest file size: the start's replay
// bound it for the folder's new place, the model made a file there, and
// the adopt, the hand file shrunk, merged it between conflict markers into
// the model's (attacker A7; b7b2102 had fixed it where gitmem was not
// killed). Shrunk, it is taken where it is, and the model's file stays as
// made.
func TestAFileLeftOverTheSizeLimitStaysWhereItIsAfterACrashRightAfterTheRename(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt := testOptions(t)
	opt.MaxFileBytes = 50
	r, dir := newRepoOpts(t, opt)
	write(t, r, "t1", "d/a.md", "A\n")
	settle(t, r)
	big := strings.Repeat("x", 59) + "\n"
	writeDisk(t, dir, "d/big.md", big)
	if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
		t.Fatalf("adopt: %v, want ErrNoChange (over the size limit)", err)
	}
	r = crashRightAfterRename(t, r, dir, opt, "d", "e")
	write(t, r, "t3", "e/big.md", "the model's\n")
	settle(t, r)
	writeDisk(t, dir, "d/big.md", "shrunk by hand\n")
	if _, err := r.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	got := files(t, r)
	if got["e/big.md"] != "the model's\n" {
		t.Errorf("e/big.md = %q, want the model's file as made", got["e/big.md"])
	}
	if got["d/big.md"] != "shrunk by hand\n" {
		t.Errorf("d/big.md = %q, want the shrunk hand file taken where it is", got["d/big.md"])
	}
}

// A file made by hand in a folder while the model renames it (before the
// worktree follows) goes with the folder: it is kept, bound for the
// folder's new place (repairs.movedTo). A create of the model's at that
// place before the next adopt found no file there on disk, and was
// committed; the adopt then merged the hand file into it between conflict
// markers. The place is taken, as where a file made by hand is on disk:
// the create gets "already exists" (HandMade), a rename onto it ErrExist,
// a path beneath it ErrNotDir; the adopt the look brings takes the hand
// file there as made.
func TestAFileMadeInAFolderWhileItIsRenamedHoldsItsNewPlace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fn   func(tx *Tx) error
		want error
	}{
		{"create", create("e/h.md"), ErrExist},
		{"create beneath", create("e/h.md/x.md"), ErrNotDir},
		{"rename onto", func(tx *Tx) error { return tx.Rename("c.md", "e/h.md") }, ErrExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r, dir := newRepoOpts(t, testOptions(t))
			write(t, r, "t1", "d/a.md", "A\n")
			write(t, r, "t2", "c.md", "C\n")
			settle(t, r)
			r.disk.hold() // the worktree has not caught up yet
			mv(t, r, "t3", "d", "e")
			writeDisk(t, dir, "d/h.md", "HAND\n")
			r.disk.mu.Unlock()
			settle(t, r)
			if to := r.mirror.repairs.movedTo("memories/d/h.md"); to != "memories/e/h.md" {
				t.Fatalf("the hand file is bound for %q, want memories/e/h.md", to)
			}
			if _, err := r.Update(ctx, Meta{Subject: tc.name}, tc.fn); !errors.Is(err, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			}
			settle(t, r)
			if _, err := r.Adopt(ctx); err != nil && !errors.Is(err, ErrNoChange) {
				t.Fatal(err)
			}
			settle(t, r)
			got := files(t, r)
			if got["e/h.md"] != "HAND\n" {
				t.Errorf("e/h.md = %q, want the hand file as made: %v", got["e/h.md"], got)
			}
			if got["c.md"] != "C\n" {
				t.Errorf("c.md = %q, want it as the model made it", got["c.md"])
			}
			if out := gittest.Git(t, dir, "log", "-p", "HEAD"); strings.Contains(out, "<<<<<<<") {
				t.Errorf("a commit holds conflict markers:\n%s", out)
			}
		})
	}
}

// A rename onto a folder of files made by hand, or a create beneath it,
// is refused with a look at one of them, not at each: with 20,000 left
// for want of room, the refusal looked at every file twice (its own look,
// then the adopt's after it, which could take none while the memory holds
// the most files), 130 ms or more under the writer turn, at every call.
// An editor's temporary file, or a folder of them only, is no file made
// by hand; one in a folder beneath is.
func TestARefusedCallLooksAtOneFileMadeByHand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt := testOptions(t)
	opt.MaxFiles = 2
	r, dir := newRepoOpts(t, opt)
	write(t, r, "t1", "a.md", "A\n")
	write(t, r, "t2", "c.md", "C\n")
	settle(t, r)
	mk := func(rel string) { writeDisk(t, dir, rel, "by hand\n") }
	for i := range 300 {
		mk(fmt.Sprintf("x/h%03d.md", i))
	}
	mk("y/.a.md.swp")
	mk("y/a.md~")
	mk("z/.a.md.swp")
	mk("z/deeper/h.md")
	if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
		t.Fatalf("adopt: %v, want ErrNoChange (no room)", err)
	}
	for _, tc := range []struct {
		name string
		fn   func(tx *Tx) error
		want error
	}{
		{"rename onto x", func(tx *Tx) error { return tx.Rename("c.md", "x") }, ErrExist},
		{"create x", create("x"), ErrExist},
		{"create beneath x/h000.md", create("x/h000.md/n.md"), ErrNotDir},
		{"rename onto z", func(tx *Tx) error { return tx.Rename("c.md", "z") }, ErrExist},
		{"rename onto y", func(tx *Tx) error { return tx.Rename("c.md", "y") }, nil},
	} {
		before := r.mirror.wt.looks.Load()
		if _, err := r.Update(ctx, Meta{Subject: tc.name}, tc.fn); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if n := r.mirror.wt.looks.Load() - before; n > 2 {
			t.Errorf("%s: %d files looked at, want at most 2", tc.name, n)
		}
	}
	if got := files(t, r); got["y"] != "C\n" || len(got) != 2 {
		t.Errorf("the memory holds %v, want a.md and y", got)
	}
}

// .git/gitmem/left names the files left while some are: a start finds
// the one an earlier process left removed by hand meanwhile, and removes
// the file (it named a file no longer there, for a later crash's replay).
func TestTheListOfFilesLeftGoesWithTheLastOfThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opt := testOptions(t)
	opt.MaxFiles = 1
	r, dir := newRepoOpts(t, opt)
	write(t, r, "t1", "a.md", "A\n")
	settle(t, r)
	hand := filepath.Join(dir, "memories", "h.md")
	if err := os.WriteFile(hand, []byte("HAND\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) {
		t.Fatalf("adopt: %v, want ErrNoChange (no room)", err)
	}
	list := filepath.Join(dir, ".git", "gitmem", "left")
	if b, err := os.ReadFile(list); err != nil || string(b) != "h.md\n" {
		t.Fatalf(".git/gitmem/left = %q %v, want h.md", b, err)
	}
	if fi, err := os.Stat(list); err != nil || fi.Mode().Perm() != gd.OwnFileMode {
		t.Errorf(".git/gitmem/left: %v %v, want mode %v", fi.Mode(), err, gd.OwnFileMode)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(hand); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Flush(ctx); err != nil { // after the start's look
		t.Fatal(err)
	}
	if _, err := os.Lstat(list); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf(".git/gitmem/left after the start: %v, want none", err)
	}
}

// The memory at --max-files, an adopt of a memory removed by hand and of
// a folder of files made by hand (where the tree has nothing): the
// removal makes room, and the look finds the folder's files too (the
// adopt takes the first: driftedAt leaves them out only while no hand
// edit of the other paths can make room); without the removal, it finds
// none of them.
func TestARemovalByHandMakesRoomForAFileMadeInAFolderTheAdoptLooksAt(t *testing.T) {
	t.Parallel()
	opt := testOptions(t)
	opt.MaxFiles = 2
	r, dir := newRepoOpts(t, opt)
	write(t, r, "t1", "a.md", "A\n")
	write(t, r, "t2", "c.md", "C\n")
	settle(t, r)
	writeDisk(t, dir, "x/h.md", "HAND\n")
	paths := []string{"memories/c.md", "memories/x"}
	if drift, err := r.mirror.driftedAt(r.snapshotTree(), paths); err != nil || len(drift) != 0 {
		t.Errorf("drift with no room: %v %v, want none", drift, err)
	}
	if err := os.Remove(filepath.Join(dir, "memories", "c.md")); err != nil {
		t.Fatal(err)
	}
	if drift, err := r.mirror.driftedAt(r.snapshotTree(), paths); err != nil || !slices.Equal(drift, []string{"c.md", "x/h.md"}) {
		t.Errorf("drift with c.md removed: %v %v, want c.md and x/h.md", drift, err)
	}
	if _, err := r.Adopt(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	if got := files(t, r); got["x/h.md"] != "HAND\n" || len(got) != 2 {
		t.Errorf("the memory holds %v, want a.md and x/h.md", got)
	}
}
