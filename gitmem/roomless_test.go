package gitmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
		if err := os.WriteFile(filepath.Join(dir, "memories", fmt.Sprintf("n%d.md", i)), []byte("by hand\n"), 0o600); err != nil {
			t.Fatal(err)
		}
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
		if err := os.WriteFile(filepath.Join(dir, "memories", p), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
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
	if err := os.MkdirAll(filepath.Join(dir, "memories", "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "memories", "d", "big.md"), []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
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
	if err := os.WriteFile(filepath.Join(dir, "memories", "d", "big.md"), []byte("shrunk by hand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
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
	if err := os.WriteFile(filepath.Join(dir, "memories", "d", "h.md"), []byte("HAND\n"), 0o600); err != nil {
		t.Fatal(err)
	}
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
	if err := os.WriteFile(filepath.Join(dir, "memories", "d", "big.md"), []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
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
	if err := os.WriteFile(filepath.Join(dir, "memories", "d", "h.md"), []byte("0123456789012345678\n"), 0o600); err != nil {
		t.Fatal(err)
	}
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
	if err := os.WriteFile(filepath.Join(dir, "memories", "d", "h.md"), []byte("HAND\n"), 0o600); err != nil {
		t.Fatal(err)
	}
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
