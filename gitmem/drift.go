package gitmem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/policy"
)

// Hand edits. An operator may change files under memories/ at any time,
// gitmem running or not. gitmem never overwrites such an edit: before a
// change touches (or a command looks at) a file whose worktree copy
// differs from HEAD, the worktree's version is committed as an adopt
// commit by the operator, and the command runs on it. At start the whole
// worktree is checked the same way (not with Options.TouchedOnly: a
// revert's or a restore's change checks the files it reads or changes):
// one command's start before Open returns, a server's right after, with
// the writer turn the start held (checkLater; what waits for it there).
// Paths named by the journal are gitmem's own unfinished writes, not hand
// edits: they are repaired, never adopted.
//
// Checking a file costs one lstat: the mirror's stat cache keeps the
// lstat data of each worktree file last seen holding its HEAD blob, with
// that blob (seeded from .git/index at start), and only a file whose lstat
// data differs is read and hashed. What such a read learns goes into the next .git/index
// written (git's own refresh): a start after the folder was copied reads
// every file once, the next one none.

// sameAsTree reports whether the worktree file at repository path p (with
// lstat data fi) holds blob h, reading it only when the cached lstat data
// does not vouch for it.
func (m *mirror) sameAsTree(p string, fi fs.FileInfo, n *node) (bool, error) {
	h := n.hash
	if m.stats.vouches(p, gd.StatOf(fi), h) {
		return true, nil
	}
	if m.tooBig(fi.Size()) && fi.Size() != n.size {
		return false, nil // not read: see adoptDrift
	}
	// What is cached is the lstat data of the file read, taken on the
	// descriptor read from before and after the read (not fi, which may
	// be of an older file at p): an edit that lands after the read changes
	// it, and the next look reads the file again.
	data, st, err := m.wt.readRegular(p, -1, true)
	if errors.Is(err, errNotRegular) || errors.Is(err, fs.ErrNotExist) { // replaced or removed since it was looked at: not the blob
		return false, nil
	}
	if leased(err) {
		// Another program holds a lease on it: it cannot be read without
		// waiting for that program. Taken as HEAD's until it can be
		// (not cached); a change of gitmem's to it keeps that program's
		// file (syncChecked, errWriting).
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if plumbing.ComputeHash(plumbing.BlobObject, data) != h {
		return false, nil
	}
	if before, after := gd.StatOf(st[0]), gd.StatOf(st[1]); before == after && !after.Racy(time.Now()) {
		m.stats.put(p, statEntry{after, h}, true)
	}
	return true, nil
}

// leaveTooBig leaves the file rel (relative to memories/), made by hand
// over the largest file size (2 GB of zeros, say), where it is: never read
// (the whole file would be in memory), never committed. The error log
// names it once, and again only if its size changes. Called with the writer turn held.
func (m *mirror) leaveTooBig(rel string, size int64) {
	m.tooBigMu.Lock()
	n, named := m.tooBigLogged[rel]
	if m.tooBigLogged == nil {
		m.tooBigLogged = map[string]int64{}
	}
	m.tooBigLogged[rel] = size
	if !named {
		m.tooBigChanges++
	}
	m.tooBigMu.Unlock()
	if named && n == size {
		return
	}
	m.errorf("gitmem: %s is %s, over the limit of %s per file: it is not committed, nor shown to the model; shrink or remove it",
		full(rel), policy.Count(size, "byte"), policy.Count(m.maxFileBytes, "byte"))
}

// tooBigGone forgets that the file rel was named as over the largest
// file size: it is no longer, and is named again if it grows over it.
// Called with the writer turn held.
func (m *mirror) tooBigGone(rel string) {
	m.tooBigMu.Lock()
	if _, ok := m.tooBigLogged[rel]; ok {
		delete(m.tooBigLogged, rel)
		m.tooBigChanges++
	}
	m.tooBigMu.Unlock()
	m.leftBefore.drop(rel)
}

// leftByAdopt reports whether an adopt left the file rel (relative to
// memories/) on disk, uncommitted: for want of room (leaveRoomless), or
// over the largest file size (leaveTooBig), and has not taken it since;
// or an earlier process's adopt did (leftBefore, loadLeft).
func (m *mirror) leftByAdopt(rel string) bool {
	if m.roomless.has(rel) || m.leftBefore.has(rel) {
		return true
	}
	m.tooBigMu.Lock()
	defer m.tooBigMu.Unlock()
	_, ok := m.tooBigLogged[rel]
	return ok
}

// leftPath names the file that carries the files an adopt left (for
// want of room, over the largest file size: leftByAdopt) to the next
// process, above all one that replays the write-ahead log after this one
// was killed. Known in memory only, they were unknown to the replay's
// follow of a rename of their folder, which took such a file for one made
// in the folder while the model renamed it, and bound it for the folder's
// new place: it was then committed there past the most files, or, once
// shrunk below the largest file size, merged between conflict markers
// into the file the model made there since. It holds one path (relative
// to memories/) a line, and is there only while some are left.
func (m *mirror) leftPath() string { return filepath.Join(m.gitDir, "gitmem", leftName) }

const leftName = "left"

// saveLeft writes the files left (leftByAdopt's) to leftPath, durably, or
// removes it when none is left, if they changed since it was last
// written: before the writer turn is given back, so before any change of
// the model's that a replay could follow, and not at every adopt (a
// process that keeps making files by hand, the memory full, makes a new
// one left at each). Called by adoptDrift with the writer turn held.
func (m *mirror) saveLeft() {
	changes := m.roomless.changeCount() + m.leftBefore.changeCount()
	m.tooBigMu.Lock()
	changes += m.tooBigChanges
	m.tooBigMu.Unlock()
	if changes == m.leftSaved {
		return
	}
	var rels []string
	m.roomless.list(&rels)
	m.leftBefore.list(&rels)
	m.tooBigMu.Lock()
	for rel := range m.tooBigLogged {
		rels = append(rels, rel)
	}
	m.tooBigMu.Unlock()
	slices.Sort(rels)
	rels = slices.Compact(rels)
	var err error
	if len(rels) == 0 {
		if err = os.Remove(m.leftPath()); errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	} else {
		dir := filepath.Dir(m.leftPath())
		err = gd.WriteFileSync(dir, "left-", m.leftPath(), []byte(strings.Join(rels, "\n")+"\n"), gd.OwnFileMode)
		if err == nil {
			err = gd.SyncDir(dir)
		}
	}
	if err != nil {
		// Tried again at the next adopt; logged once until it succeeds.
		if !m.leftFailed {
			m.logf("gitmem: could not save the files made by hand left uncommitted (%s); after a crash, one in a folder the model renamed may be taken for a file made there as it was renamed", scrubPaths(err))
		}
		m.leftFailed = true
		return
	}
	m.leftSaved, m.leftFailed = changes, false
}

// loadLeft notes the files leftPath names as left by an adopt
// (leftBefore): by an earlier process, for this one's follows of the
// model's changes until its own adopts have looked (at a start), or by a
// process killed with changes not yet in git's files, for the follow of
// the log's replay. The next save (saveLeft) writes the file again, with
// this process's own. Called with the writer turn held: by start, when
// .git/gitmem holds the file, and before a replay is published.
//
// A file over maxLeftBytes is not read, and a line longer than a path
// can be is not looked at: a list put there by hand of a gigabyte, or
// one long line, was read whole, and checkRel quoted each such line in
// its error (a NUL as six bytes): 4 GiB and 18 s of a start for 64 MiB.
func (m *mirror) loadLeft() {
	data, err := gd.ReadFileMax(m.leftPath(), maxLeftBytes) // a regular file only: a FIFO put there is not waited on
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			m.leftSaved = -1 // replaced (or removed) at the next adopt
		}
		return // none left (or unreadable: each is taken as made by hand, as before)
	}
	var rels []string
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if len(line) == 0 || len(line) > policy.MaxPathBytes {
			continue
		}
		if rel := string(line); checkRel(rel) == nil {
			rels = append(rels, rel)
		}
	}
	m.leftBefore.add(rels)
	m.leftSaved = -1 // written again (or removed) at the next adopt, whatever it holds
}

// maxLeftBytes is the largest .git/gitmem/left a start reads: 100,000
// files left make 1.5 MB of it; 32 MiB names two million such.
const maxLeftBytes = 32 << 20

// noRoom reports whether the memory of tree has no room for a file made
// by hand at rel (relative to memories/), size bytes long: it is none of
// tree's files, and tree holds maxFiles files or more, or would be over
// maxTotal bytes with it. The model gets "Cannot create" or "Cannot
// write" there (policy.Limits.Check); a hand edit gets no further either.
func (m *mirror) noRoom(tree *node, rel string, size int64) bool {
	if lookup(tree, full(rel)).isFile() {
		return false
	}
	return m.full(tree) || m.maxTotal > 0 && m.bytes(tree)+size > m.maxTotal
}

