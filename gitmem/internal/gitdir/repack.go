package gitdir

import (
	"bytes"
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/klauspost/compress/zlib"
)

// Repacking with deltas and without a delta search. git finds bases by
// trying each object against its neighbours in a window of similar ones;
// gitmem knows better: a tree or a file is almost always a small edit of
// the version at the same path in the commit next to it. So the commits
// are walked newest first (each after a child), each commit's tree is
// compared with its child's (equal subtrees skipped by hash, as a diff
// does), and every object met for the first time is written as a delta
// against an earlier version of the same path, already in the pack.
//
// Which earlier version: the newest is stored whole, and version n
// (counting back from it) is a delta against version n with its lowest set
// bit cleared. A chain is then at most log2(versions) long (17 for
// 100,000 versions, under git's 50), and a delta spans about log2(n)/2
// edits on average: a tree that changes every commit costs a few entries
// per version, where a plain chain would store it whole every 50.
//
// Memory is bounded by the walk's bookkeeping (a few dozen bytes per
// object and per commit), the Store's caches of recently read trees and
// delta bases, and the trees on the path being compared; objects are read
// and written one at a time.

// RepackOptions says what Repack packs.
type RepackOptions struct {
	// Tips are where the walk starts: the objects the refs name.
	Tips []plumbing.Hash
	// Only, when not nil, limits the pack to these objects (an incremental
	// repack: loose objects and the packs being merged); the ones the walk
	// does not reach are packed whole at the end. Nil: everything the tips
	// reach and nothing else (a full repack).
	Only map[plumbing.Hash]bool
	// Stop is polled now and then; when it returns true Repack gives up
	// with ErrStopped.
	Stop func() bool
	// Keep is the .keep the new pack gets: Own in gitmem's repository,
	// NoKeep in a remote's.
	Keep Keep
}

// RepackResult says what Repack wrote.
type RepackResult struct {
	Pack    plumbing.Hash   // zero when there was nothing to pack
	Objects []plumbing.Hash // what the pack holds, sorted
	Deltas  int             // how many are deltas
}

// Holds reports whether the pack holds h.
func (r RepackResult) Holds(h plumbing.Hash) bool {
	_, ok := slices.BinarySearchFunc(r.Objects, h, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })
	return ok
}

// ErrStopped is Repack's error when RepackOptions.Stop asked it to stop.
var ErrStopped = errors.New("repack stopped")

// Repack writes one pack (fsynced, with its index) of the objects the
// options name and returns what it holds. Nothing is deleted: the caller
// swaps the pack in. The Store is only read, and must not be used by
// anyone else meanwhile (open a Store of its own for it).
func (s *Store) Repack(opt RepackOptions) (_ RepackResult, err error) {
	defer s.packs.mapPacks()()
	pw, err := newPackWriter(s.Env, s.Dir, -1, zlib.DefaultCompression)
	if err != nil {
		return RepackResult{}, err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if ferr := faultError(recover()); ferr != nil {
			pw.abort()
			err = ferr
		}
	}()
	pw.keep = opt.Keep
	p := &repacker{s: s, out: pw, rest: opt.Only, stop: opt.Stop, paths: map[string]*versions{}}
	p.in = func(plumbing.Hash) bool { return true }
	if opt.Only != nil {
		p.in = func(h plumbing.Hash) bool { return opt.Only[h] }
	}
	if err := p.run(opt.Tips); err != nil {
		pw.abort()
		return RepackResult{}, err
	}
	if len(pw.entries) == 0 {
		pw.abort()
		return RepackResult{}, nil
	}
	res := RepackResult{Deltas: pw.deltas, Objects: make([]plumbing.Hash, len(pw.entries))}
	for i, e := range pw.entries {
		res.Objects[i] = e.hash
	}
	slices.SortFunc(res.Objects, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })
	if res.Pack, err = pw.finish(true); err != nil {
		return RepackResult{}, err
	}
	return res, nil
}

// Reachable calls visit with every object the tips reach, but those
// known reports and what only they reach (known must hold for everything
// an object it holds reaches: the objects of a full repack, of an earlier
// call). The walk is Repack's: each commit's tree is compared with its
// child's, so the cost follows what changed, not the size of the trees.
func (s *Store) Reachable(tips []plumbing.Hash, known func(plumbing.Hash) bool, visit func(plumbing.ObjectType, plumbing.Hash)) error {
	v := visitor{seen: map[plumbing.Hash]bool{}, visit: visit}
	p := &repacker{s: s, out: v, in: func(h plumbing.Hash) bool { return !known(h) }}
	return p.run(tips)
}

