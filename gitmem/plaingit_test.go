package gitmem

import (
	"testing"
	"time"
)

// .git/index never pairs a file's new blob with the lstat data of the
// version the worktree still holds: an index written between a commit
// being published and its file being written (Flush runs beside the
// materialiser) gave the file its old size, and git then listed it as
// modified for good though it was identical to HEAD (issue 21, item 17).
func TestIndexNeverVouchesForAFileNotYetWritten(t *testing.T) {
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "one\n")
	settle(t, r)
	// Past the racy window, a view's drift check caches a.md's lstat data.
	time.Sleep(150 * time.Millisecond)
	if _, err := r.Snapshot("a.md"); err != nil {
		t.Fatal(err)
	}
	r.mmu.Lock() // the materialiser waits: t2 is published, not yet in the worktree
	write(t, r, "t2", "a.md", "two, longer\n")
	if err := r.writeIndex(); err != nil {
		r.mmu.Unlock()
		t.Fatal(err)
	}
	r.mmu.Unlock()
	settle(t, r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if st := gitCLI(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status after a clean exit:\n%s", st)
	}
}