// bytes is the total size of the memory's files in tree.
func (m *mirror) bytes(tree *node) int64 {
	if n := lookup(tree, memDir); n.isDir() {
		return n.size
	}
	return 0
}

// full reports whether the memory of tree holds maxFiles files or more.
func (m *mirror) full(tree *node) bool {
	if m.maxFiles <= 0 {
		return false
	}
	n := lookup(tree, memDir)
	return n.isDir() && n.files >= m.maxFiles
}

// leaveRoomless leaves the files made by hand that an adopt found no
// room for (rels, relative to memories/, in path order) where they are:
// never read, never committed, and not looked at again while the memory
// has no room (skipRoomless). The error log says how many are left, with
// the first in path order and the limit, when none were before, and again
// each time their count has doubled since it last did (roomless.add).
// Called with the writer turn held.
//
// The line gives the limit the memory is at: the most files when it
// holds that many, else the largest total size.
func (m *mirror) leaveRoomless(rels []string, tree *node) {
	name, count, first := m.roomless.add(rels)
	if !name {
		return
	}
	holds := policy.Count(int64(lookup(tree, memDir).files), "file") + ", the limit is " + policy.Count(int64(m.maxFiles), "file")
	if !m.full(tree) {
		holds = policy.Count(m.bytes(tree), "byte") + ", the limit is " + policy.Count(m.maxTotal, "byte") + " in all"
	}
	m.errorf("gitmem: %s file(s) made by hand in memories/ (%s first) are not committed, nor shown to the model: the memory holds %s; they are taken once it has room (remove them, delete other memories, or raise the limit)",
		policy.Thousands(int64(count)), full(first), holds)
}

// skipRoomless is drift (relative to memories/, found against tree)
// without the files made by hand that an adopt left for want of room,
// while tree still has none: looked at again, they kept the writer turn
// and lock for a look at each, at every adopt, and came to nothing.
func (m *mirror) skipRoomless(tree *node, drift []string) []string {
	if !m.full(tree) {
		return drift
	}
	return m.roomless.without(drift, func(rel string) bool { return !lookup(tree, full(rel)).isFile() })
}

// roomless is the set of files made by hand that an adopt left because
// the memory had no room for them (relative to memories/). Its own lock
// is a leaf: an adopt adds to it with the writer turn held, a look
// without the turn reads it (Adopt's, a view's).
type roomless struct {
	mu      sync.Mutex
	left    map[string]bool
	named   int // how many were left when the error log last named them (0: none named, or none left since)
	changes int // how often left changed (saveLeft)
}

// add notes rels, and reports whether the error log is to name the files
// left now, with how many they are and the first in path order: some are
// new, and none were named before, or twice as many are left as when
// they last were. A process that kept making files by hand had them named
// at every adopt (one line per file, as each adopt found one more); it
// gets a line each time their count doubles.
func (r *roomless) add(rels []string) (name bool, count int, first string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.left == nil {
		r.left = map[string]bool{}
	}
	added := false
	for _, rel := range rels {
		if !r.left[rel] {
			r.left[rel] = true
			added = true
		}
	}
	if added {
		r.changes++
	}
	if !added || r.named > 0 && len(r.left) < 2*r.named {
		return false, 0, ""
	}
	r.named = len(r.left)
	for rel := range r.left {
		if first == "" || rel < first {
			first = rel
		}
	}
	return true, len(r.left), first
}

// has reports whether rel is noted.
func (r *roomless) has(rel string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.left[rel]
}

// forgotten notes that files left were forgotten: once none is left,
// the next one left is named. Fewer left is no reason to name them
// sooner: a program that makes and removes a temporary file beside one
// left (sed -i, an editor's save) had the count drop and double at each
// adopt, one line each time.
func (r *roomless) forgotten() {
	if len(r.left) == 0 {
		r.named = 0
	}
}

// drop forgets rels: taken, or no longer on disk.
func (r *roomless) drop(rels ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rel := range rels {
		if r.left[rel] {
			delete(r.left, rel)
			r.changes++
		}
	}
	r.forgotten()
}

// keepOnly forgets every file not in drift (a look at every file): one
// made again later is counted again.
func (r *roomless) keepOnly(drift []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.left) == 0 {
		return
	}
	in := make(map[string]bool, len(drift))
	for _, rel := range drift {
		in[rel] = true
	}
	for rel := range r.left {
		if !in[rel] {
			delete(r.left, rel)
			r.changes++
		}
	}
	r.forgotten()
}

// changeCount is how often the set changed: the same count, the same set.
func (r *roomless) changeCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changes
}

// list appends the files noted to rels.
func (r *roomless) list(rels *[]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for rel := range r.left {
		*rels = append(*rels, rel)
	}
}

// without is drift without the files noted that skip reports.
func (r *roomless) without(drift []string, skip func(rel string) bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.left) == 0 {
		return drift
	}
	out := drift[:0:0]
	for _, rel := range drift {
		if !r.left[rel] || !skip(rel) {
			out = append(out, rel)
		}
	}
	return out
}

// loadIndexStats seeds the lstat cache from .git/index: an entry whose
// blob is HEAD's and that is not racy (changed no earlier than the index
// was written) vouches for its file. tree is HEAD's.
func (m *mirror) loadIndexStats(si *startIndex, tree *node) {
	if si == nil {
		return // no index, or one gitmem does not read: files are hashed
	}
	m.stats.seed(si.list(), tree, si.written)
}

// statsSeeded takes what is left of .git/index's entries into the lstat
// cache, and lets the index go: before a look at every file (a start's,
// which takes nearly all of them), in one pass over the sorted entries
// rather than a search of them at each file's look; the cache then keeps
// no second copy of it.
func (m *mirror) statsSeeded() { m.stats.takeRest() }

// drifted returns the memory files (relative to memories/) at or under the
// given repository paths, or at a folder on their way, whose worktree copy
// differs from the tree root: changed, created or deleted by hand. Paths
// that are gitmem's own unfinished work (pend, see pendingFor) are skipped. Names no model could write
// (.git*, control characters) and symlinks are not memory files.
func (m *mirror) drifted(root *node, paths []string, pend coverer) ([]string, error) {
	return m.driftedLooking(root, paths, pend, m.filesOnDisk)
}

// firstDrifted is drifted with, at or beneath each of paths, only the
// first file found on disk (firstOnDisk): for paths root holds nothing
// at, where every file is made by hand.
func (m *mirror) firstDrifted(root *node, paths []string, pend coverer) ([]string, error) {
	return m.driftedLooking(root, paths, pend, m.firstOnDisk)
}

// driftedLooking is drifted, collecting the files at or beneath each
// path with onDisk (filesOnDisk's signature).
func (m *mirror) driftedLooking(root *node, paths []string, pend coverer, onDisk func(string, fs.FileInfo, error, coverer, map[string]fs.FileInfo) error) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if rel := p[len(memDir)+1:]; !seen[rel] {
			seen[rel] = true
			out = append(out, rel)
		}
	}
	var last folderFD // paths come sorted: a folder's files one after the other
	defer last.done()
	for _, p := range paths {
		if pend.covers(p) || (p != memDir && !under(p, []string{memDir})) {
			continue
		}
		// A file made by hand where the path needs a folder; a symlink or
		// a missing folder on the way means nothing is there. When p's
		// folders are known real, each need not be looked at.
		fi, err, folders := m.wt.lstatIn(p, &last)
		blocked := false
		for a := path.Dir(p); !folders && a != memDir && a != "."; a = path.Dir(a) {
			fi, err := m.wt.lstat(a)
			switch {
			case err != nil || fi.Mode()&fs.ModeSymlink != 0:
				blocked = true
			case fi.Mode().IsRegular() && !pend.covers(a):
				blocked = true
				n := lookup(root, a)
				if !n.isFile() {
					add(a)
				} else if same, err := m.sameAsTree(a, fi, n); err != nil {
					return nil, err
				} else if !same {
					add(a)
				}
			case !fi.IsDir():
				blocked = true
			}
		}
		found := map[string]fs.FileInfo{}
		if !blocked {
			if err := onDisk(p, fi, err, pend, found); err != nil {
				return nil, err
			}
		}
		m.wt.looks.Add(int64(len(found)))
		byDir := map[string]*node{} // each folder looked up in root once, for all its files
		for q, fi := range found {
			d, name := path.Split(q)
			f, ok := byDir[d]
			if !ok {
				f = lookup(root, strings.TrimSuffix(d, "/"))
				byDir[d] = f
			}
			n := f.kid(name)
			if !n.isFile() {
				add(q)
				// A folder where root has a file: that file is gone.
				if a := fileAbove(root, q); a != "" && !pend.covers(a) {
					add(a)
				}
			} else if same, err := m.sameAsTree(q, fi, n); err != nil {
				return nil, err
			} else if !same {
				add(q)
			}
		}
		walkFiles(lookup(root, p), p, func(q string, _ *node) {
			if _, ok := found[q]; !ok && !pend.covers(q) && checkRel(q[len(memDir)+1:]) == nil && !policy.IsEditorTemp(path.Base(q)) {
				add(q)
			}
		})
	}
	slices.Sort(out)
	return out, nil
}

