package gitdir

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// Stat is the part of lstat(2) that git keeps in the index to tell an
// unchanged file without reading it.
type Stat struct {
	ctimeSec, ctimeNsec, mtimeSec, mtimeNsec uint32
	dev, ino, uid, gid, size                 uint32
}

// RacyWindow is how recent a file's change may be for its lstat data not
// to be trusted: file times come from a coarse clock, so an edit right
// after a look could leave size and times unchanged (git's "racily clean"
// entries).
const RacyWindow = 100 * time.Millisecond

// Racy reports whether the file changed so recently (within RacyWindow of
// now) that an edit after this lstat could leave the same data.
func (s Stat) Racy(now time.Time) bool {
	ctime := time.Unix(int64(s.ctimeSec), int64(s.ctimeNsec))
	return now.Sub(s.mtime()) < RacyWindow || now.Sub(ctime) < RacyWindow
}

// Size is the file's size (as far as 32 bits hold it).
func (s Stat) Size() int64 { return int64(s.size) }

// IsZero reports whether the entry carries no lstat data (not vouched for).
func (s Stat) IsZero() bool { return s == Stat{} }

func (s Stat) mtime() time.Time { return time.Unix(int64(s.mtimeSec), int64(s.mtimeNsec)) }

// mtimeBefore reports whether the file was last changed before t (an
// index written at t vouches for it; one changed at t or later is racy).
func (s Stat) MtimeBefore(t time.Time) bool { return s.mtime().Before(t) }

// IndexEntry is one file of .git/index.
type IndexEntry struct {
	Path string // repository path
	Hash plumbing.Hash
	Mode filemode.FileMode
	Stat Stat // zero: not vouched for (git re-reads the file)
}

// ReadIndex reads the file entries of .git/index (versions 2 and 3, as
// gitmem and git write them; extensions are skipped) and the time the
// index was written. Any other version, or damage, is an error: the caller
// then hashes files instead of trusting lstat data.
func ReadIndex(gitDir string) ([]IndexEntry, time.Time, error) {
	// Opened without the poller's calls (OpenRead), its time from the
	// open file, which is the one read: four system calls fewer.
	f, err := OpenRead(filepath.Join(gitDir, "index"))
	if err != nil {
		return nil, time.Time{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	data := make([]byte, 0, fi.Size()+1)
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, time.Time{}, err
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
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
	out := make([]IndexEntry, 0, n)
	for range n {
		if len(body) < 62 {
			return nil, time.Time{}, bad
		}
		u := func(i int) uint32 { return binary.BigEndian.Uint32(body[4*i:]) }
		e := IndexEntry{Mode: filemode.FileMode(u(6)), Stat: Stat{ctimeSec: u(0), ctimeNsec: u(1), mtimeSec: u(2), mtimeNsec: u(3),
			dev: u(4), ino: u(5), uid: u(7), gid: u(8), size: u(9)}}
		copy(e.Hash[:], body[40:60])
		flags := binary.BigEndian.Uint16(body[60:])
		head := 62
		if flags&0x4000 != 0 { // extended flags (version 3)
			head += 2
		}
		end := bytes.IndexByte(body[min(head, len(body)):], 0)
		if end < 0 {
			return nil, time.Time{}, bad
		}
		e.Path = string(body[head : head+end])
		entryLen := (head + end + 8) &^ 7 // NUL-padded to a multiple of 8
		if entryLen > len(body) {
			return nil, time.Time{}, bad
		}
		if flags&0x3000 == 0 && e.Mode.IsFile() { // stage 0 files only
			out = append(out, e)
		}
		body = body[entryLen:]
	}
	return out, fi.ModTime(), nil
}

// WriteIndex writes .git/index (version 2) with the entries, sorted, the
// way git does (index.lock, rename) and, as git by default
// (core.fsync=committed), without an fsync: the index is a cache of HEAD's
// tree and the worktree's lstat data, rebuilt by the next gitmem start or
// `git reset` — gitmem writes it every second under load, and its fsync
// (tens of milliseconds for 1 MB here) would be paid under the writer
// mutex. go-git's encoder is ~15x slower at 10,000 entries and is not
// needed: gitmem's index has no extensions and no conflict stages.
func WriteIndex(ctx context.Context, env *Env, gitDir string, entries []IndexEntry) error {
	if err := env.Injected(StepIndex, ".git/index"); err != nil {
		return err
	}
	slices.SortFunc(entries, func(a, b IndexEntry) int { return strings.Compare(a.Path, b.Path) })
	buf := make([]byte, 12, 12+len(entries)*96)
	copy(buf, "DIRC")
	binary.BigEndian.PutUint32(buf[4:], 2)
	binary.BigEndian.PutUint32(buf[8:], uint32(len(entries)))
	for _, e := range entries {
		st := e.Stat
		start := len(buf)
		for _, v := range []uint32{st.ctimeSec, st.ctimeNsec, st.mtimeSec, st.mtimeNsec, st.dev, st.ino,
			uint32(e.Mode), st.uid, st.gid, st.size} {
			buf = binary.BigEndian.AppendUint32(buf, v)
		}
		buf = append(buf, e.Hash[:]...)
		buf = binary.BigEndian.AppendUint16(buf, uint16(min(len(e.Path), 0xfff)))
		buf = append(buf, e.Path...)
		pad := 8 - (len(buf)-start)%8 // 1..8 NULs, as git pads
		for range pad {
			buf = append(buf, 0)
		}
	}
	sum := sha1.Sum(buf)
	buf = append(buf, sum[:]...)
	return ReplaceCache(ctx, filepath.Join(gitDir, "index"), buf, GitFileMode)
}

// AppendStat appends s to b as nine decimal numbers separated by spaces
// (a text form of lstat data, which ParseStat reads back).
func AppendStat(b []byte, s Stat) []byte {
	for i, v := range [9]uint32{s.ctimeSec, s.ctimeNsec, s.mtimeSec, s.mtimeNsec, s.dev, s.ino, s.uid, s.gid, s.size} {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendUint(b, uint64(v), 10)
	}
	return b
}

// ParseStat reads the lstat data AppendStat wrote, the nine fields f.
func ParseStat(f []string) (Stat, bool) {
	if len(f) != 9 {
		return Stat{}, false
	}
	var v [9]uint32
	for i, s := range f {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return Stat{}, false
		}
		v[i] = uint32(n)
	}
	return Stat{ctimeSec: v[0], ctimeNsec: v[1], mtimeSec: v[2], mtimeNsec: v[3], dev: v[4], ino: v[5], uid: v[6], gid: v[7], size: v[8]}, true
}
