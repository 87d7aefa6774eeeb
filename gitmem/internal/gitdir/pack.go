package gitdir

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// PackSmall packs the loose objects and the objects of the given packs,
// and removes their files: one pack if it fits; on a full disk, batches
// that start small and double, smallest files first, each batch's files
// removed (a loose object or a small pack takes a block or two, far more
// than its share of a pack) before the next is written. It returns how
// many objects it packed and how many files (loose objects, packs) it
// removed.
func (s *Store) PackSmall(loose []plumbing.Hash, packs []Pack) (objects, removed int, err error) {
	type unit struct {
		objs []plumbing.Hash
		pack plumbing.Hash // zero: a loose object
		size int64
	}
	var units []unit
	for _, h := range loose {
		hex := h.String()
		u := unit{objs: []plumbing.Hash{h}}
		if fi, err := os.Stat(filepath.Join(s.Dir, "objects", hex[:2], hex[2:])); err == nil {
			u.size = fi.Size()
		}
		units = append(units, u)
	}
	for _, p := range packs {
		hs, err := PackHashes(PackIndexPath(s.Dir, p.Hash))
		if err != nil {
			return objects, removed, err
		}
		units = append(units, unit{objs: hs, pack: p.Hash, size: p.Bytes})
	}
	pack := func(us []unit) error {
		var hs []plumbing.Hash
		for _, u := range us {
			hs = append(hs, u.objs...)
		}
		if len(hs) == 0 {
			return nil
		}
		if _, err := s.PackObjects(hs, Own); err != nil {
			return err
		}
		var ps []plumbing.Hash
		for _, u := range us {
			if u.pack.IsZero() {
				removed += RemoveLoose(s.Dir, u.objs)
			} else {
				ps = append(ps, u.pack)
			}
		}
		removed += RemovePacks(s.Dir, ps)
		objects += len(hs)
		return nil
	}
	if err := pack(units); err == nil {
		return objects, removed, nil
	}
	// The disk is full: spend the reserve on the smallest first.
	os.Remove(s.reservePath())
	defer s.MakeReserve()
	slices.SortFunc(units, func(a, b unit) int { return cmp.Compare(a.size, b.size) })
	for done, batch := 0, 32; done < len(units); batch *= 2 { // objects
		end, n := done, 0
		for end < len(units) && (end == done || n+len(units[end].objs) <= batch) {
			n += len(units[end].objs)
			end++
		}
		if err := pack(units[done:end]); err != nil {
			return objects, removed, err
		}
		done = end
	}
	return objects, removed, nil
}

// The reserve (.git/gitmem/reserve) is a few KiB gitmem sets aside while
// the disk has room, so that on a full disk gc can still write its first
// small pack, whose loose files it then deletes.
const reserveBytes = 16 << 10

func RemoveLoose(gitDir string, hashes []plumbing.Hash) int {
	n := 0
	for _, h := range hashes {
		hex := h.String()
		if os.Remove(filepath.Join(gitDir, "objects", hex[:2], hex[2:])) == nil {
			n++
		}
	}
	return n
}

// ClearGarbage deletes what takes space for nothing: gitmem's temporary
// files (half-written packs and objects; the worktree's are gitmem's
// clearTemp's) that a crash left, older than StaleTemp, or all of them (as a redaction needs: one
// could hold the old content, and nothing writes meanwhile), and pack
// indexes without their pack and marks of packs that are gone. The pack
// folder's temporary files stay while a fetch, which writes there
// without the writer lock, holds .git/gitmem/fetch (sweepTurn). It
// returns how many files it deleted.
func (s *Store) ClearGarbage(all bool) int {
	patterns := []string{filepath.Join(s.Dir, "objects", "??", TmpObjPrefix+"*")}
	if release, ok := sweepTurn(s.Dir); ok {
		defer release()
		patterns = append(patterns,
			filepath.Join(s.Dir, "objects", "pack", "tmp_*"),
			filepath.Join(s.Dir, "objects", "pack", TmpPackPrefix+"*"))
	}
	n := 0
	for _, pattern := range patterns {
		m, _ := filepath.Glob(pattern)
		for _, p := range m {
			if fi, err := os.Stat(p); err == nil && (all || time.Since(fi.ModTime()) > StaleTemp) && os.Remove(p) == nil {
				n++
			}
		}
	}
	return n + RemoveOrphanIndexes(s.Env, s.Dir)
}

