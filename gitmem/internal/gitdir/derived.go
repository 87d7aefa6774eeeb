package gitdir

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// git's derived files are indexes git writes beside the objects to find
// them faster: the commit-graph (objects/info/commit-graph, or a chain in
// objects/info/commit-graphs/), which names commits with their trees and
// parents; the multi-pack-index (objects/pack/multi-pack-index), which
// names packs, with its bitmap and reverse index
// (multi-pack-index-<checksum>.bitmap, .rev); and beside a pack its
// bitmap, reverse index, mtimes and promisor files (pack-H.bitmap, .rev,
// .mtimes, .promisor). git gc and git maintenance write them. Once a
// commit or a pack they name is deleted (gitmem gc, a redaction), they
// are stale: git fsck fails on them ("Could not read ... for
// commit-graph", "failed to load pack in position ..."), and git may
// trust them. They are only caches: gitmem removes a stale one, and git
// writes it again at its next gc.

// A Derived is one of git's derived files that is stale, and why.
type Derived struct {
	Path string // relative to .git
	Why  string
}

// StaleDerived lists the derived files that name what the repository
// does not hold: a commit-graph that names a commit has does not find (or
// whose tree differs from the graph's, when tree can tell), a
// multi-pack-index that names a missing pack, the bitmap or reverse
// index of a multi-pack-index that is not there, and the files of a pack
// that is gone. With graphs false the commit-graph is not read (its
// commits are not looked up).
func StaleDerived(gitDir string, graphs bool, has func(plumbing.Hash) bool, tree func(plumbing.Hash) (plumbing.Hash, bool)) []Derived {
	var out []Derived
	rel := func(p string) string {
		r, _ := filepath.Rel(gitDir, p)
		return filepath.ToSlash(r)
	}
	if graphs {
		for _, f := range commitGraphFiles(gitDir) {
			commits, err := readCommitGraph(f)
			if err != nil {
				out = append(out, Derived{rel(f), fmt.Sprintf("it cannot be read (%v)", withoutPath(err))})
				continue
			}
			for _, c := range commits {
				if !has(c.commit) {
					out = append(out, Derived{rel(f), fmt.Sprintf("it names the commit %s, which the repository does not hold", c.commit)})
					break
				}
				if t, ok := tree(c.commit); ok && t != c.tree {
					out = append(out, Derived{rel(f), fmt.Sprintf("it gives the commit %s the tree %s, where the commit has %s", c.commit, c.tree, t)})
					break
				}
			}
		}
	}
	packDir := filepath.Join(gitDir, "objects", "pack")
	midx := filepath.Join(packDir, "multi-pack-index")
	packs, sum, err := readMidx(midx)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		out = append(out, Derived{rel(midx), fmt.Sprintf("it cannot be read (%v)", withoutPath(err))})
	default:
		for _, p := range packs {
			if _, err := os.Stat(filepath.Join(packDir, strings.TrimSuffix(p, ".idx")+".pack")); err != nil {
				out = append(out, Derived{rel(midx), fmt.Sprintf("it names the pack %s, which is gone", strings.TrimSuffix(p, ".idx"))})
				break
			}
		}
	}
	for _, ext := range []string{".bitmap", ".rev"} {
		m, _ := filepath.Glob(filepath.Join(packDir, "multi-pack-index-*"+ext))
		for _, f := range m {
			if hex := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "multi-pack-index-"), ext); err != nil || hex != sum.String() {
				out = append(out, Derived{rel(f), "it belongs to a multi-pack-index that is not there"})
			}
		}
	}
	for _, ext := range []string{".bitmap", ".rev", ".mtimes", ".promisor"} {
		m, _ := filepath.Glob(filepath.Join(packDir, "pack-*"+ext))
		for _, f := range m {
			if _, err := os.Stat(strings.TrimSuffix(f, ext) + ".pack"); errors.Is(err, fs.ErrNotExist) {
				out = append(out, Derived{rel(f), "its pack is gone"})
			}
		}
	}
	return out
}

