package gitmem

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// followWorktree brings the worktree from prev, the tree it mirrors (of
// the commit prevHead), to the last of items, which git's files hold now:
// every path the commits change, and those an earlier pass could not
// write. A hand edit found there is kept (keepHandEdits, syncChecked);
// a path that cannot be written (a full disk) waits in repairs.pend and
// the journal. Called by materializeSome with the disk lock held (dt).
func (r *Repo) followWorktree(dt diskTurn, items []*prepared, prevHead plumbing.Hash, prev *node) {
	last := items[len(items)-1]
	var paths []string
	for _, p := range items {
		paths = append(paths, p.paths...)
	}
	// Sorted once: a union per commit was quadratic in a large group.
	slices.Sort(paths)
	paths = slices.Compact(paths)
	retry := r.mirror.repairs.pending() // paths an earlier pass could not write
	r.mirror.awaitGit()
	// A folder the commits remove, or replace with another or with a
	// file (a delete, a rename), goes file by file: each of its files is
	// checked as a file is, and one edited by hand is kept (syncFolder).
	// (A file that stays a file has no folder to look for in the trees;
	// one the disk holds there all the same — files kept in a folder an
	// earlier pass replaced by a file, or made by hand — is found by the
	// write, errFolderThere, and its files checked then.)
	inside := map[string][]string{}
	var files []string
	for _, q := range paths {
		if lookup(last.tree, q).isFile() && lookup(prev, q).isFile() {
			continue
		}
		if in := r.mirror.wt.filesIn(q); len(in) > 0 {
			inside[q] = in
			files = append(files, in...)
		}
	}
	kept, checks := r.keepHandEdits(items, prevHead, prev, union(paths, files), retry)
	paths = union(paths, retry)
	r.mirror.forget(paths)
	var failed []string
	fail := func(q string, err error) {
		failed = append(failed, q)
		r.opt.Logf("gitmem: the worktree could not follow %s (%v); it will be repaired", q, scrubPaths(err))
	}
	// The files' blobs are read a batch at a time before they are written,
	// in the order of the packs, mapped, the packs held open and their
	// delta bases cached from one batch to the next: read as each file
	// was written, every read opened the pack again and read the blob's
	// whole delta chain with a pread per link (a pull of 10,000 commits
	// writing 6,367 files made 196,000). What is not read so (a blob
	// already in the batch, a read that failed) is read as before.
	r.objects.holdPacks()
	defer r.objects.dropPacks()
	var batch map[plumbing.Hash][]byte
	blob := func(h plumbing.Hash) ([]byte, error) {
		if data, ok := batch[h]; ok {
			return data, nil
		}
		return r.objects.readBlob(h)
	}
	var follow func(q string)
	through := func(q string, in []string) { // the folder q, whose files are in
		for _, f := range in {
			follow(f)
		}
		if err := r.mirror.wt.syncFolder(q, lookup(last.tree, q), blob); err != nil {
			fail(q, err)
		}
	}
	follow = func(q string) {
		if kept[q] || r.mirror.repairs.keptAbove(q) {
			// A hand edit stays there; one of a file the commits make a
			// folder of holds the path beneath it, for the adopt.
			return
		}
		var err error
		if of, ok := checks[q]; ok {
			err = r.mirror.syncChecked(q, lookup(last.tree, q), of, blob)
		} else {
			// A path to repair (retry): the file the disk holds there is
			// gitmem's own; a folder is not (keepHandEdits).
			err = r.mirror.wt.syncKeeping(q, lookup(last.tree, q), blob)
		}
		if errors.Is(err, errFolderThere) {
			// A folder where the trees had a file (or none): files kept
			// in a folder the commits replaced by a file hold it (an
			// earlier pass left it), or one was made by hand, also where
			// a repair writes. Its files are checked as those of a
			// folder the commits remove.
			in := r.mirror.wt.filesIn(q)
			kin, cin := r.keepHandEdits(items, prevHead, prev, in, retry)
			maps.Copy(kept, kin)
			maps.Copy(checks, cin)
			r.mirror.forget(in)
			through(q, in)
			return
		}
		if err != nil {
			fail(q, err)
		}
	}
	for len(paths) > 0 {
		var hs []plumbing.Hash
		var size int64
		k := 0
		for ; k < len(paths) && size < followBatchBytes; k++ {
			for _, f := range append([]string{paths[k]}, inside[paths[k]]...) {
				if n := lookup(last.tree, f); n.isFile() && !kept[f] {
					hs, size = append(hs, n.hash), size+n.size
				}
			}
		}
		batch = make(map[plumbing.Hash][]byte, len(hs))
		r.objects.blobsInPackOrder(hs, func(h plumbing.Hash, data []byte, err error) error {
			if err == nil {
				batch[h] = data
			}
			return nil
		})
		for _, q := range paths[:k] {
			if in, ok := inside[q]; ok {
				through(q, in)
			} else {
				follow(q)
			}
		}
		paths = paths[k:]
	}
	r.mirror.repairs.followed(items, prev, failed, time.Now())
}