// RemoveOrphanIndexes deletes pack indexes (and marks) whose pack is
// missing (an earlier version renamed an index into place before its
// pack): one would be trusted if the same pack were written again.
// A mark in .git/gitmem/repacked whose pack is gone (git's own gc
// replaced it, say) is deleted too, and not counted: it is no leftover
// of a crash.
func RemoveOrphanIndexes(env *Env, gitDir string) int {
	return removeOrphanIndexes(gitDir, listPackDir(env, gitDir))
}

// listPackDir lists .git/objects/pack (nil if it cannot), counted in
// env's PackListings.
func listPackDir(env *Env, gitDir string) []os.DirEntry {
	env.count(func(e *Env) *atomic.Int64 { return &e.packListings })
	ents, _ := os.ReadDir(filepath.Join(gitDir, "objects", "pack"))
	return ents
}

// removeOrphanIndexes is RemoveOrphanIndexes of the listing ents of the
// pack folder.
func removeOrphanIndexes(gitDir string, ents []os.DirEntry) int {
	n := 0
	packDir := filepath.Join(gitDir, "objects", "pack")
	names := make(map[string]bool, len(ents))
	for _, e := range ents {
		names[e.Name()] = true
	}
	for _, e := range ents {
		for _, ext := range []string{".idx", oldMarkExt} {
			if base, ok := strings.CutSuffix(e.Name(), ext); ok && strings.HasPrefix(base, "pack-") && !names[base+".pack"] {
				if os.Remove(filepath.Join(packDir, e.Name())) == nil {
					n++
				}
			}
		}
	}
	marks, _ := os.ReadDir(filepath.Join(gitDir, "gitmem", repackedDir))
	for _, e := range marks {
		if !names["pack-"+e.Name()+".pack"] {
			os.Remove(repackedMarkPath(gitDir, e.Name()))
		}
	}
	return n
}

// looseHashes lists the loose objects.
func (s *Store) LooseHashes() ([]plumbing.Hash, error) {
	var out []plumbing.Hash
	dir := filepath.Join(s.Dir, "objects")
	subs, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, s := range subs {
		if len(s.Name()) != 2 || !s.IsDir() {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(dir, s.Name()))
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if h := s.Name() + e.Name(); plumbing.IsHash(h) {
				out = append(out, plumbing.NewHash(h))
			}
		}
	}
	return out, nil
}

// RefTips are the objects the refs (and a detached HEAD) point to.
func (s *Store) RefTips() ([]plumbing.Hash, error) {
	refs, err := ListTips(s.Dir)
	if err != nil {
		return nil, err
	}
	var tips []plumbing.Hash
	for _, h := range refs {
		if !slices.Contains(tips, h) {
			tips = append(tips, h)
		}
	}
	slices.SortFunc(tips, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })
	return tips, nil
}

