package gitmem

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

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
}

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

// readJournal returns the journal, or nil when there is none. Its paths
// are checked like a model's: one that is not memories/ or a valid memory
// path beneath it is dropped, and the whole memories folder is repaired
// instead; an unreadable journal (one read that does not parse, or not a
// regular file) means the same. A read that fails (out of file
// descriptors, a disk error, no permission) says nothing of the journal:
// it is an error, and nothing is repaired on it.
func (m *mirror) readJournal() (*journal, error) {
	found, data, err := m.loadJournal()
	if !found || err != nil {
		return nil, err
	}
	var j journal
	if data == nil || json.Unmarshal(data, &j) != nil {
		m.logf("gitmem: the journal is unreadable; the whole worktree will be brought back to HEAD")
		return &journal{Paths: []string{memDir}}, nil
	}
	paths := j.Paths[:0]
	for _, p := range j.Paths {
		if rel, ok := strings.CutPrefix(p, memDir+"/"); (ok && checkRel(rel) == nil) || p == memDir {
			paths = append(paths, p)
			continue
		}
		m.logf("gitmem: ignoring the journal path %q: not a memory path; the whole worktree will be brought back to HEAD", p)
		paths = []string{memDir}
		break
	}
	j.Paths = paths
	return &j, nil
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
			data, err = os.ReadFile(m.journalPath())
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
	if j == nil {
		r.mirror.repairs.setPending(nil)
		return nil
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
			r.opt.Logf("gitmem: could not bring %s back to HEAD yet: %v", p, err)
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
		r.opt.Logf("gitmem: could not sync the repaired worktree: %v", err)
		return nil
	}
	r.mirror.clearJournal(left, j.Checkout)
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
		m.logf("gitmem: could not rewrite the journal: %v", err)
	}
}

// checkRel refuses a memory path (relative to memories/) that a model
// could not have written: gitmem's own files and trees are checked with
// the same rule before a path reaches the tree or the disk.
func checkRel(rel string) error {
	if c, err := policy.ParsePath(policy.Display(rel)); err != nil || c != rel {
		return &DamagedError{Problem: "refusing the path " + policyQuote(rel) + ": not a valid memory path",
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
