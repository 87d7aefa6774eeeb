package gitdir

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// packLoose packs the loose objects and removes their files: one pack if
// it fits; on a full disk, batches that start small and double, each
// batch's loose files removed (freeing far more than the pack takes)
// before the next is written. It returns how many objects it packed.
func (s *Store) PackLoose(loose []plumbing.Hash) (int, error) {
	if len(loose) == 0 {
		return 0, nil
	}
	if _, err := s.WritePack(loose); err == nil {
		return RemoveLoose(s.Dir, loose), nil
	}
	// The disk is full: spend the reserve on the smallest objects first.
	os.Remove(s.reservePath())
	defer s.MakeReserve()
	size := map[plumbing.Hash]int64{}
	for _, h := range loose {
		hex := h.String()
		if fi, err := os.Stat(filepath.Join(s.Dir, "objects", hex[:2], hex[2:])); err == nil {
			size[h] = fi.Size()
		}
	}
	loose = slices.Clone(loose)
	slices.SortFunc(loose, func(a, b plumbing.Hash) int { return cmp.Compare(size[a], size[b]) })
	done := 0
	for batch := 32; done < len(loose); batch *= 2 {
		part := loose[done:min(done+batch, len(loose))]
		if _, err := s.WritePack(part); err != nil {
			return done, err
		}
		RemoveLoose(s.Dir, part)
		done += len(part)
	}
	return done, nil
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

// clearGarbage deletes what takes space for nothing: half-written packs
// (every one when full, as a redaction needs: one could hold the old
// content; else those older than StaleTemp), gitmem's temporary files,
// and loose objects that a pack holds already (left by a gc killed
// between writing its pack and removing the loose files). It returns how
// many files it deleted.
func (s *Store) ClearGarbage(full bool) int {
	n := 0
	for _, p := range TempPacks(s.Dir) {
		if fi, err := os.Stat(p); err == nil && (full || time.Since(fi.ModTime()) > StaleTemp) && os.Remove(p) == nil {
			n++
		}
	}
	for _, pattern := range []string{
		filepath.Join(s.Dir, "gitmem", "tmp", "*"),
		filepath.Join(s.Dir, "objects", "??", TmpObjPrefix+"*"),
	} {
		m, _ := filepath.Glob(pattern)
		for _, p := range m {
			if os.Remove(p) == nil {
				n++
			}
		}
	}
	n += RemoveOrphanIndexes(s.Dir)
	loose, err := s.LooseHashes()
	if err != nil || len(loose) == 0 {
		return n
	}
	s.st.ObjectStorage.Reindex()
	packs, err := s.st.ObjectPacks()
	if err != nil {
		return n
	}
	var idxs []*idxfile.MemoryIndex
	for _, p := range packs {
		f, err := os.Open(filepath.Join(s.Dir, "objects", "pack", "pack-"+p.String()+".idx"))
		if err != nil {
			continue
		}
		idx := idxfile.NewMemoryIndex()
		if idxfile.NewDecoder(f).Decode(idx) == nil {
			idxs = append(idxs, idx)
		}
		f.Close()
	}
	var packed []plumbing.Hash
	for _, h := range loose {
		for _, idx := range idxs {
			if ok, _ := idx.Contains(h); ok {
				packed = append(packed, h)
				break
			}
		}
	}
	return n + RemoveLoose(s.Dir, packed)
}

// RemoveOrphanIndexes deletes pack indexes whose pack is missing: go-git
// writes a pack's index before it renames the pack into place, and would
// trust a half-written one if the same pack were written again.
func RemoveOrphanIndexes(gitDir string) int {
	n := 0
	idxs, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "pack-*.idx"))
	for _, idx := range idxs {
		if _, err := os.Stat(strings.TrimSuffix(idx, ".idx") + ".pack"); errors.Is(err, fs.ErrNotExist) && os.Remove(idx) == nil {
			n++
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

// refTips are the objects the refs point to.
func (s *Store) RefTips() ([]plumbing.Hash, error) {
	iter, err := s.st.IterReferences()
	if err != nil {
		return nil, err
	}
	var tips []plumbing.Hash
	err = iter.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() == plumbing.HashReference && !slices.Contains(tips, ref.Hash()) {
			tips = append(tips, ref.Hash())
		}
		return nil
	})
	return tips, err
}

// writePack writes the objects as one pack without deltas, with its
// index, fsyncs both and the pack folder, and returns the pack's hash.
func (s *Store) WritePack(hashes []plumbing.Hash) (plumbing.Hash, error) {
	before, err := s.st.ObjectPacks()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := Injected(StepPack, ".git/objects/pack"); err != nil {
		return plumbing.ZeroHash, err
	}
	pw, err := s.st.PackfileWriter()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	sum, err := packfile.NewEncoder(pw, s.st, false).Encode(hashes, 0)
	if cerr := pw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		for _, p := range TempPacks(s.Dir) { // ours, half-written
			if fi, serr := os.Stat(p); serr == nil && time.Since(fi.ModTime()) < time.Minute {
				os.Remove(p)
			}
		}
		RemoveOrphanIndexes(s.Dir)
		return plumbing.ZeroHash, err
	}
	packDir := filepath.Join(s.Dir, "objects", "pack")
	if slices.Contains(before, sum) {
		return sum, nil // the very same pack existed already
	}
	for _, ext := range []string{".pack", ".idx"} {
		f, err := os.Open(filepath.Join(packDir, "pack-"+sum.String()+ext))
		if err != nil {
			return plumbing.ZeroHash, err
		}
		err = Fsync(f)
		f.Close()
		if err != nil {
			return plumbing.ZeroHash, err
		}
	}
	return sum, SyncDir(packDir)
}

func (s *Store) RemovePack(p plumbing.Hash) {
	packDir := filepath.Join(s.Dir, "objects", "pack")
	ents, _ := os.ReadDir(packDir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "pack-"+p.String()+".") {
			os.Remove(filepath.Join(packDir, e.Name()))
		}
	}
}

// StaleTemp is how old a temporary pack must be to count as abandoned.
const StaleTemp = 10 * time.Minute

// TempPacks lists the half-written packs in .git/objects/pack.
func TempPacks(gitDir string) []string {
	m, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "tmp_*"))
	return m
}

func (s *Store) reservePath() string { return filepath.Join(s.Dir, "gitmem", "reserve") }

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
