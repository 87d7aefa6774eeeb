package gitmem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

func testOptions(t *testing.T) Options {
	return Options{
		Now:      func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) },
		Operator: Signature{"op", "op@example.com"},
		Logf:     t.Logf,
		hooks:    &testHooks{env: new(gd.Env)}, // for failAt
	}
}

// captureLogs makes opt's Logf and Errorf keep what they are given (and
// log it to t); the function returned lists what they were given so far.
func captureLogs(t *testing.T, opt *Options) func() []string {
	var mu sync.Mutex
	var logged []string
	opt.Logf = func(format string, a ...any) {
		mu.Lock()
		logged = append(logged, fmt.Sprintf(format, a...))
		mu.Unlock()
		t.Logf(format, a...)
	}
	opt.Errorf = opt.Logf
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(logged)
	}
}

// captureErrorLogs is captureLogs with the lines of opt.Errorf (what the
// operator must act on) beginning "ERROR ".
func captureErrorLogs(t *testing.T, opt *Options) func() []string {
	logs := captureLogs(t, opt)
	logf := opt.Logf
	opt.Errorf = func(format string, a ...any) { logf("ERROR "+format, a...) }
	return logs
}

// newFollowedRepo is a new repository (closed at the end of the test) and a
// check that the worktree followed: the memory files hold what want says,
// and nothing was logged as "could not follow".
func newFollowedRepo(t *testing.T) (*Repo, string, func(want map[string]string)) {
	t.Helper()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	logged := captureLogs(t, &opt)
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, dir, func(want map[string]string) {
		t.Helper()
		for p, text := range want {
			if got, err := os.ReadFile(filepath.Join(dir, "memories", p)); err != nil || string(got) != text {
				t.Errorf("%s: %q %v, want %q", p, got, err, text)
			}
		}
		for _, l := range logged() {
			if strings.Contains(l, "could not follow") {
				t.Errorf("logged: %s", l)
			}
		}
	}
}

// TestOpenParsesConfigOnce: a writer's Open parses .git/config once, for
// whether it parses and for gitmem's mark both (it parsed it twice: the
// parse is a tenth of a cold store's open under serve --stores).
func TestOpenParsesConfigOnce(t *testing.T) {
	t.Parallel()
	if got := countedInOpen(t, (*gd.Env).ConfigParses); got != 1 {
		t.Errorf("Open parsed .git/config %d times, want 1", got)
	}
}

// TestStartListsEachFolderOnce: the sweeps of a writer's start (the lock
// files a killed gitmem left, then its temporary files) share one
// listing of .git and one of .git/gitmem: each was listed twice, one of
// the cold open's costs under serve --stores.
func TestStartListsEachFolderOnce(t *testing.T) {
	t.Parallel()
	// .git, .git/gitmem, .git/gitmem/tmp and .git/objects (no loose
	// object folder)
	if got := countedInOpen(t, (*gd.Env).DirListings); got != 4 {
		t.Errorf("the start listed %d folders, want 4", got)
	}
}

// countedInOpen is what count, one of the counts of the repository's
// gd.Env, is after a writer's Open of a closed repository.
func countedInOpen(t *testing.T, count func(*gd.Env) int64) int64 {
	t.Helper()
	r, dir := newRepo(t)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	opt := testOptions(t)
	r, err := Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	got := count(opt.hooks.gdEnv())
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return got
}

// newRepo is a new repository in a temporary folder, closed at the end
// of the test.
func newRepo(t *testing.T) (*Repo, string) {
	t.Helper()
	return newRepoWith(t, nil)
}

// newRepoWith is newRepo with the test's seams into it.
func newRepoWith(t *testing.T, h *testHooks) (*Repo, string) {
	t.Helper()
	opt := testOptions(t)
	if h != nil {
		opt.hooks = h
	}
	return newRepoOpts(t, opt)
}

// newRepoOpts is newRepo made with opt.
func newRepoOpts(t *testing.T, opt Options) (*Repo, string) {
	t.Helper()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, dir
}

