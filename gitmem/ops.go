package gitmem

import (
	"context"
	"errors"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// Progress reports how far a long operation is: done of total steps.
type Progress func(done, total int)

// LogOptions filter a log. Zero fields do not filter.
type LogOptions struct {
	Paths     []string // memory paths relative to memories/; a folder matches what is beneath it
	ToolUseID string
	Session   string
	Agent     string
	Command   string
	Since     time.Time
	Until     time.Time
	Limit     int
	Conflicts bool // only merges that resolved a conflict
	// Follow lists the history of the one path in Paths beyond its
	// renames, as git log --follow: past the commit that renamed it (or a
	// folder above it), older commits are matched under its old name.
	// Log renames Paths[0] in place as it goes back: while fn runs, it is
	// the name the file has in that commit.
	Follow bool
}

func (o LogOptions) match(h *histRec) bool {
	switch {
	case o.ToolUseID != "" && h.id != o.ToolUseID,
		o.Session != "" && h.session != o.Session,
		o.Agent != "" && h.agent != o.Agent,
		o.Command != "" && h.command != o.Command,
		!o.Since.IsZero() && h.when.Before(o.Since),
		!o.Until.IsZero() && h.when.After(o.Until),
		o.Conflicts && trailerValue(h.trailers, TrailerConflict) == "":
		return false
	}
	return len(o.Paths) == 0 || touches(h.paths, o.Paths)
}

// touches reports whether any changed path is one of paths or beneath one.
func touches(changed, paths []string) bool {
	for _, c := range changed {
		for _, p := range paths {
			if p == "" || c == p || strings.HasPrefix(c, p+"/") {
				return true
			}
		}
	}
	return false
}

// onTheWay reports whether folder dir may hold files that touches
// paths: it is one of them, on the way to one, or beneath one (none:
// every folder is).
func onTheWay(dir string, paths []string) bool {
	for _, p := range paths {
		if p == "" || within(p, dir) || within(dir, p) {
			return true
		}
	}
	return len(paths) == 0
}

// headHash is the branch's commit now (shareStore's: its wait for the
// disk lock ends only when Close begins).
func (r *Repo) headHash() (plumbing.Hash, error) { return r.branchHead(context.Background()) }

// branchHead is the branch's commit now, after git's files were brought
// up to date; the wait for that ends with ctx (gitUpToDate).
func (r *Repo) branchHead(ctx context.Context) (plumbing.Hash, error) {
	if r.lease.Held() { // git's files may lag: bring them up to date
		if err := r.gitUpToDate(ctx); err != nil {
			return plumbing.ZeroHash, err
		}
		return r.snapshotHead(), nil
	}
	h, err := r.readHead()
	return h, wrap("read the branch", err)
}

// indexed returns the history index up to HEAD, catching it up first
// and saving it when it had to (under the writer lock: see saveFree), by
// a reader too.
func (r *Repo) indexed(ctx context.Context, progress Progress) ([]histRec, error) {
	for attempt := 0; ; attempt++ {
		head, err := r.branchHead(ctx)
		if err != nil {
			return nil, err
		}
		hist, err := r.history(head, saveFree, progress)
		if errors.Is(err, errHistoryReset) && attempt < 3 {
			continue // a redaction rewrote the history meanwhile: from its HEAD
		}
		return hist, err
	}
}

// Log calls fn for each commit of the history that matches, newest first,
// until fn returns an error or Limit commits were given. Every commit
// reachable from HEAD is listed, both sides of every merge, in the order
// they reached this repository (a commit always after its parents).
func (r *Repo) Log(ctx context.Context, opt LogOptions, progress Progress, fn func(Commit) error) error {
	if err := r.awaitStartCheck(ctx); err != nil {
		return err
	}
	var want []byte
	switch {
	case opt.Conflicts:
		want = contains(TrailerConflict)
	case opt.ToolUseID != "":
		want = contains(opt.ToolUseID)
	case len(opt.Paths) == 1 && opt.Paths[0] != "":
		want = contains(opt.Paths[0])
	case opt.Session != "":
		want = contains(opt.Session)
	case opt.Agent != "":
		want = contains(opt.Agent)
	case opt.Command != "":
		want = contains(opt.Command)
	}
	if opt.Follow {
		if len(opt.Paths) != 1 {
			return errors.New("gitmem: following renames takes exactly one path")
		}
		if !opt.Conflicts && opt.ToolUseID == "" {
			want = nil // the path's old names are not known yet
		}
	}
	n := 0
	var ferr error
	err := r.scan(ctx, want, progress, func(h *histRec) bool {
		if n%4096 == 0 && ctx.Err() != nil {
			ferr = ctx.Err()
			return false
		}
		if opt.Follow {
			defer func() { opt.Paths[0] = h.renamedFrom(opt.Paths[0]) }()
		}
		// The newest record of the id without the twin flag is its last:
		// no older record has the id.
		more := opt.ToolUseID == "" || h.id != opt.ToolUseID || h.twin
		if !opt.match(h) {
			return more
		}
		if ferr = fn(h.commit()); ferr != nil {
			return false
		}
		n++
		return more && (opt.Limit <= 0 || n < opt.Limit)
	})
	if ferr != nil {
		return ferr
	}
	return err
}

// renamedFrom is the name path p had before this commit: its old name
// when the commit is a rename (of the file, or of a folder above it),
// else p. As blame, only a rename command counts (not a merge's).
func (h *histRec) renamedFrom(p string) string {
	if h.command != "rename" || len(h.parents) > 1 {
		return p
	}
	return movePath(p, strings.TrimPrefix(h.newPath, "/memories/"), strings.TrimPrefix(h.path, "/memories/"))
}

// Resolve finds the commit a user names: a tool_use id (the commit it
// made), a full or abbreviated hash, or a git revision (HEAD~2, main). A
// full hash of a commit, alone or with ancestry steps after it (HASH~1,
// HASH^2~3), names that commit or its ancestor, as in git, without a
// look for a tool_use id of the same text (which reads the whole history
// index: no call makes one). A tool_use id that is also a revision of
// another commit, or the id of two commits (two agents' calls, merged),
// is an AmbiguousError.
func (r *Repo) Resolve(ctx context.Context, rev string) (Commit, error) {
	if err := r.awaitStartCheck(ctx); err != nil {
		return Commit{}, err
	}
	return r.resolve(ctx, rev, true)
}

// ResolveCommit is Resolve without the files the commit changed (its
// Paths and Blobs are empty), for a caller that needs only the commit
// (diff): a full hash, alone or with ancestry steps, is read from git
// alone, with no search of the history index for its record (a diff of
// two hashes 50,000 commits apart searched half the index for the older).
func (r *Repo) ResolveCommit(ctx context.Context, rev string) (Commit, error) {
	if err := r.awaitStartCheck(ctx); err != nil {
		return Commit{}, err
	}
	return r.resolve(ctx, rev, false)
}

// resolve is Resolve, with the files the commit changed when paths is
// set (ResolveCommit: without).
func (r *Repo) resolve(ctx context.Context, rev string, paths bool) (Commit, error) {
	commit := r.Commit
	if paths {
		commit = r.commitWithPaths
	}
	if rev == "" {
		return Commit{}, ErrUnknownRev
	}
	if len(rev) >= 40 && isObjectHash(rev[:40]) && isAncestrySteps(rev[40:]) {
		if c, err := commit(ctx, rev); err == nil {
			return c, nil
		}
	}
	// Two commits of one id came from two agents that each made a call
	// with it (a retry makes no commit: Update): neither is the one. The
	// newest record of the id says whether an older one has it too
	// (histRec.twin): if not, the rest of the index is not read.
	var found, twin *histRec
	err := r.scan(ctx, contains(rev), nil, func(h *histRec) bool {
		if h.id == rev {
			if found == nil {
				found = h
			} else {
				twin = h
			}
		}
		return twin == nil && (found == nil || found.twin)
	})
	if err != nil {
		return Commit{}, err
	}
	if twin != nil {
		return Commit{}, &AmbiguousError{Name: rev, ByID: found.hash.String(), AsRevType: "tool_use id of", AsRev: twin.hash.String()}
	}
	if found != nil {
		byID := found.hash.String()
		if c, err := r.Commit(ctx, rev); err == nil && c.Hash != byID {
			return Commit{}, &AmbiguousError{Name: rev, ByID: byID, AsRevType: "revision", AsRev: c.Hash}
		}
		c, err := r.Commit(ctx, byID)
		if err == nil && paths { // the record found has them: no second look
			hc := found.commit()
			c.Paths, c.Blobs = hc.Paths, hc.Blobs
		}
		return c, err
	}
	return commit(ctx, rev)
}

// isAncestrySteps reports whether s is git's ancestry steps after a
// revision: none, or any of ~, ~N, ^, ^N one after another.
func isAncestrySteps(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '~' && s[i] != '^' && (s[i] < '0' || s[i] > '9' || i == 0) {
			return false
		}
	}
	return true
}

