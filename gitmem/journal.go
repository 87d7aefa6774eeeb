package gitmem

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/policy"
)

// The journal (.git/gitmem/pending) is gitmem's repair record for the
// worktree. It is written and fsynced before a commit moves the branch and
// names the worktree paths the commit changes, plus any path an earlier
// commit could not mirror (a full disk, a read-only folder). It is removed
// only once every path it names matches HEAD again. While it exists, the
// paths it names are gitmem's own unfinished work: they are brought back
// to HEAD, never adopted as hand edits. A clone leaves one too, marked
// Checkout: its worktree is brought to the branch by the first open, the
// same way (a clone killed half way is finished by the next start), but
// that is a first checkout, not an unfinished change, and is not reported
// as one.
type journal struct {
	Paths    []string `json:"paths"`
	Commit   string   `json:"commit,omitempty"`   // the commit being made
	Parent   string   `json:"parent,omitempty"`   // the branch before it ("" for a first commit)
	Checkout bool     `json:"checkout,omitempty"` // a clone's first checkout, nothing to recover
	// damaged says why the journal cannot say which paths ("": it can;
	// see parseJournal): Paths names the whole memory folder, repaired
	// checked (repairUnnamed), never brought back to HEAD whole.
	damaged string
}

// damage says why the journal cannot say which paths ("": it can).
func (j *journal) damage() string { return j.damaged }

func (m *mirror) journalPath() string { return filepath.Join(m.gitDir, "gitmem", "pending") }

func (m *mirror) writeJournal(j journal) error { return writeJournal(m.env, m.gitDir, j) }

// writeJournal writes the journal of the repository at gitDir, durably
// (a clone writes its first one before the repository is opened).
func writeJournal(env *gd.Env, gitDir string, j journal) error {
	if err := env.Injected(gd.StepJournal, ".git/gitmem/pending"); err != nil {
		return err
	}
	data, _ := json.Marshal(j)
	path := filepath.Join(gitDir, "gitmem", "pending")
	dir := filepath.Dir(path)
	if err := gd.WriteFileSync(dir, "pending-", path, data, 0o600); err != nil {
		return err
	}
	return gd.SyncDir(dir)
}

// readJournal returns the journal, or nil when there is none. A journal
// that cannot say which paths gitmem was writing (see parseJournal) is
// damaged: it names the whole memories folder, repaired checked
// (repairUnnamed). A read that fails (out of file descriptors, a disk
// error, no permission) says nothing of the journal: it is an error, and
// nothing is repaired on it.
func (m *mirror) readJournal() (*journal, error) {
	found, data, err := m.loadJournal()
	if !found || err != nil {
		return nil, err
	}
	j := parseJournal(data)
	return &j, nil
}

// parseJournal parses the journal's bytes (nil: it is not a regular
// file, and was not read). Its paths are checked like a model's: one that
// is not memories/ or a valid memory path beneath it makes the journal
// damaged, and so does a read that does not parse, or a journal that is
// not a regular file: damaged says why, and Paths names memories/.
func parseJournal(data []byte) (j journal) {
	switch {
	case data == nil:
		j.damaged = "it is not a regular file"
	case json.Unmarshal(data, &j) != nil:
		j.damaged = "it does not parse"
	}
	for _, p := range j.Paths {
		if rel, ok := strings.CutPrefix(p, memDir+"/"); (ok && checkRel(rel) == nil) || p == memDir || j.damaged != "" {
			continue
		}
		j.damaged = fmt.Sprintf("it names %q, not a memory path", p)
	}
	if j.damaged != "" {
		return journal{Paths: []string{memDir}, damaged: j.damaged}
	}
	return j
}

// loadJournal reads the journal's file: found is false when there is
// none, data nil when it is not a regular file (which is not read).
func (m *mirror) loadJournal() (found bool, data []byte, err error) {
	fi, err := os.Lstat(m.journalPath())
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil, nil
	}
	if err == nil && fi.Mode().IsRegular() {
		if err = m.env.Injected(gd.StepJournalRead, ".git/gitmem/pending"); err == nil {
			data, err = gd.ReadFile(m.journalPath())
		}
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil, nil // removed since the look
		}
		if data == nil {
			data = []byte{}
		}
	}
	return true, data, wrap("read the journal", err)
}

