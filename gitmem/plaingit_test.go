package gitmem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// .git/index never pairs a file's new blob with the lstat data of the
// version the worktree still holds: an index written between a commit
// being published and its file being written (Flush runs beside the
// materialiser) gave the file its old size, and git then listed it as
// modified for good though it was identical to HEAD (issue 21, item 17).
func TestIndexNeverVouchesForAFileNotYetWritten(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	// The test holds the disk lock, then asks for the writer turn (write):
	// the other way round from the store's lock order. An idle release
	// (releaseIdle after the last change: the sleep below comes near it)
	// holds the turn and waits for the disk lock: the two waited on each
	// other for good once in a loaded run. The lock is kept instead.
	keepWriterLock(t, r)
	write(t, r, "t1", "a.md", "one\n")
	settle(t, r)
	// Past the racy window, a view's drift check caches a.md's lstat data.
	time.Sleep(150 * time.Millisecond)
	if _, err := r.Snapshot(context.Background(), "a.md"); err != nil {
		t.Fatal(err)
	}
	dt := r.disk.hold() // the materialiser waits: t2 is published, not yet in the worktree
	write(t, r, "t2", "a.md", "two, longer\n")
	// The index is written for what git's files and the worktree hold
	// (TestIndexNamesOnlyBlobsGitHas): it waits for the disk lock, and
	// then either the materialiser or the index goes first.
	id, written := inBackground(r.writeIndex)
	for !waitsIn(id, "(*Repo).writeIndexHeld(", "(*disk).hold(") {
		runtime.Gosched()
	}
	dt.release()
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status after a clean exit:\n%s", st)
	}
	gittest.Fsck(t, dir)
}

// repoLoggingErrors is a new repository (closed at the end of the test)
// whose error lines (Options.Errorf) are kept: logged returns them.
func repoLoggingErrors(t *testing.T) (r *Repo, dir string, logged func() string) {
	t.Helper()
	dir = gittest.TempDir(t)
	opt := testOptions(t)
	var errs strings.Builder
	var mu sync.Mutex
	opt.Errorf = func(f string, a ...any) {
		mu.Lock()
		fmt.Fprintf(&errs, f+"\n", a...)
		mu.Unlock()
		t.Logf("ERROR "+f, a...)
	}
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, dir, func() string {
		mu.Lock()
		defer mu.Unlock()
		return errs.String()
	}
}

// The branch deleted with git (git update-ref -d, git branch -D after a
// checkout) while gitmem serves: gitmem knows the acknowledged tip, so it
// puts the branch back there and says so, and every change goes on — where
// it wrote, where it was idle, where it had given the writer lock up, and
// where it only reads. Each case ends with a clean exit, the whole history
// on the branch, git status empty and git fsck clean. (Issue 21, item 6:
// every later write was refused, forever, with an INFO line.)
func TestBranchDeletedWhileServingIsPutBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		after func(t *testing.T, r *Repo) // what gitmem does after the deletion
	}{
		{"write", func(t *testing.T, r *Repo) {
			for i := range 3 {
				write(t, r, fmt.Sprintf("after-%d", i), "b.md", fmt.Sprintf("after %d\n", i))
			}
		}},
		{"idle", func(t *testing.T, r *Repo) {}},
		{"released then write", func(t *testing.T, r *Repo) {
			write(t, r, "after-0", "b.md", "after 0\n")
		}},
		{"released then exit", func(t *testing.T, r *Repo) {}},
		{"released then view", func(t *testing.T, r *Repo) {
			if got := read(t, r, "a.md"); got != "one\n" {
				t.Errorf("a.md: %q", got)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, dir, logged := repoLoggingErrors(t)
			tip := write(t, r, "t1", "a.md", "one\n")
			settle(t, r)
			if strings.HasPrefix(tc.name, "released") {
				waitReleased(t, r)
			}
			gittest.Git(t, dir, "update-ref", "-d", "refs/heads/main")
			tc.after(t, r)
			if err := r.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			head := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "refs/heads/main"))
			ids := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)", "main")
			if !strings.Contains(ids, "t1\n") {
				t.Fatalf("the acknowledged t1 is not on the branch (at %s):\n%s", head, ids)
			}
			if strings.Contains(tc.name, "write") && !strings.Contains(ids, "after-0\n") {
				t.Fatalf("the change after the deletion is not on the branch:\n%s", ids)
			}
			if (tc.name == "idle" || tc.name == "released then exit") && head != tip.Hash {
				t.Errorf("the branch is at %s, want the acknowledged %s", head, tip.Hash)
			}
			if l := logged(); !strings.Contains(l, "refs/heads/main was deleted outside gitmem") || !strings.Contains(l, tip.Hash[:7]) {
				t.Errorf("the repair was not logged as an error:\n%s", l)
			}
			gittest.Fsck(t, dir)
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status:\n%s", st)
			}
			r2, err := Open(context.Background(), dir, testOptions(t)) // and the next start is a plain one
			if err != nil {
				t.Fatal(err)
			}
			r2.Close()
		})
	}
}

// The branch deleted while changes pour in, and while another gitmem
// process had committed on from what this one knew: no change is refused,
// every acknowledged one ends on the branch.
func TestBranchDeletedUnderLoadLosesNothing(t *testing.T) {
	gittest.Serial(t, "a load test: writers as fast as they go while git deletes the branch")
	t.Run("under load", func(t *testing.T) {
		r, dir := newRepo(t)
		write(t, r, "t0", "a.md", "zero\n")
		var wg sync.WaitGroup
		var mu sync.Mutex
		var acked []string
		for w := range 4 {
			wg.Go(func() {
				for i := range 60 {
					id := fmt.Sprintf("w%d-%d", w, i)
					if _, err := r.Update(context.Background(), Meta{Subject: id, Trailers: []Trailer{{TrailerToolUseID, id}}}, func(tx *Tx) error {
						return tx.WriteFile(fmt.Sprintf("w%d.md", w), []byte(id+"\n"))
					}); err != nil {
						t.Errorf("%s refused: %v", id, err)
						return
					}
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
				}
			})
		}
		for deleted := 0; deleted < 3; {
			mu.Lock()
			n := len(acked)
			mu.Unlock()
			if n >= 40*(deleted+1) {
				gittest.Git(t, dir, "update-ref", "-d", "refs/heads/main")
				deleted++
			}
			time.Sleep(time.Millisecond)
		}
		wg.Wait()
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		ids := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)", "main")
		for _, id := range acked {
			if !strings.Contains(ids, id+"\n") {
				t.Errorf("acknowledged %s is not on the branch", id)
			}
		}
		gittest.Fsck(t, dir)
		if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
			t.Errorf("git status:\n%s", st)
		}
	})
	t.Run("another process committed on", func(t *testing.T) {
		r1, dir := newRepo(t)
		write(t, r1, "t1", "a.md", "one\n")
		settle(t, r1)
		waitReleased(t, r1)
		r2, err := Open(context.Background(), dir, testOptions(t))
		if err != nil {
			t.Fatal(err)
		}
		write(t, r2, "t2", "b.md", "two\n")
		if err := r2.Close(); err != nil {
			t.Fatal(err)
		}
		gittest.Git(t, dir, "update-ref", "-d", "refs/heads/main")
		write(t, r1, "t3", "c.md", "three\n") // r1 knew only t1
		if err := r1.Close(); err != nil {
			t.Fatal(err)
		}
		ids := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)", "main")
		for _, id := range []string{"t1", "t2", "t3"} {
			if !strings.Contains(ids, id+"\n") {
				t.Errorf("acknowledged %s is not on the branch:\n%s", id, ids)
			}
		}
		gittest.Fsck(t, dir)
		if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
			t.Errorf("git status:\n%s", st)
		}
	})
}