// RemovePacks deletes packs with the files git keeps beside them, and a
// multi-pack-index that names one of them (see StaleDerived), in the
// reverse of placePack's order: the index first (git and gitmem read a
// pack by its index: none reads it after that), then the pack, its other
// files, and the .keep last. An index left without its pack would be
// garbage git gc deletes, with the .keep beside it, when it ends: after
// the same pack was written again, perhaps. A reader that listed a pack
// before finds its objects again in the pack that replaced it
// (Store.read looks again when a pack is gone). Only the files that are
// there are removed: the folders are read once for them (a fold removes
// 32 packs of three files each, and tried eight more a pack that were
// not there: a third of the system calls of a store's materialisation
// under load, issue 25).
func RemovePacks(gitDir string, packs []plumbing.Hash) int {
	n := 0
	if midxNames(gitDir, packs) {
		removeMidx(gitDir)
	}
	packDir := filepath.Join(gitDir, "objects", "pack")
	there, marked := dirNames(packDir), dirNames(filepath.Join(gitDir, "gitmem", repackedDir))
	remove := func(path string) error {
		packRemovals.Add(1)
		return os.Remove(path)
	}
	for _, p := range packs {
		base := "pack-" + p.String()
		for _, ext := range []string{".idx", ".pack", ".rev", ".bitmap", ".mtimes", ".promisor", oldMarkExt, ".keep"} {
			// A file the listing missed (it could not be read) is tried.
			if there != nil && !there[base+ext] {
				continue
			}
			if remove(filepath.Join(packDir, base+ext)) == nil && ext == ".pack" {
				n++
			}
		}
		if marked == nil || marked[p.String()] {
			remove(repackedMarkPath(gitDir, p.String()))
		}
	}
	return n
}

// dirNames is the names in dir (nil when it cannot be read; empty when
// it does not exist).
func dirNames(dir string) map[string]bool {
	f, err := OpenDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]bool{}
	}
	if err != nil {
		return nil
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

// packRemovals counts RemovePacks' file removals, tried or done (for
// tests).
var packRemovals atomic.Int64

// Keeping packs from git's gc. Every pack gitmem writes into its
// repository has a .keep file beside it, made before the pack appears and
// kept for as long as the pack exists: git's gc, repack, prune and
// maintenance never delete a kept pack nor drop its objects, and only
// gitmem deletes it (its gc, a fold, a redaction), once another kept pack
// holds what it keeps.
//
// A .keep removed once a ref names the objects is not enough: git's own
// commands, run at once, delete reachable objects of packs that are not
// kept. git maintenance's incremental-repack writes a multi-pack-index
// naming every .idx in the folder, a running repack's temporary pack
// (.tmp-PID-pack-H) too, which holds a copy of every object and is the
// newest; its expire deletes every pack whose objects that copy holds;
// the repack, failing when a pack it read is gone, deletes its copy. git
// 2.39.5 loses a plain repository's whole history so, with git repack -a
// -d, git repack --cruft or git gc --prune=now beside git maintenance run
// --task=incremental-repack, and so cut gitmem's history beside
// TestPlainGitGCBesideWritersLosesNothing (hundreds of acknowledged calls
// gone, in 1 run of 8 under -race). git's expire skips kept packs.
//
// A .keep says, by what it holds, whose the pack is:
//
//   - InFlight (keepNote): no ref names its objects yet (a fetch before
//     the remote-tracking ref moves, a redaction before the branch does).
//     gitmem's gc leaves it alone, as it would delete unreachable objects;
//     once a ref names them, Settle makes it Own (in a repository no
//     gitmem owns, a push's remote, Unkeep removes it).
//   - Own (ownNote): gitmem's for good. gitmem's gc packs it again and
//     deletes it like a pack without a .keep.
//
// A .keep another program made (git index-pack --keep, an operator's) is
// left alone by gitmem's gc too. In a repository gitmem does not own (a
// shared bare remote) a pack gets none (NoKeep): git's gc has it.
type Keep uint8

const (
	NoKeep Keep = iota
	InFlight
	Own
)

const (
	keepNote = "gitmem: no ref names these objects yet\n"
	ownNote  = "gitmem: this pack is gitmem's; gitmem gc replaces it, git's gc leaves it\n"
)

// writeKeep writes the .keep file k says of the pack at base (its path
// without the extension), before the pack appears, and reports whether it
// made one (a failed write removes it: dropKeep). One that is there
// already (the same pack written again) stays, made Own if it was in
// flight and k is Own.
func writeKeep(base string, k Keep) (made bool, err error) {
	note := ownNote
	switch k {
	case NoKeep:
		return false, nil
	case InFlight:
		note = keepNote
	}
	if k == Own {
		switch err := linkOwnKeep(base); {
		case err == nil:
			return true, nil
		case errors.Is(err, fs.ErrExist):
			return false, settle(base)
		} // else no template: a file of its own
	}
	f, err := os.OpenFile(base+".keep", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if errors.Is(err, fs.ErrExist) {
		if k == Own {
			return false, settle(base)
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_, err = f.WriteString(note)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(base + ".keep")
		return false, err
	}
	return true, nil
}

// OwnKeepName is the file, in .git/gitmem, every Own .keep of a
// repository gitmem owns is a link of (linkOwnKeep).
const OwnKeepName = "keep"

// ownKeepsChecked holds the templates (OwnKeepName) whose content this
// process has read once and found right.
var ownKeepsChecked sync.Map

// linkOwnKeep makes the Own .keep of the pack at base (its path without
// the extension) a link of the repository's template, .git/gitmem/keep
// (made, whole and fsynced, at its first use), instead of a new file: a
// link takes no inode, and on a file system without a journal each
// inode made costs more the more were freed in the last half minute
// (ext4's recently_deleted scan), which materialising a group at a time
// across many stores made 30% of a loaded server's CPU (issue 25). git
// and gitmem look only at a .keep's name and content, which are the
// same. It fails, and the caller makes a file, where no template can be
// made (a repository without .git/gitmem/tmp, a push's remote) or
// linked (too many links, a file system without them); with
// fs.ErrExist when the .keep is there already.
func linkOwnKeep(base string) error {
	gm := filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(base))), "gitmem")
	tmpl := filepath.Join(gm, OwnKeepName)
	if _, ok := ownKeepsChecked.Load(tmpl); !ok {
		if data, err := ReadFileMax(tmpl, int64(len(ownNote))); err != nil || string(data) != ownNote {
			// Missing, or changed in place by another program: a new one
			// (links made of the old one keep what it holds).
			if err := WriteFileSync(filepath.Join(gm, "tmp"), "keep-", tmpl, []byte(ownNote), 0o444); err != nil {
				return err
			}
		}
		ownKeepsChecked.Store(tmpl, true)
	}
	err := os.Link(tmpl, base+".keep")
	if errors.Is(err, fs.ErrNotExist) {
		ownKeepsChecked.Delete(tmpl) // removed meanwhile: made again next time
	}
	return err
}

