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
	"sync"
	"sync/atomic"
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

// historyIndex is the history index in memory and its file,
// .git/gitmem/history: what it holds, who builds it, how it is saved.
// Reading git's objects to catch it up, and taking the writer lock to
// save it, are the Repo's (catchUp, saveGrowth, startBuild); this part
// only installs what they found and writes the file.
type historyIndex struct {
	path  string // .git/gitmem/history
	chunk int    // how much of the file tail reads at a time (tailChunk, or a test's)

	// buildMu lets one catch-up run at a time. Taken after the writer
	// turn (wmu), before mu and the object store's lock (omu), and never
	// with either held: a catch-up takes omu per commit, so that tool
	// calls, views and the commit pipeline go on meanwhile.
	buildMu sync.Mutex
	// fileMu guards writes of the file (and its removal). Taken after
	// the materialiser's lock (mmu: appendHistory) and before mu.
	fileMu sync.Mutex
	// mu guards every field below. Taken after fileMu, buildMu and the
	// log files' lock (publish), before omu; never held across a read
	// of git's objects.
	mu      sync.Mutex
	recs    []histRec     // the index, oldest first (nil until loaded)
	loaded  bool          // recs was read from the file (or taken as empty)
	gen     int           // bumped when the index is dropped (a redaction, a rebuild)
	sound   bool          // the file recs was read from was whole to its end
	stop    bool          // closing: no new background build; a running one gives up
	want    plumbing.Hash // the commit the background build is to reach
	running bool          // a background build is under way

	wg     sync.WaitGroup // the background build
	saving atomic.Int32   // saves under way in this process: the writer lock is kept (release)
}

func newHistoryIndex(gitDir string, hooks *testHooks) *historyIndex {
	return &historyIndex{path: filepath.Join(gitDir, "gitmem", "history"), chunk: hooks.tail()}
}

// readFile loads the index file; a missing, foreign or damaged file
// yields what could be read up to the damage (a record whose parents were
// not all recorded before it is damage). sound says the file was read to
// its end: no damage, no torn last line (a file that is not sound is
// written anew when the index is next saved).
func (x *historyIndex) readFile() (recs []histRec, sound bool) {
	data, err := os.ReadFile(x.path)
	if err != nil {
		return nil, true
	}
	header, rest, _ := bytes.Cut(data, []byte("\n"))
	if string(header) != historyHeader {
		return nil, true // another version's: its tip is not taken (fileTip), so it is written anew
	}
	recs = make([]histRec, 0, bytes.Count(rest, []byte("\n")))
	known := make(map[plumbing.Hash]bool, cap(recs))
	for len(rest) > 0 {
		line, tail, ok := bytes.Cut(rest, []byte("\n"))
		if !ok { // a torn last line
			return recs, false
		}
		rec, good := parseRec(string(line))
		if !good || known[rec.hash] || slices.ContainsFunc(rec.parents, func(p plumbing.Hash) bool { return !known[p] }) {
			return recs, false // damaged from here: caught up from git
		}
		known[rec.hash] = true
		recs = append(recs, rec)
		rest = tail
	}
	return recs, true
}

// writeFile replaces the index file atomically.
func (x *historyIndex) writeFile(recs []histRec) error {
	var b bytes.Buffer
	b.WriteString(historyHeader + "\n")
	for i := range recs {
		b.WriteString(recs[i].line())
	}
	return gd.WriteFileSync(filepath.Dir(x.path), "history-", x.path, b.Bytes(), 0o600)
}