// HEAD switched with git while gitmem serves (git checkout -b, git
// switch, git checkout of another commit): gitmem commits only to its
// branch, so it puts HEAD back on it, says so, and brings back the files
// git's checkout rewrote; nothing acknowledged is undone, nothing is
// adopted, and once it exits git status is empty. (Issue 21, item 7:
// HEAD stayed on the other branch, nothing was logged, and git status
// listed every file written since.)
func TestHeadSwitchedWhileServingIsPutBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		checkout []string // the git command, after t1 and t2 are settled
		released bool     // run it once gitmem let the writer lock go
		branch   string   // the branch git made, left where git put it
	}{
		{"checkout -b", []string{"checkout", "-q", "-b", "other"}, false, "other"},
		{"switch -c, released", []string{"switch", "-q", "-c", "other"}, true, "other"},
		{"checkout an older commit", []string{"checkout", "-q", "T1"}, false, ""},
		{"checkout an older commit, released", []string{"checkout", "-q", "T1"}, true, ""},
		{"checkout -b at an older commit, released", []string{"checkout", "-q", "-b", "old", "T1"}, true, "old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, dir, logged := repoLoggingErrors(t)
			t1 := write(t, r, "t1", "a.md", "one\n")
			write(t, r, "t2", "a.md", "two\n")
			write(t, r, "t2b", "b.md", "bee\n")
			settle(t, r)
			if tc.released {
				waitReleased(t, r)
			}
			args := append([]string(nil), tc.checkout...)
			for i, a := range args {
				if a == "T1" {
					args[i] = t1.Hash
				}
			}
			gittest.Git(t, dir, args...)
			write(t, r, "t3", "c.md", "three\n")
			if got := read(t, r, "a.md"); got != "two\n" {
				t.Errorf("a.md reads %q after the checkout", got)
			}
			if err := r.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			if head := strings.TrimSpace(gittest.Git(t, dir, "symbolic-ref", "HEAD")); head != "refs/heads/main" {
				t.Errorf("HEAD names %s", head)
			}
			ids := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)", "main")
			for _, id := range []string{"t1", "t2", "t2b", "t3"} {
				if !strings.Contains(ids, id+"\n") {
					t.Errorf("%s is not on main:\n%s", id, ids)
				}
			}
			if adopts := gittest.Git(t, dir, "log", "--format=%h %s", "--grep=^memory: adopt", "main"); adopts != "" {
				t.Errorf("git's checkout was adopted as a hand edit:\n%s", adopts)
			}
			for p, want := range map[string]string{"a.md": "two\n", "b.md": "bee\n", "c.md": "three\n"} {
				if got := readDisk(t, dir, p); got != want {
					t.Errorf("the worktree's %s holds %q, want %q", p, got, want)
				}
			}
			if tc.branch != "" {
				gittest.Git(t, dir, "rev-parse", "--verify", "refs/heads/"+tc.branch) // left as git made it
			}
			if l := logged(); !strings.Contains(l, "HEAD was moved") || !strings.Contains(l, "put HEAD back on refs/heads/main") {
				t.Errorf("the switch was not logged as an error:\n%s", l)
			}
			gittest.Fsck(t, dir)
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status:\n%s", st)
			}
		})
	}
}

// besideGit is a repository that two writers change — each overwriting
// four files of its own and creating a new one every third call — while a
// test runs plain git commands in it, as an operator beside serve would.
type besideGit struct {
	t    *testing.T
	r    *Repo
	dir  string
	mu   sync.Mutex
	last map[string]string // memory path -> its last acknowledged content
	ids  []string
	stop atomic.Bool
	wg   sync.WaitGroup
}

// startWriters starts the writers. indexDelay (0: the default) is how
// long .git/index may lag the branch; the writer lock is kept as long
// without a change (releaseIdle), since giving it up writes the index: a
// row that needs the index to lag would otherwise find it written when,
// under load, the writers' stop or a stall of theirs outlasts 200 ms.
func startWriters(t *testing.T, indexDelay time.Duration) *besideGit {
	t.Helper()
	b := &besideGit{t: t, dir: gittest.TempDir(t), last: map[string]string{}}
	opt := testOptions(t)
	opt.IndexDelay = indexDelay
	opt.ReleaseIdle = indexDelay
	r, _, err := Init(context.Background(), b.dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	b.r = r
	for g := range 2 {
		b.wg.Go(func() {
			for i := 0; !b.stop.Load(); i++ {
				id := fmt.Sprintf("g%d-%d", g, i)
				p := fmt.Sprintf("w%d-%d.md", g, i%4)
				if i%3 == 0 {
					p = fmt.Sprintf("new/w%d-%d.md", g, i)
				}
				if _, err := r.Update(context.Background(), Meta{Subject: id, Trailers: []Trailer{{TrailerToolUseID, id}}}, func(tx *Tx) error {
					return tx.WriteFile(p, []byte(id+"\n"))
				}); err != nil {
					t.Errorf("%s refused: %v", id, err)
					return
				}
				b.mu.Lock()
				b.last[p], b.ids = id+"\n", append(b.ids, id)
				b.mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		})
	}
	return b
}

// waitAcks waits until n more calls were acknowledged.
func (b *besideGit) waitAcks(n int) {
	b.mu.Lock()
	want := len(b.ids) + n
	b.mu.Unlock()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		got := len(b.ids)
		b.mu.Unlock()
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("only %d of %d calls acknowledged", got, want)
		}
	}
}

// git runs the real git in the repository; it may fail (git refuses).
func (b *besideGit) git(args ...string) (string, error) {
	out, err := handGit(b.t, b.dir, args...).CombinedOutput()
	if err != nil {
		b.t.Logf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), err
}

// stopWriters stops the writers: the memory is quiet.
func (b *besideGit) stopWriters() {
	b.stop.Store(true)
	b.wg.Wait()
}

// finish stops the writers and closes the repository, as serve exits.
func (b *besideGit) finish() {
	b.t.Helper()
	b.stopWriters()
	if err := b.r.Close(); err != nil {
		b.t.Fatalf("close: %v", err)
	}
}

