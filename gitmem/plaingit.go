package gitmem

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/gitmem/internal/lock"
	"github.com/gitmem-dev/gitmem/policy"
)

// What gitmem does about plain git commands that take its branch away
// while it runs (docs/operations.md, "an operator commits with git, or
// moves the branch, while serve runs").

// putBranchBack recreates the branch at at after it was deleted outside
// gitmem (git update-ref -d, git branch -D) while it was at was: gitmem
// knows the acknowledged commits, so none is refused or lost for it.
// Called with objects.mu not held.
func (r *Repo) putBranchBack(was, at plumbing.Hash, why string) error {
	r.objects.lock()
	err := r.objects.st.UpdateRef(r.life, r.branch, plumbing.ZeroHash, at, false)
	r.objects.unlock()
	if err != nil {
		return wrap("put the branch back", err)
	}
	r.opt.Errorf("gitmem: the branch %s was deleted outside gitmem (it was at %s); gitmem put it back at %s, %s: nothing is lost (to take changes back, use gitmem revert or gitmem restore)",
		r.branch, was.String()[:7], at.String()[:7], why)
	return nil
}

// keepBranch puts the branch back at the commit git's files hold for it
// when it was deleted outside gitmem meanwhile; checkpoints call it, so
// that an idle gitmem repairs it before it lets the writer lock go or
// exits.
func (r *Repo) keepBranch(dt diskTurn) {
	if dt.head().IsZero() || r.deleted() {
		return
	}
	if _, err := r.readRef(r.branch); !errors.Is(err, gd.ErrNoRef) {
		return
	}
	if err := r.putBranchBack(dt.head(), dt.head(), "the last acknowledged change"); err != nil {
		r.opt.Errorf("gitmem: %v", err)
	}
}

// restoreBranch puts the branch back when it was deleted outside gitmem
// while this process did not hold the writer lock: at the newest commit
// that descends from the one it last knew (another gitmem process may
// have committed on from it), found among the commits no other commit
// names as a parent. It reports where, or false when the branch is not
// missing or cannot be put back. Called with the writer turn and the writer lock held.
func (r *Repo) restoreBranch() (plumbing.Hash, bool) {
	if _, err := r.readRef(r.branch); !errors.Is(err, gd.ErrNoRef) {
		return plumbing.ZeroHash, false
	}
	had := r.snapshotHead()
	if had.IsZero() || r.deleted() {
		return plumbing.ZeroHash, false
	}
	at := had
	if tips, err := r.headCommits(); err == nil {
		st := r.objects.st.View()
		g := gd.NewGraph(st)
		for _, c := range tips { // newest first
			h := plumbing.NewHash(c.Hash)
			if in, err := g.IsAncestor(had, h); err == nil && in {
				at = h
				break
			}
		}
		st.Close()
	}
	if err := r.putBranchBack(had, at, "the newest commit that holds every change acknowledged here"); err != nil {
		r.opt.Errorf("gitmem: %v", err)
		return plumbing.ZeroHash, false
	}
	return at, true
}

// detachedBranch returns the branch HEAD was taken off when it names a
// commit (git checkout COMMIT, git checkout --detach while gitmem was
// stopped): the branch whose history holds that commit — main when
// several do. ok is false when HEAD names no commit, or one no branch
// holds (another history: refused, ReadHEAD says how to put it back). The
// writer's start puts HEAD and the files back on the branch (putHeadBack).
func detachedBranch(gitDir string, st *gd.Store) (branch plumbing.ReferenceName, ok bool) {
	data, err := gd.ReadFileMax(filepath.Join(gitDir, "HEAD"), gd.RefMax)
	at := strings.TrimSpace(string(data))
	if err != nil || !plumbing.IsHash(at) {
		return "", false
	}
	tips, err := gd.ListRefsUnder(gitDir, "refs/heads/")
	if err != nil {
		return "", false
	}
	v := st.View()
	defer v.Close()
	g := gd.NewGraph(v)
	var holding []plumbing.ReferenceName
	for name, tip := range tips {
		if in, err := g.IsAncestor(plumbing.NewHash(at), tip); err == nil && in {
			if name == plumbing.Main {
				return name, true
			}
			holding = append(holding, name)
		}
	}
	if len(holding) != 1 {
		return "", false
	}
	return holding[0], true
}