// followBatchBytes bounds the blobs followWorktree holds read at once.
const followBatchBytes = 16 << 20

// keepHandEdits returns the files among paths that were edited by hand
// before the worktree caught up with items (it lags them by milliseconds,
// up to Options.MaterialiseEvery with it set, longer on a full disk, or a
// crash's whole downtime): the worktree holds
// neither what gitmem last wrote there (prev) nor a version one of items
// gives the file, nor what an adopt among them read there. They are not
// overwritten; the next adopt commit merges the hand edit into the
// acknowledged version (adoptDrift), from the base noted here in
// repairs (noteBase). Paths gitmem has yet to repair (own) are gitmem's own
// writes, and so is what lies beneath one where the trees have a folder;
// beneath one that is a file or nothing there, gitmem has nothing of its
// own to write (a file of a folder it removed that it could not remove
// waits for repair at its own path), and what a folder there holds is
// checked. A file deleted by hand is not kept: the acknowledged version
// comes back. For every other memory file, checks says what the worktree
// may hold as gitmem's own, for the write that follows (syncChecked):
// an edit that lands between this check and that write is kept too.
// Called with the disk lock held, before the stat cache forgets paths.
func (r *Repo) keepHandEdits(items []*prepared, prevHead plumbing.Hash, prev *node, paths, own []string) (kept map[string]bool, checks map[string]*ownFiles) {
	v := r.ownVersionsOf(items, prevHead, prev)
	skip := newPathSet(own)
	last := items[len(items)-1].tree
	kept, checks = map[string]bool{}, map[string]*ownFiles{}
	for _, q := range paths {
		if skip.coversFolder(q, last) || !under(q, []string{memDir}) {
			continue
		}
		of := v.files(q)
		if r.leftHere(of, q, last) {
			kept[q] = true // stays where it is, not noted
			continue
		}
		if r.mirror.handEdited(v.trees, of, q, r.objects.st.Size) {
			kept[q] = true
			continue
		}
		checks[q] = of
		r.mirror.repairs.dropBases(q) // gitmem writes it again: an older edit was taken
	}
	return kept, checks
}

// leftHere reports whether the worktree's regular file at q (of: what it
// may hold as gitmem's own) is one made by hand that an adopt left there,
// uncommitted, before these commits (for want of room, or over the largest
// file size: leftByAdopt), in a folder they rename or remove: no version
// gitmem wrote or was writing holds it, nor did an adopt read it, and they
// put nothing at q (last: the tree of the last of them) nor a file above
// it. It is no edit of a file of gitmem's, and was there before the model
// changed its folder: it stays where it is, and is not noted (noteBase).
// Noted, a rename of its folder bound it for the new path
// (repairs.moveKept), and the adopt merged it between conflict markers
// into the file the model made there since (it could: nothing was there);
// it is taken where it is, as any file made by hand, once there is room
// for it. (A file made in a folder the model renamed before the worktree
// caught up goes with the folder: it was made in what the operator took
// for the model's folder. Where the commits put a file or a folder, or a
// file above it, a file left holds the way of an acknowledged change, and
// is kept as handEdited and syncChecked keep it.)
func (r *Repo) leftHere(of *ownFiles, q string, last *node) bool {
	rel, ok := strings.CutPrefix(q, memDir+"/")
	if !ok || len(of.hashes) > 0 || lookup(last, q) != nil || fileAbove(last, q) != "" || !r.mirror.leftByAdopt(rel) {
		return false
	}
	fi, err := r.mirror.wt.lstat(q)
	return err == nil && fi.Mode().IsRegular()
}