// checkWhole checks what every row guarantees once serve has exited:
// every acknowledged call is on the branch, each file holds its last
// acknowledged content (nothing rolled back), HEAD names the branch, git
// status is empty and git fsck --strict is clean.
func (b *besideGit) checkWhole() {
	t := b.t
	t.Helper()
	ids := gittest.Git(t, b.dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)", "main")
	have := map[string]bool{}
	for _, id := range strings.Fields(ids) {
		have[id] = true
	}
	for _, id := range b.ids {
		if !have[id] {
			t.Errorf("acknowledged %s is not on the branch", id)
		}
	}
	// One git cat-file --batch for every file (a third of the calls make
	// a new one): a git show each started hundreds of processes.
	paths := slices.Sorted(maps.Keys(b.last))
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = "main:memories/" + p
	}
	for i, o := range gittest.CatFiles(t, b.dir, names...) {
		if want := b.last[paths[i]]; string(o.Data) != want {
			t.Errorf("main holds %q in %s, the last acknowledged content is %q", o.Data, paths[i], want)
		}
	}
	if head := strings.TrimSpace(gittest.Git(t, b.dir, "symbolic-ref", "HEAD")); head != "refs/heads/main" {
		t.Errorf("HEAD names %s", head)
	}
	gittest.Fsck(t, b.dir)
	if st := gittest.Git(t, b.dir, "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Errorf("git status after exit:\n%.2000s", st)
	}
}

// adopts lists the adopt commits on the branch with the files each
// changed.
func (b *besideGit) adopts() string {
	return gittest.Git(b.t, b.dir, "log", "--format=%h %s", "--name-status", "--grep=^memory: adopt", "main")
}

// refusedByGit reports whether git refused with one of the messages
// given (nothing changed), and fails the test on any other failure.
func refusedByGit(t *testing.T, out string, err error, why ...string) bool {
	t.Helper()
	if err == nil {
		return false
	}
	for _, w := range why {
		if strings.Contains(out, w) {
			return true
		}
	}
	t.Fatalf("git failed otherwise: %v\n%s", err, out)
	return false
}