// headMoved reads gitDir's HEAD and reports whether it no longer names
// gitmem's branch (git checkout, git switch), and then what it names: a
// ref (empty when detached) and its commit (zero when there is none).
func headMoved(gitDir string, branch plumbing.ReferenceName) (ref string, at plumbing.Hash, moved bool) {
	data, err := gd.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return "", plumbing.ZeroHash, false // unreadable now (or not a file): the next look
	}
	s := strings.TrimSpace(string(data))
	if target, ok := strings.CutPrefix(s, "ref: "); ok {
		if target == string(branch) {
			return "", plumbing.ZeroHash, false
		}
		if strings.HasPrefix(target, "refs/") && gd.ValidRefName(target) {
			at, _ = gd.ReadRef(gitDir, plumbing.ReferenceName(target))
		}
		return target, at, true
	}
	if isObjectHash(s) {
		return "", plumbing.NewHash(s), true
	}
	return "", plumbing.ZeroHash, true
}

// putHeadBack points HEAD at gitmem's branch again when git checkout or
// git switch moved it, and brings the worktree back from the commit git
// checked out (a file that holds that commit's version gets the branch's;
// one edited by hand since is adopted merged, as after a branch moved
// while gitmem was stopped: checkoutMoved), so that git's view — HEAD,
// .git/index, the worktree — is the branch's again. The ref git made, if
// any, stays where git put it. Called with the writer turn held, by the holder of the
// writer lock.
func (r *Repo) putHeadBack() {
	ref, at, moved := headMoved(r.gitDir, r.branch)
	if !moved || !r.lease.Held() {
		return
	}
	r.committer.drain() // the worktree mirrors every acknowledged change first
	if err := r.materialize(); err != nil {
		r.opt.Errorf("gitmem: HEAD was moved outside gitmem; it is put back once git's files take the acknowledged changes (%v)", err)
		return
	}
	head := []byte("ref: " + string(r.branch) + "\n")
	if err := gd.ReplaceLocked(r.life, filepath.Join(r.gitDir, "HEAD"), head, nil); err != nil {
		r.opt.Errorf("gitmem: HEAD was moved outside gitmem, and could not be put back yet (%v); gitmem tries again", err)
		return
	}
	what := "detached"
	if ref != "" {
		what = "switched to " + ref
	}
	if !at.IsZero() {
		what += " at " + at.String()[:7]
	}
	r.opt.Errorf("gitmem: HEAD was moved outside gitmem (%s, by git checkout or git switch); gitmem commits only to %s, so it put HEAD back on %s and the worktree follows it: nothing is lost (work on another branch in a clone, or in git worktree add)",
		what, r.branch, r.branch)
	// .git/index is git's now: written again whole. git's checkout left
	// the worktree and .git/index at at: what checkoutMoved brings the
	// worktree from.
	r.gitIndex.gitWrote(at)
	if !at.IsZero() {
		os.Remove(r.indexHeadPath())
		r.checkoutMoved(nil)
	}
	held := r.gitIndex.lock()
	held.forget()
	err := r.writeIndexHeld(held)
	held.unlock()
	if err != nil {
		r.opt.Logf("gitmem: could not write .git/index: %v", scrubPaths(err))
	}
}

// gitMoved undoes what a git command did while gitmem held the writer
// lock that no materialisation has seen yet (nothing was committed
// since): a move of the branch — the moved-to commit is kept
// (refs/gitmem/displaced/, merged back), the branch goes back on the
// acknowledged commits, and the files git checked out for it are put back
// (undoCheckout) — or a checkout that could not move it
// (undoGitCheckout). It reports whether it did either. Called before an
// adopt looks at the files, and before gitmem writes .git/index over the
// one git left.
func (r *Repo) gitMoved() bool {
	if !r.lease.Held() {
		return false
	}
	cur, err := r.readRef(r.branch)
	head := r.snapshotHead()
	if err == nil && cur != head {
		dt := r.disk.hold()
		// Read again under the disk lock: the materialiser may have moved it meanwhile.
		cur, err = r.readRef(r.branch)
		if err == nil && cur != dt.head() && !dt.head().IsZero() {
			if cur, err = r.takeBranchBack(dt, cur, dt.head()); err != nil {
				r.opt.Logf("gitmem: %v", scrubPaths(err))
			} else {
				r.undoCheckout(cur, dt.tree())
			}
			dt.release()
			return err == nil
		}
		dt.release()
	}
	return r.undoGitCheckout()
}