// ownVersions are the versions of the worktree files that are gitmem's
// own writes when the worktree follows a group of commits (keepHandEdits):
// the trees, and which of them to look a path up in.
type ownVersions struct {
	trees []*node // what the worktree mirrored, each commit's tree, and a crash's base
	// A path is looked up only in the versions that may hold another file
	// there than the version before: with a group of n commits of a path
	// each, n lookups, not n for every path. Those are the mirrored tree
	// and the crash's base, the first commit, any that is no plain
	// transaction on the one before (always), and a plain one whose paths
	// hold the path or a folder above it (at). (A path beneath it makes it
	// a folder: no file.)
	always []int
	at     map[string][]int
	adopts []*prepared // the adopt commits among them, in order
}

// ownVersionsOf is the versions gitmem wrote, or was writing, when the
// worktree mirrored prev (of commit prevHead) and follows items.
func (r *Repo) ownVersionsOf(items []*prepared, prevHead plumbing.Hash, prev *node) *ownVersions {
	v := &ownVersions{trees: []*node{prev}, always: []int{0}, at: map[string][]int{}}
	for _, p := range items {
		v.trees = append(v.trees, p.tree)
	}
	if base := items[0].parent; base != prevHead && !base.IsZero() {
		// Replayed after a crash: the worktree may hold what it did
		// before the first of them, where the crash stopped it.
		r.objects.lock()
		c, err := r.objects.st.Commit(base)
		if err == nil {
			var t *node
			if t, err = r.loadTree(c.TreeHash, prev, ""); err == nil {
				v.trees = append(v.trees, t)
			}
		}
		r.objects.unlock()
	}
	if len(v.trees) > len(items)+1 {
		v.always = append(v.always, len(items)+1)
	}
	for j, p := range items {
		if p.adopt != nil {
			v.adopts = append(v.adopts, p)
		}
		if j == 0 || !p.plain || p.parent != items[j-1].hash {
			v.always = append(v.always, j+1)
			continue
		}
		for _, x := range p.paths {
			v.at[x] = append(v.at[x], j+1)
		}
	}
	return v
}

// files is what the worktree file at q may hold as gitmem's own.
func (v *ownVersions) files(q string) *ownFiles {
	of := &ownFiles{hashes: map[plumbing.Hash]bool{}, texts: map[plumbing.Hash][]byte{}}
	add := func(is []int) {
		for _, i := range is {
			if n := lookup(v.trees[i], q); n.isFile() {
				of.hashes[n.hash] = true
			}
		}
	}
	add(v.always)
	add(v.at[q])
	for a := q; ; {
		k := strings.LastIndexByte(a, '/')
		if k < 0 {
			break
		}
		a = a[:k]
		add(v.at[a])
	}
	for _, p := range v.adopts { // what adopts read is gitmem's to replace, nothing later
		if data, ok := p.adopt.read[q]; ok {
			h := plumbing.ComputeHash(plumbing.BlobObject, data)
			of.hashes[h], of.texts[h] = true, data
			of.lastRead = h
		}
	}
	return of
}

// ownFiles is what a worktree file may hold as gitmem's own: blobs gitmem
// wrote or was writing there, and texts adopts read there.
type ownFiles struct {
	hashes   map[plumbing.Hash]bool
	texts    map[plumbing.Hash][]byte // those that are no blob of the repository's
	lastRead plumbing.Hash            // the last text an adopt read (zero: none)
	found    plumbing.Hash            // what the worktree held when checked (zero: no file)
}

// text is the content of one of them (blob reads a blob).
func (of *ownFiles) text(h plumbing.Hash, blob func(plumbing.Hash) ([]byte, error)) ([]byte, error) {
	if h.IsZero() {
		return nil, nil
	}
	if t, ok := of.texts[h]; ok {
		return t, nil
	}
	return blob(h)
}

