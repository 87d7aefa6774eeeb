package gitmem

import (
	"cmp"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/gitmem/internal/lock"
)

// gitIndex is gitmem's side of .git/index: what `git status` compares
// the worktree with, and what a `git commit` made by hand is built from.
// It keeps the tree and entries of the last index written (so that the
// next write looks only at what changed), the marks of which commit the
// index holds and was written for, and the timer that rewrites it.
type gitIndex struct {
	gitDir string
	env    *gd.Env // the test suite's seams (nil: none)
	// life is the Repo's lifetime (Repo.life): a write's wait for
	// .git/index.lock held by another program (git commit, its editor
	// open) gives up when Close begins, and Close's own write tries it
	// once (gd.WriteIndex).
	life context.Context

	// mu guards .git/index, tree and entries; the writer lock is let go
	// (owned set false) only with it held, so that no flush writes the
	// index after. Reached through lock (an indexHeld proves it held).
	// Taken after the writer turn, never with disk.mu or objects.mu held. release and Close
	// close the log (disk.mu, then logFiles.mu) with it held: so the order
	// is mu -> disk.mu -> logFiles.mu, and nothing may take mu with
	// disk.mu held (design F8). Flush's wait for it ends with its
	// context (lockContext).
	mu      lock.Mutex
	tree    *node           // the tree of the last .git/index written
	entries []gd.IndexEntry // its entries, sorted by path
	// exact says that the entries of a folder of tree are the ones under
	// its path: so for those write made for tree, and for an index read
	// at start whose entries made tree (treeFromIndex: each path once,
	// the tree's hash checked).
	exact bool
	// looked is how many files the last write looked at one by one (for
	// tests).
	looked int
	// unvouched says that the last write, at writtenAt, left a file
	// without lstat data (vouch: racy, or not HEAD's blob) and was not
	// itself the look again at such files that a write for the same
	// commit makes (write).
	unvouched bool
	writtenAt time.Time

	// marksMu guards the marks below. No lock is taken with it held.
	marksMu sync.Mutex
	head    plumbing.Hash // the commit .git/index holds the tree of
	// madeFor is the commit gitmem last wrote .git/index for (kept in
	// .git/gitmem/index-head): a commit made with git from that index
	// holds its versions of what gitmem changed since. log is the last
	// madeFor values and when each began (setMadeFor).
	madeFor plumbing.Hash
	log     []indexWrite

	// timerMu guards timer and due (schedule). No lock is taken with it
	// held; the timer's function runs without it.
	timerMu sync.Mutex
	timer   *time.Timer
	due     time.Time // when timer fires
}

func newGitIndex(life context.Context, gitDir string, env *gd.Env) *gitIndex {
	return &gitIndex{life: life, gitDir: gitDir, env: env}
}

// indexHeld is the index's lock held: what writes .git/index.
type indexHeld struct{ x *gitIndex }

// lock takes the index's lock (see gitIndex.mu), however long it waits.
func (x *gitIndex) lock() indexHeld {
	x.mu.Lock(context.Background(), nil) // cannot fail: no ctx, no closing
	return indexHeld{x}
}

// lockContext takes the index's lock for Flush: a wait for it ends with
// ctx or closing (lock.Mutex.Take).
func (x *gitIndex) lockContext(ctx context.Context, closing <-chan struct{}) (indexHeld, error) {
	if err := x.mu.Take(ctx, closing); err != nil {
		return indexHeld{}, err
	}
	return indexHeld{x}, nil
}

// tryLock takes the index's lock if it is free.
func (x *gitIndex) tryLock() (indexHeld, bool) {
	if !x.mu.TryLock() {
		return indexHeld{}, false
	}
	return indexHeld{x}, true
}

func (l indexHeld) unlock() { l.x.mu.Unlock() }