// repairPending brings the worktree paths a leftover journal names back
// to HEAD and removes the journal once all of them match. What could not
// be repaired stays in repairs.pend (and in the journal) for the next attempt.
// A journal that cannot be read is an error, and nothing is repaired.
// Called with the writer turn and the writer lock held.
func (r *Repo) repairPending() error {
	j, err := r.mirror.readJournal()
	if err != nil {
		return err
	}
	// This process's own paths to repair are repaired too: the journal
	// may lack them, as when the log's replay could write neither them
	// nor it (a full disk). Forgotten, they were taken for hand edits.
	own := r.mirror.repairs.pending()
	switch {
	case j == nil && len(own) == 0:
		return nil
	case j == nil:
		j = &journal{Paths: own}
	default:
		j.Paths = union(j.Paths, own)
	}
	if j.damaged != "" {
		r.opt.Logf("gitmem: the journal (.git/gitmem/pending) is damaged (%s): it cannot say which worktree paths gitmem was writing; the memory files that differ from HEAD are checked", j.damaged)
		return r.repairUnnamed()
	}
	defer r.disk.hold().release() // not while the worktree is being materialised
	// A commit was under way: a branch lock file, if any, is its own.
	gd.RemoveLock(filepath.Join(r.gitDir, filepath.FromSlash(string(r.branch))) + ".lock")
	tree := r.snapshotTree()
	var left []string
	// A folder found where HEAD has a file or nothing holds files made by
	// hand (gitmem's own there, a file it could not remove, waits at its
	// own path, repaired first: the paths beneath one come before it):
	// they are kept, for the adopt, as the follow keeps them
	// (followWorktree).
	slices.Sort(j.Paths)
	slices.Reverse(j.Paths)
	kept := 0
	for _, p := range j.Paths {
		n := lookup(tree, p)
		err := r.mirror.wt.syncKeeping(p, n, r.objects.readBlob)
		if errors.Is(err, errFolderThere) {
			err = r.mirror.wt.syncFolder(p, n, r.objects.readBlob)
			if fi, lerr := r.mirror.wt.lstat(p); err == nil && lerr == nil && fi.IsDir() {
				r.opt.Logf("gitmem: kept the files made by hand in the folder %s, where HEAD has no folder; the adopt commit takes them", p)
				kept++
				continue
			}
		}
		if err != nil {
			r.opt.Logf("gitmem: could not bring %s back to HEAD yet: %v", p, scrubPaths(err))
			left = append(left, p)
		}
	}
	if back := len(j.Paths) - len(left) - kept; back > 0 && !j.Checkout {
		r.opt.Logf("gitmem: brought %d path(s) of an unfinished change back to HEAD", back)
	}
	r.mirror.forget(j.Paths)
	r.mirror.repairs.setPending(left)
	// The repaired files must be on disk before the record of them goes.
	if err := gd.SyncFS(r.objects.st.Env, r.dir, r.mirror.wt.flushList()); err != nil {
		r.opt.Logf("gitmem: could not sync the repaired worktree: %v", scrubPaths(err))
		return nil
	}
	r.mirror.clearJournal(left, j.Checkout)
	return nil
}

// repairUnnamed is repairPending for a damaged journal, which cannot say
// which paths gitmem was writing when it stopped. gitmem writes a
// worktree file whole (a temporary file renamed into place), so a path
// it had yet to follow holds a version an earlier commit put there, or
// nothing: what differs from HEAD and holds a version committed at that
// path (the history index lists them), or is missing, is its own and is
// brought back to HEAD, checked as a follow writes (syncChecked: an edit
// landing meanwhile is kept). Anything else holds text no commit put
// there: made or edited by hand, it is left for the start's adopt
// commit, as a folder with files where HEAD has a file or none is. A
// file put back by hand to a version committed there is brought to HEAD:
// its text is in the history; a file deleted by hand comes back, as in a
// follow. A look that fails (the worktree's, the history's) fails the
// start, nothing changed; a file that cannot be read is left as it is.
// Called with the writer turn and the writer lock held; the disk lock is
// taken here, once the history is read.
func (r *Repo) repairUnnamed() error {
	head, tree := r.state.snapshot()
	drift, err := r.mirror.drifted(tree, []string{memDir}, pathSet{})
	var hist []histRec
	if err == nil && len(drift) > 0 && !head.IsZero() {
		hist, err = r.history(head, saveHeld, nil)
	}
	if err != nil {
		// Nothing changed, the damaged journal stays: the next start
		// checks again (a look without it would adopt gitmem's own).
		return wrap("check the memory files against the history", err)
	}
	committed := map[string]map[plumbing.Hash]bool{} // memory path -> its versions
	for _, rel := range drift {
		committed[rel] = map[plumbing.Hash]bool{}
	}
	for i := range hist {
		for k, rel := range hist[i].paths {
			if v, ok := committed[rel]; ok && !hist[i].blobs[k].IsZero() {
				v[hist[i].blobs[k]] = true
			}
		}
	}
	defer r.disk.hold().release() // not while the worktree is being materialised
	var back, left []string
	kept := 0
	// repair brings rel back to HEAD when it is gitmem's own, and reports
	// whether it was.
	repair := func(rel string) (own bool, err error) {
		p := full(rel)
		n := lookup(tree, p)
		if n != nil && !n.isFile() && !n.isDir() {
			n = nil
		}
		fi, err := r.mirror.wt.lstat(p)
		switch {
		case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return false, nil // not looked at: left as it is
		case err != nil: // missing: a write not done
			return true, r.mirror.syncChecked(p, n, &ownFiles{hashes: map[plumbing.Hash]bool{{}: true}}, r.objects.readBlob)
		case fi.IsDir():
			err := r.mirror.wt.syncKeeping(p, n, r.objects.readBlob)
			if errors.Is(err, errFolderThere) {
				return false, nil // files made by hand in it, for the adopt
			}
			return true, err
		case !fi.Mode().IsRegular() || r.mirror.tooBig(fi.Size()):
			return false, nil
		}
		data, err := r.mirror.wt.readFile(p)
		if err != nil {
			return false, nil // not read: left as it is (the adopt cannot take it either)
		}
		h := plumbing.ComputeHash(plumbing.BlobObject, data)
		if !committed[rel][h] {
			return false, nil
		}
		return true, r.mirror.syncChecked(p, n, &ownFiles{hashes: map[plumbing.Hash]bool{h: true}, found: h}, r.objects.readBlob)
	}
	// The paths beneath a folder come before it; one that waits for its
	// folder (a file HEAD replaced by one) is tried again after.
	slices.Reverse(drift)
	for round := 0; round < 2 && len(drift) > 0; round++ {
		var again []string
		for _, rel := range drift {
			own, err := repair(rel)
			switch {
			case err != nil:
				again = append(again, rel)
			case own:
				back = append(back, full(rel))
			default:
				kept++
			}
		}
		drift = again
	}
	for _, rel := range drift {
		r.opt.Logf("gitmem: could not bring %s back to HEAD yet", full(rel))
		left = append(left, full(rel))
	}
	r.opt.Logf("gitmem: %d memory file(s) that hold a version gitmem committed there, or are missing, brought back to HEAD; %d that no commit put there kept for the adopt commit", len(back), kept)
	r.mirror.forget(back)
	r.mirror.repairs.setPending(left)
	if err := gd.SyncFS(r.objects.st.Env, r.dir, r.mirror.wt.flushList()); err != nil {
		r.opt.Logf("gitmem: could not sync the repaired worktree: %v", scrubPaths(err))
		return nil
	}
	if len(left) == 0 {
		// A folder there (not gitmem's) stays: fsck names it.
		os.Remove(r.mirror.journalPath())
	}
	return nil
}