// handEdited reports whether the worktree file at q holds an edit made by
// hand: none of the versions gitmem wrote or was writing there — the
// first of versions is what the worktree mirrors (old) — nor a text an
// adopt read. If so its base is noted for the adopt commit's merge: the
// last text an adopt read there, or else old. sizeOf gives a blob's size.
func (m *mirror) handEdited(versions []*node, of *ownFiles, q string, sizeOf func(plumbing.Hash) (int64, error)) bool {
	old := lookup(versions[0], q)
	if old.isDir() {
		return false
	}
	fi, err := m.wt.lstat(q)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	if old.isFile() {
		if same, err := m.sameAsTree(q, fi, old); err != nil || same {
			of.found = old.hash
			return false
		}
	}
	// A file over the largest file size that no version gitmem wrote
	// there is as long as was made by hand: it is not read (adoptDrift
	// leaves it too).
	if !m.tooBig(fi.Size()) || of.sized(fi.Size(), sizeOf) {
		data, err := m.wt.readFile(q)
		if err != nil {
			return false
		}
		h := plumbing.ComputeHash(plumbing.BlobObject, data)
		if of.hashes[h] {
			of.found = h
			return false // gitmem's own write, done or left as it was by a crash, or what an adopt took
		}
	}
	base := handBase{}
	if old.isFile() {
		base.hash = old.hash
	}
	if !of.lastRead.IsZero() {
		base = handBase{hash: of.lastRead, text: of.texts[of.lastRead]}
	}
	// Kept already: its base is the older one, and it was logged (once
	// until the adopt takes it, not at every change under load).
	if m.repairs.noteBase(q, base) {
		m.logf("gitmem: %s was edited by hand before an acknowledged change to it reached the worktree; the edit is kept, and merged into that change by the next adopt commit", q)
	}
	return true
}

// sized reports whether a version of allows may be size bytes long (one
// whose size sizeOf cannot read counts as one).
func (of *ownFiles) sized(size int64, sizeOf func(plumbing.Hash) (int64, error)) bool {
	for h := range of.hashes {
		if t, ok := of.texts[h]; ok {
			if int64(len(t)) == size {
				return true
			}
			continue
		}
		if n, err := sizeOf(h); err != nil || n == size {
			return true
		}
	}
	return false
}