// writeIndex writes .git/index for HEAD's tree, so that `git status` and
// `git diff` find the worktree clean without re-reading every file. Only
// lstat data gitmem has checked against HEAD's blob goes in (a file it
// cannot vouch for gets zeroes, which git re-reads): an index that paired
// a hand-edited file's lstat data with HEAD's blob would hide the edit
// from git and from gitmem's next start.
//
// A file whose blob is the one the last index written held keeps that
// entry: only the files changed since are looked at, so an index written
// every second under load costs what changed, not an lstat of every file
// (a second of ~300 ms, under the writer mutex, at 10,000 files); a
// folder that is the one the last index was written for (the same node)
// keeps all its entries at once, unless one of them is still to be
// vouched for or a read found one of its files. An
// entry kept is as safe as git's own: a file edited since no longer
// matches its lstat data, and git (and gitmem's next start) reads it
// again. A file the stat cache read since the last index (a hand-edit
// check that found its lstat data changed but not its blob: a folder
// copied, a backup restored) gets what that read found, as git's refresh
// does, so the next start need not read it again; for it alone an index
// that holds HEAD's tree is written again. Called with the writer turn held, or by
// flush with the index's lock held (as writeIndexHeld).
func (r *Repo) writeIndex() error {
	held := r.gitIndex.lock()
	defer held.unlock()
	return r.writeIndexHeld(held)
}

// writeIndexHeld is writeIndex with the index's lock held. It is
// written for the branch as git's files hold it and the tree the worktree
// mirrors (the disk's, read together), not for readers' HEAD: calls
// acknowledge changes meanwhile (Flush holds no writer lock), in the log
// and not yet in git's files, and an index that named their blobs had git
// diff read blobs git did not have ("unable to read"; git 2.39's diff
// --stat crashed there: TestIndexNamesOnlyBlobsGitHas).
func (r *Repo) writeIndexHeld(held indexHeld) error {
	dt := r.disk.hold()
	head, root := dt.head(), dt.tree()
	dt.release()
	return held.write(head, root, r.mirror.statsRead(), r.vouch)
}

// write writes .git/index for head's tree root (see writeIndex): read
// is what the stat cache read since the last index, vouch the lstat data
// a file changed since may be paired with.
func (l indexHeld) write(head plumbing.Hash, root *node, read map[string]statEntry, vouch func(string, *node, time.Time) gd.Stat) error {
	x := l.x
	x.marksMu.Lock()
	current := x.head == head && !head.IsZero()
	x.marksMu.Unlock()
	// An index that holds HEAD's tree already (read at start, or written
	// since) is written again for what is known of the files since: what
	// the stat cache read, and, once, the files the last write could not
	// vouch for, most of them racy then (written just before it) and no
	// longer: unvouched, git and each start read and hash them until the
	// next change. (Not before the racy window has passed: a release of
	// the writer lock right after the scheduled write would write the
	// same entries again.)
	now := time.Now()
	if current && len(read) == 0 && !(x.unvouched && now.Sub(x.writtenAt) > gd.RacyWindow) {
		return nil
	}
	unvouched := false
	prev := x.entries
	entries := make([]gd.IndexEntry, 0, len(prev)+16)
	readPaths := slices.Sorted(maps.Keys(read))
	looked := 0
	// The walk meets paths in prev's order (a folder sorts as its name and
	// "/", the paths' byte order), so prev is looked at from where the
	// last look ended (from): a changed folder of n files costs n steps,
	// not n searches, and an entry kept is not made again.
	from := 0
	var walk func(n, was *node, prefix string)
	walk = func(n, was *node, prefix string) {
		zipKids(n, was, func(name string, k, w *node) {
			if k == nil {
				return // gone since the last index
			}
			if k.isDir() {
				p := join2(prefix, name)
				if w == k && x.exact { // the same folder as the last index's
					if kept, end, ok := keptUnder(prev, p+"/", readPaths); ok {
						entries = append(entries, kept...)
						from = end
						return
					}
				}
				walk(k, w, p)
				return
			}
			looked++
			if len(read) > 0 {
				p := join2(prefix, name)
				if c, ok := read[p]; ok && c.hash == k.hash && k.isFile() {
					entries = append(entries, gd.IndexEntry{Path: p, Hash: k.hash, Mode: k.mode, Stat: c.st})
					return
				}
			}
			if w != nil && w.hash == k.hash && w.mode == k.mode {
				if i, ok := entryAt(prev, from, prefix, name); ok && !prev[i].Stat.IsZero() {
					entries = append(entries, prev[i])
					from = i + 1
					return
				}
			}
			p := join2(prefix, name)
			e := gd.IndexEntry{Path: p, Hash: k.hash, Mode: k.mode}
			if k.isFile() {
				e.Stat = vouch(p, k, now)
				unvouched = unvouched || e.Stat.IsZero()
			}
			entries = append(entries, e)
		})
	}
	if root != nil {
		walk(root, x.tree, "")
	}
	if err := gd.WriteIndex(x.life, x.env, x.gitDir, entries); err != nil { // sorts entries
		return err
	}
	x.tree, x.entries, x.exact, x.looked = root, entries, true, looked
	x.unvouched, x.writtenAt = unvouched && !current, now
	x.marksMu.Lock()
	x.head = head
	x.setMadeFor(head)
	x.marksMu.Unlock()
	if err := gd.RewriteCache(x.headPath(), []byte(head.String()+"\n"), gd.OwnFileMode); err != nil {
		os.Remove(x.headPath()) // better none than a wrong one
	}
	return nil
}

