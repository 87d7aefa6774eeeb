package gitmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A program reads a memory file, an acknowledged change to it reaches the
// worktree, and the program writes its edit of what it had read (a
// read-modify-write racing the model, or sed -i): the file it writes
// holds the older version of the model's line. The adopt commit must not
// roll the acknowledged change back: the edit is merged from the version
// it was made on. A region both changed shows both; a write that changed
// nothing of what it read is no edit; and one made later that takes a
// model's line out is taken as it is.
func TestEditOfAFileReadBeforeAnAcknowledgedChange(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	p := filepath.Join(dir, "memories", "a.md")
	adopt := func(want error) {
		t.Helper()
		awaitNoWriter(t, r, "a.md")
		if _, err := r.Adopt(context.Background()); !errors.Is(err, want) {
			t.Fatalf("adopt: %v, want %v", err, want)
		}
		settle(t, r)
	}
	check := func(want string) {
		t.Helper()
		if got := read(t, r, "a.md"); got != want {
			t.Fatalf("HEAD's a.md = %q, want %q\n%s", got, want, gittest.Git(t, dir, "log", "-p", "--format=%s"))
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

	// A file put back exactly as the version before the model's last
	// change is that version written back, or checked out by git, when it
	// comes right after the change; written seconds later (its mtime), it
	// is the operator taking the model's line out.
	// (Its mtime is set to before the change reached the worktree: "right
	// after" whatever the time settle took on a loaded machine.)
	write(t, r, "t5", "a.md", "fresh\n")
	right := time.Now()
	write(t, r, "t6", "a.md", "fresh\nwrong fact\n")
	settle(t, r)
	os.WriteFile(p, []byte("fresh\n"), 0o600)
	os.Chtimes(p, right, right)
	adopt(ErrNoChange)
	check("fresh\nwrong fact\n")
	os.WriteFile(p, []byte("fresh\n"), 0o600)
	later := time.Now().Add(staleWindow + time.Second)
	os.Chtimes(p, later, later)
	adopt(nil)
	check("fresh\n")

	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
	gittest.Fsck(t, dir)
}

// awaitNoWriter waits until no process holds the memory file rel open
// for writing. A descriptor may outlive its Close a moment: a process
// another test of the package forks (to run git) holds a copy of every
// descriptor of the test binary until it execs — the test's own, of a
// file it has just written by hand, and gitmem's spare files, kept open
// (worktree.recycle), one of which may be rel's file by then. An adopt
// leaves a file open for writing to a later round (ErrNoChange, and a
// file written back stays as it is), as gitmem promises of a program's
// write under way: a test that adopts a file it wrote runs the adopt once
// no process holds it.
func awaitNoWriter(t *testing.T, r *Repo, rel string) {
	t.Helper()
	waitUntil(t, rel+" closed in every process", func() bool {
		_, busy, err := r.mirror.wt.readSettled(full(rel), 0)
		return err == nil && !busy
	})
}

// A program reads a memory file the last adopt took, the model changes
// the file more times than mergeHandEdit compares an edit with (the
// worktree follows them in one pass, writing only the last), and the
// program writes its edit of what it had read. The edit was made on what
// the worktree held, the adopt's read: merged from any version the pass
// went over (which the worktree never held), it undid the model's
// changes between that version and the read, or conflicted with them
// (TestTruncatingHandEditsBesideTheModel, about 1 run in 430 under load).
func TestEditMadeBeforeAFollowOfManyCommitsMergesFromWhatTheWorktreeHeld(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	keepWriterLock(t, r)
	p := filepath.Join(dir, "memories", "a.md")
	write(t, r, "t0", "a.md", "m0: 0\nfiller\nm1: 0\nfiller\nfiller\n")
	settle(t, r)
	appendHand(t, dir, "a.md", "hand-0")
	if _, err := r.Adopt(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	had := readDisk(t, dir, "a.md") // the program reads what the adopt took
	n := [2]int{}
	r.disk.hold()                       // the worktree follows the model's changes in one pass
	for i := range baseCandidates + 1 { // more than are compared with
		key := fmt.Sprintf("m%d: ", i%2)
		old, new := fmt.Sprintf("%s%d\n", key, n[i%2]), fmt.Sprintf("%s%d\n", key, n[i%2]+1)
		n[i%2]++
		_, err := r.Update(context.Background(), Meta{Subject: "model", Trailers: []Trailer{{TrailerToolUseID, fmt.Sprint("m", i)}}}, func(tx *Tx) error {
			data, err := tx.ReadFile("a.md")
			if err != nil {
				return err
			}
			return tx.WriteFile("a.md", []byte(strings.Replace(string(data), old, new, 1)))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	r.disk.mu.Unlock()
	settle(t, r)
	if err := os.WriteFile(p, []byte(had+"hand-1\n"), 0o600); err != nil { // its edit of what it read
		t.Fatal(err)
	}
	if _, err := r.Adopt(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	wantEverywhere(t, r, dir, "a.md", fmt.Sprintf("m0: %d\nfiller\nm1: %d\nfiller\nfiller\nhand-0\nhand-1\n", n[0], n[1]))
}

// git reset --hard HEAD~5 while serve holds the writer lock (under load
// it always does): the branch move is undone, as documented, and so is
// what the reset wrote to the worktree — files put back to their version
// of five commits ago, files created since deleted, a file deleted since
// back. They are git's, not hand edits: adopted, they undid acknowledged
// inserts and str_replaces in HEAD (issue 21, item 2). Whatever gitmem
// does next — an adopt, a write to another file, the model's next change
// to a file the reset rewrote — HEAD keeps every acknowledged change, the
// worktree follows it, and no adopt commit is made.
func TestResetHardWhileServingUndoesNoAcknowledgedChange(t *testing.T) {
	t.Parallel()
	for _, next := range []string{"adopt", "another file", "that file"} {
		t.Run(next, func(t *testing.T) {
			r, dir := newRepo(t)
			write(t, r, "t1", "a.md", "a1\n\nx\n")
			write(t, r, "t2", "b.md", "b\n")
			write(t, r, "t3", "gone.md", "g\n")
			// Five acknowledged changes: an insert, a str_replace, a
			// create, another insert, a delete.
			write(t, r, "t4", "a.md", "a1\nins\n\nx\n")
			write(t, r, "t5", "b.md", "B\n")
			write(t, r, "t6", "c.md", "c\n")
			write(t, r, "t7", "a.md", "a1\nins\nins2\n\nx\n")
			if _, err := r.Update(context.Background(), Meta{Subject: "rm gone.md", Trailers: []Trailer{{TrailerToolUseID, "t8"}}}, func(tx *Tx) error {
				return tx.Remove("gone.md")
			}); err != nil {
				t.Fatal(err)
			}
			settle(t, r)
			defer r.collector.running()() // the writer lock stays held, as under load
			gittest.Git(t, dir, "reset", "-q", "--hard", "HEAD~5")
			want := map[string]string{"a.md": "a1\nins\nins2\n\nx\n", "b.md": "B\n", "c.md": "c\n"}
			switch next {
			case "adopt": // serve's --adopt-every
				if _, err := r.Adopt(context.Background()); !errors.Is(err, ErrNoChange) {
					t.Fatalf("adopt: %v, want ErrNoChange", err)
				}
			case "another file":
				write(t, r, "t9", "z.md", "z\n")
				want["z.md"] = "z\n"
				settle(t, r)
				if _, err := r.Adopt(context.Background()); !errors.Is(err, ErrNoChange) {
					t.Fatalf("adopt: %v, want ErrNoChange", err)
				}
			case "that file": // a str_replace of a.md
				if _, err := r.Update(context.Background(), Meta{Subject: "str_replace", Trailers: []Trailer{{TrailerToolUseID, "t9"}}}, func(tx *Tx) error {
					data, err := tx.ReadFile("a.md")
					if err != nil {
						return err
					}
					if !strings.Contains(string(data), "ins2\n") {
						return fmt.Errorf("a.md = %q: the acknowledged inserts are gone", data)
					}
					return tx.WriteFile("a.md", []byte(strings.Replace(string(data), "x\n", "X\n", 1)))
				}); err != nil {
					t.Fatal(err)
				}
				want["a.md"] = "a1\nins\nins2\n\nX\n"
			}
			settle(t, r)
			for p, content := range want {
				if got := read(t, r, p); got != content {
					t.Errorf("%s in HEAD: %q, want %q", p, got, content)
				}
				if got := readDisk(t, dir, p); got != content {
					t.Errorf("%s on disk: %q, want %q", p, got, content)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "memories", "gone.md")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("gone.md, deleted by an acknowledged change, is on disk (%v)", err)
			}
			if log := subjects(t, dir); strings.Contains(log, "adopt") {
				t.Errorf("an adopt commit:\n%s", log)
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status:\n%s", st)
			}
			if refs := gittest.Git(t, dir, "for-each-ref", "refs/gitmem/displaced"); refs != "" {
				t.Errorf("left: %s", refs)
			}
			gittest.Fsck(t, dir)
		})
	}
}

// The same reset seen half-way: git writes the worktree files while it
// holds .git/index.lock, and moves the branch only after. An adopt, or a
// change of the model to such a file, in between must not take the file
// git wrote for a hand edit; once git is done the move is undone with
// its files.
func TestAdoptWaitsWhileGitRewritesTheWorktree(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "a1\n\nx\n")
	settle(t, r)
	old := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD"))
	write(t, r, "t2", "a.md", "a1\nins\n\nx\n")
	settle(t, r)
	defer r.collector.running()() // the writer lock stays held, as under load
	lock := filepath.Join(dir, ".git", "index.lock")
	if err := os.WriteFile(lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "memories", "a.md"), []byte("a1\n\nx\n"), 0o600) // git's checkout
	if _, err := r.Adopt(context.Background()); !errors.Is(err, ErrNoChange) {
		t.Fatalf("adopt while git holds the index: %v, want ErrNoChange", err)
	}
	if _, err := r.Update(context.Background(), Meta{Subject: "str_replace", Trailers: []Trailer{{TrailerToolUseID, "t3"}}}, func(tx *Tx) error {
		data, err := tx.ReadFile("a.md")
		if err != nil {
			return err
		}
		return tx.WriteFile("a.md", []byte(strings.Replace(string(data), "x\n", "X\n", 1)))
	}); err != nil {
		t.Fatal(err)
	}
	// In git's files (not .git/index: git holds its lock, and gitmem
	// waits for it, never removes it).
	if err := r.materialize(); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, dir, "update-ref", "refs/heads/main", old) // git is done: the branch moves
	os.Remove(lock)
	if _, err := r.Adopt(context.Background()); !errors.Is(err, ErrNoChange) {
		t.Fatalf("adopt: %v, want ErrNoChange", err)
	}
	settle(t, r)
	want := "a1\nins\n\nX\n"
	if got := read(t, r, "a.md"); got != want {
		t.Fatalf("a.md in HEAD: %q, want %q\n%s", got, want, gittest.Git(t, dir, "log", "-p", "--format=%s"))
	}
	if got := readDisk(t, dir, "a.md"); got != want {
		t.Fatalf("a.md on disk: %q, want %q", got, want)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("git status:\n%s", st)
	}
	gittest.Fsck(t, dir)
}

// Issue 21, item 5: conflict markers piled up, 12 blocks deep, each new
// conflict of a file that already held one wrapped it. A new conflict in
// or around a block takes the whole block in, one block deep, and keeps
// every line: a block's two halves are merged each on its own, so a file
// edited round after round grows by the lines of each round, no more.
func TestConflictMarkersNeverNest(t *testing.T) {
	t.Parallel()
	block := func(o, h string) string {
		return "<<<<<<< gitmem\n" + o + "=======\n" + h + ">>>>>>> edited by hand\n"
	}
	for _, tc := range []struct{ name, base, ours, hand, want string }{
		{"inside a block of the base",
			"x\n" + block("a\n", "b\n") + "y\n",
			"x\n" + block("A\n", "b\n") + "y\n",
			"x\n" + block("c\n", "b\n") + "y\n",
			"x\n" + block("A\nc\n", "b\n") + "y\n"},
		{"a block on one side",
			"x\nk\ny\n",
			"x\n" + block("K1\n", "K2\n") + "y\n",
			"x\nk3\ny\n",
			"x\n" + block("K1\nK2\n", "k3\n") + "y\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(mergeHand([]byte(tc.base), []byte(tc.ours), []byte(tc.hand))); got != tc.want {
				t.Fatalf("merged:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
	// Round after round of conflicting edits of one line.
	text := "v: 0\nmiddle\nw: 0\n"
	for i := 1; i <= 12; i++ {
		ours := strings.Replace(text, fmt.Sprintf("v: %d\n", i-1), fmt.Sprintf("v: %d\n", i), 1)
		hand := strings.Replace(text, fmt.Sprintf("v: %d\n", i-1), fmt.Sprintf("v: hand %d\n", i), 1)
		text = string(mergeHand([]byte(text), []byte(ours), []byte(hand)))
		depth, most := 0, 0
		for _, l := range splitKeep(text) {
			switch {
			case strings.HasPrefix(l, "<<<<<<< "):
				depth++
				most = max(most, depth)
			case strings.HasPrefix(l, ">>>>>>> "):
				depth--
			}
		}
		if n := len(splitKeep(text)); most > 1 || n > 2*i+6 || !strings.Contains(text, fmt.Sprintf("v: %d\n", i)) || !strings.Contains(text, fmt.Sprintf("v: hand %d\n", i)) {
			t.Fatalf("round %d: %d deep:\n%s", i, most, text)
		}
	}
}

// A block one side holds and the base does not (the file was edited by
// hand from the version before the merge that wrote it) is kept whole too:
// a hand edit just before or after it, or in it, took in only part of it,
// and the merge wrote two "<<<<<<< gitmem" lines before one "=======".
// Every case must give balanced blocks, one deep, and keep every line of
// either side.
func TestMergeHandKeepsASideBlockWhole(t *testing.T) {
	t.Parallel()
	block := "<<<<<<< gitmem\n113\n=======\n110\n>>>>>>> edited by hand\n"
	base := "a\nb\n113\nc\nd\n"
	merged := "a\nb\n" + block + "c\nd\n" // the base after a merge
	for _, tc := range []struct{ name, base, ours, hand string }{
		{"the finding", "s\n113\n", "s\n" + block, "s\n113\n116\n"},
		{"a line added after it", base, merged, "a\nb\n113\n116\nc\nd\n"},
		{"a line added before it", base, merged, "a\nb\n112\n113\nc\nd\n"},
		{"the line before it changed", base, merged, "a\nB\n113\nc\nd\n"},
		{"the line after it changed", base, merged, "a\nb\n113\nC\nd\n"},
		{"lines added around it", base, merged, "a\nb\n112\n113\n116\nc\nd\n"},
		{"its line changed", base, merged, "a\nb\n114\nc\nd\n"},
		{"its line deleted", base, merged, "a\nb\nc\nd\n"},
		{"far from it", base, merged, "A\nb\n113\nc\nD\n"},
		{"the model changed the line after it too", base, "a\nb\n" + block + "c2\nd\n", "a\nb\n113\n116\nc\nd\n"},
		{"the model changed the line before it too", base, "a\nb2\n" + block + "c\nd\n", "a\nb\n112\n113\nc\nd\n"},
		{"the block on the hand side", base, "a\nb\n113\n116\nc\nd\n", merged},
		{"a block on each side", base, merged, "a\nb\n" + strings.Replace(block, "110", "111", 1) + "116\nc\nd\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(mergeHand([]byte(tc.base), []byte(tc.ours), []byte(tc.hand)))
			if err := checkBlocks(got); err != nil {
				t.Fatalf("%v:\n%s", err, got)
			}
			// Each line a side added (more of it than the base has) is kept.
			count := func(text string) map[string]int {
				n := map[string]int{}
				for _, l := range unmarked(splitKeep(text)) {
					n[l]++
				}
				return n
			}
			have, was := count(got), count(tc.base)
			for _, side := range []string{tc.ours, tc.hand} {
				for l, n := range count(side) {
					if n > was[l] && have[l] < n-was[l] {
						t.Fatalf("line %q of\n%s\nlost:\n%s", l, side, got)
					}
				}
			}
		})
	}
}

// checkBlocks says what is wrong with the conflict blocks of text: each
// is a "<<<<<<< " line, then one "=======", then a ">>>>>>> " line, none
// in another.
func checkBlocks(text string) error {
	state := 0 // 0 outside a block, 1 in its first half, 2 in its second
	for i, l := range splitKeep(text) {
		next := state
		switch {
		case strings.HasPrefix(l, markerOurs):
			next = 1
		case l == markerSep:
			next = 2
		case strings.HasPrefix(l, markerTheirs):
			next = 0
		default:
			continue
		}
		if next != (state+1)%3 {
			return fmt.Errorf("line %d, %q, where a block is %d", i+1, l, state)
		}
		state = next
	}
	if state != 0 {
		return fmt.Errorf("a block is left open")
	}
	return nil
}

// A git reset --hard that could not move the branch (gitmem moved it
// meanwhile, under load) leaves the worktree and .git/index at the commit
// it went to; undoGitCheckout found that commit only among the branch's
// last 1,024, and the attack reset HEAD~2000 at 1,500 commits a second:
// the files git wrote were adopted as hand edits (conflict blocks of
// versions 2,000 calls old). git checkout -- FILE rewrites .git/index as
// gitmem last wrote it, for a commit the branch has moved on from by
// thousands under load: its file was adopted too, rolling the acknowledged
// str_replaces back. Neither is a hand edit, however far back.
func TestGitCheckoutOfAnOldCommitIsNoHandEdit(t *testing.T) {
	t.Parallel()
	const n = 1100 // commits since: the old bound was 1,024
	for _, how := range []string{"reset that could not move the branch", "checkout -- file of a lagging index"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			dir := gittest.TempDir(t)
			opt := testOptions(t)
			opt.IndexDelay = time.Hour // .git/index lags until the adopt
			r, _, err := Init(context.Background(), dir, opt)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			write(t, r, "t0", "a.md", "v0\n")
			write(t, r, "t1", "b.md", "b0\n")
			settle(t, r) // .git/index written for t1
			// The writer lock stays held, as under load.
			defer r.collector.running()()
			for i := range n {
				write(t, r, fmt.Sprintf("a%d", i), "a.md", fmt.Sprintf("v%d\n", i+1))
			}
			write(t, r, "b", "b.md", "b1\n")
			if err := r.materialize(); err != nil {
				t.Fatal(err)
			}
			switch how {
			case "reset that could not move the branch":
				// What git reset --hard HEAD~n does up to its failed ref update.
				gittest.Git(t, dir, "read-tree", "-u", "--reset", fmt.Sprintf("HEAD~%d", n+1))
			default:
				gittest.Git(t, dir, "checkout", "--", "memories/a.md")
			}
			if got := readDisk(t, dir, "a.md"); got != "v0\n" {
				t.Fatalf("git wrote a.md = %q", got)
			}
			if _, err := r.Adopt(context.Background()); !errors.Is(err, ErrNoChange) {
				t.Fatalf("adopt: %v, want ErrNoChange", err)
			}
			settle(t, r)
			want := map[string]string{"a.md": fmt.Sprintf("v%d\n", n), "b.md": "b1\n"}
			for p, content := range want {
				if got := read(t, r, p); got != content {
					t.Errorf("%s in HEAD: %q, want %q", p, got, content)
				}
				if got := readDisk(t, dir, p); got != content {
					t.Errorf("%s on disk: %q, want %q", p, got, content)
				}
			}
			if log := subjects(t, dir); strings.Contains(log, "adopt") {
				t.Errorf("an adopt commit")
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status:\n%s", st)
			}
		})
	}
}

// A git reset --hard that fails half-way ("unable to create file ...:
// File exists", when gitmem wrote a file in the instant git had removed
// it) has written some worktree files and neither .git/index nor the
// branch: nothing tells which commit it checked out. Under load the
// attack's HEAD~1100 put a file 70 versions back, beyond the versions an
// adopt compared it with (the last 64 of the last 2 s), and the adopt
// took it for a hand edit: 70 acknowledged str_replaces undone. A file
// that holds one of the versions of the last checkoutDepth commits,
// written while git held .git/index.lock, is git's checkout, not a hand
// edit. The same file put back by hand with no git command running is a
// hand edit, adopted.
func TestHalfFailedGitCheckoutIsNoHandEdit(t *testing.T) {
	t.Parallel()
	for _, git := range []bool{true, false} {
		t.Run(fmt.Sprintf("git %v", git), func(t *testing.T) {
			r, dir := newRepo(t)
			defer r.collector.running()() // the writer lock stays held, as under load
			for i := range 100 {
				write(t, r, fmt.Sprintf("t%d", i), "a.md", fmt.Sprintf("v%d\n", i))
			}
			settle(t, r)
			lock := filepath.Join(dir, ".git", "index.lock")
			if git {
				if err := os.WriteFile(lock, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			os.WriteFile(filepath.Join(dir, "memories", "a.md"), []byte("v10\n"), 0o600) // HEAD~89's
			if git {
				if _, err := r.Adopt(context.Background()); !errors.Is(err, ErrNoChange) { // waits for git
					t.Fatalf("adopt while git holds the index: %v, want ErrNoChange", err)
				}
			}
			os.Remove(lock) // git failed: no index written, the branch not moved
			_, err := r.Adopt(context.Background())
			settle(t, r)
			want := "v99\n"
			if !git {
				want = "v10\n" // a hand edit
			}
			if got := read(t, r, "a.md"); got != want {
				t.Errorf("a.md in HEAD = %q, want %q (adopt: %v)", got, want, err)
			}
			if got := readDisk(t, dir, "a.md"); got != want {
				t.Errorf("a.md on disk = %q, want %q", got, want)
			}
		})
	}
}

// An adopt that merges a hand edit kept from an acknowledged change
// writes the merge to the worktree, in place of what it read there. Its
// commit joins the group being filled, which another member may write
// and publish, and the worktree follow, the instant it is queued (the
// hook does both then): the follow found the file still holding what the
// adopt read, which it was not yet told of, and kept it as a hand edit.
// The worktree then held the edit without the acknowledged change, until
// the next adopt, and -race reported the adopt's note of what it read
// (TestTruncatingHandEditsBesideTheModel).
func TestAdoptPublishedTheInstantItIsQueuedWritesItsMerge(t *testing.T) {
	t.Parallel()
	var r *Repo
	followed := 0
	r, dir := newRepoWith(t, &testHooks{adopted: func(p *prepared) {
		if r == nil {
			return // the first commit, made by Init
		}
		if err := r.committer.durable(p); err != nil {
			t.Error(err)
		}
		if err := r.materialize(); err != nil {
			t.Error(err)
		}
		followed++
	}})
	keepWriterLock(t, r)
	changeBehindTheWorktree(t, r, func() { appendHand(t, dir, "a.md", "by hand") }) // kept, to be merged
	if _, err := r.Adopt(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	if followed != 1 {
		t.Fatalf("the hook ran %d times", followed)
	}
	wantEverywhere(t, r, dir, "a.md", "ONE\ntwo\nby hand\n")
}

// wantEverywhere fails the test unless HEAD and the worktree hold want at
// the memory path p, git status is clean and git fsck --strict too.
func wantEverywhere(t *testing.T, r *Repo, dir, p, want string) {
	t.Helper()
	if got := read(t, r, p); got != want {
		t.Fatalf("HEAD's %s = %q, want %q", p, got, want)
	}
	if got := readDisk(t, dir, p); got != want {
		t.Fatalf("worktree %s = %q, want %q", p, got, want)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
	gittest.Fsck(t, dir)
}

// An adopt takes a hand edit kept from an acknowledged change, merged;
// the program that made the edit writes to the file again right after the
// adopt read it; and the adopt's commit is published, and the worktree
// follows it, the instant it is queued (the hook does all three then).
// The follow keeps the new edit, made on what the adopt read. That read
// is its base: noted before the adopt had dropped the older edit's base,
// it was not noted at all (the older one stood), and the adopt then
// dropped the older one. Without a base, the edit was taken as it is at
// the next start, and the model's change the adopt had merged was undone
// (and a model change in between noted a version the worktree never held
// as its base: the conflicts of an old value with the model's latest in
// TestTruncatingHandEditsBesideTheModel).
func TestEditAfterAnAdoptReadKeepsTheReadAsItsBase(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	var r *Repo
	ran := false
	opt := testOptions(t)
	opt.hooks = &testHooks{adopted: func(p *prepared) {
		if r == nil || ran {
			return // the first commit, made by Init; Close's adopt
		}
		ran = true
		appendHand(t, dir, "a.md", "second by hand")
		if err := r.committer.durable(p); err != nil {
			t.Error(err)
		}
		if err := r.materialize(); err != nil {
			t.Error(err)
		}
	}}
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	changeBehindTheWorktree(t, r, func() { appendHand(t, dir, "a.md", "by hand") }) // kept, to be merged
	if _, err := r.Adopt(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	opt.hooks = nil
	if r, err = Open(context.Background(), dir, opt); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	settle(t, r)
	wantEverywhere(t, r, dir, "a.md", "ONE\ntwo\nby hand\nsecond by hand\n")
}

// An editor's swap, backup and lock files beside a memory file (vim:
// .notes.md.swp, notes.md~, 4913; emacs: .#notes.md, #notes.md#) were
// adopted as memories: committed as hand edits, listed by view, vim's
// binary swap in the history. They are never adopted (policy.IsEditorTemp):
// nor shown by gitmem diff. The hand edit beside them is.
func TestEditorTemporariesAreNeverAdopted(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "notes.md", "a\n")
	write(t, r, "t2", "made.md~", "the model's own\n") // the tool takes the name
	settle(t, r)
	os.Remove(filepath.Join(dir, "memories", "made.md~")) // a deletion by hand: not adopted either
	junk := []string{".notes.md.swp", "notes.md~", "4913", ".#notes.md", "#notes.md#", "sub/.x.md.swo"}
	os.MkdirAll(filepath.Join(dir, "memories", "sub"), 0o700)
	for _, p := range junk {
		if err := os.WriteFile(filepath.Join(dir, "memories", p), []byte("b0VIM 9.0\x00\x00junk"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "memories", "notes.md"), []byte("a, by hand\n"), 0o600)
	if diff, err := r.DiffWorktree(); err != nil || len(diff) != 1 || diff[0].Path != "notes.md" {
		t.Errorf("gitmem diff: %v %+v, want notes.md alone", err, diff)
	}
	c, err := r.Adopt(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Paths) != 1 || c.Paths[0] != "notes.md" {
		t.Errorf("adopted %v, want notes.md alone", c.Paths)
	}
	settle(t, r)
	if files := gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD"); files != "memories/made.md~\nmemories/notes.md\n" {
		t.Errorf("HEAD holds:\n%s", files)
	}
	if _, err := r.Adopt(context.Background()); !errors.Is(err, ErrNoChange) {
		t.Errorf("a second adopt: %v, want ErrNoChange", err)
	}
}

// A program reads a file an adopt is about to merge (its own last edit,
// what the adopt reads), the worktree follows the adopt's merge, and the
// program writes its next edit of what it had read over the merge. The
// next follow keeps that edit, noting the merge as its base (what the
// worktree held), and the model then changes the file more times than
// the versions noted per file (seenMax) before the next adopt. The edit
// was made on the adopt's read, a version older than the base: compared
// with only the base, as the older versions were no longer noted, it
// conflicted with every line the model changed since its read (the
// conflicts of TestTruncatingHandEditsBesideTheModel: the program's old
// values against the model's latest). The versions it may have been made
// on are those noted when it was kept.
func TestAnEditKeptBeforeManyChangesMergesFromTheVersionItWasMadeOn(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	keepWriterLock(t, r)
	p := filepath.Join(dir, "memories", "a.md")
	write(t, r, "t0", "a.md", "m0: 0\nfiller\nm1: 0\nfiller\nfiller\n")
	settle(t, r)
	n := [2]int{}
	model := func(i int) {
		t.Helper()
		key := fmt.Sprintf("m%d: ", i%2)
		old, new := fmt.Sprintf("%s%d\n", key, n[i%2]), fmt.Sprintf("%s%d\n", key, n[i%2]+1)
		n[i%2]++
		_, err := r.Update(context.Background(), Meta{Subject: "model", Trailers: []Trailer{{TrailerToolUseID, fmt.Sprint("m", i)}}}, func(tx *Tx) error {
			data, err := tx.ReadFile("a.md")
			if err != nil {
				return err
			}
			return tx.WriteFile("a.md", []byte(strings.Replace(string(data), old, new, 1)))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	r.disk.hold() // an edit kept from an acknowledged change: the adopt merges it
	model(0)
	appendHand(t, dir, "a.md", "hand-0")
	r.disk.mu.Unlock()
	settle(t, r)
	had := readDisk(t, dir, "a.md") // the program reads its own edit, which the adopt reads
	if _, err := r.Adopt(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, r) // the worktree gets the merge
	// The follow that keeps the program's edit of what it read, and many
	// changes; the first is in flight as the edit is written, so the
	// model's calls do not look at the file for hand edits.
	r.disk.hold()
	model(1)
	if err := os.WriteFile(p, []byte(had+"hand-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= seenMax+1; i++ {
		model(i)
	}
	r.disk.mu.Unlock()
	settle(t, r)
	if _, err := r.Adopt(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	wantEverywhere(t, r, dir, "a.md", fmt.Sprintf("m0: %d\nfiller\nm1: %d\nfiller\nfiller\nhand-0\nhand-1\n", n[0], n[1]))
}