// Each row of docs/operations.md's table of plain git commands beside a
// running serve, run beside two writers: what git does, and what gitmem
// then does. (Issue 21, item 8.) The rows for git reset --hard, git stash
// and git merge (which reset the files gitmem changed in the last second:
// stash those it stashes, merge when it gives up) and for git gc, prune
// and repack are pinned where those are fixed.
func TestPlainGitBesideAWritingRepo(t *testing.T) {
	gittest.Serial(t, "a load test: two writers beside every plain git command, each waited for with a deadline")
	const lagging = time.Hour // .git/index lags every change: what git refuses, it refuses every time
	for _, tc := range []struct {
		name       string
		indexDelay time.Duration
		run        func(t *testing.T, b *besideGit)
	}{
		{"reads: log show diff blame grep status ls-files cat-file stash list", 0, func(t *testing.T, b *besideGit) {
			for range 3 {
				for _, args := range [][]string{
					{"log", "--oneline", "-5"}, {"show", "--stat", "HEAD"}, {"diff", "HEAD~2", "HEAD", "--stat"},
					{"blame", "memories/w0-1.md"}, {"grep", "-c", "g0", "HEAD"}, {"status", "--porcelain"},
					{"diff", "--stat"}, {"ls-files"}, {"cat-file", "-p", "HEAD"}, {"stash", "list"},
				} {
					if _, err := b.git(args...); err != nil {
						t.Errorf("git %s failed", strings.Join(args, " "))
					}
				}
				b.waitAcks(20)
			}
		}},
		{"own refs: fetch tag branch (not checked out)", 0, func(t *testing.T, b *besideGit) {
			for i, args := range [][]string{
				{"fetch", "-q", ".", "main:refs/remotes/self/main"}, {"tag", "t1"}, {"branch", "side", "HEAD~2"},
			} {
				if _, err := b.git(args...); err != nil {
					t.Fatalf("row %d: git %s failed", i, strings.Join(args, " "))
				}
				b.waitAcks(20)
			}
		}},
		{"index only: add, rm --cached, reset", 0, func(t *testing.T, b *besideGit) {
			for _, args := range [][]string{{"add", "-A"}, {"rm", "-q", "--cached", "memories/w0-1.md"}, {"reset", "-q"}} {
				b.git(args...) // rm --cached may find the file not yet in the index: either way only the index changes
				b.waitAcks(20)
			}
		}},
		{"commit: add and commit a hand edit, commit -am", 0, func(t *testing.T, b *besideGit) {
			// mergedBack waits until the branch holds n merges of commits
			// made with git, and returns the commit merged last.
			mergedBack := func(n int) string {
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					heads := strings.Fields(gittest.Git(t, b.dir, "log", "--format=%(trailers:key=Merge-Head,valueonly)", "--grep=^memory: merge outside-gitmem", "main"))
					if len(heads) == n {
						return heads[0]
					}
					if time.Now().After(deadline) {
						t.Fatalf("%d merge(s) back, want %d", len(heads), n)
					}
				}
			}
			hand := func(rev string) string {
				got, _ := gittest.Command(t, b.dir, "show", rev+":memories/hand.md").Output()
				return string(got)
			}
			// git checks that the branch is where it read it when it moves
			// it: when gitmem moved it meanwhile, git refuses (cannot lock
			// ref) and nothing changed: it is run again. It reports
			// whether git made a commit.
			commit := func(args ...string) bool {
				for range 100 {
					out, err := b.git(args...)
					if !refusedByGit(t, out, err, "cannot lock ref", "nothing added to commit", "nothing to commit") {
						return true
					}
					if strings.Contains(out, "nothing added to commit") || strings.Contains(out, "nothing to commit") {
						return false
					}
				}
				t.Fatal("git commit was refused 100 times")
				return false
			}
			os.WriteFile(filepath.Join(b.dir, "memories", "hand.md"), []byte("by hand\n"), 0o600)
			// gitmem writes .git/index again within a second (the row of
			// add): written between git add and git commit, it drops what
			// git add staged, and git commits the index without hand.md
			// (merged back all the same), or nothing. hand.md, untracked,
			// is then staged and committed again.
			merges := 0
			for try := 0; ; try++ {
				if try == 20 {
					t.Fatal("git add was undone 20 times before git commit")
				}
				b.git("add", "memories/hand.md")
				if !commit("commit", "-q", "-m", "by hand") {
					continue
				}
				merges++
				if c := mergedBack(merges); hand(c) == "by hand\n" {
					break
				}
				t.Logf("git add was undone before git commit (try %d)", try)
			}
			if got := hand("main"); got != "by hand\n" {
				t.Fatalf("main holds %q in hand.md, want %q", got, "by hand\n")
			}
			b.waitAcks(20)
			os.WriteFile(filepath.Join(b.dir, "memories", "hand.md"), []byte("by hand, again\n"), 0o600)
			if !commit("commit", "-q", "-am", "again by hand") {
				// git found nothing to commit: the edit changed hand.md's
				// size, which git compares whatever the index's times say,
				// so no stat data could hide it; the index named the
				// edit's blob, and "working tree clean" says the branch
				// held it: gitmem committed the edit first, as a hand
				// edit (an adopt: a follow of the worktree that found it
				// where it wrote hand.md, around the merge back of the
				// first git commit). Anything else fails here, with what
				// tells which.
				adopted := gittest.Git(t, b.dir, "log", "--format=%h %s", "--grep=^memory: adopt", "main", "--", "memories/hand.md")
				if hand("main") != "by hand, again\n" || adopted == "" {
					disk, _ := os.ReadFile(filepath.Join(b.dir, "memories", "hand.md"))
					t.Fatalf("git commit -am committed nothing, and gitmem did not adopt the edit: main holds %q in hand.md, the worktree %q; adopts of it: %q; the index: %s",
						hand("main"), disk, adopted, gittest.Git(t, b.dir, "ls-files", "--debug", "memories/hand.md"))
				}
				t.Logf("gitmem adopted the hand edit before git commit -am: %s", adopted)
			} else if c := mergedBack(merges + 1); hand(c) != "by hand, again\n" || hand("main") != "by hand, again\n" {
				t.Fatalf("merged back %q, main holds %q in hand.md; want %q", hand(c), hand("main"), "by hand, again\n")
			}
		}},
		{"checkout of another commit: refused while the index lags", lagging, func(t *testing.T, b *besideGit) {
			b.waitAcks(20)
			for _, args := range [][]string{{"checkout", "-q", "HEAD~3"}, {"switch", "-q", "--detach", "HEAD~3"}, {"checkout", "-q", "side"}} {
				if args[len(args)-1] == "side" {
					b.git("branch", "side", "HEAD~3")
				}
				out, err := b.git(args...)
				if !refusedByGit(t, out, err, "would be overwritten") {
					t.Errorf("git %s went through while the index lagged", strings.Join(args, " "))
				}
			}
		}},
		{"checkout -b, switch -c: HEAD put back", 0, func(t *testing.T, b *besideGit) {
			for _, args := range [][]string{{"checkout", "-q", "-b", "other"}, {"switch", "-q", "-c", "other2"}} {
				if _, err := b.git(args...); err != nil {
					t.Fatalf("git %s failed", strings.Join(args, " "))
				}
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					if head, _ := b.git("symbolic-ref", "HEAD"); strings.TrimSpace(head) == "refs/heads/main" {
						break // within a second
					}
					if time.Now().After(deadline) {
						t.Fatal("HEAD was not put back on main")
					}
				}
			}
		}},
		{"revert, cherry-pick: refused while the index lags", lagging, func(t *testing.T, b *besideGit) {
			b.waitAcks(20)
			for _, args := range [][]string{{"revert", "--no-edit", "HEAD~1"}, {"cherry-pick", "HEAD~2"}} {
				out, err := b.git(args...)
				if !refusedByGit(t, out, err, "would be overwritten") {
					t.Errorf("git %s went through while the index lagged", strings.Join(args, " "))
				}
			}
		}},
		{"branch -f of the branch: refused by git", 0, func(t *testing.T, b *besideGit) {
			out, err := b.git("branch", "-f", "main", "HEAD~3")
			if !refusedByGit(t, out, err, "cannot force update the branch") {
				t.Error("git branch -f main went through")
			}
		}},
		{"branch moved back (update-ref, reset --soft): undone", 0, func(t *testing.T, b *besideGit) {
			for _, args := range [][]string{{"update-ref", "refs/heads/main", "HEAD~3"}, {"reset", "-q", "--soft", "HEAD~3"}} {
				out, err := b.git(args...)
				refusedByGit(t, out, err, "cannot lock ref") // gitmem moved it first: nothing changed
				b.waitAcks(20)
			}
		}},
		{"clean -fd: the files gitmem made since it wrote the index deleted, adopted, reverted", lagging, func(t *testing.T, b *besideGit) {
			b.stopWriters()
			b.r.gitUpToDate(context.Background()) // the worktree holds every acknowledged change; .git/index lags them
			if _, err := b.git("clean", "-fdq"); err != nil {
				t.Fatal("git clean failed")
			}
			n := 0 // the files git deleted: those it did not know (untracked)
			for p := range b.last {
				if _, err := os.Stat(filepath.Join(b.dir, "memories", p)); err != nil {
					n++
				}
			}
			if n == 0 {
				t.Fatal("git clean deleted nothing")
			}
			// serve's periodic adopt: git's deletions are taken as hand edits
			c, err := b.r.Adopt(context.Background())
			if err != nil {
				t.Fatalf("adopt: %v", err)
			}
			if len(c.Paths) != n {
				t.Errorf("the adopt commit deletes %d file(s), git clean deleted %d: %v", len(c.Paths), n, c.Paths)
			}
			// ... and gitmem revert brings them back as they were
			if _, _, err := b.r.Revert(context.Background(), []string{c.Hash}, RevertOptions{}); err != nil {
				t.Fatalf("revert: %v", err)
			}
			b.finish()
		}},
		{"branch deleted (update-ref -d): put back", 0, func(t *testing.T, b *besideGit) {
			if _, err := b.git("update-ref", "-d", "refs/heads/main"); err != nil {
				t.Fatal("git update-ref -d failed")
			}
			b.waitAcks(20)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startWriters(t, tc.indexDelay)
			b.waitAcks(50)
			tc.run(t, b)
			if !b.stop.Load() {
				b.waitAcks(20)
				b.finish()
			}
			b.checkWhole()
			if a := b.adopts(); a != "" && !strings.HasPrefix(tc.name, "commit") && !strings.HasPrefix(tc.name, "clean") {
				t.Errorf("git's work was adopted as hand edits:\n%s", a)
			}
		})
	}
}