// gitMovedAway reports whether HEAD or the branch was taken away with git
// (git checkout, git switch, git update-ref -d, git reset): the holder of
// the writer lock puts them back. Called with the writer turn held.
func (r *Repo) gitMovedAway() bool {
	if _, _, moved := headMoved(r.gitDir, r.branch); moved {
		return true
	}
	cur, err := r.readRef(r.branch)
	if err != nil {
		return errors.Is(err, gd.ErrNoRef)
	}
	had := r.snapshotHead()
	off, _ := r.movedOff(had, cur)
	return off
}

// movedOff reports whether the branch, found at cur, was moved off had,
// the commit this process last knew it at (what it acknowledged, or what
// another gitmem process committed on top of that): cur does not descend
// from had. A running gitmem never takes such a move (git reset --hard,
// git update-ref while it had let the writer lock go): it puts the branch
// back (takeBack). The one move it takes is a redaction's, by another
// gitmem process: it rewrites had, and deletes it from git's files (or
// has not yet: its record is still on disk); rewritten says so. A
// read-only Repo takes the branch as it is. Called with the writer turn held.
func (r *Repo) movedOff(had, cur plumbing.Hash) (off, rewritten bool) {
	if had.IsZero() || cur.IsZero() || had == cur || r.opt.ReadOnly {
		return false, false
	}
	if _, err := os.Stat(redactPath(r.gitDir)); err == nil {
		return false, true // a redaction is finishing (or its gc failed)
	}
	st := r.objects.st.View()
	in, err := gd.NewGraph(st).IsAncestor(had, cur)
	st.Close()
	if err != nil || in {
		return false, false // a missing commit is refresh's to report
	}
	r.objects.lock()
	gone := len(r.objects.st.Missing([]gd.Object{{Type: plumbing.CommitObject, Hash: had}})) > 0
	r.objects.unlock()
	return !gone, gone
}

// takeBack puts the branch, which git moved to cur while this process did
// not hold the writer lock, back on the acknowledged commits (disk.head):
// cur is kept and merged back like a commit made by hand (takeBranchBack;
// one the acknowledged commits already hold leaves nothing to merge), and
// the worktree files git checked out for it get the acknowledged version
// back (undoCheckout): they are git's, not hand edits. Called by settleIn
// with the writer turn and the writer lock held.
func (r *Repo) takeBack(cur plumbing.Hash) {
	dt := r.disk.hold()
	defer dt.release()
	moved, err := r.takeBranchBack(dt, cur, dt.head())
	if err != nil {
		// Put back by the next change's moveBranch or gitMoved: the
		// acknowledged commits are what this process goes on from.
		r.opt.Errorf("gitmem: the branch was moved outside gitmem (to %s) and could not be put back yet: %v", cur.String()[:7], err)
		return
	}
	r.opt.Errorf("gitmem: the branch %s was moved outside gitmem (to %s, by git reset or git update-ref) while gitmem let the writer lock go; gitmem put it back at %s, the last acknowledged change: nothing is lost (to take changes back, use gitmem revert or gitmem restore)",
		r.branch, moved.String()[:7], dt.head().String()[:7])
	r.undoCheckout(moved, dt.tree())
}

// takeBranchBack points the branch, which something outside gitmem moved
// to cur, at the acknowledged commit to, keeping cur (durably, first) for
// mergeDisplaced to merge back. When the branch moves again meanwhile
// (another git command), that commit is kept too, and so on a few times;
// moved is the last commit kept.
func (r *Repo) takeBranchBack(dt diskTurn, cur, to plumbing.Hash) (moved plumbing.Hash, err error) {
	for try := 0; ; try++ {
		r.objects.lock()
		var made time.Time // when git made the commit (its committer date)
		c, err := r.objects.st.Commit(cur)
		if err == nil {
			made = c.Committer.When
			err = r.keepDisplaced(cur)
		}
		kept := err == nil
		if err == nil {
			err = r.objects.st.UpdateRef(r.life, r.branch, cur, to, false)
		}
		r.objects.unlock()
		if kept {
			r.opt.Logf("gitmem: the branch was moved outside gitmem (to %s); the acknowledged commits stay on it and %s is merged back", cur, cur)
			r.outside.displaced(r.gitDir, cur, r.gitIndex.candidates(made)) // what a git commit may have been made from
		}
		if err == nil {
			break
		}
		now, rerr := r.readRef(r.branch)
		if !kept || rerr != nil || now == cur || try == 4 {
			r.maint.signal()
			return plumbing.ZeroHash, wrap("update the branch", err)
		}
		cur = now
	}
	dt.setHead(to)
	r.maint.signal()
	return cur, nil
}