type repacker struct {
	s     *Store
	out   sink                     // where the objects go
	in    func(plumbing.Hash) bool // whether an object is to go there
	rest  map[plumbing.Hash]bool   // objects that go whether the walk reaches them or not
	stop  func() bool              // polled
	paths map[string]*versions     // path (trees end in "/") -> its versions; nil: no deltas
	ticks int
}

// sink is where the walk puts objects: a pack, or a visitor.
type sink interface {
	has(h plumbing.Hash) bool
	add(t plumbing.ObjectType, h plumbing.Hash, data []byte, base plumbing.Hash, baseData []byte) error
}

type visitor struct {
	seen  map[plumbing.Hash]bool
	visit func(plumbing.ObjectType, plumbing.Hash)
}

func (v visitor) has(h plumbing.Hash) bool { return v.seen[h] }

func (v visitor) add(t plumbing.ObjectType, h plumbing.Hash, _ []byte, _ plumbing.Hash, _ []byte) error {
	v.seen[h] = true
	v.visit(t, h)
	return nil
}

// walked is a commit the walk reached: its tree, and the index (in walk
// order) of the child it was reached from (-1: a tip), or when it is a
// tip whose parent the walk leaves out, that parent's tree.
type walked struct {
	tree, prev plumbing.Hash
	child      int32
}

// run writes (to p.out) the objects the tips reach that p.in admits,
// then those of p.rest the walk did not reach.
func (p *repacker) run(tips []plumbing.Hash) error {
	var q commitQueue
	others, err := p.queueTips(&q, tips)
	if err != nil {
		return err
	}
	order, err := p.writeCommits(&q)
	if err != nil {
		return err
	}
	if err := p.writeTrees(order); err != nil {
		return err
	}
	if err := p.writeOthers(others); err != nil {
		return err
	}
	return p.writeRest()
}

// queueTips puts the commits among the tips (or that their tags name) on
// q, and returns the tags, and the trees and blobs the tips name.
func (p *repacker) queueTips(q *commitQueue, tips []plumbing.Hash) (others []plumbing.Hash, err error) {
	for _, tip := range tips {
		for depth := 0; p.in(tip); depth++ {
			t, data, err := p.readAny(tip)
			if err != nil {
				return nil, err
			}
			if t == plumbing.CommitObject {
				if err := p.queueCommit(q, tip, -1); err != nil {
					return nil, err
				}
				break
			}
			others = append(others, tip)
			if t != plumbing.TagObject || depth > 16 {
				break
			}
			if tip, err = tagTarget(data); err != nil {
				return nil, err
			}
		}
	}
	return others, nil
}

// queueCommit puts commit h, reached from the child at index child of
// the walk order (-1: a tip), on q.
func (p *repacker) queueCommit(q *commitQueue, h plumbing.Hash, child int32) error {
	data, err := p.read(h, plumbing.CommitObject)
	if err != nil {
		return err
	}
	_, _, when, err := parseCommit(data)
	if err != nil {
		return fmt.Errorf("commit %s: %w", h, err)
	}
	heap.Push(q, queuedCommit{h, when, child, q.pushed})
	q.pushed++
	return nil
}

// writeCommits writes the commits, newest first, each as it is reached,
// and returns them in that order.
func (p *repacker) writeCommits(q *commitQueue) ([]walked, error) {
	seen := map[plumbing.Hash]bool{}
	var order []walked
	for q.Len() > 0 {
		c := heap.Pop(q).(queuedCommit)
		if seen[c.hash] {
			continue
		}
		seen[c.hash] = true
		data, err := p.read(c.hash, plumbing.CommitObject)
		if err != nil {
			return nil, err
		}
		tree, parents, _, err := parseCommit(data)
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", c.hash, err)
		}
		if err := p.put(plumbing.CommitObject, c.hash, data, "\x00commit"); err != nil {
			return nil, err
		}
		w := walked{tree: tree, child: c.child}
		if c.child < 0 && len(parents) > 0 && !p.in(parents[0]) {
			// What this commit shares with its parent is not the walk's:
			// only what differs from it is looked at.
			if pdata, err := p.read(parents[0], plumbing.CommitObject); err == nil {
				w.prev, _, _, _ = parseCommit(pdata)
			}
		}
		order = append(order, w)
		for _, parent := range parents {
			if !seen[parent] && p.in(parent) {
				if err := p.queueCommit(q, parent, int32(len(order)-1)); err != nil {
					return nil, err
				}
			}
		}
	}
	return order, nil
}

