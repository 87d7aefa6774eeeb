package gitmem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// Opening a repository reads no worktree file whose lstat data
// .git/index vouches for, as git does; when the index does not (the
// folder was copied, or restored from a backup: every file has a new
// inode), the files are read once and the index is rewritten with what
// was found, so the next start reads none.
func TestOpenReadsNoUnchangedFile(t *testing.T) {
	t.Parallel()
	dir, files := copiedRepo(t)
	open := func() int64 {
		t.Helper()
		r, err := Open(context.Background(), dir, testOptions(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil { // a server's start looks after Open returned: Close waits for it
			t.Fatal(err)
		}
		return r.mirror.wt.reads.Load()
	}
	if n := open(); n < files {
		t.Fatalf("the first start after the copy read %d files, want all %d (the index's lstat data is not theirs)", n, files)
	}
	// git finds the index's lstat data matching every file.
	if out := gittest.Git(t, dir, "diff-files", "--name-only"); out != "" {
		t.Fatalf("git diff-files lists files whose lstat data the index lacks:\n%s", out)
	}
	if n := open(); n != 0 {
		t.Fatalf("the second start read %d files, want none", n)
	}
	if got := subjects(t, dir); strings.Contains(got, "adopt") {
		t.Fatalf("an unchanged file was adopted:\n%s", got)
	}
}

// copiedRepo is a closed repository of files memory files, each of which
// then got a new inode, its content unchanged (cp, a backup restored),
// and became older than the racy window: .git/index vouches for none.
func copiedRepo(t *testing.T) (dir string, files int64) {
	t.Helper()
	dir = gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	files = 20
	for i := range files {
		write(t, r, fmt.Sprintf("t%d", i), fmt.Sprintf("d%d/f%d.md", i%3, i), fmt.Sprintf("file %d\n", i))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range files {
		p := filepath.Join(dir, "memories", fmt.Sprintf("d%d/f%d.md", i%3, i))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p+".tmp", data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * gd.RacyWindow)
	return dir, files
}

// A hand edit that keeps the file's size and sets its mtime back
// (touch -d) is adopted at the next start; so is one whose lstat data
// the index holds exactly, when the racy rule says so: an entry not older
// than the index itself may have been edited in the tick it was looked
// at, and is read again.
func TestHandEditWithTheSameSizeAndMtimeIsAdopted(t *testing.T) {
	t.Parallel()
	for _, forged := range []bool{false, true} {
		t.Run(fmt.Sprintf("forged=%v", forged), func(t *testing.T) {
			dir := closedRepo(t)
			p := filepath.Join(dir, "memories", "a.md")
			was, err := os.Lstat(p)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * gd.RacyWindow)
			if err := os.WriteFile(p, []byte("two\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			stamp := was.ModTime().Format("2006-01-02 15:04:05.000000000 -0700")
			if out, err := exec.Command("touch", "-m", "-d", stamp, p).CombinedOutput(); err != nil {
				t.Fatalf("touch: %v: %s", err, out)
			}
			if forged {
				// The index pairs the edited file's lstat data with the
				// old blob (written in the tick of the edit), and is no
				// newer than the file: racy.
				entries, _, err := gd.ReadIndex(filepath.Join(dir, ".git"))
				if err != nil {
					t.Fatal(err)
				}
				fi, err := os.Lstat(p)
				if err != nil {
					t.Fatal(err)
				}
				for i := range entries {
					if entries[i].Path == "memories/a.md" {
						entries[i].Stat = gd.StatOf(fi)
					}
				}
				if err := gd.WriteIndex(context.Background(), nil, filepath.Join(dir, ".git"), entries); err != nil {
					t.Fatal(err)
				}
				if out, err := exec.Command("touch", "-m", "-d", stamp, filepath.Join(dir, ".git", "index")).CombinedOutput(); err != nil {
					t.Fatalf("touch: %v: %s", err, out)
				}
			}
			r, err := Open(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if head, _ := r.Commit(context.Background(), "HEAD"); head.Subject != "memory: adopt changes made outside gitmem" || read(t, r, "a.md") != "two\n" {
				t.Fatalf("HEAD %q, a.md %q: the edit was not adopted", head.Subject, read(t, r, "a.md"))
			}
		})
	}
}

// Close does not wait for the background read of the history's tool_use
// ids that every start begins (about 130 ms at 100,000 commits, with the
// writer lock held): the read gives up, and the next process reads them.
func TestCloseStopsTheIDsRead(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	for i := range 2 * idsStopEvery {
		write(t, r, fmt.Sprintf("t%d", i), "a.md", fmt.Sprintf("v%d\n", i))
	}
	settle(t, r)
	head := r.snapshotHead()
	r.histIndex.stopBuild() // what Close does first
	r.toolIDs.forgetFile(false)
	if ok, err := r.readIDs(head, true); !errors.Is(err, ErrClosed) {
		t.Fatalf("readIDs after Close began: %v, %v; want ErrClosed", ok, err)
	}
}

// Reverting a recent call reads the history index from its end back to
// that call (the renames after it), not the whole index: a fresh process
// reverting one call does not load 100,000 records.
func TestRevertReadsTheHistoryFromItsEnd(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		write(t, r, fmt.Sprintf("t%d", i), fmt.Sprintf("f%d.md", i), "one\n")
	}
	write(t, r, "t5", "a.md", "two\n")
	tx := func(tx *Tx) error { return tx.Rename("a.md", "b.md") }
	if _, err := r.Update(context.Background(), Meta{Subject: "mv", Trailers: []Trailer{{TrailerToolUseID, "t6"}, {TrailerCommand, "rename"}, {TrailerPath, "/memories/a.md"}, {TrailerNewPath, "/memories/b.md"}}}, tx); err != nil {
		t.Fatal(err)
	}
	write(t, r, "t7", "f1.md", "more\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, _, err := r.Revert(context.Background(), []string{"t5"}, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	if r.histIndex.isLoaded() {
		t.Fatal("revert loaded the whole history index")
	}
	v, err := r.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Stat("b.md"); err == nil {
		t.Fatal("b.md (a.md, created by the reverted call, renamed since) is still there")
	}
}

// A full hash names its commit, as in git, without reading the whole
// history index for a tool_use id of the same text: even a call whose id
// is that text (no client makes one) does not take its place.
func TestResolveOfAFullHashIsThatCommit(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	first := write(t, r, "t1", "a.md", "one\n")
	write(t, r, first.Hash, "b.md", "two\n")
	c, err := r.Resolve(context.Background(), first.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if c.Hash != first.Hash || len(c.Paths) != 1 || c.Paths[0] != "a.md" {
		t.Fatalf("Resolve(%s) = %s %v, want the commit itself and its path", first.Hash[:7], c.Hash[:7], c.Paths)
	}
}

// A repository opened for one command does not read the history's
// tool_use ids ahead, and still recognises a retried call.
func TestOneCommandStillRecognisesARetry(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	c := write(t, r, "t1", "a.md", "one\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	opt := testOptions(t)
	opt.OneCommand = true
	r, err = Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Update(context.Background(), Meta{Subject: "w a.md", Trailers: []Trailer{{TrailerToolUseID, "t1"}}}, func(tx *Tx) error {
		return tx.WriteFile("a.md", []byte("two\n"))
	})
	var applied *AppliedError
	if !errors.As(err, &applied) || applied.Commit.Hash != c.Hash {
		t.Fatalf("a retry of t1: %v, want it recognised as %s", err, c.Hash[:7])
	}
}

// HEAD, a full hash or an abbreviated one with ~N and ^N steps resolves
// to what git's rev-parse says, read with gitmem's own object reader.
func TestResolveAncestorsAsGit(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	var last Commit
	for i := range 4 {
		last = write(t, r, fmt.Sprintf("t%d", i), "a.md", fmt.Sprintf("v%d\n", i))
	}
	settle(t, r)
	for _, base := range []string{last.Hash, last.Hash[:7], "HEAD", "@"} {
		suffixes := []string{"~0", "~1", "~3", "^", "^0", "^1", "~1^", "^^~1", "~2^0"}
		if base == "HEAD" || base == "@" {
			suffixes = append(suffixes, "") // show HEAD: not go-git's whole pack index
		}
		for _, suffix := range suffixes {
			want := gittest.Git(t, dir, "rev-parse", base+suffix)
			r.objects.lock()
			h, ok := r.hist().resolveAncestor(base + suffix)
			r.objects.unlock()
			if !ok || h.String() != strings.TrimSpace(want) {
				t.Errorf("%s%s: %s %v, git says %s", base, suffix, h, ok, want)
			}
		}
	}
	for _, bad := range []string{"~9", "^2", "~x", ":a.md", "~99999999"} {
		r.objects.lock()
		_, ok := r.hist().resolveAncestor(last.Hash + bad)
		r.objects.unlock()
		if ok {
			t.Errorf("%s resolved", bad)
		}
	}
	// HEAD taken off the branch by hand names what git says it names:
	// left to go-git, which reads HEAD itself. The writer turn held, the
	// maintainer cannot put HEAD back meanwhile.
	turn, err := r.beginWrite(r.life, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer turn.end()
	gittest.Git(t, dir, "checkout", "-q", "--detach", "HEAD~2")
	for _, rev := range []string{"HEAD", "@", "HEAD~1"} {
		r.objects.lock()
		h, ok := r.hist().resolveAncestor(rev)
		r.objects.unlock()
		if ok {
			t.Errorf("%s with HEAD detached: %s from gitmem's branch", rev, h)
		}
	}
}

// What go-git's ResolveRevision skips (a reflog's @{1}, a path after a
// colon, ^{type}) names nothing: it resolved to the commit before it, and
// gitmem revert HEAD@{1} reverted HEAD. A full hash of no commit is an
// unknown revision, not a failed read. Ref names with steps still resolve
// as git's rev-parse.
func TestResolveRefusesWhatGitWouldNotResolveSo(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	var last Commit
	for i := range 3 {
		last = write(t, r, fmt.Sprintf("t%d", i), "a.md", fmt.Sprintf("v%d\n", i))
	}
	settle(t, r)
	blob := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD:memories/a.md"))
	for _, rev := range []string{"HEAD@{1}", "main@{1}", "HEAD:", last.Hash + ":memories/a.md", last.Hash + "~1:foo",
		last.Hash + "^{tree}", "HEAD^{commit}", "main~1:a.md", strings.Repeat("0", 40), strings.Repeat("0", 40) + "~1", blob, "HEAD..main", "~1"} {
		if c, err := r.Resolve(context.Background(), rev); !errors.Is(err, ErrUnknownRev) {
			t.Errorf("Resolve(%q) = %s, %v; want ErrUnknownRev", rev, c.Hash, err)
		}
	}
	for _, rev := range []string{"main", "main~1", "HEAD^^", "refs/heads/main~2", "@", "@~1"} {
		want := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", rev))
		if c, err := r.Resolve(context.Background(), rev); err != nil || c.Hash != want {
			t.Errorf("Resolve(%q) = %s, %v; git says %s", rev, c.Hash, err, want)
		}
	}
}

// An abbreviated hash names the one commit that begins with it, as git
// rev-parse says, read from gitmem's own pack indexes and loose objects;
// it is preferred to a ref of that name, as go-git (what resolved it
// before) does.
func TestResolveShortHashAsGit(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	var commits []Commit
	for i := range 6 {
		commits = append(commits, write(t, r, fmt.Sprintf("t%d", i), "a.md", fmt.Sprintf("v%d\n", i)))
	}
	settle(t, r)
	gittest.Git(t, dir, "-c", "gc.auto=0", "repack", "-q") // some in a pack git wrote, as after git gc
	commits = append(commits, write(t, r, "t6", "b.md", "b\n"))
	settle(t, r)
	for _, c := range commits {
		for _, n := range []int{7, 5, 12} {
			want := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", c.Hash[:n]))
			r.objects.lock()
			h, ok := r.hist().expandCommit(c.Hash[:n])
			r.objects.unlock()
			if !ok || h.String() != want {
				t.Errorf("%s: %s %v, git says %s", c.Hash[:n], h, ok, want)
			}
		}
	}
	r.objects.lock()
	_, ok := r.hist().expandCommit("0000000")
	r.objects.unlock()
	if ok {
		t.Error("0000000 resolved")
	}
	short := commits[1].Hash[:7]
	gittest.Git(t, dir, "update-ref", "refs/heads/"+short, commits[3].Hash)
	if h, err := r.hist().resolve(short); err != nil || h.String() != commits[1].Hash {
		t.Fatalf("%s: %s %v, want the commit %s", short, h, err, commits[1].Hash[:7])
	}
}

// A file made by hand over the largest file size (issue 21 N4: 2 GB of
// zeros in memories/) is never read, never committed, and logged once
// at the error level; the hand edits beside it are adopted as usual. A
// view does not show it: it is in no commit.
func TestHandMadeFileOverTheLimitIsNotRead(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	opt.MaxFileBytes = 1000
	logs := captureErrorLogs(t, &opt)
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	write(t, r, "t1", "grown.md", "small\n")
	write(t, r, "t2", "ok.md", "one\n")
	settle(t, r)
	big := strings.Repeat("x", 4000)
	for p, data := range map[string]string{"big.md": big, "grown.md": big, "ok.md": "one\ntwo by hand\n"} {
		if err := os.WriteFile(filepath.Join(dir, "memories", p), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := r.mirror.wt.readBytes.Load()
	if _, err := r.Adopt(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := r.mirror.wt.readBytes.Load() - before; n >= int64(len(big)) {
		t.Fatalf("the adopt read %d bytes: a file over the limit (%d bytes) was read", n, len(big))
	}
	if _, err := r.Adopt(context.Background()); !errors.Is(err, ErrNoChange) {
		t.Fatalf("second adopt: %v, want ErrNoChange", err)
	}
	if got := read(t, r, "ok.md"); got != "one\ntwo by hand\n" {
		t.Fatalf("ok.md = %q: the hand edit beside the big files was not adopted", got)
	}
	if got := read(t, r, "grown.md"); got != "small\n" {
		t.Fatalf("grown.md = %d bytes in HEAD, want HEAD's %q", len(got), "small\n")
	}
	if out := gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD"); strings.Contains(out, "big.md") {
		t.Fatalf("big.md was committed:\n%s", out)
	}
	v, err := r.Snapshot(context.Background(), "big.md")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Stat("big.md"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("a view of big.md: %v, want ErrNotExist", err)
	}
	for _, p := range []string{"memories/big.md", "memories/grown.md"} {
		n := 0
		for _, l := range logs() {
			if strings.HasPrefix(l, "ERROR gitmem: "+p+" is 4,000 bytes, over the limit of 1,000 bytes per file") && !strings.Contains(l, dir) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%s logged at the error level %d times, want once:\n%s", p, n, strings.Join(logs(), "\n"))
		}
	}
	if got := readDisk(t, dir, "big.md"); got != big {
		t.Fatalf("big.md on disk changed: %d bytes", len(got))
	}
	// A change of the model's to such a path is committed; the file on
	// disk is kept as a hand edit, and not read to tell it from gitmem's
	// own versions: none is that long.
	before = r.mirror.wt.readBytes.Load()
	write(t, r, "t3", "grown.md", "model\n")
	write(t, r, "t4", "big.md", "model big\n")
	settle(t, r)
	if n := r.mirror.wt.readBytes.Load() - before; n >= int64(len(big)) {
		t.Fatalf("the model's changes read %d bytes: a file over the limit (%d bytes) was read", n, len(big))
	}
	if read(t, r, "grown.md") != "model\n" || read(t, r, "big.md") != "model big\n" || readDisk(t, dir, "grown.md") != big || readDisk(t, dir, "big.md") != big {
		t.Fatalf("HEAD grown.md %q, big.md %q; on disk %d and %d bytes", read(t, r, "grown.md"), read(t, r, "big.md"), len(readDisk(t, dir, "grown.md")), len(readDisk(t, dir, "big.md")))
	}
	// A file that grows past the limit between the adopt's lstat and its
	// read is not read either: the size is checked on the descriptor.
	before = r.mirror.wt.readBytes.Load()
	var tb *tooBigError
	if _, _, err := r.mirror.wt.readSettled("memories/big.md", opt.MaxFileBytes); !errors.As(err, &tb) || tb.size != 4000 {
		t.Fatalf("readSettled of a file over its bound: %v", err)
	}
	if n := r.mirror.wt.readBytes.Load() - before; n != 0 {
		t.Fatalf("readSettled read %d bytes of a file over its bound", n)
	}
}

// A revision that is not a full hash (restore --to HASH~1) is first
// looked for as a tool_use id through the whole history index: that look
// costs the file's read and a check of each record's links, not a parse
// of each record (allocations per record): only a part of the file that
// holds the text is looked at line by line. And the links are compared
// with the one commit expected as text, on a line of descent without
// merges: no hash decoded, no map changed per record (a third of a
// restore --to HASH~1's CPU at 100,000 commits).
func TestResolveOfARevisionParsesNoRecordItCannotMatch(t *testing.T) { // not parallel: AllocsPerRun
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	const n = 400
	for i := range n {
		write(t, r, fmt.Sprintf("toolu_%03d", i), fmt.Sprintf("f%d.md", i%7), fmt.Sprint(i))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(context.Background(), dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	want := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD~1"))
	var got Commit
	decoded := ro.histIndex.linksDecoded.Load()
	allocs := testing.AllocsPerRun(3, func() {
		if got, err = ro.Resolve(context.Background(), "HEAD~1"); err != nil {
			t.Fatal(err)
		}
	})
	if got.Hash != want {
		t.Fatalf("HEAD~1 resolved to %s, git says %s", got.Hash, want)
	}
	if ro.histIndex.isLoaded() {
		t.Fatal("the whole history index was loaded")
	}
	if allocs > n {
		t.Fatalf("Resolve(HEAD~1) over %d records made %.0f allocations: records are parsed one by one", n, allocs)
	}
	if d := ro.histIndex.linksDecoded.Load() - decoded; d > 4*2 { // 4 runs, a look for the id and one for the commit
		t.Fatalf("4 Resolve(HEAD~1) over %d records decoded the links of %d", n, d)
	}
}

// A tool_use id is looked for from the newest record back: the record
// found says whether an older one has the id too (its twin flag), so a
// fresh process reads the index only back to the call's record, not the
// rest of it for a second commit of the id (show of a recent call read
// all 32 MB at 100,000 commits, twice the CPU of a show by hash). A
// commit of the id made by hand (copied by git) is still found, and the
// id refused as naming two.
func TestResolveOfAnIDReadsTheIndexBackToItsRecordOnly(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	calls := make([]Commit, n)
	for i := range n {
		calls[i] = write(t, r, fmt.Sprintf("toolu_%03d", i), fmt.Sprintf("f%d.md", i%7), fmt.Sprint(i))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		fi, err := os.Stat(filepath.Join(dir, ".git", "gitmem", "history"))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	look := func(id string) (Commit, int64, error) {
		t.Helper()
		ro, err := Open(context.Background(), dir, Options{ReadOnly: true, hooks: &testHooks{tailChunk: 512}})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		reads := ro.histIndex.reads.Load()
		c, err := ro.Resolve(context.Background(), id)
		if ro.histIndex.isLoaded() {
			t.Fatalf("Resolve(%s) loaded the whole history index", id)
		}
		if n := ro.histIndex.reads.Load() - reads; n != 1 {
			t.Fatalf("Resolve(%s) read the history index %d times: the record found has the commit's files", id, n)
		}
		return c, ro.histIndex.tailBytes.Load(), err
	}
	// log --tool-use-id: the commits of the id, and the bytes read.
	logID := func(id string) ([]string, int64) {
		t.Helper()
		ro, err := Open(context.Background(), dir, Options{ReadOnly: true, hooks: &testHooks{tailChunk: 512}})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		var hashes []string
		if err := ro.Log(context.Background(), LogOptions{ToolUseID: id}, nil, func(c Commit) error {
			hashes = append(hashes, c.Hash)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return hashes, ro.histIndex.tailBytes.Load()
	}
	c, read, err := look("toolu_290")
	if err != nil || c.Hash != calls[290].Hash || len(c.Paths) != 1 {
		t.Fatalf("toolu_290 resolved to %s %v, %v; want %s", c.Hash, c.Paths, err, calls[290].Hash)
	}
	if all := size(); read > all/4 {
		t.Fatalf("Resolve of the 10th newest call's id read %d bytes of the %d-byte history index", read, all)
	}
	if hashes, read := logID("toolu_290"); len(hashes) != 1 || hashes[0] != calls[290].Hash || read > size()/4 {
		t.Fatalf("log of toolu_290: %.7s, having read %d bytes of the %d-byte history index", hashes, read, size())
	}
	// The call of toolu_005 copied by hand: two commits of the id.
	msg := gittest.Git(t, dir, "log", "-1", "--format=%B", calls[5].Hash)
	gittest.Git(t, dir, "commit", "--allow-empty", "-q", "-m", msg)
	r, err = Open(context.Background(), dir, testOptions(t)) // records the commit
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "toolu_after", "g.md", "after\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	_, read, err = look("toolu_005")
	if ae := (*AmbiguousError)(nil); !errors.As(err, &ae) || ae.AsRev != calls[5].Hash {
		t.Fatalf("toolu_005, of two commits: %v", err)
	}
	if all := size(); read < all/2 {
		t.Fatalf("Resolve of an id of two commits read %d bytes of the %d-byte history index: not back to the older", read, all)
	}
	if hashes, _ := logID("toolu_005"); len(hashes) != 2 || hashes[1] != calls[5].Hash {
		t.Fatalf("log of toolu_005, of two commits: %.7s", hashes)
	}
}

// A version 5 history index (no twin flags) is read, its flags worked
// out, and written anew as version 6 with the same records: not rebuilt
// from git. An id of two commits in it is still refused, before and
// after.
func TestVersion5HistoryIndexIsWrittenAnewWithTwinFlags(t *testing.T) {
	t.Parallel()
	dir, first, p, v6 := twinIndex(t)
	// As version 5 wrote it: the header, and no flag at each line's end.
	header, rest, _ := strings.Cut(string(v6), "\n")
	if header != historyHeader {
		t.Fatalf("header %q", header)
	}
	lines := strings.SplitAfter(rest, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = l[:strings.LastIndexByte(l[:len(l)-1], '\t')] + "\n"
		}
	}
	v5 := historyHeaderV5 + "\n" + strings.Join(lines, "")
	if err := os.WriteFile(p, []byte(v5), 0o600); err != nil {
		t.Fatal(err)
	}
	var recorded atomic.Int32
	ro, err := Open(context.Background(), dir, Options{ReadOnly: true, hooks: &testHooks{catchUp: func() { recorded.Add(1) }}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ro.Resolve(context.Background(), "toolu_1")
	if ae := (*AmbiguousError)(nil); !errors.As(err, &ae) || ae.AsRev != first.Hash {
		t.Fatalf("toolu_1 in a version 5 index: %v", err)
	}
	if c, err := ro.Resolve(context.Background(), "toolu_3"); err != nil || len(c.Paths) != 1 || c.Paths[0] != "c.md" {
		t.Fatalf("toolu_3 in a version 5 index: %v %v", c.Paths, err)
	}
	ro.Close()
	if n := recorded.Load(); n != 0 {
		t.Fatalf("a version 5 index was caught up from git %d times", n)
	}
	if got, err := os.ReadFile(p); err != nil || string(got) != string(v6) {
		t.Fatalf("the version 5 index was written anew as\n%s\nwant\n%s", got, v6)
	}
}

// A commit named by its full hash, alone or with ancestry steps, is read
// from git alone when its files are not wanted (ResolveCommit, what
// diff resolves its two revisions with): the history index is not read
// for its record. Resolve in its place read it once per name, and a diff
// of two hashes 50,000 commits apart searched half of it for the older.
func TestResolveCommitReadsNoHistoryIndex(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	var calls []Commit
	for i := range 5 {
		calls = append(calls, write(t, r, fmt.Sprintf("toolu_%d", i), "a.md", fmt.Sprint(i)))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(context.Background(), dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for _, rev := range []string{calls[0].Hash, calls[3].Hash + "~2", calls[4].Hash + "^"} {
		want := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", rev))
		reads := ro.histIndex.reads.Load()
		c, err := ro.ResolveCommit(context.Background(), rev)
		if err != nil || c.Hash != want {
			t.Fatalf("ResolveCommit(%s) = %s, %v; git says %s", rev, c.Hash, err, want)
		}
		if n := ro.histIndex.reads.Load() - reads; n != 0 {
			t.Errorf("ResolveCommit(%s) read the history index %d times", rev, n)
		}
		reads = ro.histIndex.reads.Load()
		if c, err := ro.Resolve(context.Background(), rev); err != nil || c.Hash != want || len(c.Paths) != 1 {
			t.Fatalf("Resolve(%s) = %s %v, %v; git says %s", rev, c.Hash, c.Paths, err, want)
		}
		if ro.histIndex.reads.Load() == reads {
			t.Fatalf("Resolve(%s) read no history index for the commit's files: not a test of the reads", rev)
		}
	}
	// Any other name is looked for as a tool_use id first, as Resolve does.
	if c, err := ro.ResolveCommit(context.Background(), "toolu_2"); err != nil || c.Hash != calls[2].Hash {
		t.Fatalf("ResolveCommit(toolu_2) = %s, %v; want %s", c.Hash, err, calls[2].Hash)
	}
}

// A tool_use id is any text: one that reads as a revision (HEAD~1, an
// abbreviated hash with ^) is found as its call's wherever its record is
// in the index and however the reader's chunks cut it, and, naming
// another commit as a revision, is refused as naming two. A full hash
// with ancestry steps after it (HASH~1) is the revision, as in git: it is
// not looked for as an id (a look reads the whole history index).
func TestToolUseIDThatReadsAsARevisionIsFoundAndAmbiguous(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	first := write(t, r, "toolu_first", "a.md", "a\n")
	ids := map[string]Commit{}
	for i := range 120 {
		id := fmt.Sprintf("toolu_%03d", i)
		switch i {
		case 3:
			id = "HEAD~1"
		case 60:
			id = first.Hash + "~1"
		case 110:
			id = first.Hash[:7] + "^"
		}
		ids[id] = write(t, r, id, fmt.Sprintf("f%d.md", i%5), fmt.Sprint(i))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for _, chunk := range []int{0, 64, 333} {
		ro, err := Open(context.Background(), dir, Options{ReadOnly: true, hooks: &testHooks{tailChunk: chunk}})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"toolu_000", "toolu_119"} {
			c, err := ro.Resolve(context.Background(), id)
			if err != nil || c.Hash != ids[id].Hash {
				t.Errorf("chunk %d: %s resolved to %s %v, want its call's commit %s", chunk, id, c.Hash, err, ids[id].Hash)
			}
		}
		for _, id := range []string{"HEAD~1", first.Hash[:7] + "^"} {
			want := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", id))
			_, err := ro.Resolve(context.Background(), id)
			if ae := (*AmbiguousError)(nil); !errors.As(err, &ae) || ae.ByID != ids[id].Hash || ae.AsRev != want {
				t.Errorf("chunk %d: %s resolved: %v; want the call's commit %.7s and the revision %.7s", chunk, id, err, ids[id].Hash, want)
			}
		}
		for _, rev := range []string{"HEAD~2", first.Hash + "~1", ids["toolu_100"].Hash + "~2^1", ids["toolu_100"].Hash + "^^"} {
			want := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", rev))
			if c, err := ro.Resolve(context.Background(), rev); err != nil || c.Hash != want {
				t.Errorf("chunk %d: %s resolved to %s %v, git says %s", chunk, rev, c.Hash, err, want)
			}
		}
		ro.Close()
	}
}

// A repository opened for one command does not write .git/index at
// start for what the start read (a file copied): the command's Close
// writes it once, with the same lstat data, so the next start reads no
// file.
func TestOneCommandWritesTheIndexOnceAtClose(t *testing.T) {
	t.Parallel()
	dir := closedRepo(t)
	p := filepath.Join(dir, "memories", "a.md") // a new inode, the same content: read at start
	if err := os.WriteFile(p+".tmp", []byte("one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * gd.RacyWindow)
	index := filepath.Join(dir, ".git", "index")
	before, err := os.Stat(index)
	if err != nil {
		t.Fatal(err)
	}
	opt := testOptions(t)
	opt.OneCommand = true
	r, err := Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.mirror.wt.reads.Load(); n == 0 {
		t.Fatal("the start read no file, want the copied one read")
	}
	if now, err := os.Stat(index); err != nil || !os.SameFile(before, now) {
		t.Fatalf(".git/index was written at the start of one command (%v)", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if out := gittest.Git(t, dir, "diff-files", "--name-only"); out != "" {
		t.Fatalf("git diff-files lists files whose lstat data the index lacks:\n%s", out)
	}
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n := r.mirror.wt.reads.Load(); n != 0 {
		t.Fatalf("the next start read %d files, want none", n)
	}
}

// Close keeps the write-ahead log's files, emptied by its checkpoint (as
// letting the lease go when idle does), and the next start opens them
// again: it does not make two new files, with two fsyncs of each file
// and of their folder, at every start of a command that writes.
func TestTheNextStartOpensTheLogCloseKept(t *testing.T) {
	t.Parallel()
	dir := closedRepo(t)
	logs := map[string]os.FileInfo{}
	for _, name := range []string{"wal", "wal2"} {
		fi, err := os.Stat(filepath.Join(dir, ".git", "gitmem", name))
		if err != nil {
			t.Fatalf("after Close: %v", err)
		}
		logs[name] = fi
	}
	opt := testOptions(t)
	opt.OneCommand = true
	r, err := Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t2", "a.md", "two\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for name, was := range logs {
		fi, err := os.Stat(filepath.Join(dir, ".git", "gitmem", name))
		if err != nil || !os.SameFile(was, fi) {
			t.Fatalf(".git/gitmem/%s was made anew by the next start (%v)", name, err)
		}
	}
	if n := walRecords(t, dir); n != 0 {
		t.Fatalf("the log holds %d records after Close, want none (a checkpoint emptied it)", n)
	}
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := read(t, r, "a.md"); got != "two\n" {
		t.Fatalf("a.md = %q after a restart", got)
	}
}

// containsText says what bytes.Contains says, whichever byte of the
// text it searches from: texts and lines of a small alphabet (hex, ~, ^,
// a tab, a multibyte letter), matches at the start, the end, overlapping
// and cut.
func TestContainsTextIsContains(t *testing.T) {
	t.Parallel()
	alphabet := []string{"a", "b", "0", "~", "^", "\t", "é", "1"}
	rng := rand.New(rand.NewPCG(5, 6))
	word := func(n int) []byte {
		var b []byte
		for range n {
			b = append(b, alphabet[rng.IntN(len(alphabet))]...)
		}
		return b
	}
	for range 20000 {
		s, text := word(rng.IntN(40)), word(1+rng.IntN(5))
		if got, want := containsText(s, text), bytes.Contains(s, text); got != want {
			t.Fatalf("containsText(%q, %q) = %v, bytes.Contains says %v", s, text, got, want)
		}
	}
}

// The files of one path at a commit (restore --to REV -- PATH) are read
// from the folders on the way to it alone, not from every folder of the
// memory: at 10,000 files in 100 folders, 101 trees read for one.
func TestFilesOfOnePathReadItsFoldersAlone(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Update(context.Background(), Meta{Subject: "seed"}, func(tx *Tx) error {
		for i := range 40 {
			if err := tx.WriteFile(fmt.Sprintf("d%02d/sub/f%d.md", i, i), []byte(fmt.Sprint(i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		paths []string
		want  string
	}{
		{[]string{"d07/sub/f7.md"}, "d07/sub/f7.md"},
		{[]string{"d07"}, "d07/sub/f7.md"},
		{[]string{"d07/sub/f7.md", "d31/sub"}, "d07/sub/f7.md d31/sub/f31.md"},
		{[]string{"d0"}, ""},
		{[]string{"d07/sub/f7.md/x"}, ""},
	} {
		ro, err := Open(context.Background(), dir, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		before := ro.objects.st.Decoded()
		files, err := ro.Files(c.Hash, tc.paths...)
		read := ro.objects.st.Decoded() - before
		ro.Close()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for p := range files {
			got = append(got, p)
		}
		slices.Sort(got)
		if strings.Join(got, " ") != tc.want {
			t.Errorf("Files(%q) = %q, want %q", tc.paths, got, tc.want)
		}
		if read > 10 {
			t.Errorf("Files(%q) read %d objects, of a tree of 40 folders", tc.paths, read)
		}
	}
}

// Open does not read the git configuration for the operator's identity,
// which only a commit of the operator's needs (two config files and a
// go-git open of the repository): not for a reader (log, show, diff,
// blame: half a millisecond of a 9 ms log), nor for a writer (a store's
// first call, which commits nothing of the operator's, paid 59 µs for
// it). Operator reads it at the first call: a user.name set after Open
// is the one it gives.
func TestOpenReadsTheOperatorsIdentityWhenAsked(t *testing.T) {
	t.Parallel()
	for _, readOnly := range []bool{true, false} {
		dir := closedRepo(t)
		r, err := Open(context.Background(), dir, Options{ReadOnly: readOnly})
		if err != nil {
			t.Fatal(err)
		}
		gittest.Git(t, dir, "config", "user.name", "Olive Operator")
		gittest.Git(t, dir, "config", "user.email", "olive@example.com")
		if got := r.Operator(); got != (Signature{"Olive Operator", "olive@example.com"}) {
			t.Errorf("read-only %v: Operator() = %v, want the repository's user as the config says after Open", readOnly, got)
		}
		gittest.Git(t, dir, "config", "user.name", "Later Name")
		if got := r.Operator(); got.Name != "Olive Operator" {
			t.Errorf("read-only %v: Operator() read the configuration again: %v", readOnly, got)
		}
		r.Close()
	}
}

// Opening a repository whose memory is empty (a store no call has
// written to yet) and closing it again writes nothing to .git/index:
// the index holding no entries is HEAD's empty tree, as one holding
// entries is taken for HEAD's tree when it matches.
func TestOpenOfAnEmptyMemoryWritesNoIndex(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		opt := testOptions(t)
		var writes atomic.Int32
		opt.hooks.env.SetFault(func(step, _ string) error {
			if step == gd.StepIndex {
				writes.Add(1)
			}
			return nil
		})
		r, err := Open(context.Background(), dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if n := writes.Load(); n != 0 {
			t.Fatalf("an open and close of an empty memory wrote .git/index %d times, want none", n)
		}
	}
	if out := gittest.Git(t, dir, "status", "--porcelain"); out != "" {
		t.Fatalf("git status:\n%s", out)
	}
}

// walRecords counts the records the write-ahead log holds (a crash left
// them for the next start to replay).
func walRecords(t *testing.T, dir string) int {
	n := 0
	for _, name := range []string{"wal", "wal2"} {
		if _, err := os.Stat(filepath.Join(dir, ".git", "gitmem", name)); err != nil {
			continue
		}
		w, recs, err := gd.OpenWAL(nil, filepath.Join(dir, ".git"), name)
		if err != nil {
			t.Fatalf("read the log: %v", err)
		}
		w.Close()
		n += len(recs)
	}
	return n
}

// A caller chooses its tool_use ids: an id that is also a revision of
// another commit (a short hash `gitmem log` printed, HEAD, the branch)
// is refused as naming two commits, for show and revert alike, never
// taken for the call's commit. An id that names the same commit both
// ways, or no revision at all, is the call's. Before, the id won: `show
// HEAD` showed the call whose id was HEAD, and a revert of a short hash
// would have undone another commit.
func TestResolveRefusesAnIdThatIsAnotherCommitsRevision(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	first := write(t, r, "toolu_a", "a.md", "a\n")
	short := first.Hash[:7]
	byShort := write(t, r, short, "b.md", "b\n")
	byHEAD := write(t, r, "HEAD", "c.md", "c\n")
	byMain := write(t, r, "main", "d.md", "d\n")
	last := write(t, r, "HEAD~3", "e.md", "e\n") // as a revision: byShort
	settle(t, r)
	for _, tc := range []struct{ name, byID, asRev string }{
		{short, byShort.Hash, first.Hash},
		{"HEAD", byHEAD.Hash, last.Hash},
		{"main", byMain.Hash, last.Hash},
		{"HEAD~3", last.Hash, byShort.Hash},
	} {
		_, err := r.Resolve(context.Background(), tc.name)
		var ae *AmbiguousError
		if !errors.As(err, &ae) || ae.ByID != tc.byID || ae.AsRev != tc.asRev {
			t.Errorf("Resolve(%q) = %v; want it to name %.7s by id and %.7s as a revision", tc.name, err, tc.byID, tc.asRev)
			continue
		}
		if want := fmt.Sprintf("%q names two commits: the tool_use id of %s and the revision %s; name the one meant by its hash", tc.name, tc.byID[:12], tc.asRev[:12]); err.Error() != want {
			t.Errorf("Resolve(%q): %q, want %q", tc.name, err, want)
		}
		if _, _, err := r.Revert(context.Background(), []string{tc.name}, RevertOptions{}); !errors.As(err, &ae) {
			t.Errorf("Revert(%q) = %v; want it refused as naming two commits", tc.name, err)
		}
	}
	if c, err := r.Resolve(context.Background(), "toolu_a"); err != nil || c.Hash != first.Hash {
		t.Errorf("Resolve(toolu_a) = %s, %v; want %s", c.Hash, err, first.Hash)
	}
	if got := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD")); got != last.Hash {
		t.Fatalf("HEAD moved to %s: a refused revert committed", got)
	}
}

// A twin flag cleared by hand (or by a torn write that still parses) is
// damage, as a lost record is: a look for the id would stop at one of its
// two commits and act on it. fsck names it, its repair rebuilds the
// index, and the id names two commits again.
func TestAClearedTwinFlagIsDamage(t *testing.T) {
	t.Parallel()
	dir, _, p, data := twinIndex(t)
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), "\t1\n", "\t\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := Fsck(context.Background(), dir, testOptions(t), false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Problems, func(p Problem) bool { return strings.Contains(p.What, "history index") }) {
		t.Fatalf("fsck of an index whose twin flag was cleared: %+v, want the history index named damaged", rep.Problems)
	}
	if _, err := Fsck(context.Background(), dir, testOptions(t), true); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(context.Background(), dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.Resolve(context.Background(), "toolu_1"); !errors.As(err, new(*AmbiguousError)) {
		t.Fatalf("toolu_1 after fsck --repair: %v, want it to name two commits", err)
	}
}

// twinIndex makes a memory whose history index holds one id of two
// commits (toolu_1's commit copied by hand with git, then toolu_2 and
// toolu_3), and returns its folder, toolu_1's first commit, the index
// file's path and its content (one record flagged as a twin).
func twinIndex(t *testing.T) (dir string, first Commit, path string, data []byte) {
	t.Helper()
	dir = gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	first = write(t, r, "toolu_1", "a.md", "one\n")
	write(t, r, "toolu_2", "b.md", "two\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, dir, "commit", "--allow-empty", "-q", "-m", gittest.Git(t, dir, "log", "-1", "--format=%B", first.Hash))
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "toolu_3", "c.md", "three\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, ".git", "gitmem", "history")
	if data, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\t1\n"); n != 1 {
		t.Fatalf("%d records flagged as twins, want 1:\n%s", n, data)
	}
	return dir, first, path, data
}

// TestHandMadeFilesPastTheFileLimitAreLeft: files made by hand in
// memories/ past the most files the memory may hold (100,000 made in a
// store of serve --stores, --max-files 10,000: every one was read and
// committed, and the store's start took over 50 s) are taken only while
// the memory has room, in path order, after the hand edits that make
// room. The others are neither read nor committed: they stay on disk as
// they are, a view says they do not exist, the error log says so once,
// with the limit and no host path, and they are taken once the memory
// has room. Nothing acknowledged is lost.
func TestHandMadeFilesPastTheFileLimitAreLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	opt.MaxFiles = 4
	logs := captureErrorLogs(t, &opt)
	r, _, err := Init(ctx, dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "a.md", "a\n")
	write(t, r, "t2", "b.md", "b\n")
	write(t, r, "t3", "c.md", "c\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// While gitmem is stopped: a.md edited, b.md deleted, eight files
	// made: the two the memory has room for are small, the others
	// 100,000 bytes each.
	made := func(i int) string {
		if i < 2 {
			return fmt.Sprintf("small %d\n", i)
		}
		return strings.Repeat("m", 99_999) + "\n"
	}
	for i := range 8 {
		if err := os.WriteFile(filepath.Join(dir, "memories", fmt.Sprintf("n%d.md", i)), []byte(made(i)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "memories", "a.md"), []byte("a by hand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "memories", "b.md")); err != nil {
		t.Fatal(err)
	}
	var adopts atomic.Int64 // adopts that found files to take, and took the writer turn and lock to look at each
	opt.hooks.drift = func() { adopts.Add(1) }
	r, err = Open(ctx, dir, opt) // a server's: the start's adopt runs after Open returns
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The files left are not looked at again while there is no room.
	if _, err := r.Adopt(ctx); !errors.Is(err, ErrNoChange) { // after the start's adopt
		t.Fatalf("adopt after the start's: %v, want ErrNoChange", err)
	}
	if n := adopts.Load(); n != 1 {
		t.Fatalf("%d adopts found files to take, want 1 (the start's)", n)
	}
	if n := r.mirror.wt.readBytes.Load(); n >= 100_000 {
		t.Fatalf("the start read %d bytes: the files made past the limit (100,000 bytes each) were read", n)
	}
	files := func() string {
		t.Helper()
		settle(t, r)
		return strings.Join(strings.Fields(gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD")), " ")
	}
	if got, want := files(), "memories/a.md memories/c.md memories/n0.md memories/n1.md"; got != want {
		t.Fatalf("HEAD holds %s, want %s", got, want)
	}
	if got := read(t, r, "a.md"); got != "a by hand\n" {
		t.Fatalf("a.md = %q: the hand edit was not taken", got)
	}
	v, err := r.Snapshot(ctx, "n5.md")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Stat("n5.md"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("a view of n5.md: %v, want ErrNotExist", err)
	}
	named := func() int {
		n := 0
		for _, l := range logs() {
			if strings.Contains(l, dir) {
				t.Fatalf("a host path was logged: %s", l)
			}
			if strings.HasPrefix(l, "ERROR gitmem: 6 file(s) made by hand in memories/ (memories/n2.md first) are not committed, nor shown to the model: the memory holds 4 files, the limit is 4 files") {
				n++
			} else if strings.HasPrefix(l, "ERROR") {
				t.Fatalf("logged: %s", l)
			}
		}
		return n
	}
	if n := named(); n != 1 {
		t.Fatalf("the files left were named %d times, want once:\n%s", n, strings.Join(logs(), "\n"))
	}
	// Room for one: the next in path order is taken, the others are not
	// named again.
	del(t, r, "t4", "c.md")
	if _, err := r.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := files(), "memories/a.md memories/n0.md memories/n1.md memories/n2.md"; got != want {
		t.Fatalf("with room for one, HEAD holds %s, want %s", got, want)
	}
	if n := named(); n != 1 {
		t.Fatalf("the files left were named %d times, want once:\n%s", n, strings.Join(logs(), "\n"))
	}
	for i := range 8 {
		if got := readDisk(t, dir, fmt.Sprintf("n%d.md", i)); got != made(i) {
			t.Fatalf("n%d.md on disk changed: %d bytes", i, len(got))
		}
	}
}