// madeByHand is the first file (relative to memories/) made by hand at
// or under the repository path p, or in its way, that tree does not
// hold ("": none), leaving out gitmem's unfinished work there (a removal
// the worktree has yet to follow). A hand edit kept where a rename took
// its file, or the folder of a file made by hand (repairs.movedTo), is
// there too: the adopt takes it there (mergeHandEdit), and a file of the
// model's made there first was merged with it between conflict markers.
// from is then the hand edit's file, elsewhere on disk (a repository
// path; "": made is on disk). Called with the writer turn held.
func (m *mirror) madeByHand(tree *node, p string) (made, from string, err error) {
	pend := m.repairs.pendingFor([]string{p})
	first := m.drifted
	if lookup(tree, p) == nil {
		// Every file at or beneath p is made by hand: one tells. (A
		// look at each, as drifted makes, took 130 ms at 20,000 files
		// left for want of room, under the writer turn, at every
		// refused rename onto their folder.)
		first = m.firstDrifted
	}
	drift, err := first(tree, []string{p}, pend)
	if err != nil {
		return "", "", err
	}
	for _, rel := range drift {
		if !lookup(tree, full(rel)).isFile() {
			return rel, "", nil
		}
	}
	if from, to := m.repairs.boundAt(p); from != "" {
		if fi, err := m.wt.lstat(from); err == nil && fi.Mode().IsRegular() { // else no edit is left to take
			return to[len(memDir)+1:], from, nil
		}
	}
	return "", "", nil
}

// fileAbove is the folder above the repository path p where tree holds
// a file ("": none).
func fileAbove(tree *node, p string) string {
	for a := path.Dir(p); a != memDir && a != "."; a = path.Dir(a) {
		if lookup(tree, a).isFile() {
			return a
		}
	}
	return ""
}

// filesOnDisk collects the regular files at or under repository path p
// (whose lstat gave fi and err), never following a symlink and skipping
// what no model could write and an editor's temporary files
// (policy.IsEditorTemp: never adopted).
func (m *mirror) filesOnDisk(p string, fi fs.FileInfo, err error, pend coverer, out map[string]fs.FileInfo) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode().IsRegular():
		if !policy.IsEditorTemp(path.Base(p)) {
			out[p] = fi
		}
		return nil
	case !fi.IsDir():
		return nil
	}
	return fs.WalkDir(m.wt.root.FS(), p, func(q string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed since it was listed (git reset --hard writes it anew): not on disk
		}
		if err != nil {
			return err
		}
		if q != p && (checkRel(q[len(memDir)+1:]) != nil || pend.covers(q)) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && !policy.IsEditorTemp(d.Name()) {
			fi, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			out[q] = fi
		}
		return nil
	})
}