// appendFile appends recs to the index file; a missing file is written
// whole, from all (the index that ends with recs; recs alone, from a root
// commit, when the index in memory is not loaded). Called with fileMu
// held.
func (x *historyIndex) appendFile(recs, all []histRec) error {
	f, err := os.OpenFile(x.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
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

// saveMode says how history saves an index it had to catch up.
type saveMode int

const (
	noSave   saveMode = iota
	saveHeld          // the caller holds wmu and the writer lock
	// saveFree: the caller holds no lock. The index is saved under the
	// writer lock: this process's when it owns it, else the lock taken
	// for the save alone when no other process holds it (a read-only
	// process, or one that let the lock go). A process that holds it is
	// a writer, which saves what it builds.
	saveFree
)

// errHistoryReset is a catch-up's error when the index was dropped while
// it read the history (a redaction): it is read again from the new HEAD.
var errHistoryReset = errors.New("gitmem: the history index was dropped meanwhile")

// history returns the index up to head, oldest first, loading or catching
// it up as needed, and saves it when it grew (save says how). The
// returned slice must not be modified.
func (r *Repo) history(head plumbing.Hash, save saveMode, progress Progress) ([]histRec, error) {
	hist, grew, err := r.catchUp(head, progress)
	if err == nil && grew != nil && save != noSave {
		r.saveGrowth(*grew, save)
	}
	return hist, err
}

// histGrowth is what a catch-up added: recs after oldTip (appendOnly),
// or an index that drops records HEAD no longer reaches (a rewritten
// history).
type histGrowth struct {
	oldTip     plumbing.Hash
	appendOnly bool
	recs       []histRec
	gen        int
}

// catchUp brings the index in memory up to head: the commits it lacks
// are read from git and recorded (their trees compared), with no lock but
// buildMu held for long — omu is taken per object — so that tool calls, views
// and the commit pipeline go on meanwhile. It reports what it added (nil:
// the index was at head already).
func (r *Repo) catchUp(head plumbing.Hash, progress Progress) ([]histRec, *histGrowth, error) {
	r.histIndex.buildMu.Lock()
	defer r.histIndex.buildMu.Unlock()
	base, gen := r.histIndex.base()
	oldTip := tipOf(base)
	if oldTip == head {
		return base, nil, nil
	}
	r.holdPacks()
	defer r.dropPacks()
	w, err := r.walkNew(head, base)
	if err != nil {
		return nil, nil, err
	}
	return r.record(base, gen, w, progress)
}

// record records the commits a walk found (their trees compared, omu
// taken per commit) and installs the index base grew into, unless it was
// dropped or changed meanwhile (errHistoryReset). Called with the index's
// buildMu held.
func (r *Repo) record(base []histRec, gen int, w newCommits, progress Progress) ([]histRec, *histGrowth, error) {
	oldTip := tipOf(base)
	r.opt.hooks.atCatchUp()
	recs := make([]histRec, 0, len(w.newer))
	for i, c := range w.newer {
		if r.histIndex.stopping() {
			return nil, nil, ErrClosed
		}
		r.omu.Lock()
		rec, err := r.recordOf(c)
		r.unlockObj()
		if err != nil {
			return nil, nil, wrap("index the history", err)
		}
		recs = append(recs, rec)
		if progress != nil {
			progress(i+1, len(w.newer))
		}
	}
	hist := base
	if !w.reachedTip {
		// HEAD does not descend from the index's tip (the history was
		// reset or rewritten): keep the records HEAD still reaches.
		hist = reachable(base, w.known, w.boundary)
	}
	hist = append(hist[:len(hist):len(hist)], recs...)
	if err := r.histIndex.install(base, gen, hist); err != nil {
		return nil, nil, err
	}
	return hist, &histGrowth{oldTip: oldTip, appendOnly: w.reachedTip, recs: recs, gen: gen}, nil
}

// install makes hist the index, grown from base (of generation gen),
// unless the index was dropped or changed meanwhile (errHistoryReset).
func (x *historyIndex) install(base []histRec, gen int, hist []histRec) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.gen != gen || len(x.recs) != len(base) || tipOf(x.recs) != tipOf(base) {
		return errHistoryReset
	}
	x.recs = hist
	return nil
}

func tipOf(hist []histRec) plumbing.Hash {
	if len(hist) == 0 {
		return plumbing.ZeroHash
	}
	return hist[len(hist)-1].hash
}

// base is the index in memory, read from the file first if need be
// (without mu: a commit's publish takes it), and its generation.
func (x *historyIndex) base() ([]histRec, int) {
	x.mu.Lock()
	loaded, gen := x.loaded, x.gen
	x.mu.Unlock()
	if !loaded {
		recs, sound := x.readFile()
		x.mu.Lock()
		if !x.loaded && x.gen == gen {
			x.recs, x.loaded, x.sound = recs, true, sound
		}
		x.mu.Unlock()
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.recs, x.gen
}

// isLoaded reports whether the index in memory was loaded (it is then
// kept up to every commit this process publishes on it).
func (x *historyIndex) isLoaded() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.loaded
}

// newCommits is what a walk back from a commit to the commits an index
// holds found.
type newCommits struct {
	newer      []*object.Commit      // not in the index, parents first
	known      map[plumbing.Hash]int // the index's records by hash
	boundary   []plumbing.Hash       // commits of the index the walk reached
	reachedTip bool                  // the index's tip among them (or the index is empty)
}

// walkNew walks back from head over every parent to the commits base
// holds, reading the commits it lacks (omu taken per commit), so that a
// merge costs the commits it brings.
func (r *Repo) walkNew(head plumbing.Hash, base []histRec) (newCommits, error) {
	w := newCommits{known: make(map[plumbing.Hash]int, len(base))}
	for i := range base {
		w.known[base[i].hash] = i
	}
	oldTip := tipOf(base)
	w.reachedTip = oldTip.IsZero()
	seen := map[plumbing.Hash]bool{}
	stack := []plumbing.Hash{head}
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if h.IsZero() || seen[h] {
			continue
		}
		seen[h] = true
		if _, ok := w.known[h]; ok {
			w.boundary = append(w.boundary, h)
			w.reachedTip = w.reachedTip || h == oldTip
			continue
		}
		if len(w.newer)%1024 == 1023 && r.histIndex.stopping() {
			return w, ErrClosed
		}
		r.omu.Lock()
		c, err := r.obj.Commit(h)
		r.unlockObj()
		if err != nil {
			return w, wrap("read the history", err)
		}
		w.newer = append(w.newer, c)
		for i := len(c.ParentHashes) - 1; i >= 0; i-- {
			stack = append(stack, c.ParentHashes[i])
		}
	}
	w.newer = gd.TopoSort(w.newer)
	return w, nil
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

// saveGrowth saves what a catch-up added to the index, as save says
// (see saveMode).
func (r *Repo) saveGrowth(g histGrowth, save saveMode) {
	if save == saveFree {
		r.wmu.Lock()
		r.smu.RLock()
		closed := r.closed
		r.smu.RUnlock()
		owned := r.owned.Load() && !closed
		if owned {
			defer r.histIndex.saveBegins()() // release keeps the lock until the save is done
		}
		r.wmu.Unlock()
		if closed {
			return
		}
		if !owned {
			unlock := r.lockForSave()
			if unlock == nil {
				return
			}
			defer unlock()
			// Under the lock: another process may have moved the branch
			// (a redaction rewrote it) since the history was read. The
			// index is saved only when it is the branch's.
			head, err := r.readHead()
			if err != nil || !r.histIndex.reaches(head) {
				return
			}
		}
	}
	if err := r.histIndex.save(g); err != nil {
		r.opt.Logf("gitmem: could not save the history index: %v", err)
	}
}

// saveBegins notes a save under way, so that the writer lock is kept
// until it is done (savesUnderWay); the function it returns notes its end.
func (x *historyIndex) saveBegins() func() {
	x.saving.Add(1)
	return func() { x.saving.Add(-1) }
}

// savesUnderWay reports whether a save this process began is not done.
func (x *historyIndex) savesUnderWay() bool { return x.saving.Load() > 0 }

// reaches reports whether the index in memory ends at head, the branch
// as read under the writer lock taken for a save. When the branch moved
// on (this process's calls, before it let the lock go), a background
// build under way goes on to it, and saves then.
func (x *historyIndex) reaches(head plumbing.Hash) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	current := head == tipOf(x.recs)
	if !current && x.running && !x.stop {
		x.want = head
	}
	return current
}