// RelabelledKeeps returns the .keep files of gitDir's packs that are
// links of .git/gitmem/keep (linkOwnKeep), or of one another (linkOwnKeep
// made them of a template since written anew: no other program links
// two packs' .keep), and hold another content than gitmem's: the file was
// edited in place, which relabels every pack it keeps as another
// program's, and gitmem's gc never folds them (git reads a .keep by its
// name alone: it keeps them either way). template says the template
// itself holds another content.
func RelabelledKeeps(gitDir string) (keeps []string, template bool) {
	tmpl := filepath.Join(gitDir, "gitmem", OwnKeepName)
	data, err := ReadFile(tmpl)
	template = err == nil && string(data) != ownNote
	tfi, terr := os.Lstat(tmpl)
	type group struct {
		fi    fs.FileInfo
		paths []string
	}
	var groups []*group
	m, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "pack-*.keep"))
	for _, k := range m {
		fi, err := os.Lstat(k)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		i := slices.IndexFunc(groups, func(g *group) bool { return os.SameFile(g.fi, fi) })
		if i < 0 {
			i = len(groups)
			groups = append(groups, &group{fi: fi})
		}
		groups[i].paths = append(groups[i].paths, k)
	}
	for _, g := range groups {
		linked := terr == nil && os.SameFile(g.fi, tfi)
		if !linked && len(g.paths) < 2 {
			continue // a file of its own: gitmem's or another program's, as it says
		}
		if data, err := ReadFile(g.paths[0]); err == nil && string(data) != ownNote {
			keeps = append(keeps, g.paths...)
		}
	}
	return keeps, template
}