// displacedRefs is where commits the branch was moved to outside gitmem
// wait to be merged back.
const displacedRefs = "refs/gitmem/displaced/"

// keepDisplaced makes h reachable as refs/gitmem/displaced/<h>, durably.
// Called with objects.mu held.
func (r *Repo) keepDisplaced(h plumbing.Hash) error {
	name := plumbing.ReferenceName(displacedRefs + h.String())
	if cur, err := r.readRef(name); err == nil && cur == h {
		return nil
	}
	return r.objects.st.UpdateRef(r.life, name, plumbing.ZeroHash, h, true)
}

// displacedIn lists the commits waiting to be merged back in gitDir, by
// ref, loose or packed (git gc packs refs). A ref is named after the
// commit it was made for, but holds the commit to merge: a redaction may
// have rewritten it.
func displacedIn(gitDir string) map[plumbing.ReferenceName]plumbing.Hash {
	out, err := gd.ListRefsUnder(gitDir, displacedRefs) // not every ref: every writer's start asks
	if err != nil {
		return map[plumbing.ReferenceName]plumbing.Hash{}
	}
	return out
}

// mergeDisplaced merges each commit the branch was moved to outside
// gitmem back into it, one merge commit each by the operator (conflicts
// are marked as in a pull), and drops its ref once merged. Called without
// the writer turn, by the maintenance loop and Flush. The wait for the one under way
// ends with ctx (ctx.Err()) or when Close begins (ErrClosed).
func (r *Repo) mergeDisplaced(ctx context.Context) error {
	if err := r.outside.mergeMu.Take(ctx, r.life.Done()); err != nil { // one at a time: Flush waits for the loop's
		return r.gaveUp(err)
	}
	defer r.outside.mergeMu.Unlock()
	if !r.outside.due() {
		return nil
	}
	for name, h := range displacedIn(r.gitDir) {
		st := r.objects.st.View()
		was := plumbing.NewHash(strings.TrimPrefix(name.String(), displacedRefs))
		idx, ok := r.outside.indexFor(was)
		if !ok {
			idx = []plumbing.Hash{r.gitIndex.lastMadeFor()} // displaced by an earlier run: the index file is the best clue left
		}
		m := &merger{store: r, hooks: r.opt.hooks, logf: r.opt.Logf, g: gd.NewGraph(st), st: st, label: "outside-gitmem", theirs: h, limits: policy.DefaultLimits, index: idx, held: r.mirror.heldBefore}
		meta := Meta{Subject: "memory: merge outside-gitmem", Author: r.opt.operator(), Trailers: []Trailer{{TrailerCommand, "merge"}}}
		_, err := r.update(r.life, meta, m.run) // gives up when Close begins
		st.Close()
		if err == nil {
			r.outside.mergedBack.Add(1)
		}
		if errors.Is(err, ErrClosed) {
			return err
		}
		if err != nil && !errors.Is(err, errUpToDate) {
			r.opt.Logf("gitmem: %s, which the branch was moved to outside gitmem, could not be merged back (%v); it is kept as %s and tried again at the next start", h, scrubPaths(err), name)
			continue
		}
		for _, c := range m.conflicts {
			r.opt.Logf("gitmem: merging %s back: conflict (%s) in %s", h, c.Kind, c.Path)
		}
		r.objects.lock()
		if err := r.objects.st.Storage().RemoveReference(name); err != nil {
			r.opt.Logf("gitmem: could not delete %s after merging it back: %v", name, scrubPaths(err))
		}
		r.objects.unlock()
		r.outside.merged(r.gitDir, was)
	}
	return nil
}

