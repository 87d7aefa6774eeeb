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
)

// packLoose packs the loose objects and removes their files: one pack if
// it fits; on a full disk, batches that start small and double, each
// batch's loose files removed (freeing far more than the pack takes)
// before the next is written. It returns how many objects it packed.
func (s *Store) PackLoose(loose []plumbing.Hash) (int, error) {
	if len(loose) == 0 {
		return 0, nil
	}
	if _, err := s.PackObjects(loose); err == nil {
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
		if _, err := s.PackObjects(part); err != nil {
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

// ClearGarbage deletes what takes space for nothing: gitmem's temporary
// files (half-written packs and objects, worktree files) that a crash
// left, older than StaleTemp, or all of them (as a redaction needs: one
// could hold the old content, and nothing writes meanwhile), and pack
// indexes without their pack and marks of packs that are gone. It returns
// how many files it deleted.
func (s *Store) ClearGarbage(all bool) int {
	n := 0
	for _, pattern := range []string{
		filepath.Join(s.Dir, "objects", "pack", "tmp_*"),
		filepath.Join(s.Dir, "gitmem", "tmp", "*"),
		filepath.Join(s.Dir, "objects", "??", TmpObjPrefix+"*"),
	} {
		m, _ := filepath.Glob(pattern)
		for _, p := range m {
			if fi, err := os.Stat(p); err == nil && (all || time.Since(fi.ModTime()) > StaleTemp) && os.Remove(p) == nil {
				n++
			}
		}
	}
	return n + RemoveOrphanIndexes(s.Dir)
}

// RemoveOrphanIndexes deletes pack indexes (and marks) whose pack is
// missing: an index is renamed into place before its pack, and a
// half-written one would be trusted if the same pack were written again.
// A mark in .git/gitmem/repacked whose pack is gone (git's own gc
// replaced it, say) is deleted too, and not counted: it is no leftover
// of a crash.
func RemoveOrphanIndexes(gitDir string) int {
	n := 0
	packDir := filepath.Join(gitDir, "objects", "pack")
	for _, ext := range []string{".idx", oldMarkExt} {
		m, _ := filepath.Glob(filepath.Join(packDir, "pack-*"+ext))
		for _, p := range m {
			if _, err := os.Stat(strings.TrimSuffix(p, ext) + ".pack"); errors.Is(err, fs.ErrNotExist) && os.Remove(p) == nil {
				n++
			}
		}
	}
	marks, _ := os.ReadDir(filepath.Join(gitDir, "gitmem", repackedDir))
	for _, e := range marks {
		if _, err := os.Stat(filepath.Join(packDir, "pack-"+e.Name()+".pack")); errors.Is(err, fs.ErrNotExist) {
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

// RemovePacks deletes packs with the files git keeps beside them, the
// pack itself first (an index without its pack is ignored). A reader that
// listed a pack before finds its objects again in the pack that replaced
// it (Store.read looks again when a pack is gone).
func RemovePacks(gitDir string, packs []plumbing.Hash) int {
	n := 0
	for _, p := range packs {
		base := filepath.Join(gitDir, "objects", "pack", "pack-"+p.String())
		if os.Remove(base+".pack") == nil {
			n++
		}
		for _, ext := range []string{".idx", ".rev", ".bitmap", ".mtimes", ".keep", ".promisor", oldMarkExt} {
			os.Remove(base + ext)
		}
		os.Remove(repackedMarkPath(gitDir, p.String()))
	}
	return n
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
