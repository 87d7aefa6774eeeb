package gitmem

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// The clean mark, .git/gitmem/clean, lets a view of a folder of a
// repository no process has open be answered from the mark and the
// worktree's folders (CleanView), without opening the repository: the
// writer lock, the sweeps, the log files' scan, .git/index, the packs and
// the history index each cost a read of the disk where the repository's
// files are out of the page cache (a store of serve --stores not used
// for hours), against one for the folder itself.
//
// A writer that lets the writer lock go (release, Close) with nothing left
// to write — the log empty after a checkpoint, .git/index written for the
// branch's commit, every memory file's lstat data vouched for in it, no
// hand-kept file — writes the mark, under the lock: the branch's commit,
// the lstat data of HEAD, the branch's file and both log files, and each
// memory file's mode and lstat data as .git/index holds them. Every taker
// of the writer lock removes it before it writes anything (dropClean, in
// waitLock and ownIfFree). CleanView trusts it only when all of that is
// still so on disk: HEAD, the branch and the log files as marked (a
// change acknowledged since, by any process, even one that does not know
// the mark, appended to a log file; git moving the branch replaced its
// file), and every file and folder under memories/ one of the mark's with
// the marked lstat data (a hand edit changed it: the writer's start commits
// it first). .git/index's entries are vouched for as git's are (not
// changed within the racy window of the look), so an edit after the mark
// leaves other lstat data. The mark, HEAD, the branch and the log files are
// looked at again after the folders were read: a writer that began
// meanwhile (and may have moved files while they were read) removed the
// mark or changed a log file. Anything else, or any doubt, and the caller
// opens the repository as before.

const cleanName = "clean"

func cleanPath(gitDir string) string { return filepath.Join(gitDir, "gitmem", cleanName) }

// dropClean removes the clean mark: called by whoever takes the writer
// lock, before it writes anything.
func dropClean(gitDir string) { os.Remove(cleanPath(gitDir)) }

// MarkWhenClean makes this writer write the clean mark when it lets the
// writer lock go with nothing left to write (see CleanView). Off by
// default: package stores turns it on for a repository it opened as a
// store, which CleanView's callers then know it to be.
func (r *Repo) MarkWhenClean() { r.cleanMark.Store(true) }

// markClean writes the clean mark if the writer holding the lock leaves
// nothing to write: called by release and Close after the checkpoint and
// .git/index's write, before the lock is let go, held the index's lock.
func (r *Repo) markClean(held indexHeld) {
	if !r.cleanMark.Load() || r.log.records() > 0 || r.state.pending() || r.mirror.handKept() {
		return
	}
	dt := r.disk.hold()
	head, tree := dt.head(), dt.tree()
	dt.release()
	entries, ok := held.entriesFor(head, tree)
	if !ok {
		return
	}
	var b []byte
	b = append(b, "gitmem clean 1\n"...)
	b = append(b, head.String()...)
	b = append(b, '\n')
	b = append(b, r.branch.String()...)
	b = append(b, '\n')
	for _, p := range []string{"HEAD", r.branch.String(), "gitmem/wal", "gitmem/wal2"} {
		fi, err := os.Lstat(filepath.Join(r.gitDir, p))
		if err != nil || !fi.Mode().IsRegular() {
			return
		}
		b = gd.AppendStat(b, gd.StatOf(fi))
		b = append(b, '\n')
	}
	now := time.Now()
	for _, e := range entries {
		if !strings.HasPrefix(e.Path, memDir+"/") {
			continue
		}
		n := lookup(tree, e.Path)
		if !n.isFile() || n.hash != e.Hash || strings.ContainsAny(e.Path, "\n") {
			return
		}
		st := e.Stat
		if st.IsZero() {
			// Not vouched for when .git/index was written (changed within
			// the racy window then): the file is read and vouched for
			// now, as the next index would. One just written (the
			// checkpoint before this materialised it) is vouched for
			// once the racy window is over: a release keeps the lock
			// until then (racyMark); Close writes no mark.
			if st = r.vouch(e.Path, n, now); st.IsZero() {
				return
			}
		}
		b = strconv.AppendUint(b, uint64(e.Mode), 8)
		b = append(b, ' ')
		b = gd.AppendStat(b, st)
		b = append(b, ' ')
		b = append(b, e.Path...)
		b = append(b, '\n')
	}
	b = append(b, "end\n"...)
	if err := gd.ReplaceCache(context.Background(), cleanPath(r.gitDir), b, gd.OwnFileMode); err != nil {
		dropClean(r.gitDir)
	}
}

// racyMark reports whether the clean mark, written now for head (the
// commit git's files hold), would leave out a memory file that .git/index
// could not vouch for and that cannot be vouched for yet: changed within
// the racy window (just materialised), or edited by hand. Called as
// markClean is.
func (r *Repo) racyMark(held indexHeld) (head plumbing.Hash, racy bool) {
	dt := r.disk.hold()
	head, tree := dt.head(), dt.tree()
	dt.release()
	if !r.cleanMark.Load() {
		return head, false
	}
	entries, ok := held.entriesFor(head, tree)
	if !ok {
		return head, false
	}
	now := time.Now()
	for _, e := range entries {
		if !e.Stat.IsZero() || !strings.HasPrefix(e.Path, memDir+"/") {
			continue
		}
		if n := lookup(tree, e.Path); n.isFile() && r.vouch(e.Path, n, now).IsZero() {
			return head, true
		}
	}
	return head, false
}