// The branch moved back with git (git reset --hard HEAD~3) in the moment
// serve had given the writer lock up — which it does after 200 ms without
// a change, also under load when calls wait on git's index lock: the
// attacker's reset landed in such a gap, serve took the old commit as its
// tip when it took the lock again, and 2,000–6,924 acknowledged calls were
// no longer on the branch (no ref reached them: a gc deleted them). A
// running gitmem never takes a branch moved off what it acknowledged:
// whether it then writes, reads or exits, the branch is put back, the
// files git checked out get the acknowledged version back, a commit made
// on the old one is merged back, and nothing is adopted. A redaction
// (here by another process) is the one move it takes.
func TestBranchMovedBackWhileTheLockIsFreeIsPutBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		move  func(t *testing.T, dir string)
		after func(t *testing.T, r *Repo) // what gitmem does next
	}{
		{"reset then write", resetBack, func(t *testing.T, r *Repo) { write(t, r, "after", "b.md", "b\n") }},
		{"reset then view", resetBack, func(t *testing.T, r *Repo) {
			if got := read(t, r, "a.md"); got != "v5\n" {
				t.Errorf("a view after the reset reads a.md = %q, want the acknowledged v5", got)
			}
		}},
		{"reset then exit", resetBack, func(t *testing.T, r *Repo) {}},
		{"update-ref then write", func(t *testing.T, dir string) {
			gittest.Git(t, dir, "update-ref", "refs/heads/main", "HEAD~4")
		}, func(t *testing.T, r *Repo) { write(t, r, "after", "b.md", "b\n") }},
		{"reset and a commit on it, then write", func(t *testing.T, dir string) {
			resetBack(t, dir)
			os.WriteFile(filepath.Join(dir, "memories", "hand.md"), []byte("by hand\n"), 0o600)
			commitByHand(t, dir, "on the old commit")
		}, func(t *testing.T, r *Repo) { write(t, r, "after", "b.md", "b\n") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, dir := newRepo(t)
			for i := range 6 {
				write(t, r, fmt.Sprintf("t%d", i), "a.md", fmt.Sprintf("v%d\n", i))
			}
			settle(t, r)
			waitReleased(t, r)
			tc.move(t, dir)
			tc.after(t, r)
			settle(t, r)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			ids := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)", "main")
			for i := range 6 {
				if !strings.Contains(ids, fmt.Sprintf("t%d\n", i)) {
					t.Fatalf("the acknowledged t%d is no longer on the branch:\n%s", i, gittest.Git(t, dir, "log", "--format=%h %s", "main"))
				}
			}
			if got := gittest.Git(t, dir, "show", "main:memories/a.md"); got != "v5\n" {
				t.Errorf("a.md in HEAD = %q, want the acknowledged v5", got)
			}
			if got := readDisk(t, dir, "a.md"); got != "v5\n" {
				t.Errorf("a.md on disk = %q, want the acknowledged v5", got)
			}
			if strings.Contains(tc.name, "commit") {
				if got := readDisk(t, dir, "hand.md"); got != "by hand\n" {
					t.Errorf("the commit made on the old one was not merged back: hand.md = %q", got)
				}
			}
			if log := gittest.Git(t, dir, "log", "--format=%s", "main"); strings.Contains(log, "adopt") {
				t.Errorf("git's checkout was adopted:\n%s", log)
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status after exit:\n%s", st)
			}
		})
	}
	t.Run("a redaction by another process is taken", func(t *testing.T) {
		r, dir := newRepo(t)
		write(t, r, "t1", "a.md", "token sk-live42secret\n")
		write(t, r, "t2", "b.md", "b\n")
		settle(t, r)
		waitReleased(t, r)
		other, err := Open(context.Background(), dir, testOptions(t)) // gitmem redact, in its own process
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)}, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := other.Close(); err != nil {
			t.Fatal(err)
		}
		write(t, r, "t3", "c.md", "c\n")
		settle(t, r)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		assertNoSecret(t, dir, "sk-live42secret")
		if got := gittest.Git(t, dir, "show", "main:memories/a.md"); got != "token [REDACTED]\n" {
			t.Errorf("a.md = %q", got)
		}
	})
}

// resetBack is git reset --hard HEAD~3, as an operator runs it.
func resetBack(t *testing.T, dir string) {
	gittest.Git(t, dir, "reset", "-q", "--hard", "HEAD~3")
}

// displacedIn, which every writer's start calls, reads the folder of the
// displaced refs and packed-refs, not every ref: it listed all of refs/
// and read each ref file (a cold store's first call: refs/, heads/, the
// branch, tags/, 4% of its CPU). A symlink to a folder under refs/tags,
// which a read of every ref fails on, shows which it reads: before this
// change it found nothing (the listing failed) where the displaced refs,
// loose and packed, are.
func TestDisplacedRefsAreListedAlone(t *testing.T) {
	t.Parallel()
	dir := closedRepo(t)
	head := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD"))
	gittest.Git(t, dir, "update-ref", displacedRefs+"packed", head)
	gittest.Git(t, dir, "pack-refs", "--all")
	gittest.Git(t, dir, "update-ref", displacedRefs+"loose", head)
	trap := filepath.Join(dir, ".git", "refs", "tags", "trap")
	if err := os.MkdirAll(filepath.Dir(trap), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), trap); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(trap) // before git fsck at the end
	got := displacedIn(filepath.Join(dir, ".git"))
	if len(got) != 2 || got[displacedRefs+"packed"].String() != head || got[displacedRefs+"loose"].String() != head {
		t.Errorf("displacedIn = %v, want %spacked and %sloose at %s", got, displacedRefs, displacedRefs, head)
	}
}