// syncChecked makes the worktree at the memory path q match n (nil:
// absent), as wt.sync does, but every file it replaces or removes is moved
// aside in the same step (worktree.put) and compared with what of allows:
// one that holds anything else was edited by hand after keepHandEdits
// looked. It is kept: put back as it is, its base (what the file held
// when checked) noted in repairs (noteBase) for the next adopt commit's merge
// (mergeHandEdit). One that another program still holds open for writing
// is waited for, or put back (keepWriting). A folder found where a file
// was is left as it is (errFolderThere): its files are the caller's to
// check. blob reads a blob. Called with the disk lock held.
//
// It is longer than 80 lines on purpose: its rounds share the state of
// one write (what to put, what q may hold as gitmem's own, the edit's
// base, the temporary file, whether an edit was kept), and every round
// may change each of them; split, that state would become a struct
// passed through every piece, and the order of the steps within a round
// (put, take aside, compare, keep), which is what makes a hand edit safe,
// would no longer read in one place.
func (m *mirror) syncChecked(q string, n *node, of *ownFiles, blob func(plumbing.Hash) ([]byte, error)) error {
	if n.isDir() {
		// A file where the folder goes is removed checked first: a hand
		// edit in it stays, and the folder waits for the adopt.
		if fi, err := m.wt.lstat(q); err == nil && fi.Mode().IsRegular() {
			if err := m.syncChecked(q, nil, of, blob); err != nil {
				return err
			}
			if _, err := m.wt.lstat(q); err == nil {
				return nil // kept
			}
		}
		// A file made by hand in the folder once it is there is kept:
		// the folder is synced as one whose files were checked.
		return m.wt.syncFolder(q, n, blob)
	}
	if err := m.env.Injected(gd.StepWorktree, q); err != nil {
		return err
	}
	w := m.wt
	var want []byte
	if n != nil {
		// Read first, so that what q's lookup finds below is as fresh as
		// can be when the file is put.
		var err error
		if want, err = blob(n.hash); err != nil {
			return err
		}
	}
	fi, err, folders := w.lstatFolders(q)
	there := err == nil // something at q, as far as known: put's first try
	switch {
	case n == nil && errors.Is(err, syscall.ENOTDIR):
		return nil // a folder of q is a file (made by hand): q is gone already
	case errors.Is(err, syscall.ENOTDIR):
		// A folder of q is a file: not gitmem's (its own goes with the
		// change that made the folder, before q), so made by hand. It
		// holds q's way, kept for the adopt commit, which takes it where
		// it is (the model's files under it make way, in the history), as
		// a folder replaced by a file by hand; the paths beneath it are not
		// followed meanwhile (repairs.keptAbove).
		if a := w.fileAbove(q); a != "" {
			if m.keepHand(a, nil) {
				m.logf("gitmem: %s was made by hand where an acknowledged change puts a folder; the file is kept, and taken by the next adopt commit", a)
			}
			return nil
		}
		return err
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	case err == nil && fi.IsDir():
		// A folder where a file was: its files are the caller's to check
		// (followWorktree), never removed with it unchecked.
		return errFolderThere
	case err != nil && n == nil:
		return nil
	}
	if n != nil {
		if err == nil && fi.Mode().IsRegular() && fi.Size() == n.size { // the lstat tells most apart
			if _, ok := w.readBlob(q, n); ok {
				return nil
			}
		}
		if !folders { // else q's folders were found real just now
			if err := w.ensureDir(path.Dir(q)); err != nil {
				return err
			}
		}
	}
	wantFile := n != nil
	// expect is what the file at q may hold as gitmem's own; base is what
	// it was made from, which a hand edit found in it is merged from.
	expect := func(h plumbing.Hash) bool { return of.hashes[h] }
	var base []byte
	baseRead := false // read when a hand edit is found: it costs a blob read, maybe from a pack
	mergeBase := func() []byte {
		if !baseRead {
			b, err := of.text(of.found, blob)
			if err != nil {
				b = nil // merged from nothing: both sides kept between markers
			}
			base, baseRead = b, true
		}
		return base
	}
	m.hooks.atExchange(q, true)
	defer m.hooks.atExchange(q, false)
	if there && fi.Mode().IsRegular() && m.editedBefore(q, fi, expect) {
		// Edited by hand before this write: it stays as it is, never
		// taken aside, and the next adopt commit merges it. Taken aside,
		// gitmem's version would be in its place until a round below put
		// the edit back, and a program that read the file then (to append
		// to it, say) wrote back a file without its own last edit, which
		// the adopt could only keep beside the other between conflict
		// markers (TestTruncatingHandEditsBesideTheModel). An edit made
		// between this look and the put is found by the rounds below.
		if m.keepHand(q, mergeBase()) {
			m.logf("gitmem: %s was edited by hand while gitmem wrote an acknowledged change to it; the edit is kept, and merged into that change by the next adopt commit", q)
		}
		return nil
	}
	tmp := ""
	var tmpInfo fs.FileInfo // tmp's stat data once written
	defer func() {
		if tmp != "" {
			w.root.Remove(tmp)
		}
	}()
	kept := false // a hand edit was found, put back, its base noted
	for {
		aside, placed := "", true
		var asideInfo fs.FileInfo
		put, putFile := want, wantFile
		if putFile {
			if tmp == "" {
				if tmp, tmpInfo, err = w.writeTemp(put); err != nil {
					return err
				}
			}
			if aside, asideInfo, placed, err = w.put(tmp, q, there); err != nil {
				return err
			}
			if placed {
				w.notePlaced(q, tmpInfo)
				tmp = ""
			}
		} else if aside, err = w.moveAside(q); err != nil {
			return err
		}
		hand := false
		if aside != "" {
			data, file, err := w.takeAside(aside, asideInfo)
			if errors.Is(err, errWriting) && placed {
				return m.keepWriting(q, aside, put, putFile, mergeBase())
			}
			if err != nil {
				return fmt.Errorf("read the file it replaced (left in .git/gitmem/tmp): %w", err)
			}
			if hand = file && !expect(plumbing.ComputeHash(plumbing.BlobObject, data)); hand {
				if kept {
					// An edit of what an earlier round put: merged into
					// the edit that round kept.
					want = mergeHand(mergeBase(), want, data)
				} else {
					// Put back as it is (where the change removes the
					// file too), and merged by the next adopt, which
					// also finds the version the edit was made from when
					// that is older than what q held (a program that read
					// the file before gitmem's last change to it).
					want = data
					if m.keepHand(q, mergeBase()) {
						m.logf("gitmem: %s was edited by hand while gitmem wrote an acknowledged change to it; the edit is kept, and merged into that change by the next adopt commit", q)
					}
				}
				kept, wantFile = true, true
			}
		}
		if placed && !hand {
			if !putFile {
				w.forgetPlaced(q)
				w.touchDir(w.prune(path.Dir(q)))
			}
			return nil
		}
		there = putFile // what this round put, or what appeared at q meanwhile
		// Another round. q holds what this one put there, or, when a file
		// appeared at q after it was moved aside, one made from nothing.
		if placed && putFile {
			h := plumbing.ComputeHash(plumbing.BlobObject, put)
			expect = func(g plumbing.Hash) bool { return g == h }
			base, baseRead = put, true
		} else {
			expect = func(plumbing.Hash) bool { return false }
			base, baseRead = nil, true
		}
		if hand && tmp != "" { // it holds the older want
			w.root.Remove(tmp)
			tmp = ""
		}
	}
}