// outsideGit is what gitmem knows of commits plain git moved the branch
// to while gitmem held it (or while it let it go): each is kept under
// refs/gitmem/displaced/ (takeBranchBack) and merged back
// (mergeDisplaced).
type outsideGit struct {
	// mergeMu lets one merge back run at a time (the maintenance loop's
	// or Flush's). Taken before the writer turn (the merge is a change, through
	// update) and everything after it.
	mergeMu    lock.Mutex
	waiting    atomic.Bool  // a commit under refs/gitmem/displaced/ waits to be merged back
	mergedBack atomic.Int64 // merges back made (counted once published)

	// mu guards indexAt and its file. No lock is taken with it held.
	mu sync.Mutex
	// indexAt is, for a commit displaced, the commits .git/index may
	// have been written for when git made it (gitIndex.candidates). It
	// is kept in .git/gitmem/displaced-index too, for whoever merges the
	// commit back when this process does not (it exits, or lets the
	// writer lock go, first): the next holder's index knows nothing of
	// the indexes written before it.
	indexAt map[plumbing.Hash][]plumbing.Hash
}

// displacedIndexPath names the file that keeps outsideGit.indexAt.
func displacedIndexPath(gitDir string) string {
	return filepath.Join(gitDir, "gitmem", "displaced-index")
}

// displaced notes that cur was kept to be merged back, and the commits
// .git/index may have been written for when git made it, in gitDir's
// file too.
func (o *outsideGit) displaced(gitDir string, cur plumbing.Hash, index []plumbing.Hash) {
	o.mu.Lock()
	if o.indexAt == nil {
		o.indexAt = map[plumbing.Hash][]plumbing.Hash{}
	}
	o.indexAt[cur] = index
	o.saveLocked(gitDir)
	o.mu.Unlock()
	o.waiting.Store(true)
}

// load adds what gitDir's file notes of the commits displaced, those
// refs (displacedIn) keep, to indexAt (a start, or a lock taken after
// another holder's). A line that
// cannot be read is skipped: its commit is merged back from the index
// file's clue alone (mergeDisplaced).
func (o *outsideGit) load(gitDir string, refs map[plumbing.ReferenceName]plumbing.Hash) {
	data, err := gd.ReadFileMax(displacedIndexPath(gitDir), 1<<20)
	if err != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || slices.ContainsFunc(f, func(s string) bool { return !isObjectHash(s) }) {
			continue
		}
		if _, ok := refs[plumbing.ReferenceName(displacedRefs+f[0])]; !ok {
			continue // merged back since
		}
		if o.indexAt == nil {
			o.indexAt = map[plumbing.Hash][]plumbing.Hash{}
		}
		var idx []plumbing.Hash
		for _, s := range f[1:] {
			idx = append(idx, plumbing.NewHash(s))
		}
		if _, ok := o.indexAt[plumbing.NewHash(f[0])]; !ok {
			o.indexAt[plumbing.NewHash(f[0])] = idx
		}
	}
}

// saveLocked writes indexAt to gitDir's file, one line a commit: its
// hash, then its index's candidates (none: the file is removed). A cache:
// a failure is no error. Called with mu held.
func (o *outsideGit) saveLocked(gitDir string) {
	path := displacedIndexPath(gitDir)
	if len(o.indexAt) == 0 {
		os.Remove(path)
		return
	}
	var b strings.Builder
	for h, idx := range o.indexAt {
		b.WriteString(h.String())
		for _, i := range idx {
			b.WriteString(" " + i.String())
		}
		b.WriteString("\n")
	}
	if err := gd.RewriteCache(path, []byte(b.String()), gd.OwnFileMode); err != nil {
		os.Remove(path)
	}
}

// indexFor is what displaced noted for the commit h.
func (o *outsideGit) indexFor(h plumbing.Hash) ([]plumbing.Hash, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	idx, ok := o.indexAt[h]
	return idx, ok
}

// merged forgets the commit h: merged back (or nothing to merge).
func (o *outsideGit) merged(gitDir string, h plumbing.Hash) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.indexAt[h]; ok {
		delete(o.indexAt, h)
		o.saveLocked(gitDir)
	}
}

// wait notes that a commit waits to be merged back (one left by an
// earlier run).
func (o *outsideGit) wait() { o.waiting.Store(true) }

// waits reports whether a commit waits to be merged back.
func (o *outsideGit) waits() bool { return o.waiting.Load() }

// due reports whether a commit waited, and takes the note: a merge back
// under way takes what was displaced until now.
func (o *outsideGit) due() bool { return o.waiting.Swap(false) }

// merges is how many merges back were made.
func (o *outsideGit) merges() int64 { return o.mergedBack.Load() }
