package gitmem

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

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
// (a second of ~300 ms, under the writer mutex, at 10,000 files). An
// entry kept is as safe as git's own: a file edited since no longer
// matches its lstat data, and git (and gitmem's next start) reads it
// again. A file the stat cache read since the last index (a hand-edit
// check that found its lstat data changed but not its blob: a folder
// copied, a backup restored) gets what that read found, as git's refresh
// does, so the next start need not read it again; for it alone an index
// that holds HEAD's tree is written again. Called with wmu held, or by
// flush with imu held (as Locked).
func (r *Repo) writeIndex() error {
	r.imu.Lock()
	defer r.imu.Unlock()
	return r.writeIndexLocked()
}

// writeIndexLocked is writeIndex with imu held.
func (r *Repo) writeIndexLocked() error {
	r.smu.RLock()
	head, current := r.head, r.indexHead == r.head && !r.head.IsZero()
	root := r.tree // with head: commits are published meanwhile (Flush holds no writer lock)
	r.smu.RUnlock()
	r.cmu.Lock()
	read := r.stats.takeRead()
	r.cmu.Unlock()
	if current && len(read) == 0 {
		return nil // it holds HEAD's tree already (read at start, or written since) and what is known of the files
	}
	var entries []gd.IndexEntry
	prev := r.idxEntries
	now := time.Now()
	var walk func(n, was *node, prefix string)
	walk = func(n, was *node, prefix string) {
		for _, e := range n.kids {
			k, p, w := e.n, join2(prefix, e.name), was.kid(e.name)
			if k.isDir() {
				walk(k, w, p)
				continue
			}
			if c, ok := read[p]; ok && c.hash == k.hash && k.isFile() {
				entries = append(entries, gd.IndexEntry{Path: p, Hash: k.hash, Mode: k.mode, Stat: c.st})
				continue
			}
			if w != nil && w.hash == k.hash && w.mode == k.mode {
				if e, ok := prev[p]; ok && !e.Stat.IsZero() {
					entries = append(entries, e)
					continue
				}
			}
			e := gd.IndexEntry{Path: p, Hash: k.hash, Mode: k.mode}
			if k.isFile() {
				e.Stat = r.vouch(p, k, now)
			}
			entries = append(entries, e)
		}
	}
	if root != nil {
		walk(root, r.idxTree, "")
	}
	if err := gd.WriteIndex(r.obj.Env, r.gitDir, entries); err != nil {
		return err
	}
	r.idxTree, r.idxEntries = root, make(map[string]gd.IndexEntry, len(entries))
	for _, e := range entries {
		r.idxEntries[e.Path] = e
	}
	r.smu.Lock()
	r.indexHead = head
	r.setIndexFor(head)
	r.smu.Unlock()
	if err := gd.ReplaceCache(r.indexHeadPath(), []byte(head.String()+"\n")); err != nil {
		os.Remove(r.indexHeadPath()) // better none than a wrong one
	}
	return nil
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
func (r *Repo) vouch(p string, n *node, now time.Time) gd.Stat {
	data, st, err := r.wt.readRegular(p, n.size, true)
	if err != nil || plumbing.ComputeHash(plumbing.BlobObject, data) != n.hash {
		return gd.Stat{}
	}
	before, after := gd.StatOf(st[0]), gd.StatOf(st[1])
	if before != after || after.Racy(now) {
		return gd.Stat{}
	}
	return after
}

// indexWrite is an indexFor value and when it began.
type indexWrite struct {
	at     time.Time
	commit plumbing.Hash
}

// setIndexFor notes that .git/index is now for the commit h (zero: not
// known), in indexFor and indexLog. Called with smu held, or at start.
func (r *Repo) setIndexFor(h plumbing.Hash) {
	r.indexFor = h
	if n := len(r.indexLog); h.IsZero() || n > 0 && r.indexLog[n-1].commit == h {
		return
	}
	const keep = 64
	if len(r.indexLog) == keep {
		r.indexLog = slices.Delete(r.indexLog, 0, 1)
	}
	r.indexLog = append(r.indexLog, indexWrite{time.Now(), h})
}

// indexCandidates lists the commits .git/index may have been written for
// when git read it to make a commit at made (its committer date, in
// seconds): git commit reads the index before it takes
// .git/index.lock, so gitmem may write the index again in between, and
// again after git released the lock but before gitmem finds the branch
// moved — the index written last is not always the one the commit was
// made from. So every index written since shortly before made is one,
// with the two in effect before (a commit whose editor stayed open holds
// the lock meanwhile: the index written just before it is among them).
// Called with smu held.
func (r *Repo) indexCandidates(made time.Time) []plumbing.Hash {
	from := len(r.indexLog)
	for from > 0 && !r.indexLog[from-1].at.Before(made.Add(-2*time.Second)) {
		from--
	}
	var out []plumbing.Hash
	for _, w := range r.indexLog[max(from-2, 0):] {
		out = append(out, w.commit)
	}
	if len(out) == 0 && !r.indexFor.IsZero() {
		out = append(out, r.indexFor)
	}
	return out
}

// indexHeadPath names the file that says which commit gitmem last wrote
// .git/index for.
func (r *Repo) indexHeadPath() string { return filepath.Join(r.gitDir, "gitmem", "index-head") }

// readIndexHead reads it (zero: none, or not a commit here).
func (r *Repo) readIndexHead() plumbing.Hash {
	data, err := os.ReadFile(r.indexHeadPath())
	s := strings.TrimSpace(string(data))
	if err != nil || !isObjectHash(s) {
		return plumbing.ZeroHash
	}
	h := plumbing.NewHash(s)
	r.omu.Lock()
	defer r.unlockObj()
	if _, err := r.obj.Commit(h); err != nil {
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
// indexCandidates): a change that restores any one's version is dropped,
// so that no acknowledged file or text is undone. It reports whether it
// dropped any. (An operator who deliberately put back the exact version
// of one of those moments, within those seconds, is not told apart.)
func (m *merger) staleIndex(base plumbing.Hash, dT map[string]fchange) (bool, error) {
	if len(m.index) == 0 || len(dT) == 0 {
		return false, nil
	}
	bRoot, _, _, err := m.roots(base, plumbing.ZeroHash)
	if err != nil {
		return false, err
	}
	dropped := false
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