// RelinkKeeps writes .git/gitmem/keep anew, as gitmem's, and makes each
// of keeps (RelabelledKeeps) a link of it, each replaced in one rename:
// git never finds the pack without its .keep. Called with the writer lock
// held.
func RelinkKeeps(gitDir string, keeps []string) error {
	gm := filepath.Join(gitDir, "gitmem")
	tmpl := filepath.Join(gm, OwnKeepName)
	if err := WriteFileSync(filepath.Join(gm, "tmp"), "keep-", tmpl, []byte(ownNote), 0o444); err != nil {
		return err
	}
	ownKeepsChecked.Delete(tmpl)
	for i, k := range keeps {
		tmp := filepath.Join(filepath.Dir(k), fmt.Sprintf("%skeep_%s_%d", TmpPackPrefix, ProcTag, i))
		if err := os.Link(tmpl, tmp); err != nil {
			return err
		}
		if err := os.Rename(tmp, k); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	if len(keeps) == 0 {
		return nil
	}
	return SyncDir(filepath.Dir(keeps[0]))
}

// dropKeep removes the .keep file of the pack at base (its path without
// the extension) that a failed write made.
func dropKeep(base string, made bool) {
	if made {
		os.Remove(base + ".keep")
	}
}

// Settle makes the pack h, written InFlight, gitmem's own (Own) once a
// ref names its objects: its .keep is replaced in one rename, so that
// git never finds the pack without one.
func Settle(gitDir string, h plumbing.Hash) error {
	return settle(filepath.Join(gitDir, "objects", "pack", "pack-"+h.String()))
}

func settle(base string) error {
	data, err := ReadFile(base + ".keep")
	switch {
	case err == nil && string(data) != keepNote:
		return nil // Own already, or another program's
	case errors.Is(err, fs.ErrNotExist):
		if _, err := os.Lstat(base + ".pack"); errors.Is(err, fs.ErrNotExist) {
			return nil // deleted meanwhile (a redaction's gc): nothing to keep
		}
	}
	return WriteFileSync(filepath.Dir(base), TmpPackPrefix+"keep_", base+".keep", []byte(ownNote), 0o444)
}

// Unkeep removes the .keep of the pack h, written InFlight into a
// repository gitmem does not own (a push's remote), once a ref names its
// objects: git's gc has it from then on.
func Unkeep(gitDir string, h plumbing.Hash) {
	os.Remove(filepath.Join(gitDir, "objects", "pack", "pack-"+h.String()+".keep"))
}

// keptBy reads whose the pack at base is by its .keep: NoKeep without
// one, InFlight or Own for gitmem's, and another program's (foreign).
func keptBy(base string) (k Keep, foreign bool) {
	data, err := ReadFile(base + ".keep")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return NoKeep, false
	case err == nil && string(data) == keepNote:
		return InFlight, false
	case err == nil && string(data) == ownNote:
		return Own, false
	}
	return NoKeep, true
}

// SettleStaleKeeps makes the packs a killed process left InFlight
// gitmem's own (what one holds for a commit is in the write-ahead log,
// which the start replays; what no ref reaches goes at a full gc), and
// removes gitmem's .keep files without a pack (killed before the pack
// appeared, or before the note was written: an empty one) and gitmem's
// packs without an index (killed between the two: see placePack), and
// returns how many files it removed. Called with the writer lock held: no
// gitmem process has a pack in flight.
func SettleStaleKeeps(env *Env, gitDir string) int {
	return settleStaleKeeps(gitDir, listPackDir(env, gitDir))
}

