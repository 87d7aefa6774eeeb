package gitmem

import (
	"crypto/sha1"
	"encoding/binary"
	"os"
	"path/filepath"
	"sort"

	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// statInfo is the part of lstat(2) that git keeps in the index to tell an
// unchanged file without reading it.
type statInfo struct {
	ctimeSec, ctimeNsec, mtimeSec, mtimeNsec uint32
	dev, ino, uid, gid, size                 uint32
}

// writeIndex writes .git/index (version 2) for the tree root, with the
// worktree's lstat data, so that `git status` and `git diff` find the
// worktree clean without re-reading every file. It is written git's way
// (index.lock, fsync, rename). go-git's encoder is ~15x slower at 10,000
// entries and is not needed: gitmem's index has no extensions and no
// conflict stages.
func writeIndex(gitDir, workDir string, root *node) error {
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
		if e.n.mode != filemode.Submodule {
			if fi, err := os.Lstat(filepath.Join(workDir, filepath.FromSlash(e.path))); err == nil && !fi.IsDir() {
				st = statOf(fi)
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

	return replaceLocked(filepath.Join(gitDir, "index"), buf, nil)
}