// cleanMark is a clean mark as read.
type cleanMark struct {
	head   plumbing.Hash
	branch string     // relative to .git: refs/heads/main
	stats  [4]gd.Stat // HEAD, the branch, wal, wal2
	files  map[string]cleanFile
}

type cleanFile struct {
	mode filemode.FileMode
	st   gd.Stat
}

// readCleanMark reads the clean mark, and its own lstat data, taken
// before the read (CleanView's last look compares it: a mark replaced
// meanwhile has other). A FIFO or anything but a regular file is no mark,
// and is not waited on (gd.ReadFileMax opens without waiting).
func readCleanMark(gitDir string) (m cleanMark, st gd.Stat, ok bool) {
	fi, err := os.Lstat(cleanPath(gitDir))
	if err != nil || !fi.Mode().IsRegular() {
		return m, st, false
	}
	data, err := gd.ReadFileMax(cleanPath(gitDir), 64<<20)
	if err != nil {
		return m, st, false
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) < 9 || lines[0] != "gitmem clean 1" || lines[len(lines)-2] != "end" || lines[len(lines)-1] != "" {
		return m, st, false
	}
	if m.head, ok = parseHash(lines[1]); !ok {
		return m, st, false
	}
	m.branch = lines[2]
	if !strings.HasPrefix(m.branch, "refs/heads/") {
		return m, st, false
	}
	for i := range m.stats {
		if m.stats[i], ok = gd.ParseStat(strings.Fields(lines[3+i])); !ok {
			return m, st, false
		}
	}
	m.files = make(map[string]cleanFile, len(lines)-9)
	for _, l := range lines[7 : len(lines)-2] {
		f := strings.SplitN(l, " ", 11)
		if len(f) != 11 {
			return m, st, false
		}
		mode, err := strconv.ParseUint(f[0], 8, 32)
		s, sok := gd.ParseStat(f[1:10])
		if err != nil || !sok {
			return m, st, false
		}
		m.files[f[10]] = cleanFile{filemode.FileMode(mode), s}
	}
	return m, gd.StatOf(fi), true
}

func parseHash(s string) (plumbing.Hash, bool) {
	h := plumbing.NewHash(s)
	return h, len(s) == 40 && h.String() == s
}

// CleanView returns the memory of the repository at dir as of its clean
// mark, when the mark and everything it vouches for hold on disk (see the
// mark's comment above): no process has written to it since the mark was
// written, nor edited a memory file by hand. It opens nothing but the
// mark, and looks at HEAD, the branch, the log files and the worktree's
// memory folders and files; it writes nothing. false: the caller opens
// the repository (gitmem.Open), which recovers, adopts and repairs as it
// always does. Only a view's Stat and List may be used (ReadFile needs the
// repository): a folder's listing.
func CleanView(dir string) (*View, bool) {
	gitDir := filepath.Join(dir, ".git")
	m, markSt, ok := readCleanMark(gitDir)
	if !ok {
		return nil, false
	}
	// HEAD is not read: git writes it anew (lock, rename) to name another
	// branch, which its lstat data then says.
	looks := []string{"HEAD", m.branch, "gitmem/wal", "gitmem/wal2"}
	same := func() bool {
		for i, p := range looks {
			fi, err := os.Lstat(filepath.Join(gitDir, p))
			if err != nil || gd.StatOf(fi) != m.stats[i] {
				return false
			}
		}
		return true
	}
	if !same() {
		return nil, false
	}
	// The worktree's memory files are the mark's, unchanged, and its
	// folders those their paths make: nothing else is there. Each folder's
	// node is made of its kids once (os.ReadDir lists them whole).
	found := 0
	var walk func(rel string) *node
	walk = func(rel string) *node {
		list, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil || (rel != memDir && len(list) == 0) { // an empty folder: git's tree has none
			return nil
		}
		kids := make([]kid, 0, len(list))
		for _, k := range list {
			p := rel + "/" + k.Name()
			fi, err := k.Info()
			if err != nil {
				return nil
			}
			var n *node
			switch {
			case fi.IsDir():
				n = walk(p)
			case fi.Mode().IsRegular():
				if f, ok := m.files[p]; ok && gd.StatOf(fi) == f.st {
					n = &node{mode: f.mode, size: f.st.Size()}
					found++
				}
			}
			if n == nil {
				return nil
			}
			kids = append(kids, kid{k.Name(), n})
		}
		return newDir(kids)
	}
	fi, err := os.Lstat(filepath.Join(dir, memDir))
	if err != nil || !fi.IsDir() {
		return nil, false
	}
	mem := walk(memDir)
	if mem == nil || found != len(m.files) {
		return nil, false
	}
	// Nothing began to write meanwhile: the mark is the one read (a taker
	// of the lock removes it), and so are the log files and the branch.
	if fi, err := os.Lstat(cleanPath(gitDir)); err != nil || gd.StatOf(fi) != markSt || !same() {
		return nil, false
	}
	return &View{root: newDir([]kid{{memDir, mem}}), head: m.head}, true
}