// A writer's start removes the temporary files a killed gitmem left in
// .git/gitmem (pending-*, history-*, redact-*, reserve-*, left-*, kept-*,
// tmp/*), .git (packed-refs-*) and .git/objects/??/ (a loose object's
// temporary file), read from one listing of each folder, and nothing
// else there: the history index and the reserve of the same names without
// the dash stay.
func TestStartClearsTheTemporaryFilesOfGitmemsFolder(t *testing.T) {
	t.Parallel()
	dir := closedRepo(t)
	gm := filepath.Join(dir, ".git", "gitmem")
	left := []string{"pending-1.tmp", "history-2.tmp", "redact-3.tmp", "reserve-4.tmp", "left-8", "kept-9", "tmp/5", "../packed-refs-6", "../objects/ab/" + gd.TmpObjPrefix + "7"}
	if err := os.MkdirAll(filepath.Join(gm, "..", "objects", "ab"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range left {
		if err := os.WriteFile(filepath.Join(gm, n), []byte("left by a killed gitmem\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startAndClose(t, dir)
	for _, n := range left {
		if _, err := os.Stat(filepath.Join(gm, n)); err == nil {
			t.Errorf(".git/gitmem/%s is still there after a start", n)
		}
	}
	for _, n := range []string{"history", "reserve", "wal"} {
		if _, err := os.Stat(filepath.Join(gm, n)); err != nil {
			t.Errorf(".git/gitmem/%s: %v", n, err)
		}
	}
}

// A writer's start makes .git/gitmem/reserve where it is missing (gc
// spends it, a full disk's holder file takes a block of it), and looks for
// it in the start's listing of .git/gitmem: a start where it is there
// (nearly every one) does not stat it, a file fewer for a store's first
// call where the disk's cache no longer holds the store.
func TestStartMakesAMissingReserve(t *testing.T) {
	t.Parallel()
	dir := closedRepo(t)
	reserve := filepath.Join(dir, ".git", "gitmem", "reserve")
	if err := os.Remove(reserve); err != nil {
		t.Fatal(err)
	}
	startAndClose(t, dir)
	if fi, err := os.Stat(reserve); err != nil || fi.Size() == 0 {
		t.Fatalf("the reserve after a start: %v", err)
	}
}

// A writer's start removes the .git/gitmem/index-head.lock a killed
// gitmem left (no git command takes it): index-head would not be written
// again while it is there. Looked for in the start's listing of
// .git/gitmem, not removed blindly at every start.
func TestStartClearsAStaleIndexHeadLock(t *testing.T) {
	t.Parallel()
	dir := closedRepo(t)
	lock := filepath.Join(dir, ".git", "gitmem", "index-head.lock")
	if err := os.WriteFile(lock, []byte("left by a killed gitmem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(context.Background(), dir, Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lock); err == nil {
		t.Errorf(".git/gitmem/index-head.lock is still there after a start")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// gitmem writes .git/index, then .git/gitmem/index-head: in between, its
// own index is newer than index-head, as one git wrote is. A Flush beside
// another index write (the lock's release, under load) took it for git's
// and read it, built its tree and walked up to 8,192 commits looking for
// it: 13% of the stores server's CPU under load (issue 25). It is looked
// at with the index's lock held, which gitmem's writes hold throughout:
// not while the lock is held, and, once it is free, an index git wrote
// is taken for git's as before.
func TestIndexBeingWrittenIsNotTakenForGits(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	opt.IndexDelay = time.Hour // no Flush of the timer's looks meanwhile
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer r.collector.running()() // the writer lock stays held, as under load
	write(t, r, "t0", "a.md", "v0\n")
	write(t, r, "t1", "a.md", "v1\n")
	settle(t, r)
	gittest.Git(t, dir, "read-tree", "HEAD~1") // an index of another commit's tree, newer than index-head
	head, err := os.Stat(filepath.Join(dir, ".git", "gitmem", "index-head"))
	if err != nil {
		t.Fatal(err)
	}
	later := head.ModTime().Add(time.Second)
	if err := os.Chtimes(filepath.Join(dir, ".git", "index"), later, later); err != nil {
		t.Fatal(err)
	}
	held := r.gitIndex.lock() // as gitmem's own index write holds it
	took := r.undoGitCheckout()
	held.unlock()
	if took {
		t.Fatal("an index newer than index-head was taken for git's while gitmem's index lock was held")
	}
	if !r.undoGitCheckout() {
		t.Fatal("the index git wrote was not taken for git's once the index lock was free")
	}
	settle(t, r)
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
	if got := readDisk(t, dir, "a.md"); got != "v1\n" {
		t.Fatalf("a.md on disk: %q", got)
	}
}

// A git command that writes worktree files while an adopt looks at them
// (git reset --hard, begun after the adopt's look for a git command)
// is no hand edit: the adopt takes nothing until git is done. It took
// a file git had removed, to write it again, as deleted, and a file git
// had checked out of an older commit as a hand edit undoing the
// acknowledged changes (TestResetHardUnderLoad: "a.md: path does not
// exist"). The hook runs between the adopt's look and its reads.
func TestAdoptTakesNothingGitWritesDuringItsLook(t *testing.T) {
	t.Parallel()
	var during func()
	r, dir := newRepoWith(t, &testHooks{drift: func() {
		if during != nil {
			during()
			during = nil
		}
	}})
	write(t, r, "m1", "a.md", "one\n")
	write(t, r, "m2", "a.md", "two\n")
	settle(t, r)
	adopt := func(want error) {
		t.Helper()
		if _, err := r.Adopt(context.Background()); !errors.Is(err, want) {
			t.Fatalf("adopt: %v, want %v\n%s", err, want, gittest.Git(t, dir, "log", "--stat", "--format=%s"))
		}
	}
	file, lock := filepath.Join(dir, "memories", "a.md"), filepath.Join(dir, ".git", "index.lock")

	// git reset --hard under way: it holds .git/index.lock and removed
	// a.md, to write it again
	appendHand(t, dir, "a.md", "by hand")
	during = func() {
		if err := os.WriteFile(lock, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Remove(file)
	}
	adopt(ErrNoChange)
	if got := subjects(t, dir); strings.Contains(got, "adopt") {
		t.Fatalf("an adopt took what git was writing:\n%s", gittest.Git(t, dir, "log", "--stat", "--format=%s"))
	}
	os.WriteFile(file, []byte("two\nby hand\n"), 0o600) // git is done
	os.Remove(lock)
	adopt(nil)
	settle(t, r)
	wantEverywhere(t, r, dir, "a.md", "two\nby hand\n")

	// git reset --hard HEAD~1 from start to end: the branch move and
	// the files it checked out are undone, none adopted
	appendHand(t, dir, "a.md", "again") // reset --hard discards it
	during = func() { gittest.Git(t, dir, "reset", "-q", "--hard", "HEAD~1") }
	adopt(ErrNoChange)
	adopt(ErrNoChange)
	settle(t, r)
	if n := strings.Count(subjects(t, dir), "adopt"); n != 1 {
		t.Fatalf("%d adopt commits, want 1:\n%s", n, gittest.Git(t, dir, "log", "--stat", "--format=%s"))
	}
	wantEverywhere(t, r, dir, "a.md", "two\nby hand\n")
}

// gitmem's own .git/index, written while an adopt reads the files it
// found (the rewrite IndexDelay after a change, which holds no writer
// turn, lands then under load), is no git command's: the adopt looks
// again and takes the hand edit. It took nothing and told its caller
// there was nothing to change (in TestTruncatingHandEditsBesideTheModel,
// 3 adopts with files to take did so in 8 runs; if its last two both
// did, hand edits stayed out of history). The hook runs between the
// adopt's look and its reads.
func TestAdoptTakesAnEditWhileGitmemWritesItsIndex(t *testing.T) {
	t.Parallel()
	var during func()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	opt.IndexDelay = time.Hour // .git/index is written by settle and the hook alone
	opt.hooks.drift = func() {
		if during != nil {
			during()
			during = nil
		}
	}
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	keepWriterLock(t, r) // no idle release writes the index either
	write(t, r, "m1", "a.md", "one\n")
	settle(t, r)
	write(t, r, "m2", "a.md", "two\n")
	if err := r.materialize(); err != nil { // the worktree follows; .git/index holds m1
		t.Fatal(err)
	}
	appendHand(t, dir, "a.md", "by hand")
	awaitNoWriter(t, r, "a.md")
	during = func() {
		if err := r.writeIndex(); err != nil {
			t.Error(err)
		}
	}
	if _, err := r.Adopt(context.Background()); err != nil {
		t.Fatalf("adopt: %v\n%s", err, gittest.Git(t, dir, "log", "--stat", "--format=%s"))
	}
	if during != nil {
		t.Fatal("the hook did not run")
	}
	settle(t, r)
	wantEverywhere(t, r, dir, "a.md", "two\nby hand\n")
}

// A file or folder removed between a look at the worktree's listing and
// its read (git reset --hard removes each file it checks out, then
// writes it again) is a file that differs, not a failed look: Adopt
// failed with "scan the worktree failed: openat ...: no such file or
// directory" (TestResetHardUnderLoad). The look under the writer lock
// then finds git at work, or the file gone for good. Removed between
// the adopt's lstat and its read, it is left for the next adopt.
func TestALookAtFilesRemovedMeanwhileIsNoError(t *testing.T) {
	t.Parallel()
	r, dir := newRepoWith(t, nil)
	write(t, r, "m1", "a.md", "one\n")
	write(t, r, "m2", "sub/b.md", "two\n")
	settle(t, r)
	m, tree := r.mirror, r.snapshotTree()
	os.WriteFile(filepath.Join(dir, "memories", "a.md"), []byte("edited\n"), 0o600) // no stat vouches for it: read
	fi, err := m.wt.lstat("memories/a.md")
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "memories", "a.md"))
	if same, err := m.sameAsTree("memories/a.md", fi, lookup(tree, "memories/a.md")); same || err != nil {
		t.Errorf("a file removed since its lstat: same %v, %v", same, err)
	}
	fi, err = m.wt.lstat("memories/sub")
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, "memories", "sub"))
	onDisk := map[string]fs.FileInfo{}
	if err := m.filesOnDisk("memories/sub", fi, nil, pathSet{}, onDisk); err != nil || len(onDisk) > 0 {
		t.Errorf("a folder removed since its lstat: %v, found %v", err, onDisk)
	}
	a := &adoption{tx: r.newTx(), read: map[string][]byte{}, later: map[string]bool{}, stale: map[string][]byte{}, mtime: map[string]time.Time{}}
	if err := m.adoptWrite(a, "a.md", r.objects.readBlob); err != nil || !a.later["a.md"] || a.taken > 0 {
		t.Errorf("a file removed since the adopt's lstat: %v, taken %d, left for later %v", err, a.taken, a.later)
	}
	c, err := r.Adopt(context.Background()) // gone for good: adopted
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.md", "sub/b.md"}; !slices.Equal(c.Paths, want) {
		t.Errorf("adopted %v, want %v", c.Paths, want)
	}
}

// git checkout COMMIT while gitmem was stopped left HEAD detached at an
// older commit of the branch and the worktree at its files: the next
// start refused ("HEAD does not name a branch"), and once HEAD named the
// branch again (git symbolic-ref, or fsck --repair) the start adopted the
// checkout's files as hand edits — a commit deleting the acknowledged
// f2.md. A HEAD detached at a commit of the branch's history is git's
// checkout: the start (a reader's too) takes the branch, and a writer's
// puts HEAD and the files back on it; an edit made by hand on top of the
// checked-out files is still a hand edit. A HEAD detached at a commit the
// branch never held is refused, with advice that brings the files back.
func TestDetachedWhileStoppedIsPutBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		checkout string
		hand     bool // an edit by hand after the checkout
		fsck     bool // gitmem fsck --repair before the start
		reader   bool // gitmem log: a reader's start
	}{
		{name: "an older commit", checkout: "HEAD~1"},
		{name: "the tip", checkout: "--detach"},
		{name: "an older commit, then a hand edit", checkout: "HEAD~1", hand: true},
		{name: "an older commit, then fsck --repair", checkout: "HEAD~1", fsck: true},
		{name: "an older commit, read by gitmem log", checkout: "HEAD~1", reader: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, dir := newRepo(t)
			write(t, r, "t1", "f1.md", "one\n")
			write(t, r, "t2", "f2.md", "two\n")
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			gittest.Git(t, dir, "checkout", "-q", tc.checkout)
			if tc.hand {
				os.WriteFile(filepath.Join(dir, "memories", "f1.md"), []byte("one, by hand\n"), 0o600)
			}
			if tc.fsck {
				if _, err := Fsck(context.Background(), dir, testOptions(t), true); err != nil {
					t.Fatal(err)
				}
			}
			opt := testOptions(t)
			opt.ReadOnly = tc.reader
			r, err := Open(context.Background(), dir, opt)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if got := read(t, r, "f2.md"); got != "two\n" {
				t.Errorf("f2.md = %q", got)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.reader {
				return // a reader moves nothing
			}
			if got := strings.TrimSpace(gittest.Git(t, dir, "symbolic-ref", "HEAD")); got != "refs/heads/main" {
				t.Errorf("HEAD = %q", got)
			}
			if got := gittest.Git(t, dir, "show", "main:memories/f2.md"); got != "two\n" {
				t.Errorf("f2.md in HEAD = %q", got)
			}
			if got := readDisk(t, dir, "f2.md"); got != "two\n" {
				t.Errorf("f2.md on disk = %q", got)
			}
			log := subjects(t, dir)
			if tc.hand {
				if got := gittest.Git(t, dir, "show", "main:memories/f1.md"); got != "one, by hand\n" {
					t.Errorf("the hand edit was not adopted: f1.md in HEAD = %q\n%s", got, log)
				}
			} else if strings.Contains(log, "adopt") {
				t.Errorf("git's checkout was adopted:\n%s", log)
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status:\n%s", st)
			}
		})
	}
	t.Run("a commit the branch never held", func(t *testing.T) {
		r, dir := newRepo(t)
		write(t, r, "t1", "f1.md", "one\n")
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		gittest.Git(t, dir, "checkout", "-q", "--orphan", "other")
		commitByHand(t, dir, "elsewhere")
		gittest.Git(t, dir, "checkout", "-q", "--detach")
		gittest.Git(t, dir, "branch", "-q", "-D", "other")
		_, err := Open(context.Background(), dir, testOptions(t))
		if err == nil || !strings.Contains(err.Error(), "git checkout main") {
			t.Fatalf("open: %v, want a refusal that says git checkout main", err)
		}
	})
}

// lagCommit is git commit -qam, as an operator runs it beside gitmem.
func lagCommit(t *testing.T, dir, msg string) {
	t.Helper()
	if out, err := handGit(t, dir, "commit", "-qam", msg).CombinedOutput(); err != nil {
		t.Fatalf("git commit -am: %v\n%s", err, out)
	}
}

// A git commit -am made from a .git/index that lags (it lacks a file
// gitmem just created, so git's commit deletes it), and then another
// gitmem process takes the writer lock, or the holder exits and gitmem
// starts again: the next holder took the commit as a branch moved
// forward outside gitmem and checked the deletion out, and the
// acknowledged file was gone from the memory (N9 F0: `the branch moved to
// ... outside gitmem: checked out 1 file(s) it changed`). The holder
// that lets the lock go puts such a commit aside first, as while it
// writes, and the merge back drops what the lagging index put back.
func TestLaggingIndexCommitThenAnotherHolderLosesNothing(t *testing.T) {
	for _, next := range []string{"another process writes", "the holder exits"} {
		t.Run(next, func(t *testing.T) {
			t.Parallel()
			dir := gittest.TempDir(t)
			opt := testOptions(t)
			opt.IndexDelay = time.Hour // .git/index lags every change after settle
			a, _, err := Init(context.Background(), dir, opt)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			write(t, a, "t0", "a.md", "a\n")
			settle(t, a) // .git/index written for t0
			write(t, a, "t1", "f1.md", "acknowledged\n")
			if err := a.materialize(); err != nil {
				t.Fatal(err)
			}
			lagCommit(t, dir, "op: nothing")
			if st := gittest.Git(t, dir, "show", "--stat", "--format=", "HEAD"); !strings.Contains(st, "f1.md") {
				t.Fatalf("git's commit does not delete f1.md:\n%s", st)
			}
			switch next {
			case "the holder exits":
				if err := a.Close(); err != nil {
					t.Fatal(err)
				}
			}
			b, err := Open(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			write(t, b, "t2", "b.md", "b\n") // waits for a to let the lock go
			settle(t, b)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			a.Close()
			if got := gittest.Git(t, dir, "show", "main:memories/f1.md"); got != "acknowledged\n" {
				t.Errorf("f1.md in HEAD = %q, want the acknowledged text", got)
			}
			if got := readDisk(t, dir, "f1.md"); got != "acknowledged\n" {
				t.Errorf("f1.md on disk = %q, want the acknowledged text", got)
			}
			if log := subjects(t, dir); !strings.Contains(log, "memory: merge outside-gitmem") {
				t.Errorf("the commit made with git was not merged back:\n%s", log)
			}
			gittest.Git(t, dir, "fsck", "--strict")
		})
	}
}

// git commit -a in the instant between gitmem moving the branch and the
// worktree following it reads the newer HEAD and the file's older
// acknowledged version, and commits that on the newer commit: the merge
// back took it for the operator's edit of the file (N9 F1), and kept
// both sides between conflict markers, or the older version outright. A
// file of such a commit that is exactly a version the worktree held, and
// that gitmem replaced less than 2 s before the commit was made, holds no
// edit: dropped, as what a lagging index put back is.
func TestCommitOfAFileTheWorktreeHadYetToFollowUndoesNothing(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	var commitNow atomic.Bool
	gitOut := make(chan string, 1)
	opt := testOptions(t)
	opt.IndexDelay = time.Hour // .git/index lags every change after settle
	opt.hooks.exchange = func(q string, open bool) {
		if open && q == "memories/a.md" && commitNow.CompareAndSwap(true, false) {
			// The branch is at t2, the file still holds t1's version.
			out, err := handGit(t, dir, "commit", "-qam", "by hand").CombinedOutput()
			if err != nil {
				out = append(out, []byte(err.Error())...)
			}
			gitOut <- string(out)
		}
	}
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer r.collector.running()() // the writer lock stays held, as under load
	write(t, r, "t0", "a.md", "v0\n")
	write(t, r, "b0", "b.md", "b0\n")
	settle(t, r) // .git/index written for b0: a.md v0
	write(t, r, "t1", "a.md", "v1\n")
	if err := r.materialize(); err != nil { // the worktree holds v1
		t.Fatal(err)
	}
	commitNow.Store(true)
	write(t, r, "t2", "a.md", "v2\n")
	if err := r.materialize(); err != nil {
		t.Fatal(err)
	}
	select {
	case out := <-gitOut:
		if out != "" {
			t.Fatalf("git commit -am: %s", out)
		}
	default:
		t.Fatal("the worktree followed t2 without the hook")
	}
	write(t, r, "t3", "a.md", "v3\n")
	settle(t, r)
	if got := read(t, r, "a.md"); got != "v3\n" {
		t.Errorf("a.md in HEAD = %q, want the acknowledged v3", got)
	}
	if got := readDisk(t, dir, "a.md"); got != "v3\n" {
		t.Errorf("a.md on disk = %q, want the acknowledged v3", got)
	}
	if log := subjects(t, dir); !strings.Contains(log, "memory: merge outside-gitmem") {
		t.Errorf("the commit made with git was not merged back:\n%s", log)
	}
	gittest.Git(t, dir, "fsck", "--strict")
}

// git commit -a in the instant between gitmem moving the branch to a
// commit that creates a file and the worktree writing it finds the file
// in .git/index (an older version: the index lags) and not on disk, and
// commits its deletion on the newer commit: the merge back deleted the
// acknowledged file. A deletion of a file gitmem created, whose worktree
// file was written less than 2 s before the commit was made (or after),
// is no edit of the operator's: dropped. A deliberate git rm of a file
// the worktree held longer is merged (the commit's date says so: 3 s
// after the file was written).
func TestCommitOfAFileTheWorktreeHadYetToCreateDeletesNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		rm   bool // git rm -f, 3 s after the worktree wrote the file; else git commit -am as it is written
	}{{"git commit -am before the file is written", false}, {"git rm of a file written 3 s before", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := gittest.TempDir(t)
			// Every index gitmem writes holds a.md (the first commit too:
			// an index without it would vouch for git's deletion).
			if err := os.MkdirAll(filepath.Join(dir, "memories"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "memories", "a.md"), []byte("v0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			opt := testOptions(t)
			opt.IndexDelay = time.Hour // .git/index lags every change after settle
			r, _, err := Init(context.Background(), dir, opt)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			defer r.collector.running()() // the writer lock stays held, as under load
			write(t, r, "b0", "b.md", "b0\n")
			settle(t, r) // .git/index written for b0: a.md v0
			del(t, r, "t1", "a.md")
			if err := r.materialize(); err != nil { // no a.md on disk; the index still has v0
				t.Fatal(err)
			}
			var gitOut []byte
			var gitErr error
			var once sync.Once
			if !c.rm {
				r.objects.st.Env.SetFault(func(step, p string) error {
					if step == gd.StepWorktree && strings.HasSuffix(p, "a.md") {
						once.Do(func() { // the branch is at t2, a.md not yet on disk
							gitOut, gitErr = handGit(t, dir, "commit", "-qam", "by hand").CombinedOutput()
						})
					}
					return nil
				})
			}
			write(t, r, "t2", "a.md", "v2\n") // made again
			if err := r.materialize(); err != nil {
				t.Fatal(err)
			}
			r.objects.st.Env.SetFault(nil)
			if c.rm {
				gittest.Git(t, dir, "rm", "-qf", "memories/a.md")
				cmd := handGit(t, dir, "commit", "-qm", "by hand")
				cmd.Env = append(cmd.Env, fmt.Sprintf("GIT_COMMITTER_DATE=@%d +0000", time.Now().Add(3*time.Second).Unix()))
				gitOut, gitErr = cmd.CombinedOutput()
			}
			if gitErr != nil || len(gitOut) > 0 {
				t.Fatalf("git commit: %v %s", gitErr, gitOut)
			}
			if st := gittest.Git(t, dir, "show", "--name-status", "--format=", "HEAD"); st != "D\tmemories/a.md\n" {
				t.Fatalf("git's commit does not delete a.md alone:\n%s", st)
			}
			write(t, r, "t3", "b.md", "b1\n")
			settle(t, r)
			if log := subjects(t, dir); !strings.Contains(log, "memory: merge outside-gitmem") {
				t.Errorf("the commit made with git was not merged back:\n%s", log)
			}
			inHead := gittest.Git(t, dir, "ls-tree", "--name-only", "-r", "main", "memories")
			_, onDisk := os.Stat(filepath.Join(dir, "memories", "a.md"))
			if c.rm {
				if strings.Contains(inHead, "a.md") || onDisk == nil {
					t.Errorf("the deliberate git rm was not merged: HEAD has %q, on disk: %v", inHead, onDisk)
				}
			} else {
				if got := read(t, r, "a.md"); got != "v2\n" {
					t.Errorf("a.md in HEAD = %q, want the acknowledged v2", got)
				}
				if got := readDisk(t, dir, "a.md"); got != "v2\n" {
					t.Errorf("a.md on disk = %q, want the acknowledged v2", got)
				}
			}
			gittest.Git(t, dir, "fsck", "--strict")
		})
	}
}

// startAndClose opens the repository at dir (a start) and closes it.
func startAndClose(t *testing.T, dir string) {
	t.Helper()
	r, err := Open(context.Background(), dir, Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}