func write(t *testing.T, r *Repo, id, p, content string) Commit {
	t.Helper()
	c, err := r.Update(context.Background(), Meta{Subject: "w " + p, Trailers: []Trailer{{TrailerToolUseID, id}}}, func(tx *Tx) error {
		return tx.WriteFile(p, []byte(content))
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// settle waits until git's own files (objects, branch, worktree, index)
// hold every acknowledged change: they follow the write-ahead log within
// milliseconds, and a test that reads them with git must not race that.
func settle(t *testing.T, r *Repo) {
	t.Helper()
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, r *Repo, p string) string {
	t.Helper()
	v, err := r.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	data, err := v.ReadFile(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return string(data)
}

// Two Repo values on one folder behave like two gitmem processes: the
// lock serialises them and each sees what the other committed.
func TestTwoWritersShareOneRepository(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r1, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r2, err := Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	var wg sync.WaitGroup
	for w, r := range []*Repo{r1, r2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				write(t, r, fmt.Sprintf("w%d-%d", w, i), fmt.Sprintf("w%d/%d", w, i), "x")
				read(t, r, fmt.Sprintf("w%d/%d", w, i))
			}
		}()
	}
	wg.Wait()
	settle(t, r1) // the other process sees a change once it is in git's files
	settle(t, r2)
	head, _ := r1.Commit(context.Background(), "HEAD")
	n := 0
	for h := head; ; n++ {
		if len(h.Parents) == 0 {
			break
		}
		h, _ = r1.Commit(context.Background(), h.Parents[0])
	}
	if n != 40 {
		t.Fatalf("%d commits after init, want 40", n)
	}
	if got := read(t, r2, "w0/19"); got != "x" {
		t.Fatalf("r2 does not see r1's file: %q", got)
	}
	// An id committed by one writer is not applied again by the other.
	if _, err := r2.Update(context.Background(), Meta{Trailers: []Trailer{{TrailerToolUseID, "w0-3"}}}, func(tx *Tx) error { return nil }); err == nil {
		t.Fatal("w0-3 applied twice")
	}
}

// A crash between the branch update and the worktree leaves a journal;
// the next start makes the named paths match HEAD and commits nothing.
func TestStartRepairsAnInterruptedChange(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "a", "notes/a.md", "committed\n")
	write(t, r, "b", "b.md", "b\n")
	head, _ := r.Commit(context.Background(), "HEAD")
	r.Close()
	// As if the process died after moving the branch: the worktree still
	// holds the old state of the two paths the journal names.
	os.WriteFile(filepath.Join(dir, "memories", "notes", "a.md"), []byte("stale\n"), 0o600)
	os.Remove(filepath.Join(dir, "memories", "b.md"))
	os.WriteFile(filepath.Join(dir, ".git", "gitmem", "pending"), []byte(`{"paths":["memories/notes/a.md","memories/b.md"]}`), 0o600)

	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if after, _ := r.Commit(context.Background(), "HEAD"); after.Hash != head.Hash {
		t.Fatalf("start committed %s; the repair must not commit", after.Subject)
	}
	for p, want := range map[string]string{"notes/a.md": "committed\n", "b.md": "b\n"} {
		data, err := os.ReadFile(filepath.Join(dir, "memories", filepath.FromSlash(p)))
		if err != nil || string(data) != want {
			t.Errorf("%s = %q, %v", p, data, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "gitmem", "pending")); !os.IsNotExist(err) {
		t.Error("journal left behind")
	}
}

// A failing transaction writes nothing: no commit, no file.
func TestFailedTransactionChangesNothing(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	before, _ := r.Commit(context.Background(), "HEAD")
	_, err := r.Update(context.Background(), Meta{Subject: "x"}, func(tx *Tx) error {
		if err := tx.WriteFile("half.md", []byte("x")); err != nil {
			return err
		}
		return fmt.Errorf("changed my mind")
	})
	if err == nil {
		t.Fatal("no error")
	}
	if after, _ := r.Commit(context.Background(), "HEAD"); after.Hash != before.Hash {
		t.Fatal("a failed transaction committed")
	}
	if _, err := os.Stat(filepath.Join(dir, "memories", "half.md")); !os.IsNotExist(err) {
		t.Fatal("a failed transaction wrote the worktree")
	}
	v, _ := r.Snapshot(context.Background())
	if _, err := v.Stat("half.md"); err != ErrNotExist {
		t.Fatal("a failed transaction is visible")
	}
}

// Readers see whole snapshots while writers commit (run with -race).
func TestSnapshotsDuringWrites(t *testing.T) {
	t.Parallel()
	r, _, err := Init(context.Background(), gittest.TempDir(t), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 30 {
			if _, err := r.Update(context.Background(), Meta{Subject: "pair"}, func(tx *Tx) error {
				v := []byte(fmt.Sprint(i))
				if err := tx.WriteFile("a", v); err != nil {
					return err
				}
				return tx.WriteFile("b", v)
			}); err != nil {
				t.Error(err)
			}
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
		}
		v, err := r.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		a, errA := v.ReadFile("a")
		b, errB := v.ReadFile("b")
		if (errA == nil) != (errB == nil) || string(a) != string(b) {
			t.Fatalf("torn snapshot: a=%q b=%q", a, b)
		}
	}
}

// A fresh process's log reads the index file backwards; it must give the
// same commits as the loaded index, for any page size and file layout.
func TestLogFromTheIndexTail(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		write(t, r, fmt.Sprintf("id-%03d\twith tab", i), fmt.Sprintf("f%d.md", i%7), strings.Repeat("x", i))
	}
	var want []string
	r.Log(context.Background(), LogOptions{}, nil, func(c Commit) error { want = append(want, c.Hash+c.Trailer(TrailerToolUseID)); return nil })
	r.Close()
	chunks := &testHooks{tailChunk: 333} // lines straddle many chunk boundaries
	for _, limit := range []int{0, 1, 20, 299, 301} {
		ro, err := Open(context.Background(), dir, Options{ReadOnly: true, hooks: chunks})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		ro.Log(context.Background(), LogOptions{Limit: limit}, nil, func(c Commit) error { got = append(got, c.Hash+c.Trailer(TrailerToolUseID)); return nil })
		ro.Close()
		n := len(want)
		if limit > 0 && limit < n {
			n = limit
		}
		if strings.Join(got, ",") != strings.Join(want[:n], ",") {
			t.Fatalf("limit %d: %d commits from the tail, want %d", limit, len(got), n)
		}
	}
	if len(want) != 301 || !strings.HasSuffix(want[0], "id-299\twith tab") {
		t.Fatalf("log: %d commits, newest %q", len(want), want[0])
	}
}

// blame follows a file back through a rename of its folder.
func TestBlameFollowsRenames(t *testing.T) {
	t.Parallel()
	r, _, err := Init(context.Background(), gittest.TempDir(t), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	write(t, r, "a", "old/f.md", "one\ntwo\n")
	write(t, r, "b", "old/f.md", "one\nTWO\n")
	if _, err := r.Update(context.Background(), Meta{Subject: "mv", Trailers: []Trailer{{TrailerToolUseID, "c"}, {TrailerCommand, "rename"},
		{TrailerPath, "/memories/old"}, {TrailerNewPath, "/memories/new"}}}, func(tx *Tx) error { return tx.Rename("old", "new") }); err != nil {
		t.Fatal(err)
	}
	write(t, r, "d", "new/f.md", "one\nTWO\nthree\n")
	lines, err := r.Blame(context.Background(), "new/f.md")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		got = append(got, l.Commit.Trailer(TrailerToolUseID)+":"+l.Text)
	}
	if want := "a:one b:TWO d:three"; strings.Join(got, " ") != want {
		t.Fatalf("blame %v, want %s", got, want)
	}
}

// Two writers appending to one history index never duplicate a record:
// the file stays one clean chain that a fresh process reads in full.
func TestHistoryIndexStaysOneChainWithTwoWriters(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r1, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		write(t, r1, fmt.Sprint("a", i), "a.md", fmt.Sprint(i))
		write(t, r2, fmt.Sprint("b", i), "b.md", fmt.Sprint(i))
	}
	r1.Close()
	r2.Close()
	ro := newHistoryIndex(filepath.Join(dir, ".git"), nil)
	if recs, _ := ro.readFile(); len(recs) != 21 {
		t.Fatalf("the index file holds a chain of %d records, want 21", len(recs))
	}
	data, _ := os.ReadFile(filepath.Join(dir, ".git", "gitmem", "history"))
	if n := strings.Count(string(data), "\n"); n != 22 {
		t.Fatalf("the index file has %d lines, want 22 (header + 21)", n)
	}
}