// commitWithPaths is Commit plus the files it changed, from the index.
func (r *Repo) commitWithPaths(ctx context.Context, rev string) (Commit, error) {
	c, err := r.Commit(ctx, rev)
	if err != nil {
		return c, err
	}
	err = r.scan(ctx, contains(c.Hash), nil, func(h *histRec) bool {
		if h.hash.String() == c.Hash {
			hc := h.commit()
			c.Paths, c.Blobs = hc.Paths, hc.Blobs
			return false
		}
		return true
	})
	return c, err
}

// At returns the commit that was HEAD at time t: the newest on the
// first-parent history made at or before t (a commit merged in from
// another agent was not HEAD here; the merge that brought it was). A time
// before the first commit names the first commit when it holds no memory
// file (gitmem init's): the memory was as empty before it. ErrUnknownRev
// if none.
func (r *Repo) At(ctx context.Context, t time.Time) (Commit, error) {
	if err := r.awaitStartCheck(ctx); err != nil {
		return Commit{}, err
	}
	next, err := r.branchHead(ctx)
	if err != nil {
		return Commit{}, err
	}
	var found, root *histRec
	err = r.scan(ctx, nil, nil, func(h *histRec) bool {
		if h.hash != next {
			return true // the index lists parents before children: the chain comes in order
		}
		if !h.when.After(t) {
			found = h
			return false
		}
		next = h.parent()
		if next.IsZero() {
			root = h
		}
		return !next.IsZero()
	})
	if err != nil {
		return Commit{}, err
	}
	if found == nil && root != nil {
		if files, err := r.Files(root.hash.String()); err == nil && len(files) == 0 {
			found = root
		}
	}
	if found == nil {
		return Commit{}, ErrUnknownRev
	}
	return r.commitWithPaths(ctx, found.hash.String())
}