// firstOnDisk is filesOnDisk, collecting only the first file found at or
// beneath p, folders read a few entries at a time in the order the file
// system lists them: fs.WalkDir reads every entry of a folder first (and
// in an os.Root lstats each), sorted.
func (m *mirror) firstOnDisk(p string, fi fs.FileInfo, err error, pend coverer, out map[string]fs.FileInfo) error {
	if err != nil || !fi.IsDir() {
		return m.filesOnDisk(p, fi, err, pend, out)
	}
	for dirs := []string{p}; len(dirs) > 0; {
		d := dirs[len(dirs)-1]
		dirs = dirs[:len(dirs)-1]
		f, err := m.wt.root.Open(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since it was listed
		}
		if err != nil {
			return err
		}
		for len(out) == 0 {
			es, err := f.ReadDir(firstOnDiskBatch)
			for _, e := range es {
				q := d + "/" + e.Name()
				if checkRel(q[len(memDir)+1:]) != nil || pend.covers(q) {
					continue
				}
				if e.IsDir() {
					dirs = append(dirs, q)
				} else if e.Type().IsRegular() && !policy.IsEditorTemp(e.Name()) {
					if fi, err := e.Info(); err == nil {
						out[q] = fi
						break
					}
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Close()
				return err
			}
		}
		f.Close()
		if len(out) > 0 {
			return nil
		}
	}
	return nil
}

// firstOnDiskBatch is how many entries of a folder firstOnDisk reads at once.
const firstOnDiskBatch = 32

// adoptDrift prepares the hand edits at or under the given repository
// paths (see drifted) as one adopt commit by the operator, and returns it
// (ErrNoChange when there was nothing to adopt). With first set, the
// commit is the repository's first and is made even when the worktree is
// empty. Called with the writer turn held, after own; the caller makes it durable.
func (r *Repo) adoptDrift(paths []string, first bool) (*prepared, error) {
	defer r.mirror.saveLeft() // what it left, or took of what was left
	index := r.mirror.indexStat()
	drift, err := r.findDrift(paths, first)
	if errors.Is(err, ErrNoChange) {
		return nil, err
	}
	if err != nil {
		r.opt.Logf("gitmem: could not check the worktree for hand edits: %v", scrubPaths(err))
		return nil, nil
	}
	r.opt.hooks.atDrift()
	a := &adoption{tx: r.newTx(), meta: adoptMeta(r.opt.operator(), first), stale: map[string][]byte{}}
	defer r.putBackStale(a.stale)
	// Versions are read from the transaction too: an edit that a rename
	// took elsewhere merges into a file an earlier one of drift wrote.
	if err := r.mirror.buildAdopt(drift, first, a, a.tx.blob); err != nil {
		return nil, err
	}
	// A git command that began after findDrift's look for one (git
	// reset --hard removes each file it checks out, then writes it
	// again) may have written what buildAdopt read: a file it removed
	// was taken as deleted, one it checked out of an older commit as a
	// hand edit that undid acknowledged changes. It holds
	// .git/index.lock while it writes files and writes .git/index when
	// done: nothing is taken if either shows it ran meanwhile (taken
	// once git is done). An index written meanwhile may be gitmem's own
	// (a second after a change, under load): adoptNow looks again.
	if !first && r.mirror.gitBusy() {
		clear(a.stale) // not put back into a worktree git may be writing
		return nil, ErrNoChange
	}
	if !first && r.mirror.indexStat() != index {
		clear(a.stale)
		return nil, errIndexWritten
	}
	// The commit takes every one of them as the worktree holds it
	// (merged or not): a base noted for an earlier hand edit is history
	// now, and merging a later edit from it would make conflicts of lines
	// this commit already has. The mirror is told so as the commit is
	// queued (repairs.inFlight), before the worktree may follow it: a
	// later edit its follow keeps is made on what the adopt read.
	note := &adoptNote{read: a.read, shows: map[string]shown{}, moved: a.moved}
	for _, rel := range drift {
		if !a.later[rel] {
			note.taken = append(note.taken, full(rel))
		}
	}
	now := time.Now()
	for q, data := range a.read { // what a later edit of it is made on
		v := shown{handBase: handBase{hash: plumbing.ComputeHash(plumbing.BlobObject, data)}, at: now}
		if n := lookup(a.tx.root, q); !n.isFile() || n.hash != v.hash {
			v.text = data // merged: no blob of the repository's
		}
		note.shows[q[len(memDir)+1:]] = v
	}
	a.tx.adopt = note
	p, err := r.prepare(a.tx, a.meta)
	if err == nil {
		r.opt.hooks.atAdopted(p)
	}
	return p, err
}

// errIndexWritten is adoptDrift's answer when .git/index was written
// while it read the files it found: by a git command, which may have
// written them too, or by gitmem's own rewrite of the index (IndexDelay
// after a change; it holds no writer turn). Nothing was taken.
var errIndexWritten = fmt.Errorf("%w: .git/index was written meanwhile", ErrNoChange)

// adoptLooks bounds adoptNow's looks at the worktree when .git/index was
// written during one (errIndexWritten): gitmem rewrites it about once a
// second under a stream of changes, and a git command that wrote it is
// done by the next look, which finds what it did (findDrift).
const adoptLooks = 3

// findDrift is adoptDrift's look at the worktree: the memory files at or
// under paths that differ from the writer's tip, none while a git command
// may be writing files, and after a move of the branch by git was undone.
// ErrNoChange when there is none (with first set, an empty worktree is
// no error); another error when the worktree could not be read. Called
// with the writer turn held.
func (r *Repo) findDrift(paths []string, first bool) ([]string, error) {
	_, tip := r.state.tipOf()
	undone := r.mirror.undone.Load()
	drift, err := r.mirror.driftedAt(tip, paths)
	if err != nil {
		return nil, err
	}
	if len(drift) == 0 && !first {
		return nil, ErrNoChange
	}
	// What a git command wrote (git reset --hard, while gitmem holds the
	// writer lock) is no hand edit: nothing is taken while git may be
	// writing, and a move of the branch, or a checkout that could not
	// move it, is undone first, its files with it.
	if !first && r.mirror.gitBusy() {
		return nil, ErrNoChange // taken once git is done
	}
	if !first && r.gitMoved() {
		r.scheduleIndex()
	}
	if r.mirror.undone.Load() != undone { // files git wrote were put back since drifted looked
		if drift, err = r.mirror.driftedAt(tip, paths); err != nil || len(drift) == 0 {
			return nil, ErrNoChange
		}
	}
	return drift, nil
}

// adoption is an adopt commit being built (buildAdopt).
type adoption struct {
	tx    *Tx
	meta  Meta
	taken int                  // the files taken: removals, then writes
	read  map[string][]byte    // what was taken of each file written (repository path -> its bytes)
	later map[string]bool      // files left for a later adopt (over the size limit, still being written)
	stale map[string][]byte    // files written back as they were: put back (putBackStale), not taken
	moved [][2]string          // edits merged where a rename had taken their file: from, to (repository paths)
	mtime map[string]time.Time // when each file to take was written
}

// adoptMeta is the message of an adopt commit by the operator (of the
// repository's first commit, with first set), before its paths.
func adoptMeta(operator Signature, first bool) Meta {
	if first {
		return Meta{Subject: "memory: init", Author: operator, Trailers: []Trailer{{TrailerCommand, "init"}}}
	}
	return Meta{Subject: "memory: adopt changes made outside gitmem", Author: operator,
		Trailers: []Trailer{{TrailerCommand, "adopt"}}}
}

// buildAdopt is adoptDrift's transaction: the hand edits drift names
// (relative to memories/), each merged with the acknowledged version
// (mergeHandEdit, reading versions with readBlob), with their paths in
// the commit message, into a, whose tx and meta the caller made (and
// whose stale it puts back). ErrNoChange when there is nothing to commit
// (unless first). Called with the writer turn held.
func (m *mirror) buildAdopt(drift []string, first bool, a *adoption, readBlob func(plumbing.Hash) ([]byte, error)) error {
	a.tx.mirror = false // the worktree already holds it
	a.read, a.later, a.mtime = map[string][]byte{}, map[string]bool{}, map[string]time.Time{}
	// Deletions first: a file deleted by hand may be where a folder now is.
	var writes []string
	size := map[string]int64{}             // of each file to take, from its lstat
	removed := map[int64][]plumbing.Hash{} // the files removed by hand, by size
	for _, rel := range drift {
		fi, err := m.wt.lstat(full(rel))
		if err == nil && fi.Mode().IsRegular() && m.tooBig(fi.Size()) {
			a.later[rel] = true
			m.leaveTooBig(rel, fi.Size())
			continue
		}
		m.tooBigGone(rel)
		if err == nil && fi.Mode().IsRegular() {
			writes = append(writes, rel)
			a.mtime[rel], size[rel] = fi.ModTime(), fi.Size()
			continue
		}
		if n := lookup(a.tx.root, full(rel)); n.isFile() {
			removed[n.size] = append(removed[n.size], n.hash)
		}
		if err := a.tx.Remove(rel); err != nil && !errors.Is(err, ErrNotExist) {
			return wrap("adopt the removal of "+rel, err)
		}
		a.taken++
		a.meta.Trailers = append(a.meta.Trailers, Trailer{TrailerPath, policy.Display(rel)})
	}
	writes = m.movedFirst(a.tx.root, writes, size, removed)
	// An edit of a file a rename took elsewhere last: it merges into
	// what the file there holds then, an edit of that one taken first
	// (taken after, as it is, it would replace the merge).
	// A file made by hand is taken only while the memory has room for
	// it (maxFiles, maxTotal), in path order, after the removals made
	// room: the others are not read (100,000 files made by hand took a
	// server's start over a minute, all committed).
	var roomless, roomy []string
	for _, late := range []bool{false, true} {
		for _, rel := range writes {
			to := m.repairs.movedTo(full(rel))
			if (to != "") != late {
				continue
			}
			// A late one goes where a rename took its folder: it needs
			// room there, unless it is an edit of a file the memory
			// holds there (one made in the folder as the model renamed
			// it is a new file, as any other).
			at := rel
			if late {
				at = strings.TrimPrefix(to, memDir+"/")
			}
			if m.noRoom(a.tx.root, at, size[rel]) {
				a.later[rel] = true
				roomless = append(roomless, rel)
				continue
			}
			roomy = append(roomy, rel)
			if err := m.adoptWrite(a, rel, readBlob); err != nil {
				return err
			}
		}
	}
	m.roomless.drop(roomy...) // each one left before is counted again if it is left again
	m.leftBefore.drop(roomy...)
	if len(roomless) > 0 {
		m.leaveRoomless(roomless, a.tx.root)
	}
	if a.taken == 0 && !first {
		return ErrNoChange
	}
	if !first {
		m.logf("gitmem: committing %d file(s) changed outside gitmem", a.taken)
	}
	return nil
}

// movedFirst is writes (relative to memories/, in path order) with the
// files moved by hand first: a file tree does not hold that holds one
// the same adopt removes (a blob of removed, by size), as mv a.md z.md
// leaves. Taken in path order with the files made by hand, it lost the
// room it had to one that waited for room, and was left (its memory gone
// from HEAD, its text uncommitted). Only a file of a removed one's size
// is read, to compare.
func (m *mirror) movedFirst(tree *node, writes []string, size map[string]int64, removed map[int64][]plumbing.Hash) []string {
	if len(removed) == 0 {
		return writes
	}
	moved := map[string]bool{}
	for _, rel := range writes {
		hs := removed[size[rel]]
		if len(hs) == 0 || lookup(tree, full(rel)).isFile() {
			continue
		}
		if data, err := m.wt.readFile(full(rel)); err == nil && slices.Contains(hs, plumbing.ComputeHash(plumbing.BlobObject, data)) {
			moved[rel] = true
		}
	}
	if len(moved) == 0 {
		return writes
	}
	out := make([]string, 0, len(writes))
	for _, first := range []bool{true, false} {
		for _, rel := range writes {
			if moved[rel] == first {
				out = append(out, rel)
			}
		}
	}
	return out
}

// adoptWrite takes the file rel (relative to memories/), which a hand
// edit wrote, into a: as it is, merged, or not at all (left for later,
// or stale). Called with the writer turn held.
func (m *mirror) adoptWrite(a *adoption, rel string, readBlob func(plumbing.Hash) ([]byte, error)) error {
	// A file another program holds open for writing may be one it
	// truncated and has yet to write: it is taken once it is done.
	data, busy, err := m.wt.readSettled(full(rel), m.maxFileBytes)
	if tb := (*tooBigError)(nil); errors.As(err, &tb) { // grown since the lstat
		a.later[rel] = true
		m.leaveTooBig(rel, tb.size)
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) { // removed since buildAdopt's lstat (git reset --hard writes it anew): the next adopt looks again
		a.later[rel] = true
		return nil
	}
	if err != nil {
		return wrap("read "+rel, err)
	}
	if busy {
		a.later[rel] = true
		return nil
	}
	merged, at, how, err := m.mergeHandEdit(a.tx.root, full(rel), data, a.mtime[rel], readBlob)
	if err != nil {
		return err
	}
	if how == handStale {
		a.stale[full(rel)] = data
		return nil
	}
	if how == handAsIs {
		if n := lookup(a.tx.root, at); n.isFile() && n.hash == plumbing.ComputeHash(plumbing.BlobObject, data) {
			if at != full(rel) { // a copy of the file where a rename took it: no edit
				a.stale[full(rel)] = data
			}
			return nil // put back as HEAD holds it since drifted looked: nothing to commit
		}
	}
	a.taken++
	a.read[full(rel)] = data
	if how == handMerged {
		data = merged
		a.tx.mirror = true // the worktree gets the merge
	}
	to := at[len(memDir)+1:]
	if to != rel {
		// Merged into the file where a rename took it: the worktree
		// gets the merge there, and the file at the old path, which
		// held the edit, goes, or becomes what HEAD has there.
		a.tx.ops = append(a.tx.ops, op{kind: 'm', from: rel, to: to})
		a.tx.mirror = true
		a.moved = append(a.moved, [2]string{full(rel), at})
	}
	if n := lookup(a.tx.root, at); n.isDir() {
		if err := a.tx.Remove(to); err != nil {
			return wrap("adopt "+rel, err)
		}
	}
	if err := a.tx.WriteFile(to, data); err != nil {
		return wrap("adopt "+rel, err)
	}
	if t := (Trailer{TrailerPath, policy.Display(to)}); !slices.Contains(a.meta.Trailers, t) { // to's own edit may be taken too
		a.meta.Trailers = append(a.meta.Trailers, t)
	}
	return nil
}

// adoptKept commits the hand edits materialisation kept from acknowledged
// changes (keepHandEdits) now, merged, rather than at the next start,
// which could only take them as they are. Called by Close with the writer turn held.
func (r *Repo) adoptKept() {
	if err := r.materialize(); err != nil {
		return // the checkpoint that follows says why
	}
	paths := slices.Collect(maps.Keys(r.mirror.repairs.bases()))
	if len(paths) == 0 {
		return
	}
	p, err := r.adoptDrift(paths, false)
	if err == nil && p != nil {
		err = r.committer.durable(p)
	}
	if err != nil && !errors.Is(err, ErrNoChange) {
		r.opt.Logf("gitmem: could not commit the hand edits kept from acknowledged changes (%v); the next start takes them as they are", scrubPaths(err))
	}
}

// keptPath names the file that carries to the next start the hand edits
// kept from acknowledged changes that exit could not take (a program
// still held the file open for writing): each path, with the version its
// edit was made on. The next start took such a file as it was, and every
// acknowledged change made to it since that version was undone; with it,
// the start merges the file as a running gitmem would have.
func (m *mirror) keptPath() string { return filepath.Join(m.gitDir, "gitmem", "kept") }

// keptEdit is a record of keptPath: a hand edit of Path made on Base (on
// no file when None), whose file a rename took to To (handBase.to).
type keptEdit struct {
	Path string `json:"path"`
	Base []byte `json:"base,omitempty"`
	None bool   `json:"none,omitempty"`
	To   string `json:"to,omitempty"`
}

// saveKept writes the hand edits kept and not yet taken (repairs.bases) to
// keptPath, durably, or removes it when there are none. Called with the writer turn
// and the writer lock held, at exit and after the start's adopt; readBlob
// reads a version noted by its hash.
func (m *mirror) saveKept(readBlob func(plumbing.Hash) ([]byte, error)) {
	bases := m.repairs.bases()
	var out []keptEdit
	for _, p := range slices.Sorted(maps.Keys(bases)) {
		b := bases[p]
		k := keptEdit{Path: p, Base: b.text, None: b.hash.IsZero() && b.text == nil, To: b.to}
		if !k.None && k.Base == nil {
			var err error
			if k.Base, err = readBlob(b.hash); err != nil {
				continue // gone (a redaction): taken as it is
			}
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		os.Remove(m.keptPath())
		return
	}
	data, _ := json.Marshal(out)
	dir := filepath.Dir(m.keptPath())
	err := gd.WriteFileSync(dir, "kept-", m.keptPath(), data, 0o600)
	if err == nil {
		err = gd.SyncDir(dir)
	}
	if err != nil {
		m.logf("gitmem: could not save the hand edits kept for the next start (%v); it takes them as they are", scrubPaths(err))
	}
}

// loadKept notes the hand edits saveKept left (of files that still differ
// from HEAD, whose tree is tree) in repairs (noteBase), for the start's
// adopt to merge. Called by start with the writer turn and the writer lock held, after
// settleIn.
func (m *mirror) loadKept(tree *node) {
	data, err := gd.ReadFile(m.keptPath()) // a regular file only: a FIFO put there hung every start
	if err != nil {
		return
	}
	var ks []keptEdit
	if err := json.Unmarshal(data, &ks); err != nil {
		m.logf("gitmem: .git/gitmem/kept is unreadable (%v); the files it names are taken as they are", scrubPaths(err))
		return
	}
	bases := map[string]handBase{}
	for _, k := range ks {
		if rel, ok := strings.CutPrefix(k.Path, memDir+"/"); !ok || checkRel(rel) != nil {
			continue
		}
		b := handBase{}
		if !k.None {
			b = handBase{hash: plumbing.ComputeHash(plumbing.BlobObject, k.Base), text: bytes.Clone(k.Base)}
			if b.text == nil {
				b.text = []byte{}
			}
		}
		if to, ok := strings.CutPrefix(k.To, memDir+"/"); ok && checkRel(to) == nil {
			b.to = k.To
		}
		bases[k.Path] = b
	}
	drift, err := m.drifted(tree, slices.Collect(maps.Keys(bases)), pathSet{})
	if err != nil {
		return
	}
	for _, rel := range drift {
		m.repairs.noteBase(full(rel), bases[full(rel)])
	}
}

// mergeHandEdit merges a hand edit of the file at repository path p
// (hand, written at mtime) into the transaction's version of it (in its
// tree root; readBlob reads a version by its hash), from the
// version the edit was most likely made on (the base). The candidates are
// the version noted for an edit kept from an acknowledged change
// (repairs.handBase; else the transaction's own), and the file's older versions
// of the last commits that changed it (repairs.seen; for a kept edit,
// those noted before its base when it was kept) that the worktree
// held and that were replaced less than staleWindow before the edit was
// written: a program that read the file just before gitmem replaced it,
// and wrote it just after, made its edit on the replaced version. (A pass
// of the worktree over several commits of the file writes only the last:
// merged from a version passed over, an edit made on the one before the
// pass undid the model's changes in between, or conflicted with them.) A
// file that is exactly one of the recent versions, held or passed over,
// holds no edit: it was written back as it was read, or checked out so by
// git, which writes any (handStale: the transaction's version stands, and
// is put back).
// Otherwise the base is the candidate of which the edit keeps the most
// lines: an edit that keeps lines an older version had and a newer one
// changed was made on the older. Among equals the oldest is taken (a
// region both changed is then shown both ways), but not one the edit
// keeps nothing of (it rewrote the file: the first candidate is). how
// says what came of it: handAsIs, the edit taken as it is (its base is the
// transaction's version); handMerged, both sides' changes from the base,
// a region both changed held between conflict markers ("gitmem", "edited
// by hand"); or handStale. at is the repository path of the version it
// merges into: p, or the file renames took p's to since the noted base
// (handBase.to), when that is a file in root.
func (m *mirror) mergeHandEdit(root *node, p string, hand []byte, mtime time.Time, readBlob func(plumbing.Hash) ([]byte, error)) (data []byte, at string, how handHow, err error) {
	base, kept, seen := m.repairs.baseOf(p)
	at = p
	if kept && base.to != "" && (lookup(root, base.to).isFile() || base.hash.IsZero() && base.text == nil && lookup(root, base.to) == nil) {
		// A rename took the file the edit was made on there, or the
		// folder a file made by hand is in.
		at = base.to
	}
	tip := lookup(root, at)
	if !tip.isFile() {
		return nil, at, handAsIs, nil
	}
	if !kept {
		base = handBase{hash: tip.hash}
	}
	// recent reports whether vs[i] was replaced less than staleWindow
	// before the edit was written, at made (the newest one is not
	// replaced).
	recent := func(vs []shown, i int, made time.Time) bool {
		return i == len(vs)-1 || made.Sub(vs[i+1].at) <= staleWindow
	}
	h := plumbing.ComputeHash(plumbing.BlobObject, hand)
	for i := len(seen) - 1; i >= 0 && recent(seen, i, mtime); i-- {
		if seen[i].hash == h && h != tip.hash {
			return nil, at, handStale, nil // that version as it was: no edit
		}
	}
	if h != tip.hash && m.repairs.gitCheckedOut(p[len(memDir)+1:], h, mtime) {
		return nil, at, handStale, nil
	}
	cands := []handBase{base}
	older, made := seen, mtime
	from := len(seen) - 1 // newest first
	switch {
	case kept && base.seen != nil:
		// Made on the noted version or an older one, of those noted
		// when it was kept (its first write was then at the latest: the
		// file's mtime is its last).
		older, from = base.seen, len(base.seen)-2
		if base.noted.Before(made) {
			made = base.noted
		}
	case kept:
		from = -1
		for i := len(seen) - 1; i >= 0; i-- {
			if seen[i].hash == base.hash {
				from = i - 1
				break
			}
		}
	}
	for i := from; i >= 0 && recent(older, i, made) && len(cands) < baseCandidates; i-- {
		if !older[i].passed && !slices.ContainsFunc(cands, func(c handBase) bool { return c.hash == older[i].hash }) {
			cands = append(cands, older[i].handBase)
		}
	}
	hl := splitKeep(string(hand))
	var best []byte
	bestHash, bestKept := plumbing.ZeroHash, 0
	for i, c := range cands {
		b := c.text
		if b == nil && !c.hash.IsZero() {
			if b, err = readBlob(c.hash); err != nil {
				if i == 0 {
					return nil, at, 0, wrap("read a file to merge", err)
				}
				continue // gone (a redaction): no candidate
			}
		}
		k := keptLines(splitKeep(string(b)), hl)
		if i == 0 || k > bestKept || k == bestKept && k > 0 {
			best, bestHash, bestKept = b, c.hash, k
		}
	}
	if bestHash == tip.hash {
		return nil, at, handAsIs, nil
	}
	ours, err := readBlob(tip.hash)
	if err != nil {
		return nil, at, 0, wrap("read a file to merge", err)
	}
	merged := mergeHand(best, ours, hand)
	if bytes.Equal(merged, ours) {
		// The edit adds nothing to the acknowledged version (a program
		// that held the file open and wrote nothing): no commit.
		return nil, at, handStale, nil
	}
	return merged, at, handMerged, nil
}

// heldBefore reports whether the worktree file at memory path p held what
// the change ch gives it until at most staleWindow before made, a
// commit's date: ch's blob, gitmem's (repairs.heldBefore), or, for a
// deletion, no file, until gitmem wrote the version ch deletes, which it
// created there (repairs.createdSince). A merge back of a commit made
// with git drops such a change (merger.staleWorktree).
func (m *mirror) heldBefore(p string, ch fchange, made time.Time) bool {
	if ch.new.hash.IsZero() {
		return m.repairs.createdSince(p, ch.old.hash, made)
	}
	return m.repairs.heldBefore(p, ch.new.hash, made)
}

// handHow is what mergeHandEdit made of a hand edit.
type handHow int

const (
	handAsIs handHow = iota
	handMerged
	handStale
)

// staleWindow is how long after gitmem replaced a version of a worktree
// file an edit written there may still have been made on it (read before,
// written after): a program's read and write of a file, not a person's.
const staleWindow = 2 * time.Second

// keptLines is how many of a's lines b keeps (a line diff's common lines).
func keptLines(a, b []string) int {
	n := len(a)
	for _, h := range lineHunks(a, b) {
		n -= h.end - h.start
	}
	return n
}

// putBackStale gives the worktree files an adopt found written back as
// they were before gitmem's last changes to them (mergeHandEdit,
// handStale; repository path -> what the file held) their acknowledged
// version again, with the disk turn held. Called with the writer turn held: none of
// them is in flight.
func (r *Repo) putBackStale(files map[string][]byte) {
	if len(files) == 0 {
		return
	}
	dt := r.disk.hold()
	defer dt.release()
	r.mirror.putBackStale(files, dt.tree(), r.objects.readBlob)
}

// putBackStale writes each of files (repository path -> what the file
// held, an older version) back to its version in tree, HEAD's, which
// readBlob reads. Called with the disk turn held.
func (m *mirror) putBackStale(files map[string][]byte, tree *node, readBlob func(plumbing.Hash) ([]byte, error)) {
	// No edit to merge (syncChecked notes one made since).
	m.repairs.dropBases(slices.Collect(maps.Keys(files))...)
	for p, had := range files {
		m.logf("gitmem: %s was written back as it was before gitmem's last change to it (a program that read it before that change, or a git checkout); the acknowledged version is put back", p)
		h := plumbing.ComputeHash(plumbing.BlobObject, had)
		of := &ownFiles{hashes: map[plumbing.Hash]bool{h: true}, texts: map[plumbing.Hash][]byte{h: had}, found: h}
		m.forget([]string{p})
		if err := m.syncChecked(p, lookup(tree, p), of, readBlob); err != nil {
			m.logf("gitmem: could not put back %s: %v", p, scrubPaths(err))
		}
	}
}

// mergeHand merges a hand edit made on base with gitmem's version of the
// same file: both sides' changes, a region both changed held between
// conflict markers ("gitmem", "edited by hand").
func mergeHand(base, ours, hand []byte) []byte {
	data, _ := mergeMarked([3][]string{splitKeep(string(base)), splitKeep(string(ours)), splitKeep(string(hand))}, "gitmem", "edited by hand")
	return data
}

// adoptFiles commits hand edits to the given memory paths (relative to
// memories/), taking the locks only when a cheap check finds one. One
// found while the start's look at every file is under way is committed
// by that look (with the others, in one adopt commit): it is waited for.
func (r *Repo) adoptFiles(ctx context.Context, rels []string) error {
	return r.adoptLooked(ctx, rels, true)
}

// adoptLooked is adoptFiles; a view's (waitFailing false) does not wait
// for the writer lock while another process keeps it because its
// checkpoints fail, as its record in .git/gitmem/holder says (a full
// disk): that process lets go only once git's files take its changes,
// and the adopt commit could not be written meanwhile either. Its error
// is then a *LockHeldError (Waited 0) naming the files edited by hand;
// the view shows the memory as committed.
func (r *Repo) adoptLooked(ctx context.Context, rels []string, waitFailing bool) error {
	paths := repoPaths(rels)
	drift, err := r.mirror.driftedAt(r.snapshotTree(), paths)
	if err != nil || len(drift) == 0 {
		return err
	}
	if !waitFailing && !r.lease.Held() {
		if h := readHolder(r.gitDir); h.Pid != 0 {
			return fmt.Errorf("%s: %w", strings.Join(repoPaths(drift), ", "), &LockHeldError{Holder: h})
		}
	}
	if err := r.awaitStartCheck(ctx); err != nil {
		return err
	}
	if _, err := r.adoptNow(ctx, paths); err != nil && !errors.Is(err, ErrNoChange) {
		return err
	}
	return nil
}

// adoptAll is the start's look at every worktree file for hand edits:
// what it finds is committed in one adopt commit (with first, the
// repository's first commit, made even when the worktree is empty), and
// made durable with the turn held (no release lets the lease go
// meanwhile). Called with the writer turn held, after own.
func (r *Repo) adoptAll(first bool) *prepared {
	// It looks at every file: .git/index's entries are taken into the
	// lstat cache at once, in one pass over them, rather than each
	// looked up at its file's look.
	r.mirror.statsSeeded()
	p, err := r.adoptDrift([]string{memDir}, first)
	if err == nil && p != nil {
		err = r.committer.durable(p)
	}
	if err != nil && !errors.Is(err, ErrNoChange) {
		r.opt.Logf("gitmem: could not commit the changes made outside gitmem (%v); they will be committed before the model changes those files", scrubPaths(err))
	}
	return p
}

// checkLater is a server's start's look at every worktree file for hand
// edits (adoptAll), made after Open returned so that the first calls are
// answered meanwhile: at 10,000 files copied elsewhere (no lstat data of
// .git/index is theirs) it reads and hashes every file, 79% of the
// start. It holds the turn start handed it (t) throughout, so every
// change, and every call that takes the turn, comes after it; a change
// that came first would adopt the files it looks at anyway (Update). A
// read that sees files waits for it (awaitStartCheck) unless it looks at
// files alone, each checked as it is read (Snapshot, adoptFiles). Close
// waits for it, as for any call under way; a kill loses nothing: the
// hand edits are on disk (the kept ones named in .git/gitmem/kept), and
// the next start looks again.
func (r *Repo) checkLater(t *writerTurn) {
	defer t.end()
	defer r.mirror.looked() // before the turn is given back: whoever takes it next finds the look done
	r.opt.hooks.atStartCheck()
	if !r.lease.Held() {
		return // let go (a failed start's cleanup): the next owner looks
	}
	r.adoptAll(false)
	r.mirror.saveKept(r.objects.readBlob) // what a program still holds open waits for the next adopt, or start
	// .git/index learns what the look read (the lstat data of files
	// copied), and the adopt commit: written once both are in git's files.
	r.scheduleIndex()
}

// awaitStartCheck waits until the start's look at every worktree file
// for hand edits is done (checkLater): at once when there is none under
// way. It gives up when ctx ends (ctx.Err()) or Close begins
// (ErrClosed). Called with no lock of the store held.
func (r *Repo) awaitStartCheck(ctx context.Context) error {
	checked := *r.mirror.checked.Load()
	select {
	case <-checked:
		return nil
	default:
	}
	r.opt.hooks.atAwaitCheck()
	select {
	case <-checked:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-r.life.Done():
		return ErrClosed
	}
}

// checking notes that the start's look at every worktree file is left
// for after Open returns (checkLater closes it). Called by start, before
// it returns.
func (m *mirror) checking() {
	checking := make(chan struct{})
	m.checked.Store(&checking)
}

// looked notes that the start's look at every worktree file is done.
func (m *mirror) looked() { close(*m.checked.Load()) }

// adoptNow commits the hand edits under paths, schedules the index's
// rewrite as every commit does, and waits for the commit to be durable.
// It returns the commit, or ErrNoChange.
func (r *Repo) adoptNow(ctx context.Context, paths []string) (*prepared, error) {
	t, err := r.beginWrite(ctx, withOwn)
	if err != nil {
		return nil, err
	}
	// An adopt that took nothing because .git/index was written while it
	// read looks again, rather than answer that there was nothing to
	// change with hand edits there (to serve's background adopt, or a
	// pull's before it applies a redaction).
	p, err := r.adoptDrift(paths, false)
	for i := 1; i < adoptLooks && errors.Is(err, errIndexWritten); i++ {
		p, err = r.adoptDrift(paths, false)
	}
	if errors.Is(err, errIndexWritten) {
		err = ErrNoChange
	}
	if p != nil {
		r.scheduleIndex() // it needs the turn
	}
	t.end()
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, ErrNoChange
	}
	return p, r.committer.durable(p)
}

// driftedAt is what drifted finds at or under paths against tree,
// skipping what the worktree has yet to follow there (repairs.pendingFor:
// gitmem's own unfinished work, not hand edits).
//
// While tree holds the most files, the files in a folder at a path where
// tree has nothing, nor a file above it, are not looked at (the path's
// way is, and a file at the path), unless the other paths hold hand
// edits: each of them is made by hand, and none can be taken until a
// removal makes room, which only a hand edit of the other paths can be.
// A model's call that looked at such a path (a rename onto a folder of
// 20,000 files left for want of room, refused) had the adopt after it
// look at each, at every call.
func (m *mirror) driftedAt(tree *node, paths []string) ([]string, error) {
	pend := m.repairs.pendingFor(paths)
	var drift, roomless []string
	var err error
	if m.full(tree) {
		paths = slices.DeleteFunc(slices.Clone(paths), func(p string) bool {
			if lookup(tree, p) == nil && fileAbove(tree, p) == "" {
				roomless = append(roomless, p)
				return true
			}
			return false
		})
	}
	if drift, err = m.drifted(tree, paths, pend); err == nil && len(roomless) > 0 {
		look := m.filesOnDisk
		if len(drift) == 0 {
			look = m.fileOnDisk
		}
		var more []string
		more, err = m.driftedLooking(tree, roomless, pend, look)
		drift = union(drift, more)
	}
	if err == nil && len(paths) == 1 && paths[0] == memDir { // a look at every file (a start's)
		m.leftBefore.keepOnly(drift)
	}
	return m.skipRoomless(tree, drift), err
}

// fileOnDisk is filesOnDisk collecting the file at p alone, none in a
// folder there (driftedAt).
func (m *mirror) fileOnDisk(p string, fi fs.FileInfo, err error, pend coverer, out map[string]fs.FileInfo) error {
	if err == nil && fi.IsDir() {
		return nil
	}
	return m.filesOnDisk(p, fi, err, pend, out)
}

// allDrifted is driftedAt over the whole of memories/, skipping too
// the paths the journal names, read without the journal's lock: a look
// that adoptNow repeats, locked, for what it finds.
func (m *mirror) allDrifted(tree *node) ([]string, error) {
	pend := m.repairs.pendingFor([]string{memDir})
	j, err := m.readJournal()
	if err != nil {
		return nil, err
	}
	if j != nil && j.damage() == "" { // a damaged one was checked at start (repairUnnamed)
		for _, p := range j.Paths {
			pend[p] = true
		}
	}
	drift, err := m.drifted(tree, []string{memDir}, pend)
	if err != nil {
		return nil, err
	}
	m.roomless.keepOnly(drift) // a look at every file: one removed since it was left is counted again if made again
	m.leftBefore.keepOnly(drift)
	return m.skipRoomless(tree, drift), nil
}

// Adopt commits every hand edit in the worktree now (serve does this in
// the background, so that views show them within seconds). It returns the
// adopt commit, or ErrNoChange.
func (r *Repo) Adopt(ctx context.Context) (Commit, error) {
	if r.opt.ReadOnly {
		return Commit{}, ErrReadOnly
	}
	if err := r.awaitStartCheck(ctx); err != nil { // it looks at every file
		return Commit{}, err
	}
	drift, err := r.mirror.allDrifted(r.snapshotTree())
	if err != nil {
		return Commit{}, wrap("scan the worktree", err)
	} else if len(drift) == 0 {
		return Commit{}, ErrNoChange
	}
	// Under the writer lock, only what the scan found is looked at again:
	// the scan may have seen a file the moment before its commit reached
	// the worktree, and scanning the whole worktree again with the lock
	// held stopped every writer for the scan's length (60–90 ms at 10,000
	// files, every two seconds under load). An edit made after the scan
	// is the next scan's.
	p, err := r.adoptNow(ctx, repoPaths(drift))
	if err != nil {
		return Commit{}, err
	}
	c := p.commit
	c.Paths = p.rec.paths
	return c, nil
}

// checkoutMoved brings the worktree to a branch git alone moved while
// gitmem did not hold the writer lock (git fetch and git update-ref, git
// reset --soft): the files of the commits it moved over were never
// checked out. A file that still holds the version of the commit gitmem
// last left the worktree at (madeFor, the commit .git/index was written
// for) is checked out — adopting it would undo the new commits; a file
// that holds neither version was edited by hand meanwhile and is adopted
// merged with the new commits' change to it (handBase), so neither is
// lost. Called by settleIn with the writer turn and the writer lock held, when the
// write-ahead log had nothing to replay.
func (r *Repo) checkoutMoved(si *startIndex) {
	head, tree := r.state.snapshot()
	// Another gitmem process may have written the index since this one
	// last held the lock: the file says what the worktree was left at. At
	// a start (si) it is not read again: start read it under this lock
	// (noteMadeFor), and an index written since made it what madeFor says.
	var read plumbing.Hash
	if si == nil {
		read = r.readIndexHead()
	}
	was := r.gitIndex.leftAt(read)
	if head.IsZero() || was == head {
		return
	}
	var old *node
	err := ErrNotExist
	if !was.IsZero() {
		r.objects.lock()
		var c *object.Commit
		if c, err = r.objects.st.Commit(was); err == nil {
			old, err = r.loadTree(c.TreeHash, tree, "")
		}
		r.objects.unlock()
	}
	if err != nil {
		// Gone (git gc pruned it after the branch moved to another
		// history): .git/index, if gitmem wrote it last, holds its files.
		if old = r.mirror.indexTree(si); old == nil {
			return // nothing tells what the worktree was left at: hand-edit checks alone
		}
	}
	defer r.disk.hold().release()
	out, hand := r.mirror.moveWorktree(old, tree, r.objects.readBlob)
	for p, base := range hand {
		r.mirror.repairs.noteBase(p, handBase{hash: base})
	}
	if len(out) > 0 {
		r.opt.Logf("gitmem: the branch moved to %s outside gitmem: checked out %d file(s) it changed", head.String()[:7], len(out))
		if err := gd.SyncFS(r.objects.st.Env, r.dir, r.mirror.wt.flushList()); err != nil {
			r.opt.Logf("gitmem: could not sync the worktree: %v", scrubPaths(err))
		}
	}
}

// moveWorktree brings the worktree files that hold the version of the tree
// old to the version of tree, where the two differ: a file that holds
// old's version (or is missing where old has none) is replaced in one step,
// what it held moved aside (syncChecked: a hand edit landing after the
// check is kept); one that holds tree's is left; one that holds neither
// was edited by hand: hand says the version of old it differs from. It
// returns the files it wrote; readBlob reads a version by its hash.
// Called with the disk lock held.
func (m *mirror) moveWorktree(old, tree *node, readBlob func(plumbing.Hash) ([]byte, error)) (out []string, hand map[string]plumbing.Hash) {
	var moved []string
	changedFiles(lookup(old, memDir), lookup(tree, memDir), memDir, func(p string) {
		if checkRel(p[len(memDir)+1:]) == nil {
			moved = append(moved, p)
		}
	})
	hand = map[string]plumbing.Hash{}
	// check checks out p, or notes a hand edit; it reports a folder where
	// the branch has a file, which can go once the files in it went.
	check := func(p string) (folder bool) {
		var have, before, now plumbing.Hash
		if fi, err := m.wt.lstat(p); err == nil {
			if !fi.Mode().IsRegular() {
				// a folder or a symlink where a file was: the hand-edit check decides
				return fi.IsDir() && lookup(tree, p).isFile()
			}
			data, err := m.wt.readFile(p)
			if err != nil {
				return false
			}
			have = plumbing.ComputeHash(plumbing.BlobObject, data)
		}
		if n := lookup(old, p); n.isFile() {
			before = n.hash
		}
		n := lookup(tree, p)
		if n.isFile() {
			now = n.hash
		}
		switch have {
		case now:
		case before:
			if !n.isFile() && !n.isDir() {
				n = nil
			}
			// Replaced in one step with what it held moved aside: a hand
			// edit landing after the check is kept (syncChecked, which
			// notes its base). One noted before is gone with what it held.
			m.repairs.dropBases(p)
			of := &ownFiles{hashes: map[plumbing.Hash]bool{before: true}, found: before}
			if err := m.syncChecked(p, n, of, readBlob); err != nil {
				m.logf("gitmem: could not check out %s: %v", p[len(memDir)+1:], scrubPaths(err))
				return false
			}
			out = append(out, p)
		default:
			hand[p] = before
		}
		return false
	}
	var later []string
	for _, p := range moved {
		if check(p) {
			later = append(later, p)
		}
	}
	for _, p := range later {
		check(p) // a folder still there holds files made by hand: adopted
	}
	m.forget(out)
	return out, hand
}

// undoCheckout puts back the worktree files a git command checked out
// when it moved the branch to the commit cur while gitmem held the writer
// lock (git reset --hard): the branch is back on the acknowledged
// commits (moveBranch, gitMoved), and so is each file that holds cur's
// version (or is missing where cur has none), to the version of to, what
// the worktree mirrors; any other file is left to the hand-edit checks.
// Such files are git's, not the operator's: adopted, they undid
// acknowledged changes. Called with the disk lock held.
func (r *Repo) undoCheckout(cur plumbing.Hash, to *node) {
	r.objects.lock()
	c, err := r.objects.st.Commit(cur)
	var old *node
	if err == nil {
		old, err = r.loadTree(c.TreeHash, to, "")
	}
	r.objects.unlock()
	if err != nil {
		r.opt.Logf("gitmem: could not read %s to put back the files git checked out for it: %v", cur, scrubPaths(err))
		return
	}
	if out, _ := r.mirror.moveWorktree(old, to, r.objects.readBlob); len(out) > 0 {
		r.opt.Logf("gitmem: %d worktree file(s) git checked out for %s were put back to the acknowledged version", len(out), cur.String()[:7])
	}
	r.mirror.undone.Add(1)
	r.gitIndex.gitWrote(plumbing.ZeroHash) // git rewrote .git/index for cur: written again
}

// gitBusy reports whether a git command holds .git/index.lock (no
// older than gd.StaleLock): it may be writing worktree files now (git
// reset --hard writes them, then the index, then moves the branch), so
// an adopt takes no file for a hand edit until it is done. gitmem's own
// index write, which holds the lock for as long as the write, is no git
// command (gd.HeldByAnother), also in the instant it releases it: an
// adopt then took nothing, and said there was nothing to change (the
// model's change ran on the version before a hand edit).
func (m *mirror) gitBusy() bool {
	busy := gd.HeldByAnother(filepath.Join(m.gitDir, "index"), gd.StaleLock)
	if busy {
		m.repairs.sawGit()
	}
	return busy
}

// indexStat is the lstat data of .git/index (zero when there is none):
// a git command that changed worktree files (git reset --hard, git
// checkout) wrote it anew.
func (m *mirror) indexStat() gd.Stat {
	fi, err := os.Lstat(filepath.Join(m.gitDir, "index"))
	if err != nil {
		return gd.Stat{}
	}
	return gd.StatOf(fi)
}

// awaitGit waits, up to gd.StaleLock, while a git command holds
// .git/index.lock before gitmem writes worktree files: git reset --hard
// removes a file and creates it anew (O_EXCL), and a file gitmem put
// there in between made it fail half-way, leaving the worktree half
// checked out with neither its index nor its branch move to tell what it
// did. One stat when no git command runs.
func (m *mirror) awaitGit() {
	for deadline := time.Now().Add(gd.StaleLock); m.gitBusy() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// undoGitCheckout puts back the files of a checkout git made of one of
// the branch's last commits while gitmem held the writer lock, when the
// branch did not move: git reset --hard rewrites the worktree and the
// index before it moves the branch, and fails to move it when gitmem
// moved it meanwhile (under load, often). .git/index, written by git
// since gitmem last wrote it, then holds exactly the tree of that commit:
// the files that hold its version are git's, not hand edits, and get the
// acknowledged version back (undoCheckout). It reports whether it did.
// An index looked at once is not looked at again. gitmem writes
// .git/index, then index-head, with the index's lock held: in between,
// its own index is newer than index-head too, so the index is looked at
// only with that lock held (not while another holds it: at the next
// call).
func (r *Repo) undoGitCheckout() bool {
	if !r.lease.Held() {
		return false
	}
	if _, newer := r.indexNewer(); !newer {
		return false
	}
	held, ok := r.gitIndex.tryLock()
	if !ok {
		return false // gitmem is writing it
	}
	defer held.unlock()
	ii, newer := r.indexNewer()
	if !newer {
		return false // gitmem's own
	}
	dt := r.disk.hold()
	defer dt.release()
	if !dt.seeGitIndex(ii.ModTime()) {
		return false
	}
	entries, _, err := gd.ReadIndex(r.gitDir)
	if err != nil {
		return false
	}
	root := newDir(nil)
	for _, e := range entries {
		if n, err := with(root, split(e.Path), &node{mode: e.Mode, hash: e.Hash}); err == nil {
			root = n
		}
	}
	tree, _ := writeTrees(func(t plumbing.ObjectType, data []byte, _ plumbing.Hash) (plumbing.Hash, error) {
		return plumbing.ComputeHash(t, data), nil
	}, root, nil)
	// git checkout -- FILE (git status too) rewrites the index gitmem
	// last wrote, for a commit the branch may have moved on from by
	// thousands of commits under load: that commit is looked at first.
	found := plumbing.ZeroHash
	if ih := r.readIndexHead(); !ih.IsZero() {
		r.objects.lock()
		if c, err := r.objects.st.Commit(ih); err == nil && c.TreeHash == tree {
			found = ih
		}
		r.objects.unlock()
	}
	for h, i := dt.head(), 0; found.IsZero() && i < checkoutDepth && !h.IsZero(); i++ {
		r.objects.lock() // per commit: the calls' reads are not held up by the walk
		c, err := r.objects.st.Commit(h)
		r.objects.unlock()
		if err != nil {
			break
		}
		if c.TreeHash == tree {
			found = h
			break
		}
		h = plumbing.ZeroHash
		if len(c.ParentHashes) > 0 {
			h = c.ParentHashes[0]
		}
	}
	if found.IsZero() || found == dt.head() {
		return false
	}
	r.undoCheckout(found, dt.tree())
	return true
}

// indexNewer reports whether .git/index (ii) was written after
// index-head, which gitmem writes after each index of its own.
func (r *Repo) indexNewer() (ii fs.FileInfo, newer bool) {
	ii, err := os.Stat(filepath.Join(r.gitDir, "index"))
	if err != nil {
		return nil, false
	}
	if hi, err := os.Stat(r.indexHeadPath()); err == nil && !ii.ModTime().After(hi.ModTime()) {
		return ii, false
	}
	return ii, true
}

// checkoutDepth is how far back undoGitCheckout looks for the commit a
// git checkout took the worktree to: under load (1,500 commits a second)
// git reset --hard HEAD~N lands N and then some back, and 1,024 missed
// HEAD~2000. A commit read costs 10-60 µs; the walk is made once per
// index git writes, and goes this far only when that index is no recent
// commit's (git add).
const checkoutDepth = 8192

// indexTree is the tree .git/index holds, when gitmem wrote it last (it
// writes .git/gitmem/index-head after it: a later index is another
// program's); nil otherwise. Folders have no hashes.
func (m *mirror) indexTree(si *startIndex) *node {
	ii, err1 := os.Stat(filepath.Join(m.gitDir, "index"))
	hi, err2 := os.Stat(m.index.headPath())
	if len(si.list()) == 0 || err1 != nil || err2 != nil || ii.ModTime().After(hi.ModTime()) {
		return nil
	}
	root := newDir(nil)
	for _, e := range si.list() {
		if !under(e.Path, []string{memDir}) {
			continue
		}
		if n, err := with(root, split(e.Path), &node{mode: e.Mode, hash: e.Hash}); err == nil {
			root = n
		}
	}
	return root
}
