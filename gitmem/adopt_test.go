package gitmem

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A program reads a memory file, an acknowledged change to it reaches the
// worktree, and the program writes its edit of what it had read (a
// read-modify-write racing the model, or sed -i): the file it writes
// holds the older version of the model's line. The adopt commit must not
// roll the acknowledged change back: the edit is merged from the version
// it was made on. A region both changed shows both; a write that changed
// nothing of what it read is no edit; an edit of the current version that
// takes a model's line out is taken as it is.
func TestEditOfAFileReadBeforeAnAcknowledgedChange(t *testing.T) {
	r, dir := newRepo(t)
	p := filepath.Join(dir, "memories", "a.md")
	adopt := func(want error) {
		t.Helper()
		if _, err := r.Adopt(); !errors.Is(err, want) {
			t.Fatalf("adopt: %v, want %v", err, want)
		}
		settle(t, r)
	}
	check := func(want string) {
		t.Helper()
		if got := read(t, r, "a.md"); got != want {
			t.Fatalf("HEAD's a.md = %q, want %q\n%s", got, want, gitCLI(t, dir, "log", "-p", "--format=%s"))
		}
		if got := readDisk(t, dir, "a.md"); got != want {
			t.Fatalf("worktree a.md = %q, want %q", got, want)
		}
	}
	// (A line between the slots: changes to adjacent lines conflict, as
	// in git.)
	write(t, r, "t1", "a.md", "slot-0: m0_931\n\nslot-1: h_1\n")
	settle(t, r)

	had := readDisk(t, dir, "a.md") // the program reads
	write(t, r, "t2", "a.md", "slot-0: m0_932\n\nslot-1: h_1\n")
	settle(t, r) // the acknowledged change reaches the worktree
	os.WriteFile(p, []byte(strings.Replace(had, "h_1", "h_2", 1)), 0o600)
	adopt(nil)
	check("slot-0: m0_932\n\nslot-1: h_2\n")

	// Written back unchanged: nothing to adopt, the acknowledged version
	// is put back.
	had = readDisk(t, dir, "a.md")
	write(t, r, "t3", "a.md", "slot-0: m0_933\n\nslot-1: h_2\n")
	settle(t, r)
	os.WriteFile(p, []byte(had), 0o600)
	adopt(ErrNoChange)
	check("slot-0: m0_933\n\nslot-1: h_2\n")

	// Both changed the same line: both are shown.
	had = readDisk(t, dir, "a.md")
	write(t, r, "t4", "a.md", "slot-0: m0_934\n\nslot-1: h_2\n")
	settle(t, r)
	os.WriteFile(p, []byte(strings.Replace(had, "m0_933", "by hand", 1)), 0o600)
	adopt(nil)
	check("<<<<<<< gitmem\nslot-0: m0_934\n=======\nslot-0: by hand\n>>>>>>> edited by hand\n\nslot-1: h_2\n")

	// An edit made on the current version that takes the model's new line
	// out is the operator's, not a stale write.
	write(t, r, "t5", "a.md", "fresh\n")
	write(t, r, "t6", "a.md", "fresh\nwrong fact\n")
	settle(t, r)
	os.WriteFile(p, []byte("fresh\n"), 0o600)
	adopt(nil)
	check("fresh\n")

	if st := gitCLI(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
	gitCLI(t, dir, "fsck", "--strict")
}
