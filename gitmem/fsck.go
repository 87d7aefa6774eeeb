package gitmem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/gitmem/internal/lock"
)

// bareStore is a repository as fsck reads it, without opening it (Open
// may refuse it): its files under gitDir, its branch, its history index
// file and an object store of fsck's own. It repairs through a Repo it
// opens only once the repository can be opened.
type bareStore struct {
	gitDir string
	branch plumbing.ReferenceName
	obj    *gd.Store
	hist   *historyIndex // for its file only
	flock  *gd.FileLock  // the writer lock, held (nil: read-only, or it could not be opened)
	// journalThere: what is at the journal's path is no file of gitmem's
	// (a folder), moved aside by the repair once the open checked the
	// memory files (checkJournal).
	journalThere bool
}

func (r *Repo) headCommits() ([]Commit, error) {
	r.objects.lock()
	defer r.objects.unlock()
	return headCommits(r.objects.st)
}

// headCommits returns every commit that no other commit names as a parent
// (the tips a branch could point at), newest first by commit time. It
// reads every object: it is for a repository whose branch is lost. A
// pack listed before its index was in place is read once listed again
// (Relisted). Called with st's lock held (objects.mu, for the Repo's).
func headCommits(st *gd.Store) ([]Commit, error) {
	st.Reindex()
	var all map[plumbing.Hash]*object.Commit
	var parents map[plumbing.Hash]bool
	err := st.Relisted(func() error {
		all, parents = map[plumbing.Hash]*object.Commit{}, map[plumbing.Hash]bool{}
		iter, err := st.Storage().IterEncodedObjects(plumbing.CommitObject)
		if err != nil {
			return err
		}
		err = iter.ForEach(func(o plumbing.EncodedObject) error {
			c, err := object.DecodeCommit(st.Storage(), o)
			if err != nil {
				return nil // a damaged commit is fsck's to report, not a tip
			}
			all[c.Hash] = c
			for _, p := range c.ParentHashes {
				parents[p] = true
			}
			return nil
		})
		if errors.Is(err, storer.ErrStop) {
			err = nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []Commit
	for h, c := range all {
		if !parents[h] {
			out = append(out, commitOf(c))
		}
	}
	slices.SortFunc(out, func(a, b Commit) int {
		if c := all[plumbing.NewHash(b.Hash)].Committer.When.Compare(all[plumbing.NewHash(a.Hash)].Committer.When); c != 0 {
			return c
		}
		return strings.Compare(a.Hash, b.Hash)
	})
	return out, nil
}

// Problem is one thing fsck found wrong.
type Problem struct {
	What     string // what is wrong
	Repair   string // how to repair it ("" when --repair does)
	Repaired bool   // --repair repaired it
}

// FsckReport is what Fsck found and did.
type FsckReport struct {
	Head   string // the commit HEAD's branch is at (after repair)
	Branch string // the branch HEAD names, refs/heads/main
	// BranchState says why Head is empty: "missing" (the branch does not
	// exist while the repository holds commits), "damaged" (its file holds
	// no commit hash) or "unborn" (a repository without commits); empty
	// when Head is set.
	BranchState string
	Commits     int // commits of HEAD's history checked
	Objects     int // objects read and verified
	Problems    []Problem
	// Unrecovered: acknowledged changes the write-ahead log holds that
	// git's files lack (found before any repair), or the process that
	// holds the writer lock while its checkpoint fails (Holder).
	Unrecovered Unrecovered
}

// unrecoveredText words what the write-ahead log holds for fsck: how many
// changes and, up to ten, their tool_use ids.
func unrecoveredText(u Unrecovered) string {
	s := fmt.Sprintf("%d acknowledged change(s) are in the write-ahead log (.git/gitmem/wal) but not yet in git's files (gitmem was stopped before writing them there)", u.Changes)
	if len(u.IDs) > 0 {
		ids := u.IDs
		more := ""
		if len(ids) > 10 {
			ids, more = ids[:10], fmt.Sprintf(" and %d more", len(u.IDs)-10)
		}
		s += "; tool_use ids: " + strings.Join(ids, ", ") + more
	}
	return s
}

// Fsck checks a repository gitmem may refuse to open: HEAD and its branch,
// an interrupted change or redaction, every object reachable from HEAD
// (read and hashed, and checked as git fsck --strict checks them), git's
// derived files (a commit-graph or multi-pack-index that names what is
// gone), git maintenance's lock left behind, the history index, and the
// worktree against HEAD.
// A .git/config that does not parse is reported, with how to repair it
// by hand; nothing else is repaired until it is.
// With repair it fixes what it safely can: a lost or damaged branch is
// pointed at the newest commit that no other commit descends from (the
// history index's tip when it is one), then the repository is opened,
// which finishes interrupted work and adopts hand edits; stale derived
// files are removed (git writes them again at its next gc). Damaged objects
// it can only name; the fix is a copy from a clone or backup, or for a
// file's blob `gitmem redact --blob` to remove it from every commit.
//
// Fsck works on a repository Open refuses; it takes the writer lock,
// waiting for another process that holds it until ctx is done (then it
// returns ctx.Err(), having checked nothing) or opt.LockWait is over (a
// *LockHeldError; the repair's Open waits again so).
func Fsck(ctx context.Context, dir string, opt Options, repair bool) (FsckReport, error) {
	var rep FsckReport
	opt.defaults(dir)
	gitDir := filepath.Join(dir, ".git")
	if fi, err := os.Stat(gitDir); err != nil || !fi.IsDir() {
		return rep, ErrNotRepository
	}
	if gd.Interrupted(gitDir) {
		return rep, ErrInterrupted
	}
	if err := checkOwner(gitDir, opt); err != nil {
		return rep, err
	}
	r := &bareStore{gitDir: gitDir, obj: opt.hooks.open(gitDir), hist: newHistoryIndex(gitDir, opt.hooks)}
	defer r.obj.Close()
	if branch, err := gd.ReadHEAD(gitDir); err == nil {
		r.branch = branch
	} else {
		r.branch, _ = detachedBranch(gitDir, r.obj)
	}
	// A .git/config that does not parse is repaired by hand first: until
	// then nothing is repaired (the repair opens the repository), and
	// whether gitmem made the repository cannot be read from its mark.
	var de *DamagedError
	if marked, err := gd.Marked(r.obj.Env, gitDir); errors.As(err, &de) {
		rep.add(Problem{What: de.Problem, Repair: de.Repair})
		repair = false
	} else if err != nil {
		return rep, wrap("read .git/config", err)
	} else if !marked && !opt.Adopt && !madeByGitmem(r.gitDir, r.branch, r.obj) {
		return rep, ErrForeign
	}
	if !opt.ReadOnly {
		if l, err := gd.OpenFileLock(filepath.Join(gitDir, "gitmem", "lock")); err == nil {
			defer l.Close()
			// Queued as a writer's Open queues, holding the intent file
			// while it waits: a serve that holds the lock lets it go.
			acquire := l.LockContext
			if in, err := gd.OpenFileLock(filepath.Join(gitDir, "gitmem", "intent")); err == nil {
				defer in.Close()
				acquire = lock.NewWriter(l, in).Acquire
			}
			if err := waitLock(ctx, &opt, gitDir, acquire, l.TryLock); err != nil {
				var held *LockHeldError
				if ctx.Err() != nil || errors.As(err, &held) {
					return rep, err
				}
				return rep, wrap("lock the repository", err)
			}
			defer l.Unlock()
			r.flock = l
		}
	}
	head, err := r.checkBranch(&rep, repair)
	if err != nil {
		return rep, err
	}
	// A .git/packed-refs that is not a file: a branch found in its own
	// file is read without it, but git's every read of the refs, and
	// gitmem's of one packed there, refuses it (or a FIFO's waits on it).
	if d := gd.CheckPackedRefs(gitDir); d != nil {
		rep.add(Problem{What: d.Problem, Repair: d.Repair})
	}
	writes := repair && !opt.ReadOnly
	r.checkHistory(&rep, head, writes)
	historyDamaged := r.checkLeftovers(&rep, repair, writes)
	checkMaintenanceLock(&rep, r.obj.Env, r.gitDir, writes && !rep.damagedObjects())
	if err := checkKeeps(&rep, r.gitDir, writes && r.flock != nil); err != nil {
		return rep, err
	}
	if err := r.checkMemories(&rep, dir, writes && !rep.damagedObjects()); err != nil {
		return rep, err
	}
	if writes && !rep.damagedObjects() {
		r.flock.Unlock()
		repo, err := Open(ctx, dir, opt)
		if err != nil {
			return rep, err
		}
		if historyDamaged {
			err = repo.rebuildHistoryIndex(ctx)
		}
		if err == nil {
			err = repo.Flush(ctx) // merges back what waits under refs/gitmem/displaced/
		}
		if cerr := repo.Close(); err == nil {
			err = cerr
		}
		if err == nil && r.journalThere {
			err = wrap("move the journal's path aside", os.Rename(filepath.Join(gitDir, "gitmem", "pending"), filepath.Join(gitDir, filepath.FromSlash(journalAside))))
		}
		return rep, err
	}
	return rep, nil
}

func (rep *FsckReport) add(p Problem) { rep.Problems = append(rep.Problems, p) }

// memAside is where fsck --repair moves a memories that is not a folder.
const memAside = memDir + ".was-a-file"

// memoriesNotAFolder returns a *DamagedError when the repository's
// memories is there but is not a folder (a file, or a link to none): the
// memory files have no place, and gitmem cannot open it for writing.
func memoriesNotAFolder(dir string) error {
	fi, err := os.Lstat(filepath.Join(dir, memDir))
	if err != nil || fi.IsDir() {
		return nil // none (Open makes it), or the folder
	}
	// A symlink too, even to a folder: the worktree's files are never
	// written through one (they would leave the repository), and git
	// would track the link.
	what := "a file"
	if fi.Mode()&fs.ModeSymlink != 0 {
		what = "a symlink"
	}
	return &DamagedError{Problem: memDir + " is " + what + ", not the folder of the memory files",
		Repair: "gitmem fsck --repair moves it aside to " + memAside + " and puts the memory files back as HEAD holds them"}
}

// checkMemories reports a memories that is not a folder. writes moves it
// aside to memAside (kept as it is) and has the open that follows bring
// the folder back to HEAD, as a clone's first checkout is (the journal
// names all of memories/): the memory files are not taken as deleted by
// hand. A memAside already there is left for the operator.
func (r *bareStore) checkMemories(rep *FsckReport, dir string, writes bool) error {
	var de *DamagedError
	if !errors.As(memoriesNotAFolder(dir), &de) {
		return nil
	}
	p := Problem{What: de.Problem, Repair: de.Repair}
	if writes {
		aside := filepath.Join(dir, memAside)
		if _, err := os.Lstat(aside); err == nil {
			p.Repair = "move it aside by hand (" + memAside + " is taken), then run gitmem fsck --repair"
		} else {
			// A journal left by an unfinished change keeps its commit and
			// now names all of memories/; none: a first checkout's.
			j := journal{Checkout: true}
			if data, err := gd.ReadFile(filepath.Join(r.gitDir, "gitmem", "pending")); err == nil {
				j = journal{}
				json.Unmarshal(data, &j) // unreadable: the whole folder is repaired anyway
			}
			j.Paths = []string{memDir}
			if err := writeJournal(r.obj.Env, r.gitDir, j); err != nil {
				return wrap("write the journal", err)
			}
			if err := os.Rename(filepath.Join(dir, memDir), aside); err != nil {
				return wrap("move "+memDir+" aside", err)
			}
			p.Repaired = true
		}
	}
	rep.add(p)
	return nil
}

// checkBranch checks HEAD and its branch, and returns the commit the
// branch is at (zero: none). With repair a damaged HEAD names main again,
// and a lost or damaged branch is pointed at bestTip.
func (r *bareStore) checkBranch(rep *FsckReport, repair bool) (plumbing.Hash, error) {
	branch, err := gd.ReadHEAD(r.gitDir)
	var de *DamagedError
	if on, ok := detachedBranch(r.gitDir, r.obj); ok {
		// git's checkout of a commit of the branch: the open that
		// follows a repair puts HEAD and the files back (putHeadBack);
		// pointing HEAD alone at the branch would leave the files
		// checked out to be taken as hand edits.
		rep.add(Problem{What: "HEAD is detached (git checkout of a commit of " + on.Short() + ")", Repaired: repair,
			Repair: "gitmem fsck --repair or the next gitmem serve puts HEAD and the files back on " + on.Short() + ", as git checkout " + on.Short() + " does"})
		branch, err = on, nil
	} else if errors.As(err, &de) {
		rep.add(Problem{What: de.Problem, Repaired: repair})
		branch = plumbing.NewBranchReferenceName("main")
		if repair {
			if err := gd.ReplaceLocked(context.Background(), filepath.Join(r.gitDir, "HEAD"), []byte("ref: "+branch.String()+"\n"), nil); err != nil {
				return plumbing.ZeroHash, wrap("repair HEAD", err)
			}
		}
	} else if err != nil {
		return plumbing.ZeroHash, wrap("read HEAD", err)
	}
	r.branch = branch
	rep.Branch = branch.String()
	head, err := gd.ReadRef(r.gitDir, branch)
	de = nil
	switch {
	case errors.As(err, &de), errors.Is(err, gd.ErrNoRef):
		rep.BranchState = "missing"
		if de != nil {
			rep.BranchState = "damaged"
		}
		tip, err := r.bestTip()
		if err != nil {
			return plumbing.ZeroHash, wrap("look for commits", err)
		}
		if tip.IsZero() {
			if de != nil {
				rep.add(Problem{What: de.Problem, Repair: "the repository holds no commit to point it at; delete the branch file to start anew"})
			} else {
				rep.BranchState = "unborn"
			}
			return plumbing.ZeroHash, nil // a new repository
		}
		what := fmt.Sprintf("the branch %s is missing while the repository holds commits", branch)
		if de != nil {
			what = de.Problem
		}
		rep.add(Problem{What: what + fmt.Sprintf("; its newest commit is %s", tip), Repaired: repair,
			Repair: fmt.Sprintf("gitmem fsck --repair, or git update-ref %s %s", branch, tip)})
		if repair {
			if err := os.Remove(filepath.Join(r.gitDir, filepath.FromSlash(branch.String()))); err != nil && !errors.Is(err, os.ErrNotExist) {
				return plumbing.ZeroHash, wrap("repair the branch", err)
			}
			if err := r.obj.UpdateRef(context.Background(), branch, plumbing.ZeroHash, tip, true); err != nil {
				return plumbing.ZeroHash, wrap("repair the branch", err)
			}
			head = tip
		}
	case err != nil:
		return plumbing.ZeroHash, wrap("read the branch", err)
	}
	return head, nil
}

// checkHistory checks every object HEAD's history and the commits
// waiting to be merged back reach (checkObjects), and git's derived
// files (a commit-graph, a multi-pack-index) that name what the
// repository no longer holds; writes removes those.
func (r *bareStore) checkHistory(rep *FsckReport, head plumbing.Hash, writes bool) {
	// Commits the branch was moved to outside gitmem, waiting to be
	// merged back.
	var tips []plumbing.Hash
	for name, h := range displacedIn(r.gitDir) {
		tips = append(tips, h)
		rep.add(Problem{What: fmt.Sprintf("the commit %s, which the branch was moved to outside gitmem, waits to be merged back (%s)", h, name),
			Repair: "it is merged back by the next gitmem serve or writing command (gitmem fsck --repair does it now)", Repaired: writes})
	}
	if !head.IsZero() {
		rep.Head, rep.BranchState = head.String(), ""
		tips = append([]plumbing.Hash{head}, tips...)
	}
	trees := r.checkObjects(tips, rep)
	r.obj.Reindex()
	stale := gd.StaleDerived(r.gitDir, true, r.obj.OnDisk, func(c plumbing.Hash) (plumbing.Hash, bool) {
		t, ok := trees[c]
		return t, ok
	})
	r.obj.Release()
	for _, d := range stale {
		rep.add(Problem{What: fmt.Sprintf("git's .git/%s is stale: %s (git fsck fails on it)", d.Path, d.Why), Repaired: writes,
			Repair: "gitmem fsck --repair removes it (git writes it again at its next gc)"})
	}
	if writes {
		gd.RemoveDerived(r.gitDir, stale)
	}
}

// journalAside is where fsck --repair moves what is at the journal's path
// and is not a regular file (a folder).
const journalAside = "gitmem/pending.damaged"

// checkJournal reports a damaged journal (parseJournal), and reports
// whether the journal, if any, is sound. One that is a regular file is
// repaired by the next open (repairUnnamed); anything else at its path
// (a folder) is no file of gitmem's: writes moves it aside, as it is.
func (r *bareStore) checkJournal(rep *FsckReport, repair, writes bool) (sound bool) {
	path := filepath.Join(r.gitDir, "gitmem", "pending")
	fi, err := os.Lstat(path)
	if err != nil {
		return true
	}
	var data []byte
	if fi.Mode().IsRegular() {
		if data, err = gd.ReadFile(path); err != nil {
			return true // read again by the open, which fails on it
		}
	}
	j := parseJournal(data)
	if j.damage() == "" {
		return true
	}
	p := Problem{What: "the journal (.git/gitmem/pending) is damaged (" + j.damage() + "): it cannot say which worktree paths an interrupted change was writing",
		Repair:   "gitmem checks the memory files when it next opens the repository (gitmem fsck --repair does): those that hold a version committed at their path, or are missing, are brought back to HEAD, the others adopted",
		Repaired: repair}
	if data == nil {
		p.Repair = "gitmem fsck --repair checks the memory files as for a journal that does not parse, then moves it aside to .git/" + journalAside
		p.Repaired = writes
		if _, err := os.Lstat(filepath.Join(r.gitDir, filepath.FromSlash(journalAside))); err == nil {
			p.Repair = "move it aside by hand (.git/" + journalAside + " is taken), then run gitmem fsck --repair"
			p.Repaired = false
		}
		r.journalThere = p.Repaired
	}
	rep.add(p)
	return false
}

// checkLeftovers reports what interrupted work left: a change or a
// redaction to finish, acknowledged changes only the write-ahead log
// holds, a damaged history index (historyDamaged: the repair rebuilds
// it).
func (r *bareStore) checkLeftovers(rep *FsckReport, repair, writes bool) (historyDamaged bool) {
	journalOK := r.checkJournal(rep, repair, writes)
	for _, f := range []struct{ path, what string }{
		{"gitmem/pending", "a change was interrupted before the worktree followed it"},
		{"gitmem/redact", "a redaction was interrupted"},
	} {
		if _, err := os.Stat(filepath.Join(r.gitDir, filepath.FromSlash(f.path))); err == nil && (f.path != "gitmem/pending" || journalOK) {
			rep.add(Problem{What: f.what + " (.git/" + f.path + ")", Repair: "gitmem finishes it when it next opens the repository (gitmem fsck --repair does)", Repaired: repair})
		}
	}
	// Acknowledged changes a killed gitmem left in the write-ahead log.
	// Under the writer lock (repair) the log is stable; without it, a
	// process holding the lock has recovered the log itself.
	held := false
	if r.flock == nil {
		held, _ = gd.HeldElsewhere(filepath.Join(r.gitDir, "gitmem", "lock"))
	}
	if held {
		rep.Unrecovered.Holder = readHolder(r.gitDir) // its checkpoint fails: git's files lack what it acknowledged
	} else {
		u, err := unrecoveredIn(r.gitDir, r.branch, r.obj)
		if err != nil {
			what := strings.TrimPrefix(err.Error(), "gitmem: ")
			var de *DamagedError
			if errors.As(err, &de) {
				what = de.Problem
			}
			rep.add(Problem{What: what, Repair: "if gitmem was not killed while writing it, move .git/gitmem/wal and wal2 aside and run gitmem fsck again"})
		} else if u.Changes > 0 {
			rep.Unrecovered = u
			rep.add(Problem{What: unrecoveredText(u), Repaired: writes && !rep.damagedObjects(),
				Repair: "they are recovered by the next gitmem serve or writing command (gitmem fsck --repair does it now)"})
		}
	}
	if what := r.hist.damage(); what != "" {
		historyDamaged = true
		rep.add(Problem{What: what, Repaired: writes && !rep.damagedObjects(),
			Repair: "gitmem fsck --repair rebuilds it from the history"})
	}
	return historyDamaged
}

// checkKeeps reports a .git/gitmem/keep edited in place (see
// gd.RelabelledKeeps); writes writes it anew and links the packs' .keep
// files it kept to it again. git reads a .keep by its name alone: a pack
// keeps one throughout.
func checkKeeps(rep *FsckReport, gitDir string, writes bool) error {
	keeps, template := gd.RelabelledKeeps(gitDir)
	if len(keeps) == 0 && !template {
		return nil
	}
	rep.add(Problem{What: fmt.Sprintf(".git/gitmem/keep, the .keep file of every pack gitmem writes (one file, linked), was edited in place: %d pack(s) no longer say they are gitmem's, and gitmem gc never folds them (git's gc keeps them either way)", len(keeps)),
		Repair: "gitmem fsck --repair writes it anew and makes those .keep files links of it again", Repaired: writes})
	if writes {
		return wrap("repair the packs' .keep files", gd.RelinkKeeps(gitDir, keeps))
	}
	return nil
}

// checkMaintenanceLock reports git's .git/objects/maintenance.lock when
// no running gitmem holds it: while it is there no gc deletes a pack
// another replaced, and git maintenance skips its runs. One a killed
// gitmem left is removed by the next start (repaired: the open that
// follows does it); one of git's, only once it is older than a run of
// git maintenance takes (gd.StaleTemp), with the rm to run if none runs.
func checkMaintenanceLock(rep *FsckReport, env *gd.Env, gitDir string, repaired bool) {
	left, killed, since := gd.MaintenanceLockLeft(env, gitDir)
	const what = "while it is there gitmem gc deletes no pack another pack replaced (packs pile up) and git maintenance skips its runs"
	switch {
	case left && killed:
		rep.add(Problem{What: "a gitmem that was killed left .git/objects/maintenance.lock: " + what, Repaired: repaired,
			Repair: "it is removed by the next gitmem serve or writing command (gitmem fsck --repair does it now)"})
	case left && time.Since(since) > gd.StaleTemp:
		rep.add(Problem{What: fmt.Sprintf(".git/objects/maintenance.lock, git maintenance's lock, has been there since %s, longer than a git maintenance run takes: %s",
			since.UTC().Format(time.RFC3339), what),
			Repair: "if no git maintenance runs, delete it: rm .git/objects/maintenance.lock"})
	}
}

// damagedObjects reports whether an object cannot be read (one git fsck
// --strict fails on reads well).
func (rep FsckReport) damagedObjects() bool {
	for _, p := range rep.Problems {
		if strings.HasPrefix(p.What, "object ") && !strings.Contains(p.What, "fails git fsck --strict") {
			return true
		}
	}
	return false
}

// bestTip is the commit a lost branch should point at: the history
// index's tip if it is one of the repository's tip commits, else the
// newest tip commit; zero when it holds none. An error when its commits
// could not be read (not taken for a new repository's none).
func (r *bareStore) bestTip() (plumbing.Hash, error) {
	tips, err := headCommits(r.obj)
	r.obj.Release()
	if err != nil || len(tips) == 0 {
		return plumbing.ZeroHash, err
	}
	if t := r.hist.fileTip(); !t.IsZero() {
		for _, c := range tips {
			if c.Hash == t.String() {
				return t, nil
			}
		}
	}
	return plumbing.NewHash(tips[0].Hash), nil
}

// checkObjects reads every commit the tips reach (HEAD and the commits
// waiting to be merged back) and every tree and blob they reach, once
// each, and verifies each object's hash.
func (r *bareStore) checkObjects(tips []plumbing.Hash, rep *FsckReport) (trees map[plumbing.Hash]plumbing.Hash) {
	trees = map[plumbing.Hash]plumbing.Hash{} // commit -> its tree
	r.obj.Hold()
	defer func() {
		r.obj.Unhold()
		r.obj.Release()
	}()
	oc := &objectCheck{st: r.obj, rep: rep, seen: map[plumbing.Hash]bool{}}
	// Every commit the tips reach, both sides of every merge.
	for stack := slices.Clone(tips); len(stack) > 0; {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if oc.seen[h] {
			continue
		}
		oc.seen[h] = true
		rep.Commits++
		rep.Objects++
		if err := r.obj.Verify(plumbing.CommitObject, h); err != nil {
			oc.bad("commit", h, "", err)
			continue
		}
		oc.strict("commit", h, "", gd.CheckCommit(oc.content(h)))
		c, err := r.obj.Commit(h)
		if err != nil {
			continue // named above: it cannot be parsed
		}
		trees[h] = c.TreeHash
		oc.walk(c.TreeHash, "")
		stack = append(stack, c.ParentHashes...)
	}
	return trees
}

// objectCheck is checkObjects' reading of the objects: each read once
// (seen), verified, and checked as git fsck --strict checks it.
type objectCheck struct {
	st   *gd.Store
	rep  *FsckReport
	seen map[plumbing.Hash]bool
}

// bad reports an object that cannot be read.
func (oc *objectCheck) bad(kind string, h plumbing.Hash, at string, err error) {
	what := fmt.Sprintf("object %s (%s%s) is damaged: %v", h, kind, inPath(at), err)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		what = fmt.Sprintf("object %s (%s%s) is missing from git's files", h, kind, inPath(at))
		if kind == "commit" {
			what += ": the history stops there (git log: \"Failed to traverse parents\"); something deleted it (git gc --prune=now run while an earlier gitmem wrote could)"
		}
	}
	oc.rep.add(Problem{What: what, Repair: missingRepair(kind, h)})
}

// strict reports what git fsck --strict fails an object on.
func (oc *objectCheck) strict(kind string, h plumbing.Hash, at string, ps []gd.ObjectProblem) {
	for _, p := range ps {
		oc.rep.add(Problem{What: fmt.Sprintf("object %s (%s%s) fails git fsck --strict: %s", h, kind, inPath(at), p),
			Repair: "an object cannot be mended in place; a redaction that removes it from every commit (gitmem redact PATH, or --blob SHA) makes git fsck --strict pass"})
	}
}

// content reads an object that Verify found sound.
func (oc *objectCheck) content(h plumbing.Hash) []byte {
	_, data, _ := oc.st.ReadObject(h)
	return data
}

// walk checks the tree h, at path at, and what it holds.
func (oc *objectCheck) walk(h plumbing.Hash, at string) {
	if oc.seen[h] {
		return
	}
	oc.seen[h] = true
	oc.rep.Objects++
	if err := oc.st.Verify(plumbing.TreeObject, h); err != nil {
		oc.bad("tree", h, at, err)
		return
	}
	special := map[plumbing.Hash]string{}
	ps := gd.CheckTree(oc.content(h), func(b plumbing.Hash, file string) { special[b] = file })
	oc.strict("tree", h, at, ps)
	t, err := oc.st.Tree(h)
	if err != nil {
		return // named above: it cannot be parsed
	}
	for _, e := range t.Entries {
		p := join2(at, e.Name)
		switch {
		case e.Mode == filemode.Dir:
			oc.walk(e.Hash, p)
		case e.Mode == filemode.Submodule || oc.seen[e.Hash]:
		default:
			oc.seen[e.Hash] = true
			oc.rep.Objects++
			if err := oc.st.Verify(plumbing.BlobObject, e.Hash); err != nil {
				oc.bad("blob", e.Hash, p, err)
			} else if file, ok := special[e.Hash]; ok {
				oc.strict("blob", e.Hash, p, gd.CheckBlob(oc.content(e.Hash), file))
			}
		}
	}
}