// settleStaleKeeps is SettleStaleKeeps of the listing ents of the pack
// folder.
func settleStaleKeeps(gitDir string, ents []os.DirEntry) int {
	packDir := filepath.Join(gitDir, "objects", "pack")
	names := make(map[string]bool, len(ents))
	for _, e := range ents {
		names[e.Name()] = true
	}
	n := 0
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".keep")
		if !ok || !strings.HasPrefix(base, "pack-") {
			continue
		}
		whole := names[base+".pack"] && names[base+".idx"]
		if whole {
			// Only one in flight is settled: by its size (the names are
			// one listing, the sizes an lstat each) the others are not
			// read.
			if fi, err := e.Info(); err != nil || fi.Size() != int64(len(keepNote)) {
				continue
			}
		}
		p := filepath.Join(packDir, e.Name())
		data, err := ReadFileMax(p, int64(max(len(keepNote), len(ownNote))))
		if err != nil || len(data) != 0 && string(data) != keepNote && string(data) != ownNote {
			continue // another program's
		}
		base = filepath.Join(packDir, base)
		switch {
		case whole:
			settle(base)
		case names[filepath.Base(base)+".pack"]:
			// Without its index (see placePack): no git command reads it.
			if os.Remove(base+".pack") == nil {
				n++
			}
			fallthrough
		default:
			if os.Remove(p) == nil {
				n++
			}
		}
	}
	return n
}

// StaleTemp is how old a temporary pack must be to count as abandoned.
const StaleTemp = 10 * time.Minute

// SweepPacks is a writer's start's sweep of the pack folder: it removes
// gitmem's temporary files there (TmpPackPrefix: the writer lock is
// held, and no fetch holds .git/gitmem/fetch, so no gitmem process writes
// one), git's half-written packs (tmp_*) older than StaleTemp, then moves
// the marks an earlier version kept there (MoveRepackedMarks), removes
// indexes without their pack (RemoveOrphanIndexes) and settles gitmem's
// .keep files (SettleStaleKeeps). It returns the files it removed. A file
// another program adds meanwhile waits for the next start; so does the
// whole sweep while a fetch, which writes there without the writer lock,
// is under way in any process (HoldFetch): its files are in flight, not
// a killed process's. own is the start's listing of .git/gitmem
// (ListNames): with a .git/gitmem/repacked, whose marks of packs gone
// the sweep removes.
//
// The folder is listed first without the fetch lock: a folder with none
// of these (a clean last run's, nearly every start's) is left at that,
// without .git/gitmem/fetch opened (or made); a store's first call where
// the disk's cache no longer holds the store reads one file fewer. Only
// where there is something to remove is the lock taken and the folder
// listed again under it (a fetch may have begun or ended between).
func SweepPacks(env *Env, gitDir string, own []string) int {
	if !slices.Contains(own, repackedDir) && !packSweepNeeded(listPackDir(env, gitDir)) {
		return 0
	}
	release, ok := sweepTurn(gitDir)
	if !ok {
		return 0
	}
	defer release()
	packDir := filepath.Join(gitDir, "objects", "pack")
	ents := listPackDir(env, gitDir)
	n := 0
	for _, e := range ents {
		name := e.Name()
		stale := strings.HasPrefix(name, TmpPackPrefix)
		if !stale && strings.HasPrefix(name, "tmp_") {
			fi, err := e.Info()
			stale = err == nil && time.Since(fi.ModTime()) > StaleTemp
		}
		if stale && os.RemoveAll(filepath.Join(packDir, name)) == nil {
			n++
		}
	}
	moveRepackedMarks(gitDir, ents)
	n += removeOrphanIndexes(gitDir, ents)
	return n + settleStaleKeeps(gitDir, ents)
}

