package gitmem

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// The history index's file, .git/gitmem/history: the header line
// (historyHeader), then one line per record (histRec.line: tab-separated
// fields, escaped), every record after its parents. It is appended to at
// each commit and written anew when it was damaged or rewritten; readers
// read it whole (readFile), from its end (tail, fileTip), or for the
// tool_use ids alone (readIDs, lineToolUseID).

// Version 6 ends each line with the record's twin flag (histRec.twin),
// which version 5 lacks: a version 5 file is read whole, its flags worked
// out, and written anew (not rebuilt from git).
const (
	historyHeader   = "gitmem-history 6"
	historyHeaderV5 = "gitmem-history 5"
)

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
	// twin says an earlier record of the index has the same tool_use id
	// (two agents' calls, merged; a commit copied by hand), so that a look
	// for an id, which comes from the newest record, stops at the first
	// it finds without the flag instead of reading the rest of the index
	// for a second. A commit gitmem makes never has it: a retry of an id
	// makes no commit (Update).
	twin bool
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
	for _, b := range h.blobs {
		if b.IsZero() {
			c.Blobs = append(c.Blobs, "")
		} else {
			c.Blobs = append(c.Blobs, b.String())
		}
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
	twin := ""
	if h.twin {
		twin = "1"
	}
	f = append(f, twin)
	for i := range f {
		f[i] = escaper.Replace(f[i])
	}
	return strings.Join(f, "\t") + "\n"
}