// RemoveDerived removes derived files StaleDerived listed (a
// commit-graph chain as a whole), and returns how many it removed.
func RemoveDerived(gitDir string, stale []Derived) int {
	n := 0
	for _, d := range stale {
		p := filepath.Join(gitDir, filepath.FromSlash(d.Path))
		switch {
		case strings.HasPrefix(d.Path, "objects/info/commit-graph"):
			n += removeCommitGraph(gitDir)
		case d.Path == "objects/pack/multi-pack-index":
			n += removeMidx(gitDir)
		default:
			if os.Remove(p) == nil {
				n++
			}
		}
	}
	return n
}

// removeCommitGraph removes the commit-graph, single file and chain.
func removeCommitGraph(gitDir string) int {
	n := 0
	info := filepath.Join(gitDir, "objects", "info")
	if os.Remove(filepath.Join(info, "commit-graph")) == nil {
		n++
	}
	chain := filepath.Join(info, "commit-graphs")
	if m, _ := filepath.Glob(filepath.Join(chain, "*")); len(m) > 0 {
		n += len(m)
		os.RemoveAll(chain)
	}
	return n
}

// removeMidx removes the multi-pack-index with its bitmap and reverse
// index (and a chain of them, as newer git writes).
func removeMidx(gitDir string) int {
	packDir := filepath.Join(gitDir, "objects", "pack")
	m, _ := filepath.Glob(filepath.Join(packDir, "multi-pack-index*"))
	for _, p := range m {
		os.RemoveAll(p)
	}
	return len(m)
}

// RemoveStaleMidx removes the multi-pack-index when it names a pack that
// is gone: git may write one naming a pack it listed just before gitmem
// deleted it, and git then fails to read the objects it says are there
// ("Could not read"). It reports whether it removed one; without a
// multi-pack-index it costs a stat.
func RemoveStaleMidx(gitDir string) bool {
	packDir := filepath.Join(gitDir, "objects", "pack")
	names, _, err := readMidx(filepath.Join(packDir, "multi-pack-index"))
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	for _, n := range names {
		if _, serr := os.Stat(filepath.Join(packDir, strings.TrimSuffix(n, ".idx")+".pack")); serr != nil {
			return removeMidx(gitDir) > 0
		}
	}
	if err != nil { // unreadable
		return removeMidx(gitDir) > 0
	}
	return false
}

// LockMaintenance takes git's objects/maintenance.lock, which git
// maintenance run holds while it runs (and, finding it held, skips its
// run). gitmem holds it while it deletes packs whose objects another pack
// holds, so that the multi-pack-index git maintenance's incremental-repack
// writes never names one of them: git fails to read what such a file says
// is in a pack that is gone. (Before gitmem's packs were kept for good,
// that expire also deleted a pack whose objects its multi-pack-index found
// in another, while gitmem deleted the other.) It is taken as writeLock
// takes a lock, without waiting: a file of the process's own
// (ownLockName) linked as the lock, so that one a killed gitmem left is
// known as its own and removed at the next start (ClearOwnLocks); it
// stopped every later deletion, and every git maintenance run, for good.
// The release removes the lock, then its second name. It reports false,
// taking nothing, when another holds it (or env's fault hook fails the
// step).
func LockMaintenance(env *Env, gitDir string) (unlock func(), ok bool) {
	path := filepath.Join(gitDir, "objects", "maintenance")
	own := ownLockName(path)
	f, err := os.OpenFile(own, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return func() {}, false
	}
	f.Close()
	if err := os.Link(own, path+".lock"); err != nil {
		os.Remove(own)
		return func() {}, false
	}
	unlock = func() {
		os.Remove(path + ".lock")
		os.Remove(own)
	}
	if env.Injected(StepMaintenance, "objects/maintenance.lock") != nil {
		unlock()
		return func() {}, false
	}
	return unlock, true
}

// MaintenanceLockLeft looks at git's objects/maintenance.lock: whether
// it is there and no running gitmem holds it (left), whether a gitmem
// that was killed took it (killed: the next start removes it, see
// LockMaintenance), and since when it is there. A lock with no second
// name is git's: git maintenance run holds it while it runs.
func MaintenanceLockLeft(env *Env, gitDir string) (left, killed bool, since time.Time) {
	path := filepath.Join(gitDir, "objects", "maintenance")
	lock, err := os.Lstat(path + ".lock")
	if err != nil {
		return false, false, time.Time{}
	}
	owns, _ := filepath.Glob(path + ".gitmem-*.lock")
	for _, o := range owns {
		m := ownLockRE().FindStringSubmatch(o)
		fi, err := os.Lstat(o)
		if m == nil || err != nil || !os.SameFile(fi, lock) {
			continue
		}
		if !env.ownerGone(m) {
			return false, false, time.Time{}
		}
		return true, true, lock.ModTime()
	}
	return true, false, lock.ModTime()
}