// sweepTurn holds .git/gitmem/fetch exclusively for a sweep of the pack
// folder's temporary files (SweepPacks, ClearGarbage): ok is false while
// a fetch in any process holds it (HoldFetch), whose files those are. A
// fetch that begins meanwhile waits for release. Where the file cannot be
// made or locked, the sweep goes on: no fetch holds it either.
func sweepTurn(gitDir string) (release func(), ok bool) {
	l, err := OpenFileLock(fetchLockPath(gitDir))
	if err != nil {
		return func() {}, true
	}
	held, err := l.TryLock()
	switch {
	case err != nil:
		l.Close()
		return func() {}, true
	case !held:
		l.Close()
		return nil, false
	}
	return func() {
		l.Unlock()
		l.Close()
	}, true
}

// packSweepNeeded reports whether the listing ents of the pack folder
// holds anything SweepPacks would remove, move or settle: a temporary
// file (git's young ones too: the sweep then leaves them), an old-style
// mark, an index without its pack, a gitmem .keep without its pack and
// index or still in flight (its size: one lstat each, as the sweep's).
func packSweepNeeded(ents []os.DirEntry) bool {
	names := make(map[string]bool, len(ents))
	for _, e := range ents {
		names[e.Name()] = true
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, TmpPackPrefix) || strings.HasPrefix(name, "tmp_") || strings.HasSuffix(name, oldMarkExt) {
			return true
		}
		if base, ok := strings.CutSuffix(name, ".idx"); ok && strings.HasPrefix(base, "pack-") && !names[base+".pack"] {
			return true
		}
		if base, ok := strings.CutSuffix(name, ".keep"); ok && strings.HasPrefix(base, "pack-") {
			if !names[base+".pack"] || !names[base+".idx"] {
				return true
			}
			if fi, err := e.Info(); err == nil && fi.Size() == int64(len(keepNote)) {
				return true
			}
		}
	}
	return false
}

// fetchLockPath is .git/gitmem/fetch: held shared by each fetch under
// way (HoldFetch), exclusively by a start's sweep of the pack folder
// (SweepPacks).
func fetchLockPath(gitDir string) string { return filepath.Join(gitDir, "gitmem", "fetch") }

// HoldFetch marks a fetch into gitDir under way, from before it makes
// its first file in the pack folder until what it received is named by
// a ref or removed (release): a writer's start in any process leaves the
// pack folder alone meanwhile (SweepPacks). Fetches hold it together; a
// fetch that begins during a start's sweep waits for the sweep. Where
// the file cannot be made (a full disk, a folder that is not
// writable), the fetch goes on without it, as it would fail or not
// whatever a start does.
func HoldFetch(gitDir string) (release func()) {
	l, err := OpenFileLock(fetchLockPath(gitDir))
	if err != nil {
		return func() {}
	}
	if l.LockShared() != nil {
		l.Close()
		return func() {}
	}
	return func() {
		l.Unlock()
		l.Close()
	}
}

// ReserveName is the reserve's name in .git/gitmem.
const ReserveName = "reserve"

func (s *Store) reservePath() string { return filepath.Join(s.Dir, "gitmem", ReserveName) }

// reserveBlock is what SpareFromReserve frees: a block of most file
// systems, where a small file fits.
const reserveBlock = 4 << 10

// SpareFromReserve frees a block of the reserve for a small file that
// must be made on a full disk (.git/gitmem/holder), leaving the rest to
// gc; it reports whether it did (there was a reserve). MakeReserve does
// not make it whole again: gc, which spends it, does.
func (s *Store) SpareFromReserve() bool {
	fi, err := os.Stat(s.reservePath())
	if err != nil || !fi.Mode().IsRegular() || fi.Size() < reserveBlock {
		return false
	}
	return os.Truncate(s.reservePath(), fi.Size()-reserveBlock) == nil
}

// makeReserve creates the reserve if it is missing; on a full disk it
// cannot, and gc will do without.
func (s *Store) MakeReserve() {
	if _, err := os.Stat(s.reservePath()); err == nil {
		return
	}
	if err := WriteFileSync(filepath.Dir(s.reservePath()), "reserve-", s.reservePath(), make([]byte, reserveBytes), 0o600); err != nil {
		os.Remove(s.reservePath())
	}
}