// Files returns the memory files (relative to memories/) and their blob
// hashes at a commit, under the given paths ("" or none: all).
func (r *Repo) Files(rev string, paths ...string) (map[string]string, error) {
	if err := r.awaitStartCheck(context.Background()); err != nil {
		return nil, err
	}
	return r.hist().files(rev, paths...)
}

// files is Files.
func (hr historyReader) files(rev string, paths ...string) (map[string]string, error) {
	hr.o.lock()
	defer hr.o.unlock()
	h, err := hr.resolve(rev)
	if err != nil {
		return nil, err
	}
	return hr.filesAt(h, paths)
}

// filesAt lists files with their blob hashes, reading trees only (a
// damaged blob is named where its content is read). Called with objects.mu held.
func (hr historyReader) filesAt(commit plumbing.Hash, paths []string) (map[string]string, error) {
	out := map[string]string{}
	if commit.IsZero() {
		return out, nil
	}
	c, err := hr.o.st.Commit(commit)
	if err != nil {
		return nil, objectError("commit", commit, "", err)
	}
	mem, err := hr.memTree(c.TreeHash)
	if err != nil {
		return nil, objectError("tree", c.TreeHash, "", err)
	}
	var walk func(h plumbing.Hash, dir string) error
	walk = func(h plumbing.Hash, dir string) error {
		t, err := hr.o.st.Tree(h)
		if err != nil {
			return objectError("tree", h, path.Join(memDir, dir), err)
		}
		for _, e := range t.Entries {
			p := join2(dir, e.Name)
			switch {
			case e.Mode == filemode.Dir:
				if !onTheWay(p, paths) {
					continue // no file under it is one of paths
				}
				if err := walk(e.Hash, p); err != nil {
					return err
				}
			case e.Mode == filemode.Symlink || e.Mode == filemode.Submodule:
			case len(paths) == 0 || touches([]string{p}, paths):
				out[p] = e.Hash.String()
			}
		}
		return nil
	}
	if mem.IsZero() {
		return out, nil
	}
	return out, walk(mem, "")
}