// keptUnder returns the entries of prev (sorted by path) under the
// folder prefix (ending in "/"), unless one of them carries no lstat data
// (it is to be vouched for again) or one of read (sorted) is under it.
func keptUnder(prev []gd.IndexEntry, prefix string, read []string) (kept []gd.IndexEntry, end int, ok bool) {
	if i, _ := slices.BinarySearch(read, prefix); i < len(read) && strings.HasPrefix(read[i], prefix) {
		return nil, 0, false
	}
	lo, _ := slices.BinarySearchFunc(prev, prefix, byPath)
	n := sort.Search(len(prev)-lo, func(i int) bool { return !strings.HasPrefix(prev[lo+i].Path, prefix) })
	kept = prev[lo : lo+n]
	for _, e := range kept {
		if e.Stat.IsZero() {
			return nil, 0, false
		}
	}
	return kept, lo + n, true
}

// entryAt finds the entry of prev (sorted by path) for the path prefix/name
// (name alone when prefix is empty) at or after from: the next entry as a
// rule (the walk's order), else by a search of the rest. It makes no path.
func entryAt(prev []gd.IndexEntry, from int, prefix, name string) (int, bool) {
	if from < len(prev) && isJoined(prev[from].Path, prefix, name) {
		return from, true
	}
	from = min(from, len(prev))
	i, ok := slices.BinarySearchFunc(prev[from:], name, func(e gd.IndexEntry, name string) int {
		return compareJoined(e.Path, prefix, name)
	})
	return from + i, ok
}

// isJoined reports whether path is join2(prefix, name).
func isJoined(path, prefix, name string) bool {
	if prefix == "" {
		return path == name
	}
	return len(path) == len(prefix)+1+len(name) && path[len(prefix)] == '/' &&
		path[:len(prefix)] == prefix && path[len(prefix)+1:] == name
}

// compareJoined compares path with join2(prefix, name), as strings.Compare.
func compareJoined(path, prefix, name string) int {
	if prefix == "" {
		return strings.Compare(path, name)
	}
	if c := strings.Compare(path[:min(len(path), len(prefix))], prefix); c != 0 {
		return c // path differs within prefix, or is shorter
	}
	switch rest := path[len(prefix):]; {
	case rest == "":
		return -1
	case rest[0] != '/':
		return cmp.Compare(rest[0], '/')
	default:
		return strings.Compare(rest[1:], name)
	}
}