// lockForSave takes the writer lock for a process that does not own it,
// to save the history index, and returns what lets it go; nil when
// another process holds it (that writer saves what it builds), when the
// lock cannot be taken (no write access: a reader that cannot write
// saves nothing), or when the repository's files are another user's
// (sudo gitmem log must not leave a file the service cannot read). A lock
// of its own file description: this process's writer lock (r.flock) is
// not touched.
func (r *Repo) lockForSave() func() {
	dir := filepath.Join(r.gitDir, "gitmem")
	if !ownedByUs(dir) {
		return nil
	}
	l, err := gd.OpenFileLock(filepath.Join(dir, "lock"))
	if err != nil {
		return nil
	}
	if ok, err := l.TryLock(); err != nil || !ok {
		l.Close()
		return nil
	}
	return func() {
		l.Unlock()
		l.Close()
	}
}

// save brings the index file up to the index in memory, which grew by
// g, unless the index was dropped since (a redaction). Another process
// may have written the same records already: the file's own tip decides;
// a file that was not sound when read is written anew. The file is
// written without mu (a commit's publish takes it), under fileMu. Called
// with the writer lock held.
func (x *historyIndex) save(g histGrowth) error {
	x.fileMu.Lock()
	defer x.fileMu.Unlock()
	x.mu.Lock()
	hist, sound, current := x.recs, x.sound, x.gen == g.gen
	x.mu.Unlock()
	if !current {
		return nil
	}
	tip := x.fileTip()
	switch {
	case tip == tipOf(hist) && sound:
		return nil // already there
	case g.appendOnly && tip == g.oldTip && !tip.IsZero() && sound:
		return x.appendFile(g.recs, hist)
	}
	if err := x.writeFile(hist); err != nil {
		return err
	}
	x.mu.Lock()
	x.sound = x.sound || x.gen == g.gen
	x.mu.Unlock()
	return nil
}