// writeTrees writes the trees and blobs of the commits in walk order,
// each commit's compared with its child's.
func (p *repacker) writeTrees(order []walked) error {
	for _, c := range order {
		prev := c.prev
		if c.child >= 0 {
			prev = order[c.child].tree
		}
		if err := p.tree(c.tree, prev, ""); err != nil {
			return err
		}
	}
	return nil
}

// writeOthers writes the tags, trees and blobs the tips named.
func (p *repacker) writeOthers(others []plumbing.Hash) error {
	for _, h := range others {
		t, data, err := p.readAny(h)
		if err != nil {
			return err
		}
		switch t {
		case plumbing.TreeObject:
			err = p.tree(h, plumbing.ZeroHash, "")
		case plumbing.BlobObject:
			err = p.blob(h, "")
		default:
			err = p.put(t, h, data, "")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writeRest writes what of p.rest the walk did not reach (an incremental
// repack packs all it was given): whole, in hash order.
func (p *repacker) writeRest() error {
	var rest []plumbing.Hash
	for h := range p.rest {
		if !p.out.has(h) {
			rest = append(rest, h)
		}
	}
	slices.SortFunc(rest, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })
	for _, h := range rest {
		t, data, err := p.readAny(h)
		if err != nil {
			return err
		}
		if err := p.put(t, h, data, ""); err != nil {
			return err
		}
	}
	return nil
}

// tree writes the tree h found at path (with its subtrees and blobs that
// are not in the pack yet), given the tree prev at the same path in the
// child commit: entries equal there are in the pack already.
func (p *repacker) tree(h, prev plumbing.Hash, path string) error {
	if p.out.has(h) || !p.in(h) {
		return nil
	}
	data, err := p.read(h, plumbing.TreeObject)
	if err != nil {
		return err
	}
	var old []byte
	if !prev.IsZero() {
		old, _ = p.read(prev, plumbing.TreeObject) // only a hint
	}
	if err := p.put(plumbing.TreeObject, h, data, path+"/"); err != nil {
		return err
	}
	// Entries in the common prefix and suffix of the two trees are the
	// same objects: skipped without parsing (a folder of thousands of
	// files changes by an entry or two).
	i, oi := 0, 0
	if len(old) > 0 {
		for pre := commonPrefix(data, old); ; {
			nul := bytes.IndexByte(data[i:], 0)
			if nul < 0 || i+nul+21 > pre {
				break
			}
			i += nul + 21
		}
		oi = i
	}
	suf := commonSuffix(data[i:], old[oi:])
	for i < len(data) {
		if len(data)-i <= suf && len(data)-i == len(old)-oi {
			break // the rest is the same
		}
		e, next, err := treeEntryAt(data, i)
		if err != nil {
			return fmt.Errorf("tree %s: %w", h, err)
		}
		i = next
		var same plumbing.Hash
		for oi < len(old) {
			o, onext, err := treeEntryAt(old, oi)
			if err != nil {
				old = nil
				break
			}
			c := compareEntries(o, e)
			if c < 0 {
				oi = onext
				continue
			}
			if c == 0 {
				same, oi = o.hash, onext
			}
			break
		}
		if e.gitlink || e.hash == same {
			continue
		}
		child := string(e.name)
		if path != "" {
			child = path + "/" + child
		}
		if e.tree {
			err = p.tree(e.hash, same, child)
		} else {
			err = p.blob(e.hash, child)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (p *repacker) blob(h plumbing.Hash, path string) error {
	if p.out.has(h) || !p.in(h) {
		return nil
	}
	if _, ok := p.out.(visitor); ok { // a tree's entry says what it is
		return p.out.add(plumbing.BlobObject, h, nil, plumbing.ZeroHash, nil)
	}
	data, err := p.read(h, plumbing.BlobObject)
	if err != nil {
		return err
	}
	return p.put(plumbing.BlobObject, h, data, path)
}

// put writes an object met at path (key "" for none), as a delta against
// the earlier version of that path versions names.
func (p *repacker) put(t plumbing.ObjectType, h plumbing.Hash, data []byte, path string) error {
	if p.ticks++; p.ticks%256 == 0 && p.stop != nil && p.stop() {
		return ErrStopped
	}
	if p.out.has(h) {
		return nil
	}
	var base plumbing.Hash
	var baseData []byte
	if path != "" && p.paths != nil {
		v := p.paths[path]
		if v == nil {
			v = &versions{}
			p.paths[path] = v
		}
		base = v.next(h)
		if !base.IsZero() {
			baseData, _ = p.read(base, t)
		}
	}
	return p.out.add(t, h, data, base, baseData)
}

// versions are the versions of one path met so far: the number met, and
// those that later ones will take as bases (version n takes n with its
// lowest set bit cleared, so the ones kept are the current one and those
// with its low set bits cleared in turn: at most one per bit).
type versions struct {
	n     int
	stack []version
}

type version struct {
	n int
	h plumbing.Hash
}

// next records h as the next version and returns its base (zero: none).
func (v *versions) next(h plumbing.Hash) plumbing.Hash {
	n := v.n
	v.n++
	var base plumbing.Hash
	if n > 0 {
		b := n & (n - 1)
		for len(v.stack) > 0 && v.stack[len(v.stack)-1].n > b {
			v.stack = v.stack[:len(v.stack)-1]
		}
		if len(v.stack) > 0 {
			base = v.stack[len(v.stack)-1].h
		}
	}
	v.stack = append(v.stack, version{n, h})
	return base
}

// read returns an object's content, checking its type.
func (p *repacker) read(h plumbing.Hash, want plumbing.ObjectType) ([]byte, error) {
	t, data, err := p.readAny(h)
	if err == nil && t != want {
		err = fmt.Errorf("object %s is a %s, not a %s", h, t, want)
	}
	return data, err
}

func (p *repacker) readAny(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	t, data, err := p.s.read(h)
	if err != nil {
		return 0, nil, fmt.Errorf("read object %s: %w", h, err)
	}
	return t, data, nil
}

// ReadObject returns an object's type and content.
func (s *Store) ReadObject(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	return s.read(h)
}

// queuedCommit is a commit waiting in the walk, newest first.
type queuedCommit struct {
	hash  plumbing.Hash
	when  int64
	child int32
	seq   int
}

// commitQueue holds the commits waiting in the walk, newest first; ties
// in time go in the order they were pushed.
type commitQueue struct {
	items  []queuedCommit
	pushed int // commits pushed so far: the seq of the next
}

func (q *commitQueue) Len() int { return len(q.items) }
func (q *commitQueue) Less(i, j int) bool {
	if q.items[i].when != q.items[j].when {
		return q.items[i].when > q.items[j].when
	}
	return q.items[i].seq < q.items[j].seq
}
func (q *commitQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *commitQueue) Push(x any)    { q.items = append(q.items, x.(queuedCommit)) }
func (q *commitQueue) Pop() any {
	x := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return x
}

var errBadObject = errors.New("malformed object")

// parseCommit reads a commit's tree, parents and committer time.
func parseCommit(data []byte) (tree plumbing.Hash, parents []plumbing.Hash, when int64, err error) {
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte{'\n'})
		data = rest
		if len(line) == 0 {
			break
		}
		key, val, _ := bytes.Cut(line, []byte{' '})
		switch string(key) {
		case "tree", "parent":
			if !plumbing.IsHash(string(val)) {
				return tree, nil, 0, errBadObject
			}
			if key[0] == 't' {
				tree = plumbing.NewHash(string(val))
			} else {
				parents = append(parents, plumbing.NewHash(string(val)))
			}
		case "committer":
			// "Name <email> 1700000000 +0000"
			if i := bytes.LastIndexByte(val, '>'); i >= 0 {
				f := bytes.Fields(val[i+1:])
				if len(f) > 0 {
					when, _ = strconv.ParseInt(string(f[0]), 10, 64)
				}
			}
		}
	}
	if tree.IsZero() {
		return tree, nil, 0, errBadObject
	}
	return tree, parents, when, nil
}

// tagTarget reads the object an annotated tag names.
func tagTarget(data []byte) (plumbing.Hash, error) {
	line, _, _ := bytes.Cut(data, []byte{'\n'})
	hex, ok := bytes.CutPrefix(line, []byte("object "))
	if !ok || !plumbing.IsHash(string(hex)) {
		return plumbing.ZeroHash, errBadObject
	}
	return plumbing.NewHash(string(hex)), nil
}

type treeEntry struct {
	mode, name    []byte
	hash          plumbing.Hash
	tree, gitlink bool
}

// treeEntryAt parses the tree entry at data[i:] and returns where the
// next one starts.
func treeEntryAt(data []byte, i int) (treeEntry, int, error) {
	sp := bytes.IndexByte(data[i:], ' ')
	if sp < 0 {
		return treeEntry{}, 0, errBadObject
	}
	mode := data[i : i+sp]
	nul := bytes.IndexByte(data[i+sp+1:], 0)
	if nul < 0 {
		return treeEntry{}, 0, errBadObject
	}
	name := data[i+sp+1 : i+sp+1+nul]
	h := i + sp + 1 + nul + 1
	if h+20 > len(data) {
		return treeEntry{}, 0, errBadObject
	}
	e := treeEntry{mode: mode, name: name, tree: string(mode) == "40000", gitlink: string(mode) == "160000"}
	copy(e.hash[:], data[h:h+20])
	return e, h + 20, nil
}

// compareEntries orders tree entries as git does: a folder sorts as if
// its name ended in "/". Entries of the same name and kind are equal.
func compareEntries(a, b treeEntry) int {
	n := min(len(a.name), len(b.name))
	if c := bytes.Compare(a.name[:n], b.name[:n]); c != 0 {
		return c
	}
	end := func(e treeEntry) byte {
		switch {
		case n < len(e.name):
			return e.name[n]
		case e.tree:
			return '/'
		}
		return 0
	}
	return cmp.Compare(end(a), end(b))
}

// PackObjects writes the objects as one pack without deltas (read from
// the store, in the order given), with the .keep keep, and returns the
// pack's hash. The pack and its index are fsynced with the folder.
func (s *Store) PackObjects(hashes []plumbing.Hash, keep Keep) (plumbing.Hash, error) {
	pw, err := newPackWriter(s.Env, s.Dir, -1, zlib.DefaultCompression)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	pw.keep = keep
	for _, h := range hashes {
		t, data, err := s.ReadObject(h)
		if err == nil {
			err = pw.add(t, h, data, plumbing.ZeroHash, nil)
		}
		if err != nil {
			pw.abort()
			return plumbing.ZeroHash, err
		}
	}
	return pw.finish(true)
}

// Pack is a pack file of the repository.
type Pack struct {
	Hash     plumbing.Hash
	Objects  int   // how many objects it holds (from its index)
	Bytes    int64 // the pack file's size
	Repacked bool  // written by Repack (its deltas are gitmem's)
	Kept     bool  // it has a .keep file: git's gc leaves it alone
	Ours     bool  // its .keep is gitmem's Own (see Keep): gitmem's gc replaces it as one without
}

// A pack Repack wrote is marked by an empty file .git/gitmem/repacked/H
// (H the pack's hash). Earlier versions put the mark beside the pack, as
// .git/objects/pack/pack-H.gitmem, where git counts it as garbage (git
// count-objects -v warns of it): such a mark is still honoured, and
// MoveRepackedMarks moves it.
const (
	repackedDir = "repacked"
	oldMarkExt  = ".gitmem"
)

func repackedMarkPath(gitDir string, h string) string {
	return filepath.Join(gitDir, "gitmem", repackedDir, h)
}

// MarkRepacked records that Repack wrote the pack h.
func MarkRepacked(gitDir string, h plumbing.Hash) error {
	if err := mkdirIn(gitDir, filepath.Join(gitDir, "gitmem", repackedDir), 0o700); err != nil {
		return err
	}
	return os.WriteFile(repackedMarkPath(gitDir, h.String()), nil, 0o444)
}

// isRepacked reports whether the pack with the hash hex is marked, in
// either place.
func isRepacked(gitDir, hex string) bool {
	if _, err := os.Stat(repackedMarkPath(gitDir, hex)); err == nil {
		return true
	}
	_, err := os.Stat(filepath.Join(gitDir, "objects", "pack", "pack-"+hex+oldMarkExt))
	return err == nil
}

// moveRepackedMarks moves the marks an earlier version left in
// .git/objects/pack (ents is its listing) to .git/gitmem/repacked (a
// mark whose pack is gone is deleted instead). A mark that cannot be
// written in the new place stays where it is, still honoured.
func moveRepackedMarks(gitDir string, ents []os.DirEntry) {
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "pack-") || !strings.HasSuffix(e.Name(), oldMarkExt) {
			continue
		}
		p := filepath.Join(gitDir, "objects", "pack", e.Name())
		base := strings.TrimSuffix(p, oldMarkExt)
		hex := strings.TrimPrefix(filepath.Base(base), "pack-")
		if !plumbing.IsHash(hex) {
			continue
		}
		if _, err := os.Stat(base + ".pack"); err == nil && MarkRepacked(gitDir, plumbing.NewHash(hex)) != nil {
			continue
		}
		os.Remove(p)
	}
}

// ListPacks lists the packs (with an index) of the repository. It reads
// only the pack folder: no Store is needed.
func ListPacks(gitDir string) ([]Pack, error) {
	m, err := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "pack-*.pack"))
	if err != nil {
		return nil, err
	}
	var out []Pack
	for _, path := range m {
		name := filepath.Base(path)
		hex := name[len("pack-") : len(name)-len(".pack")]
		if !plumbing.IsHash(hex) {
			continue
		}
		fi, err := os.Stat(path)
		if err != nil {
			continue
		}
		base := path[:len(path)-len(".pack")]
		n, err := indexCount(base + ".idx")
		if err != nil {
			continue // no index (yet): not a pack git reads
		}
		k, foreign := keptBy(base)
		out = append(out, Pack{Hash: plumbing.NewHash(hex), Objects: n, Bytes: fi.Size(), Repacked: isRepacked(gitDir, hex),
			Kept: k != NoKeep || foreign, Ours: k == Own})
	}
	return out, nil
}