// entriesFor returns the entries of the last .git/index written, when it
// was written for head (not zero) and its tree root: what a clean mark
// vouches for (clean.go).
func (l indexHeld) entriesFor(head plumbing.Hash, root *node) ([]gd.IndexEntry, bool) {
	x := l.x
	x.marksMu.Lock()
	indexed := x.head
	x.marksMu.Unlock()
	if head.IsZero() || indexed != head || x.tree != root || !x.exact {
		return nil, false
	}
	return x.entries, true
}

// byPath orders index entries by path, as .git/index does.
func byPath(e gd.IndexEntry, p string) int { return strings.Compare(e.Path, p) }

// inIndexOrder orders two index entries by path, as .git/index does.
func inIndexOrder(a, b gd.IndexEntry) int { return strings.Compare(a.Path, b.Path) }

// forget drops the last index written: the next is written whole.
func (l indexHeld) forget() { l.x.tree, l.x.entries, l.x.exact = nil, nil, false }

// loaded takes the index read at start, start, as the last written: it
// holds head's tree, tree, which treeFromIndex made of exactly these
// entries. So the next index written keeps a folder that did not change
// whole, as after a write (a one-command revert's Close looked at every
// file of the memory one by one).
func (l indexHeld) loaded(head plumbing.Hash, tree *node, start []gd.IndexEntry) {
	x := l.x
	x.tree, x.entries, x.exact = tree, start, true // sorted (readStartIndex), and never changed in place
	x.marksMu.Lock()
	x.head = head
	x.marksMu.Unlock()
}

// gitWrote notes that git rewrote .git/index (for at; zero: not known):
// it is written again whole. With at, the worktree was left at it too.
func (x *gitIndex) gitWrote(at plumbing.Hash) {
	x.marksMu.Lock()
	defer x.marksMu.Unlock()
	if !at.IsZero() {
		x.setMadeFor(at)
	}
	x.head = plumbing.ZeroHash
}

// schedule has flush run delay after the first change the index does
// not hold: under a steady stream of changes too, so that git's index
// (what `git status` compares with, what `git commit` is built from) is
// never more than about delay behind the branch.
func (x *gitIndex) schedule(delay time.Duration, flush func()) {
	x.timerMu.Lock()
	defer x.timerMu.Unlock()
	now := time.Now()
	if now.Before(x.due) {
		return // due already
	}
	x.due = now.Add(delay)
	if x.timer != nil {
		x.timer.Reset(delay)
		return
	}
	x.timer = time.AfterFunc(delay, flush)
}

// waits reports whether .git/index lacks head and its rewrite is
// scheduled, not yet due.
func (x *gitIndex) waits(head plumbing.Hash) bool {
	x.timerMu.Lock()
	due := x.due
	x.timerMu.Unlock()
	x.marksMu.Lock()
	current := x.head == head
	x.marksMu.Unlock()
	return !current && time.Now().Before(due)
}

// stopTimer stops the timer (closing).
func (x *gitIndex) stopTimer() {
	x.timerMu.Lock()
	defer x.timerMu.Unlock()
	if x.timer != nil {
		x.timer.Stop()
	}
}

// startIndex is .git/index as start reads it, before gitmem writes it
// again: the tree and the worktree's lstat data without reading every
// tree object and hashing every file. It lives as long as start does,
// passed to what uses it (settleIn, refresh, treeFromIndex,
// checkoutMoved, indexTree, loadIndexStats); nil elsewhere, and when
// there is no index, or one gitmem does not read. It may hold no entries
// (the index of an empty tree).
type startIndex struct {
	entries []gd.IndexEntry
	written time.Time // when the file was written
}