// startBuild catches the index up to head in the background, and saves
// it (a build under way goes on to head when it is done). Tool calls do
// not wait for it: their ids were read without the index (walkIDs).
func (r *Repo) startBuild(head plumbing.Hash) {
	if !r.histIndex.buildWanted(head) {
		return
	}
	go func() {
		defer r.histIndex.wg.Done()
		var done plumbing.Hash
		for {
			want, ok := r.histIndex.nextBuild(done)
			if !ok {
				return
			}
			_, err := r.history(want, saveFree, nil)
			if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, errHistoryReset) {
				r.opt.Logf("gitmem: could not build the history index: %v", err)
			}
			done = want
		}
	}()
}

// buildWanted makes head the commit the background build is to reach,
// and reports whether a build is to start for it (none runs, none is
// stopped); the caller then starts it, and calls wg.Done when it ends.
func (x *historyIndex) buildWanted(head plumbing.Hash) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.want = head
	if x.stop || x.running {
		return false
	}
	x.running = true
	x.wg.Add(1)
	return true
}

// nextBuild is the commit the background build is to reach next, after
// done; false when it is there, or stopped (the build then ends).
func (x *historyIndex) nextBuild(done plumbing.Hash) (plumbing.Hash, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.want == done || x.stop {
		x.running = false
		return plumbing.ZeroHash, false
	}
	return x.want, true
}

// stopBuild stops the background build (it gives up where it is: the
// next process catches the index up) and waits for it.
func (x *historyIndex) stopBuild() {
	x.mu.Lock()
	x.stop = true
	x.mu.Unlock()
	x.wg.Wait()
}

// stopping reports whether Close began: long reads give up.
func (x *historyIndex) stopping() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.stop
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
	f, err := os.Open(x.path)
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

// tailChunk is how much of the index file tail reads at a time.
const tailChunk = 64 << 10