// midxNames reports whether the multi-pack-index names one of the packs.
func midxNames(gitDir string, packs []plumbing.Hash) bool {
	names, _, err := readMidx(filepath.Join(gitDir, "objects", "pack", "multi-pack-index"))
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) // unreadable: stale whatever it names
	}
	for _, p := range packs {
		if slices.Contains(names, "pack-"+p.String()+".idx") {
			return true
		}
	}
	return false
}

// withoutPath is err without the host path a *fs.PathError names (the
// problem names the file, relative to .git).
func withoutPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// commitGraphFiles lists the commit-graph files: the single file and the
// chain's.
func commitGraphFiles(gitDir string) []string {
	info := filepath.Join(gitDir, "objects", "info")
	var out []string
	if _, err := os.Stat(filepath.Join(info, "commit-graph")); err == nil {
		out = append(out, filepath.Join(info, "commit-graph"))
	}
	if data, err := ReadFile(filepath.Join(info, "commit-graphs", "commit-graph-chain")); err == nil {
		for _, l := range strings.Fields(string(data)) {
			out = append(out, filepath.Join(info, "commit-graphs", "graph-"+l+".graph"))
		}
	}
	return out
}

type graphCommit struct{ commit, tree plumbing.Hash }

// chunks reads a chunk table of n entries (4-byte id, 8-byte offset; the
// last entry ends the last chunk) at data[at:], and returns each chunk's
// bytes by id.
func chunks(data []byte, at, n int) (map[string][]byte, error) {
	if at+(n+1)*12 > len(data) {
		return nil, errors.New("cut short")
	}
	out := map[string][]byte{}
	for i := range n {
		e := data[at+i*12:]
		start, end := binary.BigEndian.Uint64(e[4:]), binary.BigEndian.Uint64(e[16:])
		if start > end || end > uint64(len(data)) {
			return nil, errors.New("a chunk is out of bounds")
		}
		out[string(e[:4])] = data[start:end]
	}
	return out, nil
}

// readCommitGraph returns the commits a commit-graph file names, with
// their trees.
func readCommitGraph(path string) ([]graphCommit, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) < 8 || !bytes.Equal(data[:4], []byte("CGPH")) || data[4] != 1 || data[5] != 1 {
		return nil, errors.New("not a commit-graph of version 1 with SHA-1")
	}
	cs, err := chunks(data, 8, int(data[6]))
	if err != nil {
		return nil, err
	}
	fanout, oids, cdat := cs["OIDF"], cs["OIDL"], cs["CDAT"]
	if len(fanout) != 256*4 {
		return nil, errors.New("no fan-out")
	}
	n := int(binary.BigEndian.Uint32(fanout[255*4:]))
	if len(oids) != n*20 || len(cdat) != n*36 {
		return nil, errors.New("the commit list is cut short")
	}
	out := make([]graphCommit, n)
	for i := range out {
		copy(out[i].commit[:], oids[i*20:])
		copy(out[i].tree[:], cdat[i*36:])
	}
	return out, nil
}

// readMidx returns the packs (pack-H.idx) a multi-pack-index names, and
// its checksum.
func readMidx(path string) ([]string, plumbing.Hash, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}
	if len(data) < 12+20 || !bytes.Equal(data[:4], []byte("MIDX")) || data[4] != 1 || data[5] != 1 {
		return nil, plumbing.ZeroHash, errors.New("not a multi-pack-index of version 1 with SHA-1")
	}
	var sum plumbing.Hash
	copy(sum[:], data[len(data)-20:])
	cs, err := chunks(data, 12, int(data[6]))
	if err != nil {
		return nil, sum, err
	}
	var names []string
	for _, n := range bytes.Split(cs["PNAM"], []byte{0}) {
		if len(n) > 0 {
			names = append(names, string(n))
		}
	}
	if len(names) != int(binary.BigEndian.Uint32(data[8:])) {
		return nil, sum, errors.New("its pack names do not match its count")
	}
	return names, sum, nil
}