// readStartIndex reads .git/index for start. An index of no entries is
// one too: that of an empty tree (a memory no call has written to yet),
// which start then need not write again. Its entries are sorted by path,
// as git writes them.
func readStartIndex(gitDir string) *startIndex {
	entries, written, err := gd.ReadIndex(gitDir)
	if err != nil {
		return nil
	}
	if !slices.IsSortedFunc(entries, inIndexOrder) {
		slices.SortFunc(entries, inIndexOrder)
	}
	return &startIndex{entries: entries, written: written}
}

// list is the index's entries (none for nil).
func (s *startIndex) list() []gd.IndexEntry {
	if s == nil {
		return nil
	}
	return s.entries
}

// vouch is the lstat data the index may pair with the file n at p: that
// of the file read, taken on its descriptor before and after the read,
// when it holds n's blob, nothing changed it meanwhile and it did not
// change within the racy window of now; else zero (git reads the file).
// Not the stat cache's word, nor an lstat taken before the read: the index
// is written beside the materialiser, and a file it had not yet replaced
// with n's blob, or replaced between an lstat and the read, paired n's
// blob with the old file's size — which git takes as modified without
// reading it, for as long as the entry is kept (issue 21, item 17).
// A file racy when opened is not read: whatever a read found, the lstat
// data after it would be racy too (a change since gives a change time
// after now). A pull's index is written right after its files, many of
// them racy: each was read and the read thrown away.
func (r *Repo) vouch(p string, n *node, now time.Time) gd.Stat {
	data, st, err := r.mirror.readUnlessRacy(p, n.size, now)
	if err != nil || plumbing.ComputeHash(plumbing.BlobObject, data) != n.hash {
		return gd.Stat{}
	}
	before, after := gd.StatOf(st[0]), gd.StatOf(st[1])
	if before != after || after.Racy(now) {
		return gd.Stat{}
	}
	return after
}

// indexWrite is a madeFor value and when it began.
type indexWrite struct {
	at     time.Time
	commit plumbing.Hash
}

// setMadeFor notes that .git/index is now for the commit h (zero: not
// known), in madeFor and log. Called with marksMu held.
func (x *gitIndex) setMadeFor(h plumbing.Hash) {
	x.madeFor = h
	if n := len(x.log); h.IsZero() || n > 0 && x.log[n-1].commit == h {
		return
	}
	const keep = 64
	if len(x.log) == keep {
		x.log = slices.Delete(x.log, 0, 1)
	}
	x.log = append(x.log, indexWrite{time.Now(), h})
}

// noteMadeFor notes that .git/index is now for h (zero: not known).
func (x *gitIndex) noteMadeFor(h plumbing.Hash) {
	x.marksMu.Lock()
	defer x.marksMu.Unlock()
	x.setMadeFor(h)
}

// leftAt is the commit the worktree was last left at: read, the commit
// the index file names (another process may have written it since this
// one last held the lock), else the one this process last wrote it for.
// It is noted as such.
func (x *gitIndex) leftAt(read plumbing.Hash) plumbing.Hash {
	x.marksMu.Lock()
	defer x.marksMu.Unlock()
	if read.IsZero() {
		read = x.madeFor
	}
	x.setMadeFor(read)
	return read
}

// lastMadeFor is the commit gitmem last wrote .git/index for.
func (x *gitIndex) lastMadeFor() plumbing.Hash {
	x.marksMu.Lock()
	defer x.marksMu.Unlock()
	return x.madeFor
}

// candidates lists the commits .git/index may have been written for
// when git read it to make a commit at made (its committer date, in
// seconds): git commit reads the index before it takes
// .git/index.lock, so gitmem may write the index again in between, and
// again after git released the lock but before gitmem finds the branch
// moved — the index written last is not always the one the commit was
// made from. So every index written since shortly before made is one,
// with the two in effect before (a commit whose editor stayed open holds
// the lock meanwhile: the index written just before it is among them).
func (x *gitIndex) candidates(made time.Time) []plumbing.Hash {
	x.marksMu.Lock()
	defer x.marksMu.Unlock()
	from := len(x.log)
	for from > 0 && !x.log[from-1].at.Before(made.Add(-2*time.Second)) {
		from--
	}
	var out []plumbing.Hash
	for _, w := range x.log[max(from-2, 0):] {
		out = append(out, w.commit)
	}
	if len(out) == 0 && !x.madeFor.IsZero() {
		out = append(out, x.madeFor)
	}
	return out
}

