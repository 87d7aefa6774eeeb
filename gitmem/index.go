package gitmem

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// statInfo is the part of lstat(2) that git keeps in the index to tell an
// unchanged file without reading it.
type statInfo struct {
	ctimeSec, ctimeNsec, mtimeSec, mtimeNsec uint32
	dev, ino, uid, gid, size                 uint32
}

// writeIndex writes .git/index (version 2) for HEAD's tree, so that `git
// status` and `git diff` find the worktree clean without re-reading every
// file. Only lstat data gitmem has checked against HEAD's blob goes in (a
// file it cannot vouch for gets zeroes, which git re-reads): an index that
// paired a hand-edited file's lstat data with HEAD's blob would hide the
// edit from git and from gitmem's next start. It is written git's way
// (index.lock, fsync, rename). go-git's encoder is ~15x slower at 10,000
// entries and is not needed: gitmem's index has no extensions and no
// conflict stages.
func (r *Repo) writeIndex() error {
	if err := injected(stepIndex, ".git/index"); err != nil {
		return err
	}
	root := r.snapshotTree()
	type entry struct {
		path string
		n    *node
	}
	var entries []entry
	var walk func(n *node, prefix string)
	walk = func(n *node, prefix string) {
		for name, k := range n.kids {
			p := name
			if prefix != "" {
				p = prefix + "/" + name
			}
			if k.isDir() {
				walk(k, p)
			} else {
				entries = append(entries, entry{p, k})
			}
		}
	}
	if root != nil {
		walk(root, "")
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].path < entries[j].path })

	buf := make([]byte, 12, 12+len(entries)*96)
	copy(buf, "DIRC")
	binary.BigEndian.PutUint32(buf[4:], 2)
	binary.BigEndian.PutUint32(buf[8:], uint32(len(entries)))
	for _, e := range entries {
		var st statInfo
		if e.n.isFile() {
			if fi, err := r.wt.root.Lstat(e.path); err == nil && fi.Mode().IsRegular() {
				if same, err := r.sameAsTree(e.path, fi, e.n.hash); err == nil && same && !statOf(fi).racy(time.Now()) {
					st = statOf(fi)
				}
			}
		}
		start := len(buf)
		for _, v := range []uint32{st.ctimeSec, st.ctimeNsec, st.mtimeSec, st.mtimeNsec, st.dev, st.ino,
			uint32(e.n.mode), st.uid, st.gid, st.size} {
			buf = binary.BigEndian.AppendUint32(buf, v)
		}
		buf = append(buf, e.n.hash[:]...)
		buf = binary.BigEndian.AppendUint16(buf, uint16(min(len(e.path), 0xfff)))
		buf = append(buf, e.path...)
		pad := 8 - (len(buf)-start)%8 // 1..8 NULs, as git pads
		for range pad {
			buf = append(buf, 0)
		}
	}
	sum := sha1.Sum(buf)
	buf = append(buf, sum[:]...)

	return replaceLocked(filepath.Join(r.gitDir, "index"), buf, nil)
}

// racy reports whether the file changed so recently (within racyWindow of
// now) that an edit after this lstat could leave the same data.
func (s statInfo) racy(now time.Time) bool {
	ctime := time.Unix(int64(s.ctimeSec), int64(s.ctimeNsec))
	return now.Sub(s.mtime()) < racyWindow || now.Sub(ctime) < racyWindow
}

func (s statInfo) mtime() time.Time { return time.Unix(int64(s.mtimeSec), int64(s.mtimeNsec)) }

// mtimeBefore reports whether the file was last changed before t (an
// index written at t vouches for it; one changed at t or later is racy).
func (s statInfo) mtimeBefore(t time.Time) bool { return s.mtime().Before(t) }

// indexEntry is one file of .git/index.
type indexEntry struct {
	path string // repository path
	hash plumbing.Hash
	stat statInfo
}

// readIndex reads the file entries of .git/index (versions 2 and 3, as
// gitmem and git write them; extensions are skipped) and the time the
// index was written. Any other version, or damage, is an error: the caller
// then hashes files instead of trusting lstat data.
func readIndex(gitDir string) ([]indexEntry, time.Time, error) {
	path := filepath.Join(gitDir, "index")
	fi, err := os.Stat(path)
	if err != nil {
		return nil, time.Time{}, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, time.Time{}, err
	}
	bad := errors.New("unreadable index")
	if len(data) < 12+20 || string(data[:4]) != "DIRC" {
		return nil, time.Time{}, bad
	}
	if sum := sha1.Sum(data[:len(data)-20]); !bytes.Equal(sum[:], data[len(data)-20:]) {
		return nil, time.Time{}, bad
	}
	version := binary.BigEndian.Uint32(data[4:])
	if version != 2 && version != 3 {
		return nil, time.Time{}, bad
	}
	n := int(binary.BigEndian.Uint32(data[8:]))
	body := data[12 : len(data)-20]
	out := make([]indexEntry, 0, n)
	for range n {
		if len(body) < 62 {
			return nil, time.Time{}, bad
		}
		u := func(i int) uint32 { return binary.BigEndian.Uint32(body[4*i:]) }
		e := indexEntry{stat: statInfo{ctimeSec: u(0), ctimeNsec: u(1), mtimeSec: u(2), mtimeNsec: u(3),
			dev: u(4), ino: u(5), uid: u(7), gid: u(8), size: u(9)}}
		copy(e.hash[:], body[40:60])
		flags := binary.BigEndian.Uint16(body[60:])
		head := 62
		if flags&0x4000 != 0 { // extended flags (version 3)
			head += 2
		}
		end := bytes.IndexByte(body[min(head, len(body)):], 0)
		if end < 0 {
			return nil, time.Time{}, bad
		}
		e.path = string(body[head : head+end])
		entryLen := (head + end + 8) &^ 7 // NUL-padded to a multiple of 8
		if entryLen > len(body) {
			return nil, time.Time{}, bad
		}
		if flags&0x3000 == 0 && filemode.FileMode(u(6)).IsFile() { // stage 0 files only
			out = append(out, e)
		}
		body = body[entryLen:]
	}
	return out, fi.ModTime(), nil
}
