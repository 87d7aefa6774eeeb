package gitmem

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// The index timer has a lock of its own (design F1): scheduling it needs
// no writer turn, so that a change, an adopt and a checkout of git's may
// each schedule it at once (under -race, two of them racing on when it is
// due, or making two timers, would show here).
func TestIndexTimerNeedsNoWriterTurn(t *testing.T) {
	t.Parallel()
	x := newGitIndex(context.Background(), t.TempDir(), nil)
	fired := make(chan struct{}, 1)
	flush := func() {
		select {
		case fired <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				x.schedule(time.Millisecond, flush)
			}
		}()
	}
	wg.Wait()
	select {
	case <-fired:
	case <-time.After(time.Minute): // never, unless the timer was lost
		t.Fatal("the index was never flushed")
	}
	x.stopTimer()
	x.timerMu.Lock()
	defer x.timerMu.Unlock()
	if x.timer == nil || x.due.IsZero() {
		t.Fatal("no timer kept")
	}
}

// A rewrite of .git/index looks one by one only at the files of the
// folders that changed since the last one; a folder that is the same
// keeps its entries whole. With 100 stores of 3,000 files under load,
// looking up every file's entry at every rewrite was a fifth of the
// server's CPU (issue 25). The index stays git's: clean for git status,
// and a hand edit of a file kept whole still shows.
func TestIndexRewriteLooksOnlyAtChangedFolders(t *testing.T) {
	t.Parallel()
	const folders, each = 10, 20
	r, dir := folderRepo(t, folders, each) // the index written by settle only
	defer r.Close()
	settle(t, r)
	time.Sleep(2 * gd.RacyWindow) // the files are no longer racy: the next index vouches for them
	write(t, r, "t1", "f03/n000.md", "changed\n")
	settle(t, r)
	write(t, r, "t2", "f03/n001.md", "changed too\n")
	settle(t, r)
	held := r.gitIndex.lock()
	looked := r.gitIndex.looked
	held.unlock()
	if looked != each {
		t.Fatalf("the index's rewrite after a change in one folder looked at %d files one by one, want %d (that folder's)", looked, each)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
	checkVouched(t, dir, folders*each)
	if err := os.WriteFile(filepath.Join(dir, "memories", "f07", "n005.md"), []byte("by hand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != " M memories/f07/n005.md\n" {
		t.Fatalf("git status after a hand edit of a file kept whole: %q", st)
	}
}

// TestIndexFirstRewriteAfterStartLooksOnlyAtChangedFolders: the index a
// start read, whose entries made HEAD's tree, is that tree's: the first
// rewrite after it (a one-command revert's, at Close) keeps the folders
// the change did not touch whole, as every later rewrite does, instead
// of looking at every file of the memory one by one.
func TestIndexFirstRewriteAfterStartLooksOnlyAtChangedFolders(t *testing.T) {
	t.Parallel()
	const folders, each = 10, 20
	r, dir := folderRepo(t, folders, each)
	settle(t, r) // every file written; the index pairs none written within the racy window with lstat data
	time.Sleep(2 * gd.RacyWindow)
	write(t, r, "t0", "f03/n001.md", "changed first\n") // the index written at Close vouches for the others
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * gd.RacyWindow) // nor is that one racy at the next index
	opt := testOptions(t)
	opt.OneCommand, opt.TouchedOnly = true, true // as an operator command opens it
	r, err := Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	held := r.gitIndex.lock()
	r.mirror.stats.mu.Lock()
	if kept, seeded := r.gitIndex.entries, r.mirror.stats.index; len(kept) != folders*each || len(seeded) != len(kept) || &kept[0] != &seeded[0] {
		t.Errorf("the start kept %d and %d entries of .git/index, not one copy of its %d", len(kept), len(seeded), folders*each)
	}
	r.mirror.stats.mu.Unlock()
	held.unlock()
	write(t, r, "t1", "f03/n000.md", "changed\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if looked := r.gitIndex.looked; looked != each {
		t.Fatalf("the first index written after a start, after a change in one folder, looked at %d files one by one, want %d (that folder's)", looked, each)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
	checkVouched(t, dir, folders*each)
}

// TestIndexNamingAPathTwiceIsNotTheTree: an index that holds a path
// twice (no git writes one) is not taken for HEAD's tree at start, so
// the next index written, keeping unchanged folders whole, does not copy
// the path twice.
func TestIndexNamingAPathTwiceIsNotTheTree(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "a/one.md", "one\n")
	write(t, r, "t2", "b/two.md", "two\n")
	time.Sleep(2 * gd.RacyWindow) // the index vouches for both
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	gitDir := filepath.Join(dir, ".git")
	entries, _, err := gd.ReadIndex(gitDir)
	if err != nil || len(entries) != 2 {
		t.Fatalf("index: %v, %v", entries, err)
	}
	if err := gd.WriteIndex(context.Background(), nil, gitDir, append(entries, entries[0])); err != nil {
		t.Fatal(err)
	}
	opt = testOptions(t)
	opt.OneCommand, opt.TouchedOnly = true, true
	if r, err = Open(context.Background(), dir, opt); err != nil {
		t.Fatal(err)
	}
	write(t, r, "t3", "b/two.md", "two, changed\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if entries, _, err = gd.ReadIndex(gitDir); err != nil || len(entries) != 2 {
		t.Fatalf("the index written after one that named memories/a/one.md twice holds %d entries (%v), want 2", len(entries), err)
	}
}

// folderRepo is a new repository whose one commit holds folders*each
// files, fNN/nNNN.md, each folder's every folders-th; its .git/index is
// written when settled or closed only.
func folderRepo(t *testing.T, folders, each int) (*Repo, string) {
	t.Helper()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	opt.IndexDelay = time.Hour
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Update(context.Background(), Meta{Subject: "many"}, func(tx *Tx) error {
		for i := range folders * each {
			if err := tx.WriteFile(fmt.Sprintf("f%02d/n%03d.md", i%folders, i/folders), []byte(fmt.Sprint(i, "\n"))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return r, dir
}

// checkVouched checks that dir's .git/index holds n entries, every one
// with lstat data but the file written last, which may be racy.
func checkVouched(t *testing.T, dir string, n int) {
	t.Helper()
	entries, _, err := gd.ReadIndex(filepath.Join(dir, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	vouched := 0
	for _, e := range entries {
		if !e.Stat.IsZero() {
			vouched++
		}
	}
	if len(entries) != n || vouched < n-1 {
		t.Fatalf(".git/index holds %d entries, %d with lstat data; want %d, all but at most one", len(entries), vouched, n)
	}
}

// The index pairs no file changed within the racy window of its writing
// with lstat data (an edit in the same tick could leave the same data),
// and does not read one to find that out: a pull's index is written
// right after its files, every one of them racy. A file older than the
// window is read and vouched for.
func TestIndexVouchesForNoRacyFileUnread(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	write(t, r, "t0", "a.md", "one\n")
	settle(t, r)
	const q = "memories/a.md"
	_, root := r.state.snapshot()
	n := lookup(root, q)
	fi, err := r.mirror.wt.lstat(q)
	if err != nil {
		t.Fatal(err)
	}
	read := r.mirror.wt.readBytes.Load()
	if st := r.vouch(q, n, fi.ModTime()); !st.IsZero() {
		t.Error("a file changed within the racy window is vouched for")
	}
	if got := r.mirror.wt.readBytes.Load() - read; got != 0 {
		t.Errorf("%d bytes of a file changed within the racy window were read to vouch for it", got)
	}
	if st := r.vouch(q, n, time.Now().Add(2*gd.RacyWindow)); st != gd.StatOf(fi) {
		t.Errorf("a file older than the racy window is vouched for with %+v, want its lstat data %+v", st, gd.StatOf(fi))
	}
}

// Files written just before .git/index are racy at its writing and get
// no lstat data (git, and gitmem's next start, read them). The next write
// once they are older (Flush, a release of the writer lock) vouches for
// them, though the index holds HEAD's tree already: it returned at once,
// leaving them unvouched until the next change, and each start read and
// hashed them at their first look (BenchmarkMutation's repository, 61 of
// 10,000 files).
func TestIndexVouchesLaterForFilesRacyAtItsWriting(t *testing.T) {
	t.Parallel()
	r, dir := folderRepo(t, 4, 5)
	defer r.Close()
	if err := r.materialize(); err != nil {
		t.Fatal(err)
	}
	if err := r.writeIndex(); err != nil { // at once: every file racy
		t.Fatal(err)
	}
	entries, _, err := gd.ReadIndex(filepath.Join(dir, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	if zero := countZeroStat(entries); zero == 0 {
		t.Fatal("no entry of a file racy at the index's writing is left without lstat data: the test tests nothing")
	}
	time.Sleep(2 * gd.RacyWindow)
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if entries, _, err = gd.ReadIndex(filepath.Join(dir, ".git")); err != nil {
		t.Fatal(err)
	}
	if zero := countZeroStat(entries); zero != 0 {
		t.Errorf("%d entries without lstat data after a flush past the racy window, want none", zero)
	}
}

func countZeroStat(entries []gd.IndexEntry) (n int) {
	for _, e := range entries {
		if e.Stat.IsZero() {
			n++
		}
	}
	return n
}

// .git/index names only blobs git's files hold: it is written for the
// branch as git's files hold it, not for readers' HEAD. Flush materialised
// and then, holding no lock, wrote the index for readers' HEAD, which
// calls acknowledged meanwhile had moved on (durable in the log, not yet
// in git's files): git diff then found a file stat-dirty and its index
// blob missing. git 2.39's diffcore_skip_stat_unmatch, fetching missing
// objects for the pairs of its queue it had freed, crashed there:
// TestPlainGitBesideAWritingRepo's "git diff --stat: signal: segmentation
// fault" (about one git diff --stat in 100 beside two writers, loaded).
func TestIndexNamesOnlyBlobsGitHas(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	keepWriterLock(t, r)
	write(t, r, "t0", "a.md", "v0\n")
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	held := r.gitIndex.lock() // another write of the index under way
	id, flushed := inBackground(func() error { return r.Flush(context.Background()) })
	for !waitsIn(id, "(*Repo).flush(", "lockContext(") { // Flush materialised, and waits for the index
		runtime.Gosched()
	}
	dt := r.disk.hold() // a materialisation under way: a change acknowledged now is not in git's files
	write(t, r, "t1", "a.md", "v1\n")
	held.unlock()
	// Flush writes the index, or waits for the materialiser to know what
	// git's files hold.
	done := false
	for !done && !waitsIn(id, "(*Repo).writeIndexHeld(", "(*disk).hold(") {
		select {
		case err := <-flushed:
			if err != nil {
				dt.release()
				t.Fatal(err)
			}
			done = true
		default:
			runtime.Gosched()
		}
	}
	// Looked at before the materialiser goes on: git's files lack t1.
	entries, _, err := gd.ReadIndex(filepath.Join(dir, ".git"))
	if err != nil {
		dt.release()
		t.Fatal(err)
	}
	for _, e := range entries {
		if out, err := gittest.Command(t, dir, "cat-file", "-e", e.Hash.String()).CombinedOutput(); err != nil {
			t.Errorf(".git/index names %s for %s, which git does not have: %v %s", e.Hash, e.Path, err, out)
		}
	}
	if out, err := gittest.Command(t, dir, "diff", "--stat").CombinedOutput(); err != nil {
		t.Errorf("git diff --stat: %v\n%s", err, out)
	}
	dt.release()
	if !done {
		if err := <-flushed; err != nil {
			t.Fatal(err)
		}
	}
	settle(t, r)
	if out, err := gittest.Command(t, dir, "diff", "--stat").CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("git diff --stat: %v\n%s", err, out)
	}
}

// TestCompareJoinedIsThePathsOrder: the index's walk finds an entry of
// the last index by prefix and name without making the path; its order is
// the joined path's.
func TestCompareJoinedIsThePathsOrder(t *testing.T) {
	parts := []string{"", "a", "a.md", "a/b", "a-", "a0", "ab", "b", "memories", "memories/x", "memories.md", "é"}
	for _, path := range parts {
		for _, prefix := range parts {
			for _, name := range parts[1:] {
				want := strings.Compare(path, join2(prefix, name))
				if got := compareJoined(path, prefix, name); got != want {
					t.Errorf("compareJoined(%q, %q, %q) = %d, want %d", path, prefix, name, got, want)
				}
				if got := isJoined(path, prefix, name); got != (want == 0) {
					t.Errorf("isJoined(%q, %q, %q) = %v", path, prefix, name, got)
				}
			}
		}
	}
}