// Blob returns an object's content by hash.
func (r *Repo) Blob(hash string) ([]byte, error) {
	if !plumbing.IsHash(hash) {
		return nil, ErrNotExist
	}
	data, err := r.objects.readBlob(plumbing.NewHash(hash))
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return nil, ErrNotExist
	}
	return data, wrap("read blob", err)
}

// BlameLine is one line of a file with the commit that last wrote it.
type BlameLine struct {
	Line   int
	Text   string
	Commit Commit
}

// Blame attributes every line of the memory file p (relative to
// memories/) at HEAD to the commit that last wrote it, across merges: a
// line another agent wrote is blamed on that agent's commit, not on the
// merge that brought it; only what a merge made itself (conflict markers,
// a second copy of a line) is the merge's. It works as git blame does, on
// the history index, and names the commit git blame names for every line:
// each version of the file hands the lines git's diff (xdiff.go) finds in
// a parent's version to that parent's version, parent by parent (all of
// them to the first that has the same version), and keeps the rest; a
// parent without the path gives the file it was renamed from, found as
// git finds renames (gitrename.go).
func (r *Repo) Blame(ctx context.Context, p string) ([]BlameLine, error) {
	if err := r.awaitStartCheck(ctx); err != nil {
		return nil, err
	}
	r.objects.holdPacks()
	defer r.objects.dropPacks()
	hist, err := r.indexed(ctx, nil)
	if err != nil {
		return nil, err
	}
	if len(hist) == 0 {
		return nil, ErrNotExist
	}
	v := newVersions(hist)
	start, blob := v.version(len(hist)-1, p)
	if start < 0 {
		return nil, ErrNotExist
	}
	data, err := r.objects.readFile(blob, p)
	if err != nil {
		return nil, err
	}
	result := splitKeep(string(data))
	b := &blamer{hr: r.hist(), v: v, owner: make([]int, len(result)), suspects: map[blameKey]*suspect{{start, p}: {blob: blob, lines: map[int][]int{}}}}
	for i := range result {
		b.suspects[blameKey{start, p}].lines[i] = []int{i}
	}
	for len(b.suspects) > 0 {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := b.pass(); err != nil {
			return nil, err
		}
	}
	out := make([]BlameLine, len(result))
	for i, l := range result {
		out[i] = BlameLine{Line: i + 1, Text: strings.TrimSuffix(l, "\n"), Commit: hist[b.owner[i]].commit()}
	}
	return out, nil
}

// versions tells, over the history index, which record set the version
// of a path that a record has.
type versions struct {
	hist []histRec
	pos  map[plumbing.Hash]int
	// near[path][i] is the newest record on i's first-parent chain (i
	// included) that changed path: the records hold changes against the
	// first parent, so that record set the version i has.
	near map[string][]int
}

func newVersions(hist []histRec) *versions {
	v := &versions{hist: hist, pos: make(map[plumbing.Hash]int, len(hist)), near: map[string][]int{}}
	for i := range hist {
		v.pos[hist[i].hash] = i
	}
	return v
}

// parents are the positions of record i's parents.
func (v *versions) parents(i int) []int {
	var out []int
	for _, ph := range v.hist[i].parents {
		if j, ok := v.pos[ph]; ok {
			out = append(out, j)
		}
	}
	return out
}

func (v *versions) nearOf(path string) []int {
	if n, ok := v.near[path]; ok {
		return n
	}
	n := make([]int, len(v.hist))
	for i := range v.hist {
		n[i] = -1
		if _, ok := slices.BinarySearch(v.hist[i].paths, path); ok {
			n[i] = i
		} else if j, ok := v.pos[v.hist[i].parent()]; ok {
			n[i] = n[j]
		}
	}
	v.near[path] = n
	return n
}

// version is the record that set the version of path at record i and
// its blob (-1: the file does not exist there).
func (v *versions) version(i int, path string) (int, plumbing.Hash) {
	j := v.nearOf(path)[i]
	if j < 0 {
		return -1, plumbing.ZeroHash
	}
	k, _ := slices.BinarySearch(v.hist[j].paths, path)
	if v.hist[j].blobs[k].IsZero() {
		return -1, plumbing.ZeroHash
	}
	return j, v.hist[j].blobs[k]
}