// While gitmem runs, .git/index follows HEAD once it has been idle for
// IndexDelay, so `git status` is clean without gitmem exiting.
func TestIndexCatchesUpWhenIdle(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	opt.IndexDelay = 20 * time.Millisecond
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	write(t, r, "x", "notes/a.md", "a\n")
	write(t, r, "y", "b.md", "b\n")
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := gittest.Git(t, dir, "status", "--porcelain", "--untracked-files=all")
		if st == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("git status never became clean while gitmem was idle:\n%s", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The index is rewritten every IndexDelay under a steady stream of
// changes too (not only once gitmem is idle), looking only at the files
// changed since the last one: an unchanged file keeps its entry, git
// still sees a hand edit of it, and the files gitmem changed are clean.
func TestIndexFollowsUnderLoad(t *testing.T) {
	gittest.Serial(t, "a load test: a steady stream of writes while the index follows")
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	opt.IndexDelay = 50 * time.Millisecond
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	write(t, r, "x", "kept.md", "kept\n")
	settle(t, r)
	// A change every 10 ms for a while: never idle for IndexDelay.
	var written int
	for i := 0; i < 60; i++ {
		write(t, r, fmt.Sprint("t", i), "busy.md", fmt.Sprint(i, "\n"))
		time.Sleep(10 * time.Millisecond)
		if data, err := os.ReadFile(filepath.Join(dir, ".git", "gitmem", "index-head")); err == nil {
			if c, err := r.Commit(context.Background(), strings.TrimSpace(string(data))); err == nil && strings.HasPrefix(c.Trailer(TrailerToolUseID), "t") {
				written++
			}
		}
	}
	if written == 0 {
		t.Fatal("the index was never rewritten while changes kept coming")
	}
	settle(t, r)
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status after the changes:\n%s", st)
	}
	os.WriteFile(filepath.Join(dir, "memories", "kept.md"), []byte("edited by hand\n"), 0o600)
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != " M memories/kept.md\n" {
		t.Fatalf("git status after a hand edit of an unchanged file:\n%q", st)
	}
}

// Adopt's commit schedules the index's rewrite with the writer mutex
// held, as every commit does: serve's maintenance loop adopts hand edits
// while calls commit, and the timer and its due time are the writer's.
// (Adopt scheduled it after letting the mutex go: a data race on both,
// which -race reports here, and a timer made twice, one of them lost.)
func TestAdoptBesideWritersSchedulesTheIndex(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	opt.IndexDelay = time.Millisecond // scheduled at nearly every commit
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const rounds = 40
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range rounds {
			if _, err := r.Update(context.Background(), Meta{Trailers: []Trailer{{TrailerToolUseID, fmt.Sprint("w", i)}}}, func(tx *Tx) error {
				return tx.WriteFile("model.md", []byte(fmt.Sprint(i, "\n")))
			}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	hand := filepath.Join(dir, "memories", "hand.md")
	for i := range rounds {
		if err := os.WriteFile(hand, []byte(fmt.Sprint("by hand ", i, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		// Nothing to change when the last adopt has not reached the
		// worktree yet: the edit is then the next adopt's.
		if _, err := r.Adopt(context.Background()); err != nil && !errors.Is(err, ErrNoChange) {
			t.Fatalf("adopt %d: %v", i, err)
		}
	}
	wg.Wait()
	settle(t, r)
	if _, err := r.Adopt(context.Background()); err != nil && !errors.Is(err, ErrNoChange) {
		t.Fatal(err)
	}
	settle(t, r)
	if got := read(t, r, "hand.md"); got != fmt.Sprint("by hand ", rounds-1, "\n") {
		t.Errorf("HEAD's hand.md = %q", got)
	}
	if got := read(t, r, "model.md"); got != fmt.Sprint(rounds-1, "\n") {
		t.Errorf("HEAD's model.md = %q", got)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("git status:\n%s", st)
	}
}

// Regression: a writer killed while holding refs/heads/main.lock must not
// block the next process's commits (its journal shows the lock is its
// own).
func TestLeftoverBranchLockDoesNotBlock(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "a", "a.md", "a")
	r.Close()
	lock := filepath.Join(dir, ".git", "refs", "heads", "main.lock")
	os.WriteFile(lock, []byte("0000000000000000000000000000000000000000\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".git", "gitmem", "pending"), []byte(`{"paths":[]}`), 0o600)
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	write(t, r, "b", "b.md", "b")
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Fatal("the leftover lock is still there")
	}
	// Without a record of gitmem's that shows it is its own, a lock is
	// git's, however old (git gc holds the branch's while it expires the
	// reflog): never removed. The change is acknowledged (the log holds
	// it) and reaches the branch once git is done; meanwhile Flush names
	// the lock.
	os.WriteFile(lock, nil, 0o644)
	old := time.Now().Add(-time.Minute)
	os.Chtimes(lock, old, old)
	write(t, r, "c", "c.md", "c")
	if err := r.Flush(context.Background()); err == nil || !strings.Contains(err.Error(), ".git/refs/heads/main.lock") {
		t.Fatalf("Flush while git holds the branch's lock: %v", err)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("git's lock was removed: %v", err)
	}
	os.Remove(lock) // git is done
	settle(t, r)
	if ids := gittest.Git(t, dir, "log", "-1", "--format=%(trailers:key=Tool-Use-Id,valueonly)"); strings.TrimSpace(ids) != "c" {
		t.Fatalf("the branch's last change: %q, want c", ids)
	}
}

// A time before the first commit names gitmem init's empty commit (the
// memory was as empty before it), never a first commit that holds files.
func TestAtBeforeTheFirstCommit(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	write(t, r, "t1", "a.md", "one\n")
	root, err := r.Resolve(context.Background(), "HEAD~1")
	if err != nil {
		t.Fatal(err)
	}
	before := time.Date(2025, 12, 31, 0, 0, 0, 0, time.UTC)
	if c, err := r.At(context.Background(), before); err != nil || c.Hash != root.Hash {
		t.Fatalf("At before an empty first commit: %v %v, want %s", c.Hash, err, root.Hash)
	}

	dir2 := gittest.TempDir(t)
	os.MkdirAll(filepath.Join(dir2, "memories"), 0o700)
	os.WriteFile(filepath.Join(dir2, "memories", "kept.md"), []byte("kept\n"), 0o600)
	r2, _, err := Init(context.Background(), dir2, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if c, err := r2.At(context.Background(), before); !errors.Is(err, ErrUnknownRev) {
		t.Fatalf("At before a first commit with files: %v %v, want ErrUnknownRev", c.Hash, err)
	}
}

// The operator's identity is git's: the environment before the
// configuration.
func TestGitIdentityFromTheEnvironment(t *testing.T) {
	dir := gittest.TempDir(t)
	t.Setenv("GIT_AUTHOR_NAME", "Env Op")
	t.Setenv("GIT_AUTHOR_EMAIL", "env@example.com")
	if id := gitIdentity(dir); id != (Signature{"Env Op", "env@example.com"}) {
		t.Fatalf("gitIdentity: %+v", id)
	}
}

// Issue 21: a repository deleted while a process has it open (gitmem
// store delete in another process) stays deleted: what that process
// still writes (the branch it keeps, the objects it writes again, at
// its checkpoints and its Close) fails rather than make the folder
// again, a .git holding a branch file and some objects that git, and a
// store listing, took for a damaged repository.
func TestDeletedRepositoryIsNotBroughtBack(t *testing.T) {
	t.Parallel()
	for _, settled := range []bool{true, false} {
		dir := filepath.Join(gittest.TempDir(t), "memory")
		r, _, err := Init(context.Background(), dir, testOptions(t))
		if err != nil {
			t.Fatal(err)
		}
		write(t, r, "t1", "a.md", "one\n")
		if settled {
			settle(t, r)
		}
		removeWhileOpen(t, r, dir)
		r.Close()
		var left []string
		filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
			if err == nil {
				left = append(left, p)
			}
			return nil
		})
		if len(left) > 0 {
			t.Errorf("settled %v: the deleted repository is back: %q", settled, left)
		}
	}
}

// removeWhileOpen deletes the open repository r at dir, as another
// process would (gitmem store delete), trying again while r's background
// work writes a file into a folder being removed ("directory not empty");
// r is closed if it cannot be done, so nothing logs after the test.
func removeWhileOpen(t *testing.T, r *Repo, dir string) {
	t.Helper()
	for i := 0; ; i++ {
		err := os.RemoveAll(dir)
		if err == nil {
			return
		}
		if i == 100 {
			r.Close()
			t.Fatal(err)
		}
	}
}

// A repository deleted while it is open takes its write-ahead log with
// it: what gitmem logs, and Close's error, say so, not that the changes
// git's files lack are "safe in the write-ahead log" and "recovered at
// the next start" (there is none). Both said so.
func TestDeletedRepositoryIsNotSaidSafe(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(gittest.TempDir(t), "memory")
	opt := testOptions(t)
	logged := captureLogs(t, &opt)
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "a.md", "one\n")
	removeWhileOpen(t, r, dir)
	err = r.Close()
	for _, l := range append(logged(), fmt.Sprint(err)) {
		if strings.Contains(l, "safe in the write-ahead log") || strings.Contains(l, "recovered at the next start") {
			t.Errorf("said of a deleted repository: %s", l)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "write-ahead log") || !strings.Contains(err.Error(), "deleted") {
		t.Errorf("Close of a deleted repository: %v, want an error saying the write-ahead log was deleted", err)
	}
}

// A gitmem killed while it holds a lock file (here .git/index.lock, as
// it writes .git/index) leaves it, as git does: the next start removes
// it, since it is provably the killed process's own (the lock is one file
// with a second name that names a process that no longer runs). A lock
// file of git's beside it (packed-refs.lock, no second name) stays, as
// does one whose second name names a process that runs.
func TestKilledGitmemsLockIsRemoved(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "a.md", "one\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	git := filepath.Join(dir, ".git")
	lock := func(path string, tag string) string { // what a gitmem with that ProcTag leaves
		own := fmt.Sprintf("%s.gitmem-%s-1.lock", path, tag)
		if err := os.WriteFile(own, []byte("DIRC"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(own, path+".lock"); err != nil {
			t.Fatal(err)
		}
		return own
	}
	deadTag := fmt.Sprintf("%d.0badf00d", dead.Process.Pid)
	killed := lock(filepath.Join(git, "index"), deadTag)
	killedMine := lock(filepath.Join(git, "gitmem", "redact"), deadTag) // in .git/gitmem
	running := lock(filepath.Join(git, "refs", "heads", "other"), gd.ProcTag)
	gits := filepath.Join(git, "packed-refs.lock")
	if err := os.WriteFile(gits, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err = Open(context.Background(), dir, testOptions(t)); err != nil {
		t.Fatal(err)
	}
	write(t, r, "t2", "b.md", "two\n")
	if err := r.Close(); err != nil { // writes .git/index
		t.Fatalf("Close with the killed gitmem's index.lock: %v", err)
	}
	for _, p := range []string{killed, filepath.Join(git, "index.lock"), killedMine, filepath.Join(git, "gitmem", "redact.lock")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
	for _, p := range []string{running, filepath.Join(git, "refs", "heads", "other.lock"), gits} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	os.Remove(running)
	os.Remove(filepath.Join(git, "refs", "heads", "other.lock"))
	os.Remove(gits)
	if out := gittest.Git(t, dir, "status", "--porcelain"); out != "" {
		t.Errorf("git status after Close: %q", out)
	}
}

// .git/gitmem/index-head is written over in place at each index gitmem
// writes: no new file and no lock file made (and freed) each time (issue
// 25: on a file system without a journal each inode made costs more the
// more were freed lately). It still names the commit of the last index,
// and a copy hard-linked elsewhere (a backup's) is left as it was.
func TestIndexHeadIsWrittenInPlace(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	ih := filepath.Join(dir, ".git", "gitmem", "index-head")
	names := func() string {
		data, err := os.ReadFile(ih)
		if err != nil {
			t.Fatal(err)
		}
		c, err := r.Commit(context.Background(), strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		return c.Trailer(TrailerToolUseID)
	}
	write(t, r, "toolu_1", "a.md", "one\n")
	settle(t, r)
	before, err := os.Stat(ih)
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "toolu_2", "a.md", "two\n")
	settle(t, r)
	after, err := os.Stat(ih)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Fatal("index-head was replaced by a new file, want it written in place")
	}
	if id := names(); id != "toolu_2" {
		t.Fatalf("index-head names the commit of %q, want toolu_2's", id)
	}
	backup := filepath.Join(t.TempDir(), "index-head")
	if err := os.Link(ih, backup); err != nil {
		t.Skip("no hard links here:", err)
	}
	was, _ := os.ReadFile(backup)
	write(t, r, "toolu_3", "a.md", "three\n")
	settle(t, r)
	if now, _ := os.ReadFile(backup); string(now) != string(was) {
		t.Fatal("a hard-linked copy of index-head was written over")
	}
	if id := names(); id != "toolu_3" {
		t.Fatalf("index-head names the commit of %q, want toolu_3's", id)
	}
}