// tail streams the index file's records newest first, reading it
// backwards in chunks, so that the first page of a long log costs what it
// shows. It returns false, having called fn for nothing, when the file
// does not end at head (the caller then loads and catches up the index).
// fn returns false to stop.
func (x *historyIndex) tail(head plumbing.Hash, want func(line []byte) bool, fn func(*histRec) bool) (bool, error) {
	f, end, ok := x.open()
	if !ok {
		return false, nil
	}
	defer f.Close()
	header := int64(len(historyHeader) + 1)
	chunk := int64(x.chunk)
	var carry []byte // the start of a line whose end was read already
	first := true
	expected := map[plumbing.Hash]bool{} // parents of the records read, not read yet
	for end > header {
		start := max(header, end-chunk)
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
		if start > header { // the first line may be cut
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
	if !r.histIndex.isLoaded() && !head.IsZero() {
		if ok, err := r.histIndex.tail(head, want, fn); ok || err != nil {
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
// without parsing whole records. When the file does not reach HEAD
// (commits made with plain git, a merge, a file missing or damaged), the
// commits it lacks are read for their ids alone (walkIDs). Called with
// wmu held, owning the writer lock. In the background (start's read),
// it gives up when Close begins (ErrClosed).
func (r *Repo) syncIDs(background bool) error {
	if !r.toolIDs.isStale() {
		return nil
	}
	r.gitUpToDate() // this process's own commits are in the file too
	head := r.snapshotHead()
	ok, err := r.readIDs(head, background)
	if err == nil && !ok {
		err = r.walkIDs(head)
	}
	if err != nil {
		return err
	}
	r.toolIDs.synced()
	return nil
}

// walkIDs makes the id map the ids of every commit head reaches, without
// waiting for the history index to be caught up: the commits the index in
// memory lacks are read for their Tool-Use-Id trailers alone (no trees
// compared: about 1 s for 100,000 commits, where recording them took
// 4-140 s), and the index is caught up and saved in the background
// (startBuild). The map is made anew, so that the ids of commits the
// branch no longer reaches (a reset, a redaction) are forgotten, as the
// rewritten index forgets them. Called with wmu held.
func (r *Repo) walkIDs(head plumbing.Hash) error {
	base, gen := r.histIndex.base()
	w, err := r.walkNew(head, base)
	if err != nil {
		return err
	}
	kept := base
	if !w.reachedTip {
		kept = reachable(base, w.known, w.boundary)
	}
	ids := make(map[string]plumbing.Hash, len(kept)+len(w.newer))
	for i := range kept {
		if kept[i].id != "" {
			ids[kept[i].id] = kept[i].hash
		}
	}
	for _, c := range w.newer {
		_, _, trailers := parseMessage(c.Message)
		if id := trailerValue(trailers, TrailerToolUseID); id != "" {
			ids[id] = c.Hash
		}
	}
	r.toolIDs.replace(ids)
	// A few commits (a merge, an operator's commit) are recorded here
	// and now, unless a build is under way; more, in the background.
	if len(w.newer) <= inlineCatchUp && r.histIndex.buildMu.TryLock() {
		_, grew, err := r.record(base, gen, w, nil)
		r.histIndex.buildMu.Unlock()
		if err == nil {
			if grew != nil {
				r.saveGrowth(*grew, saveHeld)
			}
			return nil
		}
	}
	r.startBuild(head)
	return nil
}

// inlineCatchUp is the most commits walkIDs records itself: their trees
// are compared in milliseconds.
const inlineCatchUp = 64

// damage says what is wrong with the history index file, if a record in
// it is lost, doubled or unreadable before its end ("" for a sound file,
// a missing one, one of an older version, or one torn at its end: those
// are caught up or rewritten as gitmem goes).
func (x *historyIndex) damage() string {
	data, err := os.ReadFile(x.path)
	if err != nil || !bytes.HasPrefix(data, []byte(historyHeader+"\n")) {
		return ""
	}
	lines := bytes.Count(data, []byte("\n")) - 1
	if recs, _ := x.readFile(); len(recs) < lines {
		good := len(recs)
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
	r.histIndex.drop(false) // read again: up to the damage
	head := r.snapshotHead()
	r.toolIDs.forgetFile(true)
	if _, err := r.history(head, saveHeld, nil); err != nil {
		return err
	}
	if err := r.histIndex.rewriteFile(head); err != nil {
		return wrap("write the history index", err)
	}
	return r.syncIDs(false)
}

// drop forgets the index in memory: loaded says whether it is then
// taken as empty (a redaction removed the file) or read again from the
// file when next needed. A catch-up under way does not install what it
// read (errHistoryReset).
func (x *historyIndex) drop(loaded bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.recs, x.loaded, x.sound = nil, loaded, true
	x.gen++
}

// remove drops the index and removes its file (a redaction: the records
// name what was removed). A save under way finishes first, or sees the
// index dropped.
func (x *historyIndex) remove() {
	x.fileMu.Lock()
	defer x.fileMu.Unlock()
	x.drop(true)
	os.Remove(x.path)
}

// rewriteFile writes the index file again from the index in memory, up
// to head.
func (x *historyIndex) rewriteFile(head plumbing.Hash) error {
	x.fileMu.Lock()
	defer x.fileMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	i := slices.IndexFunc(x.recs, func(h histRec) bool { return h.hash == head })
	if i < 0 {
		return errors.New("the index does not hold HEAD")
	}
	return x.writeFile(x.recs[:i+1])
}

// appendPublished adds to the index in memory the records of commits
// just published that follow its tip; a merge brings commits the index
// lacks: history() catches up. Called from publish, with the log files'
// lock held.
func (x *historyIndex) appendPublished(items []*prepared) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range items {
		if x.loaded && p.rec.hash == p.hash && len(p.rec.parents) <= 1 && tipOf(x.recs) == p.rec.parent() {
			x.recs = append(x.recs, p.rec)
		}
	}
}

// appendMaterialised appends to the index file the records of commits
// written to git's files, when the file ends where they start (or is
// missing and they start the history); else the next reader catches up
// from git. Called with the materialiser's lock held.
func (x *historyIndex) appendMaterialised(items []*prepared) error {
	var recs []histRec
	parent := items[0].parent
	prev := parent
	for _, p := range items {
		// A merge or a fast-forward brings commits the file lacks: the
		// next reader catches up from git.
		if p.rec.hash != p.hash || len(p.rec.parents) > 1 || p.rec.parent() != prev {
			break
		}
		recs = append(recs, p.rec)
		prev = p.hash
	}
	if len(recs) == 0 {
		return nil
	}
	x.fileMu.Lock()
	defer x.fileMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if tip := x.fileTip(); tip != parent || tip.IsZero() {
		if !tip.IsZero() || !parent.IsZero() {
			return nil
		}
	}
	return x.appendFile(recs, x.recs)
}

// filePath is the index file's path (readIDs reads it on its own).
func (x *historyIndex) filePath() string { return x.path }

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

// readIDs reads the ids of the records after where the last read stopped
// (toolIDs.fileMark) and reports whether the file now ends at head. A
// file that does not go on from there — shorter, or the record before
// it is not the one read last any more (rewritten) — is read again from the
// start into a new map. With stoppable it gives up when Close begins
// (ErrClosed), having changed nothing.
func (r *Repo) readIDs(head plumbing.Hash, stoppable bool) (bool, error) {
	f, err := os.Open(r.histIndex.filePath())
	if errors.Is(err, fs.ErrNotExist) {
		return head.IsZero(), nil
	}
	if err != nil {
		return false, wrap("read the history index", err)
	}
	defer f.Close()
	off, prev := r.toolIDs.fileMark()
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
	// parents, as readFile does: a record lost or doubled in the
	// middle (a damaged file that still ends at HEAD) would leave ids
	// unknown, and a retry would be made again. The caller then rebuilds
	// the file.
	var known map[plumbing.Hash]bool
	if fresh {
		known = map[plumbing.Hash]bool{}
	}
	damaged := false
	br := bufio.NewReaderSize(f, 256<<10)
	for n := 1; ; n++ {
		if stoppable && n%idsStopEvery == 0 && r.histIndex.stopping() {
			return false, ErrClosed // Close gives the read up: the next process reads them
		}
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
	if damaged {
		r.toolIDs.forgetFile(false) // read again from the start, once rebuilt
		return false, nil
	}
	r.toolIDs.readFromFile(ids, fresh, off, prev)
	return prev == head, nil
}

// idsStopEvery is how many records readIDs reads between two looks at
// whether Close wants it to stop.
const idsStopEvery = 256

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