// blameKey is a version of a file: the record that set it, and its path
// there.
type blameKey struct {
	rec  int
	path string
}

// suspect is a version of the file with the lines of the result it may
// be blamed for.
type suspect struct {
	blob  plumbing.Hash
	lines map[int][]int // line of this version -> the lines of the result it is
}

// origin is a parent's version of a suspect's file.
type origin struct {
	rec  int // -1: the parent has no version of it
	path string
	blob plumbing.Hash
}

// blamer hands the lines of a file down its history (Blame).
type blamer struct {
	hr       historyReader
	v        *versions
	suspects map[blameKey]*suspect
	owner    []int // the record each line of the result is blamed on
}

// pass takes the newest suspect (every version reaches a record only
// after all the records above it have handed their lines down), hands
// its lines to its parents' versions, as git's pass_blame, and blames it
// for those it keeps.
func (b *blamer) pass() error {
	var k blameKey
	first := true
	for c := range b.suspects {
		if first || c.rec > k.rec || c.rec == k.rec && c.path < k.path {
			k, first = c, false
		}
	}
	s := b.suspects[k]
	delete(b.suspects, k)
	origins, same, err := b.origins(k, s)
	if err != nil || same {
		return err
	}
	if err := b.diffDown(k, s, origins); err != nil {
		return err
	}
	for _, outs := range s.lines {
		for _, out := range outs {
			b.owner[out] = k.rec
		}
	}
	return nil
}

// hand gives the lines m to the version j of path q (blob).
func (b *blamer) hand(j int, q string, blob plumbing.Hash, m map[int][]int) {
	t := b.suspects[blameKey{j, q}]
	if t == nil {
		t = &suspect{blob: blob, lines: map[int][]int{}}
		b.suspects[blameKey{j, q}] = t
	}
	for l, outs := range m {
		t.lines[l] = append(t.lines[l], outs...)
	}
}

// origins finds each parent's version of the file, at the same path,
// else where a rename took it from; the first that is the same version
// takes every line (same).
func (b *blamer) origins(k blameKey, s *suspect) (origins []origin, same bool, err error) {
	hist := b.v.hist
	parents := b.v.parents(k.rec)
	origins = make([]origin, len(parents))
	for pass := 0; pass < 2; pass++ {
		for i, pi := range parents {
			if pass == 1 && origins[i].rec >= 0 {
				continue
			}
			q := k.path
			if pass == 1 {
				from, ok, err := b.hr.renameSource(hist[k.rec].hash, hist[pi].hash, k.path, s.blob)
				if err != nil {
					return nil, false, err
				}
				if !ok {
					continue
				}
				q = from
			}
			j, blob := b.v.version(pi, q)
			origins[i] = origin{j, q, blob}
			if j >= 0 && blob == s.blob {
				b.hand(j, q, blob, s.lines)
				return origins, true, nil
			}
		}
	}
	return origins, false, nil
}

// diffDown hands each parent's version the lines git's diff keeps from
// it, parent by parent; s keeps the rest.
func (b *blamer) diffDown(k blameKey, s *suspect, origins []origin) error {
	var text []string
	for _, o := range origins {
		if len(s.lines) == 0 {
			break
		}
		if o.rec < 0 {
			continue
		}
		if text == nil {
			d, err := b.hr.o.readFile(s.blob, k.path)
			if err != nil {
				return err
			}
			text = splitKeep(string(d))
		}
		d, err := b.hr.o.readFile(o.blob, o.path)
		if err != nil {
			return err
		}
		handed := map[int][]int{}
		for newLine, oldLine := range gitMatch(splitKeep(string(d)), text) {
			if outs, ok := s.lines[newLine]; ok && oldLine >= 0 {
				handed[oldLine] = outs
				delete(s.lines, newLine)
			}
		}
		if len(handed) > 0 {
			b.hand(o.rec, o.path, o.blob, handed)
		}
	}
	return nil
}

// splitKeep splits text into lines that keep their "\n" (the last may
// have none); "" has no lines.
func splitKeep(s string) []string {
	out := make([]string, 0, strings.Count(s, "\n")+1)
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}