// PackExists reports whether the pack h is there, index and pack.
func PackExists(gitDir string, h plumbing.Hash) bool {
	base := filepath.Join(gitDir, "objects", "pack", "pack-"+h.String())
	_, err := os.Stat(base + ".idx")
	if err == nil {
		_, err = os.Stat(base + ".pack")
	}
	return err == nil
}

// PackIndexPath is the path of a pack's index.
func PackIndexPath(gitDir string, h plumbing.Hash) string {
	return filepath.Join(gitDir, "objects", "pack", "pack-"+h.String()+".idx")
}

// indexCount reads how many objects a pack index (version 2) names.
func indexCount(idxPath string) (int, error) {
	f, err := OpenRead(idxPath)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var b [4]byte
	if _, err := f.ReadAt(b[:], 8+255*4); err != nil {
		return 0, err
	}
	return int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3]), nil
}

// ObjectLinks calls fn with each object that the object data of type t
// names, and that object's type as the naming says: a commit's parents
// (commits) and tree, a tree's entries (trees and blobs; submodule
// commits left out), a tag's target (AnyObject).
func ObjectLinks(t plumbing.ObjectType, data []byte, fn func(h plumbing.Hash, t plumbing.ObjectType)) error {
	switch t {
	case plumbing.CommitObject:
		tree, parents, _, err := parseCommit(data)
		if err != nil {
			return err
		}
		for _, p := range parents {
			fn(p, plumbing.CommitObject)
		}
		fn(tree, plumbing.TreeObject)
	case plumbing.TagObject:
		target, err := tagTarget(data)
		if err != nil {
			return err
		}
		fn(target, plumbing.AnyObject)
	case plumbing.TreeObject:
		for i := 0; i < len(data); {
			e, next, err := treeEntryAt(data, i)
			if err != nil {
				return err
			}
			switch {
			case e.tree:
				fn(e.hash, plumbing.TreeObject)
			case !e.gitlink:
				fn(e.hash, plumbing.BlobObject)
			}
			i = next
		}
	}
	return nil
}
