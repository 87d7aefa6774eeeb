package gitmem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// The history index: one record per commit reachable from HEAD — both
// sides of every merge — in topological order (every commit after its
// parents; otherwise in the order the commits reached this repository),
// with what log, blame and expire need: the trailers and the memory files
// each commit changed against its first parent. go-git's path-filtered log
// diffs every commit (21 s for 1,001 touching commits of 10,001), so gitmem
// keeps this index itself: appended at each commit, kept in
// .git/gitmem/history, caught up from git when HEAD moved elsewhere (a walk
// back over every parent to commits the index knows, so a merge costs the
// commits it brings), and rebuilt when the history was rewritten. It is a
// cache: git stays the truth. Version 5 records every parent (version 4,
// first-parent only, is rebuilt).

const historyHeader = "gitmem-history 5"

type histRec struct {
	hash     plumbing.Hash
	parents  []plumbing.Hash
	when     time.Time
	author   Signature
	subject  string
	id       string // Tool-Use-Id
	command  string // Memory-Command
	session  string
	agent    string
	path     string          // Memory-Path
	newPath  string          // Memory-New-Path
	trailers []Trailer       // all of the commit's trailers
	paths    []string        // memory files changed against the first parent, relative to memories/, sorted
	blobs    []plumbing.Hash // each path's new blob (zero: deleted there)
}

// parent is the first parent (zero for a root commit).
func (h *histRec) parent() plumbing.Hash {
	if len(h.parents) == 0 {
		return plumbing.ZeroHash
	}
	return h.parents[0]
}

// change records that path p now holds blob h (zero: removed).
func (h *histRec) change(p string, b plumbing.Hash) {
	h.paths = append(h.paths, p)
	h.blobs = append(h.blobs, b)
}

// sortPaths orders the changed paths (and their blobs) by path.
func (h *histRec) sortPaths() {
	idx := make([]int, len(h.paths))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(h.paths[a], h.paths[b]) })
	paths, blobs := make([]string, len(idx)), make([]plumbing.Hash, len(idx))
	for i, j := range idx {
		paths[i], blobs[i] = h.paths[j], h.blobs[j]
	}
	h.paths, h.blobs = paths, blobs
}

func (h *histRec) commit() Commit {
	c := Commit{Hash: h.hash.String(), Author: h.author, Time: h.when, Subject: h.subject, Paths: h.paths, Trailers: h.trailers}
	for _, p := range h.parents {
		c.Parents = append(c.Parents, p.String())
	}
	return c
}