// errFolderThere is syncChecked's answer when it finds a folder at the
// path of a file: it is left as it is.
var errFolderThere = errors.New("a folder is there")

// editedBefore reports whether the regular file at the memory path q,
// with lstat data fi, holds something other than gitmem's own (expect)
// although gitmem is about to replace it: another program still has it
// open for writing after writerWait (an edit under way: its end is the
// adopt's to take), or it is neither the file gitmem put there last
// (asPlaced) nor one the stat cache knows to hold a version of gitmem's
// own and reading it finds a content expect does not allow. A writer gone
// within the wait is no edit under way: a child process this one forked
// (git) holds a copy of every descriptor of this one's until its exec
// closes them, among them the spare or temporary file that became q, and
// q, taken for an edit, stayed on its older version until an adopt
// (TestAWriterThatLeavesAtOnceIsNoHandEdit); each look now also comes
// after such a child's exec (forksDone). A file that cannot be read
// for another reason is left to syncChecked's rounds. Called with the
// disk lock held.
func (m *mirror) editedBefore(q string, fi fs.FileInfo, expect func(plumbing.Hash) bool) bool {
	if m.wt.asPlaced(q, fi) {
		return m.wt.writing(q)
	}
	if h, ok := m.stats.hashAt(q, gd.StatOf(fi)); ok && expect(h) {
		return m.wt.writing(q)
	}
	data, err := m.wt.readWritten(q)
	return errors.Is(err, errWriting) || err == nil && !expect(plumbing.ComputeHash(plumbing.BlobObject, data))
}

// keepWriting puts back at the memory path q the file syncChecked took
// aside (aside names it) while another program still holds it open for
// writing: what it writes stays in the memory folder. q is then kept as a
// hand edit made on base (what q held when checked), which the next adopt
// commit merges with the acknowledged version, once the program is done
// (adoptDrift reads no file open for writing). put is what syncChecked
// had put at q (putFile: a file), which comes back aside. Called with the disk lock
// held.
func (m *mirror) keepWriting(q, aside string, put []byte, putFile bool, base []byte) error {
	w := m.wt
	back, backInfo, _, err := w.put(aside, q, putFile)
	w.forgetPlaced(q) // the other program's file, not gitmem's
	if err != nil {
		return fmt.Errorf("put back the file another program writes (left in .git/gitmem/tmp): %w", err)
	}
	if back != "" {
		// gitmem's own version, unless an edit of it landed in the same
		// instant: two programs writing one file at once, of which the one
		// still writing keeps the file.
		data, file, err := w.takeAside(back, backInfo)
		if err == nil && file && (!putFile || !bytes.Equal(data, put)) {
			m.logf("gitmem: %s was written by two programs at once while gitmem wrote an acknowledged change to it; the file of the one still writing is kept", q)
		}
	}
	if m.keepHand(q, base) {
		m.logf("gitmem: %s was being written by another program when gitmem wrote an acknowledged change to it; the program's file is kept, and merged into that change by the next adopt commit", q)
	}
	return nil
}

// keepHand notes that the worktree file at q holds a hand edit made on
// base (nil: no file), for the next adopt commit's merge (repairs.noteBase),
// unless an older base is noted already. It reports whether it noted it:
// what is logged of a kept edit is logged once until an adopt takes it,
// not at every change of the file under load.
func (m *mirror) keepHand(q string, base []byte) (noted bool) {
	b := handBase{text: base}
	if base != nil {
		b.hash = plumbing.ComputeHash(plumbing.BlobObject, base)
	}
	return m.repairs.noteBase(q, b)
}

// coverer tells the paths drifted leaves alone: a path is covered when it
// or a folder above it is in the set.
type coverer interface{ covers(p string) bool }