// clearJournal removes the journal, or, while paths still wait for repair,
// rewrites it to name only them (a checkout's still a checkout).
func (m *mirror) clearJournal(left []string, checkout bool) {
	if len(left) == 0 {
		os.Remove(m.journalPath())
		return
	}
	if err := m.writeJournal(journal{Paths: left, Checkout: checkout}); err != nil {
		m.logf("gitmem: could not rewrite the journal: %v", scrubPaths(err))
	}
}

// checkRel refuses a memory path (relative to memories/) that a model
// could not have written: gitmem's own files and trees are checked with
// the same rule before a path reaches the tree or the disk. The error
// quotes at most the path's first 64 bytes (a tree made by hand can hold
// a path of any length, which was quoted whole: a message of megabytes).
func checkRel(rel string) error {
	if policy.IsPlainRel(rel) {
		return nil // as ParsePath would take it (checked without allocating)
	}
	if c, err := policy.ParsePath(policy.Display(rel)); err != nil || c != rel {
		q := policyQuote(rel)
		if p := policy.Prefix(rel, 64); len(p) < len(rel) {
			q = policyQuote(p) + "..."
		}
		return &DamagedError{Problem: "refusing the path " + q + ": not a valid memory path",
			Repair: "run gitmem fsck"}
	}
	return nil
}

func policyQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// union returns the sorted union of path lists.
func union(a, b []string) []string {
	out := append(append([]string(nil), a...), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// pathSet is a set of repository paths.
type pathSet map[string]bool

func newPathSet(paths []string) pathSet {
	s := make(pathSet, len(paths))
	for _, p := range paths {
		s[p] = true
	}
	return s
}

// coversFolder reports whether p is in the set or beneath a path of it
// that tree holds a folder at (the memory folder is one).
func (s pathSet) coversFolder(p string, tree *node) bool {
	if s[p] {
		return true
	}
	for a := p; len(s) > 0 && strings.Contains(a, "/"); {
		if a = path.Dir(a); s[a] && (a == memDir || lookup(tree, a).isDir()) {
			return true
		}
	}
	return false
}

// covers reports whether p is in the set or beneath a path of it: one
// lookup per folder on p's way, however large the set.
func (s pathSet) covers(p string) bool {
	if len(s) == 0 {
		return false
	}
	for {
		if s[p] {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// under reports whether repository path p is one of roots or beneath one.
func under(p string, roots []string) bool {
	for _, r := range roots {
		if within(p, r) {
			return true
		}
	}
	return false
}

// within reports whether repository path p is root or beneath it.
func within(p, root string) bool {
	return p == root || len(p) > len(root) && p[len(root)] == '/' && p[:len(root)] == root
}

// repoPaths turns memory paths (relative to memories/) into repository
// paths.
func repoPaths(rels []string) []string {
	out := make([]string, len(rels))
	for i, p := range rels {
		out[i] = full(p)
	}
	return out
}