// indexHeadPath names the file that says which commit gitmem last wrote
// .git/index for.
func (r *Repo) indexHeadPath() string { return r.gitIndex.headPath() }

func (x *gitIndex) headPath() string { return filepath.Join(x.gitDir, "gitmem", "index-head") }

// readIndexHead reads it (zero: none, or not a commit here).
func (r *Repo) readIndexHead() plumbing.Hash {
	data, err := gd.ReadFile(r.indexHeadPath())
	s := strings.TrimSpace(string(data))
	if err != nil || !isObjectHash(s) {
		return plumbing.ZeroHash
	}
	h := plumbing.NewHash(s)
	r.objects.lock()
	defer r.objects.unlock()
	if _, err := r.objects.st.Commit(h); err != nil {
		return plumbing.ZeroHash
	}
	return h
}

// staleIndex drops from dT, the changes a commit made outside gitmem
// brings (against the merge base), those that only restore the version
// .git/index held (the tree of one of m.index, the commits gitmem wrote
// the index for about the time the commit was made): git builds a commit
// from the index, so a git commit made before gitmem rewrote it holds
// its older versions of everything gitmem changed since — deletions of
// files made since, the old text of files edited since — which are not
// the operator's. Which of those indexes git read is not known (see
// gitIndex.candidates): a change that restores any one's version is dropped,
// so that no acknowledged file or text is undone. It reports whether it
// dropped any. (An operator who deliberately put back the exact version
// of one of those moments, within those seconds, is not told apart.)
func (m *merger) staleIndex(base plumbing.Hash, dT map[string]fchange) (bool, error) {
	if len(dT) == 0 || len(m.index) == 0 && m.held == nil {
		return false, nil
	}
	dropped := m.staleWorktree(dT)
	if len(m.index) == 0 {
		return dropped, nil
	}
	bRoot, _, _, err := m.roots(base, plumbing.ZeroHash)
	if err != nil {
		return false, err
	}
	for _, idx := range m.index {
		c, err := m.g.Commit(idx)
		if err != nil {
			continue // gone (a redaction rewrote it): nothing to tell apart
		}
		dI := map[string]fchange{}
		if err := m.diff(m.memTree(bRoot), m.memTree(c.TreeHash), "", dI); err != nil {
			return false, wrap("compare with the index", err)
		}
		for p, ch := range dT {
			if i, ok := dI[p]; ok && i.new == ch.new {
				delete(dT, p)
				dropped = true
			}
		}
	}
	return dropped, nil
}

// staleWorktree drops from dT, the changes a commit made outside gitmem
// brings, those that only give a file a version the worktree held until
// gitmem replaced it at most staleWindow before the commit was made:
// gitmem moves the branch first and the worktree follows, so a git
// commit -a made in between reads the newer HEAD and the older file, and
// commits that on top (N9 F1). The same goes for a file gitmem created:
// the worktree held no file there until it wrote it, and git commit -a
// made in between, from an index that still lists the file (an older
// version), commits its deletion. It is no edit, as a file found holding
// such a version is none (mergeHandEdit). It reports whether it dropped
// any. (An operator who deliberately put back such a version, or git rm'd
// such a file, within those seconds is not told apart.)
func (m *merger) staleWorktree(dT map[string]fchange) bool {
	if m.held == nil {
		return false
	}
	c, err := m.g.Commit(m.theirs)
	if err != nil {
		return false
	}
	dropped := false
	for p, ch := range dT {
		if m.held(p, ch, c.Committer.When) {
			delete(dT, p)
			dropped = true
		}
	}
	return dropped
}