var escaper = strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`, "\r", `\r`)

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 't':
				b.WriteByte('\t')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			default:
				b.WriteByte(s[i])
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (h *histRec) line() string {
	_, off := h.when.Zone()
	parents := make([]string, len(h.parents))
	for i, p := range h.parents {
		parents[i] = p.String()
	}
	f := []string{h.hash.String(), strings.Join(parents, ","), strconv.FormatInt(h.when.Unix(), 10), strconv.Itoa(off),
		h.author.Name, h.author.Email, h.subject, strconv.Itoa(len(h.trailers))}
	for _, t := range h.trailers {
		f = append(f, t.Key, t.Value)
	}
	f = append(f, strconv.Itoa(len(h.paths)))
	f = append(f, h.paths...)
	for _, b := range h.blobs {
		if b.IsZero() {
			f = append(f, "")
		} else {
			f = append(f, b.String())
		}
	}
	for i := range f {
		f[i] = escaper.Replace(f[i])
	}
	return strings.Join(f, "\t") + "\n"
}

func parseRec(line string) (histRec, bool) {
	f := strings.Split(line, "\t")
	if len(f) < 8 || !plumbing.IsHash(f[0]) {
		return histRec{}, false
	}
	var parents []plumbing.Hash
	if f[1] != "" {
		for _, p := range strings.Split(f[1], ",") {
			if !plumbing.IsHash(p) {
				return histRec{}, false
			}
			parents = append(parents, plumbing.NewHash(p))
		}
	}
	sec, err1 := strconv.ParseInt(f[2], 10, 64)
	off, err2 := strconv.Atoi(f[3])
	n, err3 := strconv.Atoi(f[7])
	if err1 != nil || err2 != nil || err3 != nil || n < 0 || len(f) < 8+2*n {
		return histRec{}, false
	}
	var trailers []Trailer
	for i := range n {
		trailers = append(trailers, Trailer{unescape(f[8+2*i]), unescape(f[9+2*i])})
	}
	h := newRec(plumbing.NewHash(f[0]), parents, time.Unix(sec, 0).In(time.FixedZone("", off)),
		Signature{unescape(f[4]), unescape(f[5])}, unescape(f[6]), trailers)
	rest := f[8+2*n:]
	if len(rest) < 1 {
		return histRec{}, false
	}
	m, err := strconv.Atoi(rest[0])
	if err != nil || m < 0 || len(rest) != 1+2*m {
		return histRec{}, false
	}
	for i := range m {
		var b plumbing.Hash
		if hex := rest[1+m+i]; hex != "" {
			b = plumbing.NewHash(hex)
		}
		h.change(unescape(rest[1+i]), b)
	}
	return h, true
}

// newRec makes a record, taking the fields log filters on from the trailers.
func newRec(hash plumbing.Hash, parents []plumbing.Hash, when time.Time, author Signature, subject string, trailers []Trailer) histRec {
	return histRec{hash: hash, parents: parents, when: when, author: author, subject: subject, trailers: trailers,
		id: trailerValue(trailers, TrailerToolUseID), command: trailerValue(trailers, TrailerCommand),
		session: trailerValue(trailers, TrailerSession), agent: trailerValue(trailers, TrailerAgent),
		path: trailerValue(trailers, TrailerPath), newPath: trailerValue(trailers, TrailerNewPath)}
}

func (r *Repo) historyPath() string { return filepath.Join(r.gitDir, "gitmem", "history") }

// readHistoryFile loads the index file; a missing, foreign or damaged file
// yields what could be read up to the damage (a record whose parents were
// not all recorded before it is damage).
func (r *Repo) readHistoryFile() []histRec {
	data, err := os.ReadFile(r.historyPath())
	if err != nil {
		return nil
	}
	header, rest, _ := bytes.Cut(data, []byte("\n"))
	if string(header) != historyHeader {
		return nil
	}
	recs := make([]histRec, 0, bytes.Count(rest, []byte("\n")))
	known := make(map[plumbing.Hash]bool, cap(recs))
	for len(rest) > 0 {
		line, tail, ok := bytes.Cut(rest, []byte("\n"))
		if !ok { // a torn last line
			break
		}
		rec, good := parseRec(string(line))
		if !good || known[rec.hash] || slices.ContainsFunc(rec.parents, func(p plumbing.Hash) bool { return !known[p] }) {
			break // damaged from here: caught up from git
		}
		known[rec.hash] = true
		recs = append(recs, rec)
		rest = tail
	}
	return recs
}

// writeHistoryFile replaces the index file atomically.
func (r *Repo) writeHistoryFile(recs []histRec) error {
	var b bytes.Buffer
	b.WriteString(historyHeader + "\n")
	for i := range recs {
		b.WriteString(recs[i].line())
	}
	return gd.WriteFileSync(filepath.Dir(r.historyPath()), "history-", r.historyPath(), b.Bytes(), 0o600)
}

func (r *Repo) appendHistoryFile(recs []histRec) error {
	f, err := os.OpenFile(r.historyPath(), os.O_WRONLY|os.O_APPEND, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		return r.writeHistoryFile(r.hist)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	var b strings.Builder
	for i := range recs {
		b.WriteString(recs[i].line())
	}
	_, err = f.WriteString(b.String())
	return err
}

// history returns the index up to head, oldest first, loading or catching
// it up as needed. persist says the caller holds the writer lock and may
// write the index file. The returned slice must not be modified.
func (r *Repo) history(head plumbing.Hash, persist bool, progress func(done, total int)) ([]histRec, error) {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if r.histLoaded && r.histTip() == head {
		return r.hist, nil
	}
	if !r.histLoaded {
		r.hist = r.readHistoryFile()
		r.histLoaded = true
	}
	known := make(map[plumbing.Hash]int, len(r.hist))
	for i := range r.hist {
		known[r.hist[i].hash] = i
	}
	oldTip := r.histTip()
	// Walk back from head over every parent to commits the index knows.
	var newer []*object.Commit
	var boundary []plumbing.Hash // known commits the walk reached
	reachedTip := oldTip.IsZero()
	seen := map[plumbing.Hash]bool{}
	stack := []plumbing.Hash{head}
	r.omu.Lock()
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if h.IsZero() || seen[h] {
			continue
		}
		seen[h] = true
		if _, ok := known[h]; ok {
			boundary = append(boundary, h)
			reachedTip = reachedTip || h == oldTip
			continue
		}
		c, err := r.obj.Commit(h)
		if err != nil {
			r.unlockObj()
			return nil, wrap("read the history", err)
		}
		newer = append(newer, c)
		for i := len(c.ParentHashes) - 1; i >= 0; i-- {
			stack = append(stack, c.ParentHashes[i])
		}
	}
	newer = gd.TopoSort(newer)
	recs := make([]histRec, 0, len(newer))
	for i, c := range newer {
		rec, err := r.recordOf(c)
		if err != nil {
			r.unlockObj()
			return nil, wrap("index the history", err)
		}
		recs = append(recs, rec)
		if progress != nil {
			progress(i+1, len(newer))
		}
	}
	r.unlockObj()
	appendOnly := reachedTip
	if !reachedTip {
		// HEAD does not descend from the index's tip (the history was
		// reset or rewritten): keep the records HEAD still reaches.
		r.hist = reachable(r.hist, known, boundary)
	}
	r.hist = append(r.hist[:len(r.hist):len(r.hist)], recs...)
	if persist {
		r.saveHistory(oldTip, appendOnly, recs)
	}
	return r.hist, nil
}

// reachable keeps the records of hist (in order) that the boundary
// commits reach through their parents.
func reachable(hist []histRec, pos map[plumbing.Hash]int, boundary []plumbing.Hash) []histRec {
	keep := make([]bool, len(hist))
	stack := append([]plumbing.Hash(nil), boundary...)
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		i, ok := pos[h]
		if !ok || keep[i] {
			continue
		}
		keep[i] = true
		stack = append(stack, hist[i].parents...)
	}
	var out []histRec
	for i := range hist {
		if keep[i] {
			out = append(out, hist[i])
		}
	}
	return out
}

// saveHistory brings the index file up to r.hist, which grew by recs from
// oldTip (appendOnly) or was rebuilt. Another process may have written the
// same records already: the file's own tip decides. Called with hmu and
// the writer lock held.
func (r *Repo) saveHistory(oldTip plumbing.Hash, appendOnly bool, recs []histRec) {
	tip := r.fileTip()
	var err error
	switch {
	case tip == r.histTip():
		return // already there
	case appendOnly && tip == oldTip && !tip.IsZero():
		err = r.appendHistoryFile(recs)
	default:
		err = r.writeHistoryFile(r.hist)
	}
	if err != nil {
		r.opt.Logf("gitmem: could not save the history index: %v", err)
	}
}

// fileTip is the hash of the index file's last record (zero if none, or
// if the file is not of this version: an older gitmem's index is rebuilt,
// never taken as up to date).
func (r *Repo) fileTip() plumbing.Hash {
	var tip plumbing.Hash
	f, err := os.Open(r.historyPath())
	if err != nil {
		return tip
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() < 2 {
		return tip
	}
	hdr := make([]byte, len(historyHeader)+1)
	if _, err := f.ReadAt(hdr, 0); err != nil || string(hdr) != historyHeader+"\n" {
		return tip
	}
	return lastRecord(f, fi.Size()) // the last line may be long: a commit of thousands of files
}

func (r *Repo) histTip() plumbing.Hash {
	if len(r.hist) == 0 {
		return plumbing.ZeroHash
	}
	return r.hist[len(r.hist)-1].hash
}

// recordOf indexes a commit read from git. Called with omu held.
func (r *Repo) recordOf(c *object.Commit) (histRec, error) {
	subject, _, trailers := parseMessage(c.Message)
	var parentTree plumbing.Hash
	rec := newRec(c.Hash, c.ParentHashes, c.Author.When, Signature{c.Author.Name, c.Author.Email}, subject, trailers)
	if p := rec.parent(); !p.IsZero() {
		p, err := r.obj.Commit(p)
		if err != nil {
			return rec, err
		}
		parentTree = p.TreeHash
	}
	a, err := r.memTree(parentTree)
	if err != nil {
		return rec, err
	}
	b, err := r.memTree(c.TreeHash)
	if err != nil {
		return rec, err
	}
	err = r.diffTrees(a, b, "", rec.change)
	rec.sortPaths()
	return rec, err
}

// memTree returns the hash of the memories/ tree in a root tree (zero if
// none). Called with omu held.
func (r *Repo) memTree(root plumbing.Hash) (plumbing.Hash, error) {
	if root.IsZero() {
		return plumbing.ZeroHash, nil
	}
	t, err := r.obj.Tree(root)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	for _, e := range t.Entries {
		if e.Name == memDir && e.Mode == filemode.Dir {
			return e.Hash, nil
		}
	}
	return plumbing.ZeroHash, nil
}

// diffTrees calls fn for every file path that differs between trees a and
// b (zero: empty) with its blob in b (zero: none), skipping subtrees with
// equal hashes. The two entry lists are merged in git's order (a folder
// sorts as its name and "/"), without maps. Called with omu held.
func (r *Repo) diffTrees(a, b plumbing.Hash, prefix string, fn func(string, plumbing.Hash)) error {
	if a == b {
		return nil
	}
	// A file that became a folder (or back) comes as two entries: one
	// removed, one added, which reports the same paths.
	return r.obj.DiffTreeEntries(a, b, func(x, y object.TreeEntry) error {
		n := x.Name
		if n == "" {
			n = y.Name
		}
		p := join2(prefix, n)
		var xt, yt plumbing.Hash
		if x.Mode == filemode.Dir {
			xt = x.Hash
		}
		if y.Mode == filemode.Dir {
			yt = y.Hash
		}
		if (x.Mode != filemode.Dir && !x.Hash.IsZero()) || (y.Mode != filemode.Dir && !y.Hash.IsZero()) {
			var blob plumbing.Hash
			if y.Mode != filemode.Dir {
				blob = y.Hash
			}
			fn(p, blob)
		}
		if !xt.IsZero() || !yt.IsZero() {
			return r.diffTrees(xt, yt, p, fn)
		}
		return nil
	})
}

// diffNodes calls fn for every file path that differs between the
// in-memory trees a and b, with its blob in b (zero: none), skipping
// shared and equal subtrees.
func diffNodes(a, b *node, prefix string, fn func(string, plumbing.Hash)) {
	if sameNode(a, b) {
		return
	}
	aDir, bDir := a.isDir(), b.isDir()
	var blob plumbing.Hash
	if b != nil && !bDir {
		blob = b.hash
	}
	if !aDir && !bDir {
		fn(prefix, blob)
		return
	}
	if !aDir && a != nil || !bDir && b != nil {
		fn(prefix, blob) // a file became a folder or the other way round
	}
	zipKids(a, b, func(name string, x, y *node) {
		if !sameNode(x, y) {
			diffNodes(x, y, join2(prefix, name), fn)
		}
	})
}

func join2(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "/" + name
}

// tailChunk is how much of the index file tailRecords reads at a time.
var tailChunk = 64 << 10

// tailRecords streams the index file's records newest first, reading it
// backwards in chunks, so that the first page of a long log costs what it
// shows. It returns false, having called fn for nothing, when the file
// does not end at head (the caller then loads and catches up the index).
// fn returns false to stop.
func (r *Repo) tailRecords(head plumbing.Hash, want func(line []byte) bool, fn func(*histRec) bool) (bool, error) {
	f, err := os.Open(r.historyPath())
	if err != nil {
		return false, nil
	}
	defer f.Close()
	header := make([]byte, len(historyHeader)+1)
	if _, err := f.ReadAt(header, 0); err != nil || string(header) != historyHeader+"\n" {
		return false, nil
	}
	fi, err := f.Stat()
	if err != nil {
		return false, nil
	}
	chunk := int64(tailChunk)
	end := fi.Size()
	var carry []byte // the start of a line whose end was read already
	first := true
	expected := map[plumbing.Hash]bool{} // parents of the records read, not read yet
	for end > int64(len(header)) {
		start := max(int64(len(header)), end-chunk)
		buf := make([]byte, end-start, int(end-start)+len(carry))
		if _, err := f.ReadAt(buf, start); err != nil {
			return !first, wrap("read the history index", err)
		}
		buf = append(buf, carry...)
		if first && (len(buf) == 0 || buf[len(buf)-1] != '\n') {
			return false, nil // a torn last line
		}
		lines := bytes.Split(bytes.TrimSuffix(buf, []byte("\n")), []byte("\n"))
		carry = nil
		if start > int64(len(header)) { // the first line may be cut
			carry = append([]byte(nil), lines[0]...)
			carry = append(carry, '\n')
			lines = lines[1:]
		}
		for i := len(lines) - 1; i >= 0; i-- {
			if !first {
				// Each record must be a parent of one read before it, once:
				// a record lost or doubled in the middle is damage, not a
				// commit to leave out or show twice.
				h, parents, ok := recordLinks(lines[i])
				if !ok || !expected[h] {
					return true, errHistoryDamaged
				}
				delete(expected, h)
				for _, p := range parents {
					expected[p] = true
				}
				if want != nil && !want(lines[i]) {
					continue // cheaper than parsing a line that cannot match
				}
			}
			rec, ok := parseRec(string(lines[i]))
			if first {
				if !ok || rec.hash != head {
					return false, nil
				}
				first = false
				for _, p := range rec.parents {
					expected[p] = true
				}
				if want != nil && !want(lines[i]) {
					continue
				}
			}
			if !ok {
				return true, errHistoryDamaged
			}
			if !fn(&rec) {
				return true, nil
			}
		}
		end = start
	}
	if !first && len(expected) > 0 {
		// A sound index holds every ancestor of its tip: one lost that
		// another line of descent still reached (a root, a merge's side)
		// shows only here.
		return true, errHistoryDamaged
	}
	return !first, nil
}

// scan calls fn for the history's records, newest first, until fn returns
// false. want, if not nil, is a cheap test on a record's raw index line
// that every record fn needs passes (a substring it must contain); it lets
// a fresh process skip parsing the rest of a long index.
func (r *Repo) scan(want func(line []byte) bool, progress Progress, fn func(*histRec) bool) error {
	head, err := r.headHash()
	if err != nil {
		return err
	}
	r.hmu.Lock()
	loaded := r.histLoaded
	r.hmu.Unlock()
	if !loaded && !head.IsZero() {
		if ok, err := r.tailRecords(head, want, fn); ok || err != nil {
			return err
		}
	}
	hist, err := r.indexed(progress)
	if err != nil {
		return err
	}
	for i := len(hist) - 1; i >= 0; i-- {
		if !fn(&hist[i]) {
			return nil
		}
	}
	return nil
}

// contains is a want test for scan: the line holds s as a field's text.
func contains(s string) func([]byte) bool {
	if s == "" {
		return nil
	}
	b := []byte(escaper.Replace(s))
	return func(line []byte) bool { return bytes.Contains(line, b) }
}

// syncIDs brings the tool_use id map up to the branch after others moved
// it (and at start): the history index file is read on from where the
// last read stopped (all of it the first time, or when it was rewritten),
// without parsing whole records; commits the file does not hold yet are
// indexed from git first. Called with wmu held, owning the writer lock.
func (r *Repo) syncIDs() error {
	r.smu.RLock()
	dirty := r.idsDirty
	r.smu.RUnlock()
	if !dirty {
		return nil
	}
	r.gitUpToDate() // this process's own commits are in the file too
	r.smu.RLock()
	head := r.head
	r.smu.RUnlock()
	for i := range 3 {
		ok, err := r.readIDs(head)
		if err != nil {
			return err
		}
		if ok {
			r.smu.Lock()
			r.idsDirty = false
			r.smu.Unlock()
			return nil
		}
		switch i {
		case 0: // The file does not reach HEAD: catch it up from git, saved.
			if _, err := r.history(head, true, nil); err != nil {
				return err
			}
		case 1: // It still does not (it ends in a record an append on a full disk tore): write it again.
			if err := r.rewriteHistoryFile(head); err != nil {
				return wrap("write the history index", err)
			}
		}
	}
	return &StorageError{Op: "read the history index", Err: errors.New("it does not reach HEAD after a rebuild")}
}

// historyDamage says what is wrong with the history index file, if a
// record in it is lost, doubled or unreadable before its end ("" for a
// sound file, a missing one, one of an older version, or one torn at its
// end: those are caught up or rewritten as gitmem goes).
func (r *Repo) historyDamage() string {
	data, err := os.ReadFile(r.historyPath())
	if err != nil || !bytes.HasPrefix(data, []byte(historyHeader+"\n")) {
		return ""
	}
	lines := bytes.Count(data, []byte("\n")) - 1
	if good := len(r.readHistoryFile()); good < lines {
		return fmt.Sprintf("the history index (.git/gitmem/history) is damaged at record %d of %d (lost, doubled or unreadable records): log and tool_use id retries would miss commits until it is rebuilt", good+1, lines)
	}
	return ""
}

// rebuildHistoryIndex makes the history index file whole again: what it
// holds up to the damage, the rest recorded from git, written anew.
func (r *Repo) rebuildHistoryIndex() error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if err := r.own(); err != nil {
		return err
	}
	r.hmu.Lock()
	r.hist, r.histLoaded = nil, false // read again: up to the damage
	r.hmu.Unlock()
	r.smu.Lock()
	head := r.head
	r.idsDirty, r.idsOff, r.idsHead = true, 0, plumbing.ZeroHash
	r.smu.Unlock()
	if _, err := r.history(head, true, nil); err != nil {
		return err
	}
	if err := r.rewriteHistoryFile(head); err != nil {
		return wrap("write the history index", err)
	}
	return r.syncIDs()
}

// rewriteHistoryFile writes the index file again from the index in
// memory, up to head.
func (r *Repo) rewriteHistoryFile(head plumbing.Hash) error {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	i := slices.IndexFunc(r.hist, func(h histRec) bool { return h.hash == head })
	if i < 0 {
		return errors.New("the index does not hold HEAD")
	}
	return r.writeHistoryFile(r.hist[:i+1])
}

// errHistoryDamaged is a reader's error when the history index file is
// damaged before its end (fsck names it too).
var errHistoryDamaged = errors.New("gitmem: the history index (.git/gitmem/history) is damaged; gitmem fsck --repair rebuilds it")

// recordLinks reads a record line's hash and parents without parsing the
// rest.
func recordLinks(line []byte) (plumbing.Hash, []plumbing.Hash, bool) {
	if len(line) < 41 || line[40] != '\t' || !plumbing.IsHash(string(line[:40])) {
		return plumbing.ZeroHash, nil, false
	}
	field, _, _ := bytes.Cut(line[41:], []byte("\t"))
	var parents []plumbing.Hash
	for p := range bytes.SplitSeq(field, []byte(",")) {
		if len(p) == 0 {
			continue
		}
		if !plumbing.IsHash(string(p)) {
			return plumbing.ZeroHash, nil, false
		}
		parents = append(parents, plumbing.NewHash(string(p)))
	}
	return plumbing.NewHash(string(line[:40])), parents, true
}

// parentsKnown reports whether every parent of a record's line is in
// known.
func parentsKnown(line []byte, known map[plumbing.Hash]bool) bool {
	_, parents, ok := recordLinks(line)
	return ok && !slices.ContainsFunc(parents, func(p plumbing.Hash) bool { return !known[p] })
}

// lineToolUseID returns the tool_use id trailer of a record's line, found
// among the trailers alone: an author, an email or a subject may read
// "Tool-Use-Id" too (an agent's name is a caller's to choose).
func lineToolUseID(line []byte) (string, bool) {
	field := func() ([]byte, bool) {
		i := bytes.IndexAny(line, "\t\n")
		if i < 0 {
			return nil, false
		}
		f := line[:i]
		line = line[i+1:]
		return f, true
	}
	for range 7 { // hash, parents, time, zone, name, email, subject
		if _, ok := field(); !ok {
			return "", false
		}
	}
	count, ok := field()
	n, err := strconv.Atoi(string(count))
	if !ok || err != nil || n < 0 {
		return "", false
	}
	key := escaper.Replace(TrailerToolUseID)
	for range n {
		k, ok := field()
		if !ok {
			return "", false
		}
		v, ok := field()
		if !ok {
			return "", false
		}
		if string(k) == key {
			return unescape(string(v)), true
		}
	}
	return "", false
}

// readIDs reads the ids of the records after idsOff into the map and
// reports whether the file now ends at head. A file that does not go on
// from where the last read stopped — shorter, or the record before
// idsOff is not idsHead any more (rewritten) — is read again from the
// start into a new map.
func (r *Repo) readIDs(head plumbing.Hash) (bool, error) {
	f, err := os.Open(r.historyPath())
	if errors.Is(err, fs.ErrNotExist) {
		return head.IsZero(), nil
	}
	if err != nil {
		return false, wrap("read the history index", err)
	}
	defer f.Close()
	r.smu.RLock()
	off, prev := r.idsOff, r.idsHead
	r.smu.RUnlock()
	hdr := []byte(historyHeader + "\n")
	if off > int64(len(hdr)) && lastRecord(f, off) != prev {
		off = 0 // rewritten since the last read
	}
	ids := map[string]plumbing.Hash{}
	fresh := off == 0
	if fresh {
		buf := make([]byte, len(hdr))
		if _, err := io.ReadFull(f, buf); err != nil || !bytes.Equal(buf, hdr) {
			return false, nil
		}
		off, prev = int64(len(hdr)), plumbing.ZeroHash
	} else if _, err := f.Seek(off, io.SeekStart); err != nil {
		return false, wrap("read the history index", err)
	}
	// Read from the start, the records are checked to follow their
	// parents, as readHistoryFile does: a record lost or doubled in the
	// middle (a damaged file that still ends at HEAD) would leave ids
	// unknown, and a retry would be made again. The caller then rebuilds
	// the file.
	var known map[plumbing.Hash]bool
	if fresh {
		known = map[plumbing.Hash]bool{}
	}
	damaged := false
	br := bufio.NewReaderSize(f, 256<<10)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) { // a long record: gather it
			line = append([]byte(nil), line...) // before the next read reuses the buffer
			for errors.Is(err, bufio.ErrBufferFull) {
				var more []byte
				more, err = br.ReadSlice('\n')
				line = append(line, more...)
			}
		}
		if err != nil {
			break // the end, or a torn last line: stop before it
		}
		if len(line) < 42 || !plumbing.IsHash(string(line[:40])) || line[40] != '\t' {
			break
		}
		h := plumbing.NewHash(string(line[:40]))
		if known != nil {
			if damaged = known[h] || !parentsKnown(line, known); damaged {
				break
			}
			known[h] = true
		}
		if id, ok := lineToolUseID(line); ok {
			ids[id] = h
		}
		off += int64(len(line))
		prev = h
	}
	r.smu.Lock()
	defer r.smu.Unlock()
	if damaged {
		r.idsOff, r.idsHead = 0, plumbing.ZeroHash // read again from the start, once rebuilt
		return false, nil
	}
	if fresh || r.ids == nil {
		r.ids = map[string]plumbing.Hash{}
	}
	for id, h := range ids {
		r.ids[id] = h
	}
	r.idsOff, r.idsHead = off, prev
	return prev == head, nil
}

// lastRecord is the hash of the record that ends at offset end of the
// history index file (zero if it cannot be read back).
func lastRecord(f *os.File, end int64) plumbing.Hash {
	for size := int64(4 << 10); ; size *= 4 {
		start := max(0, end-size)
		buf := make([]byte, end-start)
		if _, err := f.ReadAt(buf, start); err != nil || len(buf) == 0 || buf[len(buf)-1] != '\n' {
			return plumbing.ZeroHash
		}
		i := bytes.LastIndexByte(buf[:len(buf)-1], '\n')
		if i < 0 && start > 0 {
			continue // a longer record: read further back
		}
		line := buf[i+1:]
		if len(line) < 40 || !plumbing.IsHash(string(line[:40])) {
			return plumbing.ZeroHash
		}
		return plumbing.NewHash(string(line[:40]))
	}
}