// parseRec parses a record's line of the current version; v5, of
// version 5 (no twin flag: the caller works the flags out).
func parseRec(line string, v5 bool) (histRec, bool) {
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
	flag := 1
	if v5 {
		flag = 0
	}
	if err != nil || m < 0 || len(rest) != 1+2*m+flag {
		return histRec{}, false
	}
	if flag == 1 {
		switch rest[1+2*m] {
		case "":
		case "1":
			h.twin = true
		default:
			return histRec{}, false
		}
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

// readFile loads the index file; a missing, foreign or damaged file
// yields what could be read up to the damage (a record whose parents were
// not all recorded before it is damage, as is a twin flag that does not
// say whether an earlier record has the id). sound says the file was read to
// its end: no damage, no torn last line (a file that is not sound is
// written anew when the index is next saved). A version 5 file is read,
// its twin flags worked out, and is not sound: it is written anew.
func (x *historyIndex) readFile() (recs []histRec, sound bool) {
	x.reads.Add(1)
	data, err := gd.ReadFile(x.path) // a regular file only: a named pipe put there is not waited on
	if err != nil {
		return nil, true
	}
	header, rest, _ := bytes.Cut(data, []byte("\n"))
	v5 := string(header) == historyHeaderV5
	if string(header) != historyHeader && !v5 {
		return nil, true // another version's: its tip is not taken (fileTip), so it is written anew
	}
	if v5 {
		defer func() {
			markTwins(nil, recs)
			sound = false
		}()
	}
	recs = make([]histRec, 0, bytes.Count(rest, []byte("\n")))
	known := make(map[plumbing.Hash]bool, cap(recs))
	ids := make(map[string]bool)
	for len(rest) > 0 {
		line, tail, ok := bytes.Cut(rest, []byte("\n"))
		if !ok { // a torn last line
			return recs, false
		}
		rec, good := parseRec(string(line), v5)
		if !good || known[rec.hash] || slices.ContainsFunc(rec.parents, func(p plumbing.Hash) bool { return !known[p] }) ||
			!v5 && rec.twin != (rec.id != "" && ids[rec.id]) { // a look for the id would stop at the wrong record
			return recs, false // damaged from here: caught up from git
		}
		known[rec.hash] = true
		if rec.id != "" {
			ids[rec.id] = true
		}
		recs = append(recs, rec)
		rest = tail
	}
	return recs, true
}

// writeFile replaces the index file atomically. The twin flags are
// worked out again from recs' order.
func (x *historyIndex) writeFile(recs []histRec) error {
	var b bytes.Buffer
	b.WriteString(historyHeader + "\n")
	ids := make(map[string]bool, len(recs))
	for i := range recs {
		rec := recs[i] // a copy: recs may be the index in memory, read meanwhile
		rec.twin = rec.id != "" && ids[rec.id]
		if rec.id != "" {
			ids[rec.id] = true
		}
		b.WriteString(rec.line())
	}
	return gd.WriteFileSync(filepath.Dir(x.path), "history-", x.path, b.Bytes(), 0o600)
}

// appendFile appends recs to the index file; a missing file is written
// whole, from all (the index that ends with recs; recs alone, from a root
// commit, when the index in memory is not loaded). Called with fileMu
// held.
func (x *historyIndex) appendFile(recs, all []histRec) error {
	f, err := gd.OpenRegular(x.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, gd.ErrNotRegular) { // not gitmem's (a named pipe put there): written whole in its place
		if len(all) == 0 && len(recs) > 0 && len(recs[0].parents) == 0 {
			all = recs
		}
		return x.writeFile(all)
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

// fileTip is the hash of the index file's last record (zero if none, or
// if the file is not of this version: an older gitmem's index is rebuilt,
// never taken as up to date).
func (x *historyIndex) fileTip() plumbing.Hash {
	f, size, ok := x.open()
	if !ok {
		return plumbing.ZeroHash
	}
	defer f.Close()
	return lastRecord(f, size) // the last line may be long: a commit of thousands of files
}

// open opens the index file, and gives its size, when it is of this
// version (false: missing, unreadable, or another version's).
func (x *historyIndex) open() (*os.File, int64, bool) {
	x.reads.Add(1)
	f, err := gd.OpenRegular(x.path, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, false
	}
	fi, err := f.Stat()
	hdr := make([]byte, len(historyHeader)+1)
	if err == nil {
		_, err = f.ReadAt(hdr, 0)
	}
	if err != nil || string(hdr) != historyHeader+"\n" {
		f.Close()
		return nil, 0, false
	}
	return f, fi.Size(), true
}

// tailChunk is how much of the index file tail reads at a time, from the
// second read on; tailFirst is its first read, enough for the first page
// of a log (20 records of a few hundred bytes each) without the 64 KiB
// buffer's allocation, zeroing and page faults, which were most of what
// a `log -n 20` spent reading the index.
const (
	tailChunk = 64 << 10
	tailFirst = 16 << 10
)

// tail streams the index file's records newest first, reading it
// backwards in chunks, so that the first page of a long log costs what it
// shows. It returns false, having called fn for nothing, when the file
// does not end at head (the caller then loads and catches up the index).
// fn returns false to stop. want, if not nil, is text every record fn
// needs holds (see scan): a chunk without it is only checked for its
// links, its records not parsed (a look for a tool_use id no call has
// reads 100,000 records in a few milliseconds).
func (x *historyIndex) tail(head plumbing.Hash, want []byte, fn func(*histRec) bool) (bool, error) {
	f, end, ok := x.open()
	if !ok {
		return false, nil
	}
	defer f.Close()
	header := int64(len(historyHeader) + 1)
	chunk := int64(min(x.chunk, tailFirst))
	var buf, carry []byte // carry: the start of a line whose end was read already
	var lines [][]byte
	first := true
	var expected descent // parents of the records read, not read yet
	for end > header {
		start := max(header, end-chunk)
		n := int(end - start)
		buf = slices.Grow(buf[:0], n+len(carry))[:n]
		if _, err := f.ReadAt(buf, start); err != nil {
			return !first, wrap("read the history index", err)
		}
		x.tailBytes.Add(int64(n))
		buf = append(buf, carry...)
		if first && (len(buf) == 0 || buf[len(buf)-1] != '\n') {
			return false, nil // a torn last line
		}
		lines = splitLines(lines[:0], buf[:len(buf)-1])
		carry = carry[:0]
		if start > header { // the first line may be cut
			carry = append(carry, lines[0]...)
			carry = append(carry, '\n')
			lines = lines[1:]
		}
		// A chunk without the text holds no record fn needs: the one
		// search costs less than one per line.
		hit := want == nil || containsText(buf, want)
		for i := len(lines) - 1; i >= 0; i-- {
			line := lines[i]
			if !first {
				// Each record must be a parent of one read before it, once:
				// a record lost or doubled in the middle is damage, not a
				// commit to leave out or show twice.
				if !expected.next(x, line) {
					return true, errHistoryDamaged
				}
				if !hit || want != nil && !bytes.Contains(line, want) {
					continue // cheaper than parsing a line that cannot match
				}
			}
			rec, ok := parseRec(string(line), false)
			if first {
				if !ok || rec.hash != head {
					return false, nil
				}
				first = false
				expected.start(rec.parents)
				if !hit || want != nil && !bytes.Contains(line, want) {
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
		chunk = min(2*chunk, int64(x.chunk))
	}
	if !first && expected.pending() {
		// A sound index holds every ancestor of its tip: one lost that
		// another line of descent still reached (a root, a merge's side)
		// shows only here.
		return true, errHistoryDamaged
	}
	return !first, nil
}

// descent is the commits tail expects to read next: the parents of the
// records read, not read yet. While it is one commit (a line of descent
// without merges) it is kept as the text its child's line spells it in,
// and the next line is compared with it as text: a look through 100,000
// records for a tool_use id no call has (restore --to HASH~1) decoded
// two hashes and changed a map for each, a third of the command's CPU.
// What it accepts and refuses is recordLinks' and the map's.
type descent struct {
	one     bool     // the one commit expected is text (as index lines spell it, lower case)
	text    [40]byte // it, when one
	many    map[plumbing.Hash]bool
	parents []plumbing.Hash // recordLinks' buffer
}

// start expects the parents of the first record read (the tip's).
func (d *descent) start(parents []plumbing.Hash) {
	d.many = map[plumbing.Hash]bool{}
	for _, p := range parents {
		d.many[p] = true
	}
	d.settle()
}

// next reports whether line's record is one expected; if so it is
// expected no more, and its parents are.
func (d *descent) next(x *historyIndex, line []byte) bool {
	// hash \t parent \t ...: the one expected, with one parent.
	if d.one && len(line) > 81 && line[40] == '\t' && line[81] == '\t' && string(line[:40]) == string(d.text[:]) && lowerHex(line[41:81]) {
		copy(d.text[:], line[41:81])
		return true
	}
	if d.one {
		h, _ := hexHash(d.text[:])
		d.many[h] = true
		d.one = false
	}
	x.linksDecoded.Add(1)
	h, parents, ok := recordLinks(line, d.parents)
	d.parents = parents
	if !ok || !d.many[h] {
		return false
	}
	delete(d.many, h)
	for _, p := range parents {
		d.many[p] = true
	}
	d.settle()
	return true
}

// settle keeps one commit expected as its text.
func (d *descent) settle() {
	if len(d.many) != 1 {
		return
	}
	for h := range d.many {
		hex.Encode(d.text[:], h[:])
		delete(d.many, h)
	}
	d.one = true
}

// pending reports whether a commit is still expected.
func (d *descent) pending() bool { return d.one || len(d.many) > 0 }

// lowerHex reports whether b is hex digits in lower case alone, without
// a branch per byte (one per digit or letter, which a hash mixes at
// random, took longer than the rest of the look).
func lowerHex(b []byte) bool {
	var bad byte
	for _, c := range b {
		bad |= notLowerHex[c]
	}
	return bad == 0
}

// notLowerHex is 1 for each byte that is no hex digit in lower case.
var notLowerHex = func() (t [256]byte) {
	for c := range t {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			t[c] = 1
		}
	}
	return t
}()

// containsText is bytes.Contains(s, text), searched from text's first
// byte that index lines seldom hold (not a letter, a digit, a tab or one
// of " ./_,@-": the ~ of HASH~1): bytes.Index looks for the first byte of
// what it searches, and the hex digit a hash begins with is everywhere in
// the index (13 ms of restore --to HASH~1 over 32 MB; with the ~, 1 ms).
func containsText(s, text []byte) bool {
	i := bytes.IndexFunc(text, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("\t ./_,@-", r))
	})
	if i <= 0 {
		return bytes.Contains(s, text)
	}
	for off := 0; off+i <= len(s); {
		j := bytes.Index(s[off+i:], text[i:])
		if j < 0 {
			return false
		}
		start := off + j
		if bytes.Equal(s[start:start+i], text[:i]) {
			return true
		}
		off = start + 1
	}
	return false
}

// splitLines appends to lines the lines of b (split at each newline),
// without copying them.
func splitLines(lines [][]byte, b []byte) [][]byte {
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return append(lines, b)
		}
		lines = append(lines, b[:i])
		b = b[i+1:]
	}
}

// damage says what is wrong with the history index file, if a record in
// it is lost, doubled, unreadable or wrongly flagged before its end ("" for a sound file,
// a missing one, one of an older version, or one torn at its end: those
// are caught up or rewritten as gitmem goes).
func (x *historyIndex) damage() string {
	x.reads.Add(1)
	data, err := gd.ReadFile(x.path)
	if err != nil || !bytes.HasPrefix(data, []byte(historyHeader+"\n")) {
		return ""
	}
	lines := bytes.Count(data, []byte("\n")) - 1
	if recs, _ := x.readFile(); len(recs) < lines {
		good := len(recs)
		return fmt.Sprintf("the history index (.git/gitmem/history) is damaged at record %d of %d (lost, doubled, unreadable or wrongly flagged records): log and tool_use id retries would miss commits until it is rebuilt", good+1, lines)
	}
	return ""
}

// errHistoryDamaged is a reader's error when the history index file is
// damaged before its end (fsck names it too).
var errHistoryDamaged = errors.New("gitmem: the history index (.git/gitmem/history) is damaged; gitmem fsck --repair rebuilds it")

// recordLinks reads a record line's hash and parents without parsing the
// rest. The parents are appended to buf[:0]: a reader of many lines
// gives the last one back, and allocates nothing once it holds them.
func recordLinks(line []byte, buf []plumbing.Hash) (plumbing.Hash, []plumbing.Hash, bool) {
	if len(line) < 41 || line[40] != '\t' {
		return plumbing.ZeroHash, nil, false
	}
	h, ok := hexHash(line[:40])
	if !ok {
		return plumbing.ZeroHash, nil, false
	}
	field := line[41:]
	if i := bytes.IndexByte(field, '\t'); i >= 0 {
		field = field[:i]
	}
	parents := buf[:0]
	for len(field) > 0 {
		p := field
		field = nil
		if i := bytes.IndexByte(p, ','); i >= 0 {
			p, field = p[:i], p[i+1:]
		}
		if len(p) == 0 {
			continue
		}
		ph, ok := hexHash(p)
		if !ok {
			return plumbing.ZeroHash, nil, false
		}
		parents = append(parents, ph)
	}
	return h, parents, true
}

// hexHash reads a hash written in hex as plumbing.IsHash and NewHash do
// (either case), without allocating.
func hexHash(b []byte) (plumbing.Hash, bool) {
	var h plumbing.Hash
	if len(b) != 2*len(h) {
		return h, false
	}
	if _, err := hex.Decode(h[:], b); err != nil {
		return plumbing.ZeroHash, false
	}
	return h, true
}

// parentsKnown reports whether every parent of a record's line is in
// known.
func parentsKnown(line []byte, known map[plumbing.Hash]bool) bool {
	var buf [2]plumbing.Hash
	_, parents, ok := recordLinks(line, buf[:0])
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

// markTwins sets the twin flag of each record of recs, which follow
// before in the index, whose tool_use id a record before it has.
func markTwins(before, recs []histRec) {
	ids := map[string]bool{} // recs' ids: true once a record before holds it
	for i := range recs {
		if recs[i].id != "" {
			ids[recs[i].id] = false
		}
	}
	if len(ids) == 0 {
		return
	}
	for i := range before {
		if _, ok := ids[before[i].id]; ok {
			ids[before[i].id] = true
		}
	}
	for i := range recs {
		if id := recs[i].id; id != "" {
			recs[i].twin = ids[id]
			ids[id] = true
		}
	}
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
