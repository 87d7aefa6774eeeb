package gitmem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/gitmem-dev/gitmem/policy"
)

// FileConflict is a file a revert cannot undo without losing later edits.
type FileConflict struct {
	Path      string // relative to memories/
	Reason    string
	Conflicts []Conflict // overlapping lines, when both versions exist
}

// ConflictError lists what stopped a revert. Nothing was changed.
type ConflictError struct{ Files []FileConflict }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("gitmem: the revert conflicts with later edits in %d file(s)", e.NumFiles())
}

// NumFiles is how many files the conflicts are in: a file two of the
// reverted calls changed may be named twice in Files, once for each.
func (e *ConflictError) NumFiles() int {
	seen := map[string]bool{}
	for _, f := range e.Files {
		seen[f.Path] = true
	}
	return len(seen)
}

// HandMadeError refuses a restore that would write a file where the
// worktree holds a file made by hand that no commit holds (one an adopt
// left: over the largest file size, or for want of room): the worktree's
// follow would write over it. Nothing was changed.
type HandMadeError struct {
	Path string // relative to memories/: the file the restore would write
}

func (e *HandMadeError) Error() string {
	return fmt.Sprintf("gitmem: a file made by hand that no commit holds is at %s (or in its way), left on disk over the largest file size or for want of room; "+
		"restoring would write over it: move or remove it first; nothing was changed", policy.Display(e.Path))
}

// handMadeAt is the reason no change may write the file p (relative to
// memories/, which tx does not hold): a file made by hand that no commit
// holds is there or in its way ("": none).
func (tx *Tx) handMadeAt(p string) string {
	made, err := tx.HandMade(p)
	if errors.Is(err, ErrNotDir) || made {
		return "a file made by hand that no commit holds is there (or in its way): move or remove it first"
	}
	return ""
}

// AddTrailer appends a trailer to the commit (a key may repeat).
func (tx *Tx) AddTrailer(key, value string) {
	tx.extra = append(tx.extra, Trailer{Key: key, Value: value})
}

// Paths lists the memory paths the transaction has changed so far.
func (tx *Tx) Paths() []string {
	var out []string
	for _, o := range tx.ops {
		for _, p := range []string{o.from, o.to} {
			if p != "" {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// files returns the files under prefix ("" all) with their blob hashes.
func (v *View) files(prefix string) map[string]string {
	out := map[string]string{}
	walkFiles(lookup(v.root, full(prefix)), prefix, func(p string, n *node) { out[p] = n.hash.String() })
	return out
}

// listed is files(prefix) for a change made to every file there (a
// restore): the folder is looked at (see View.get), so that a file made
// there by hand is committed first, and is one the change sees.
func (tx *Tx) listed(prefix string) map[string]string {
	*tx.reads = append(*tx.reads, prefix)
	return tx.files(prefix)
}

// content returns a file's content in the transaction, or nil, false.
func (tx *Tx) content(p string) ([]byte, bool, error) {
	data, err := tx.ReadFile(p)
	if errors.Is(err, ErrNotExist) || errors.Is(err, ErrIsDir) {
		return nil, false, nil
	}
	return data, err == nil, err
}

// set makes p hold data (exists) or removes it.
func (tx *Tx) set(p string, data []byte, exists bool) error {
	if !exists {
		if _, err := tx.Stat(p); err != nil {
			return nil
		}
		return tx.Remove(p)
	}
	return tx.WriteFile(p, data)
}

// RevertOptions tune a revert.
type RevertOptions struct {
	// Theirs forces the undo: where later edits overlap, the version
	// before the reverted change wins.
	Theirs bool
	Author Signature
	// DryRun computes the changes without committing them.
	DryRun bool
	// Check, when set, is an operator's precondition (see Check).
	Check Check
}

// Check sees the changes an operator command (revert, restore, expire)
// is about to commit, and tip, the commit they build on (Tx.Head), under
// the writer lock, so that nothing can come between: an error it returns
// refuses them, nothing is committed and the command returns that error.
// (The console confirms only the changes it previewed; a store server
// refuses a change to a store archived at tip.) A dry run does not call
// it.
type Check func(tip string, changes []FileChange) error

// errDryRun ends a transaction that was run only to see its changes.
var errDryRun = errors.New("dry run")

// opStore is what the operator operations (revert, restore, expire, the
// stale files: this file) need of a memory: its history, its files at
// any commit, and a change made as one commit. They are functions over
// it, not methods of Repo; a Repo is one, and its methods Revert,
// Restore, Expire and StaleFiles are one-line forwarders, the public API.
type opStore interface {
	Update(ctx context.Context, meta Meta, fn func(tx *Tx) error) (Commit, error)
	// preview runs fn on a transaction over HEAD and throws it away.
	preview(ctx context.Context, fn func(tx *Tx) error) error
	Resolve(ctx context.Context, rev string) (Commit, error)
	Files(rev string, paths ...string) (map[string]string, error)
	ReadFileAt(ctx context.Context, rev, p string) ([]byte, error)
	// readFile reads the blob h, the file p.
	readFile(h plumbing.Hash, p string) ([]byte, error)
	// scan reads the history index newest first (see Repo.scan).
	scan(ctx context.Context, want []byte, progress Progress, fn func(*histRec) bool) error
	// indexed is the history index up to HEAD.
	indexed(ctx context.Context, progress Progress) ([]histRec, error)
	// history is the history index up to head (see Repo.history).
	history(head plumbing.Hash, save saveMode, progress Progress) ([]histRec, error)
	// Operator is who an operator's command names when it names no one
	// (see authorOr).
	Operator() Signature
}

// operate runs an operator's change fn as one commit and returns it with
// the files it changed. A change that changes nothing makes no commit and
// returns ErrNoChange; dry computes the changes and commits nothing (the
// zero Commit).
func operate(ctx context.Context, s opStore, meta Meta, dry bool, check Check, fn func(tx *Tx) error) (Commit, []FileChange, error) {
	var changes []FileChange
	run := func(tx *Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		var err error
		if changes, err = tx.changes(); err != nil {
			return err
		}
		switch {
		case len(changes) == 0:
			return ErrNoChange
		case dry:
			return errDryRun
		case check != nil:
			return check(tx.Head(), changes)
		}
		return nil
	}
	if dry {
		err := s.preview(ctx, run)
		if errors.Is(err, errDryRun) {
			err = nil
		}
		return Commit{}, changes, err
	}
	c, err := s.Update(ctx, meta, run)
	if err != nil {
		return Commit{}, nil, err
	}
	return c, changes, nil
}

// preview runs fn on a transaction over HEAD and throws it away: nothing
// is locked or written, so it works on a read-only Repo.
func (r *Repo) preview(ctx context.Context, fn func(tx *Tx) error) error {
	if _, err := r.Snapshot(ctx); err != nil {
		return err
	}
	return fn(r.newTx())
}

// changes lists the memory files the transaction changed, with their
// content before and after.
func (tx *Tx) changes() ([]FileChange, error) {
	var out []FileChange
	var err error
	diffNodes(lookup(tx.base, memDir), lookup(tx.root, memDir), "", func(p string, _ plumbing.Hash) {
		fc := FileChange{Path: p}
		if n := lookup(tx.base, full(p)); n.isFile() {
			fc.OldFile = true
			if data, rerr := tx.r.objects.readBlob(n.hash); rerr != nil {
				err = rerr
			} else {
				fc.Old = data
			}
		}
		if n := lookup(tx.root, full(p)); n.isFile() {
			fc.NewFile = true
			if data, rerr := tx.blob(n.hash); rerr != nil {
				err = rerr
			} else {
				fc.New = data
			}
		}
		if fc.OldFile || fc.NewFile {
			out = append(out, fc)
		}
	})
	slices.SortFunc(out, func(a, b FileChange) int { return strings.Compare(a.Path, b.Path) })
	return out, wrap("read a changed file", err)
}

// Revert undoes the changes the given commits (or tool_use ids) made, as
// one new commit with a Reverts trailer for each whose undo changed
// something (a commit named twice counts once; one already undone, or
// whose undo is empty, not at all). Later edits to the same
// files are kept where they do not overlap (a three-way line merge: base
// = the file after the change, ours = HEAD, theirs = the file before).
// When they overlap, a *ConflictError describes them and nothing changes.
// A reverted delete brings the file back; a reverted rename moves it back.
// It returns the commit and the files it changed; a revert that would
// change nothing (already undone) is ErrNoChange.
func (r *Repo) Revert(ctx context.Context, revs []string, opt RevertOptions) (Commit, []FileChange, error) {
	if err := r.awaitStartCheck(ctx); err != nil {
		return Commit{}, nil, err
	}
	return revert(ctx, r, revs, opt)
}

func revert(ctx context.Context, s opStore, revs []string, opt RevertOptions) (Commit, []FileChange, error) {
	type target struct {
		rev   string // the name it was given by
		c     Commit
		after []histRec // the records after it, oldest first
	}
	var targets []target
	for _, rev := range revs {
		c, err := s.Resolve(ctx, rev)
		if me := (*AmbiguousError)(nil); errors.As(err, &me) {
			return Commit{}, nil, err
		}
		if err != nil {
			return Commit{}, nil, fmt.Errorf("%w: %s is not a commit, tool_use id or revision of this memory", ErrUnknownRev, policy.QuoteName(rev))
		}
		if !slices.ContainsFunc(targets, func(t target) bool { return t.c.Hash == c.Hash }) { // a commit named twice is reverted once
			targets = append(targets, target{rev: rev, c: c})
		}
	}
	// The history is read from its newest record back to the oldest
	// target only (a fresh process reads the index file from its end),
	// not loaded whole.
	back := map[string]int{} // target hash -> how many records follow it
	for _, t := range targets {
		back[t.c.Hash] = -1
	}
	left := len(back)
	var later []histRec // newest first
	if err := s.scan(ctx, nil, nil, func(h *histRec) bool {
		if d, ok := back[h.hash.String()]; ok && d < 0 {
			back[h.hash.String()] = len(later)
			left--
		}
		later = append(later, *h)
		return left > 0
	}); err != nil {
		return Commit{}, nil, err
	}
	for i := range targets {
		d := back[targets[i].c.Hash]
		if d < 0 {
			return Commit{}, nil, fmt.Errorf("%w: %s is not on the current branch", ErrUnknownRev, targets[i].rev)
		}
		targets[i].after = slices.Clone(later[:d])
		slices.Reverse(targets[i].after)
	}
	slices.SortFunc(targets, func(a, b target) int { return len(a.after) - len(b.after) }) // newest first
	meta := Meta{Author: authorOr(opt.Author, s.Operator()), Trailers: []Trailer{{TrailerCommand, "revert"}}}
	return operate(ctx, s, meta, opt.DryRun, opt.Check, func(tx *Tx) error {
		var conflicts []FileConflict
		var undone []Commit // the targets whose undo changed something, newest first
		for _, t := range targets {
			was := tx.root
			fc, err := undo(ctx, s, tx, t.c, opt.Theirs, movedAfter(t.after))
			if err != nil {
				return err
			}
			conflicts = append(conflicts, fc...)
			if tx.changedFrom(was) {
				undone = append(undone, t.c)
			}
		}
		if len(conflicts) > 0 {
			return &ConflictError{Files: conflicts}
		}
		// The record names only the commits undone: one already undone,
		// or whose undo is empty (the init commit), is not reverted again.
		// None: no change, and operate says so.
		if len(undone) == 1 {
			tx.SetSubject("memory: revert " + undone[0].Hash[:7] + " (" + undone[0].Subject + ")")
		} else {
			tx.SetSubject(fmt.Sprintf("memory: revert %d changes", len(undone)))
		}
		for _, c := range undone {
			tx.AddTrailer("Reverts", c.Hash)
			if id := c.Trailer(TrailerToolUseID); id != "" {
				tx.AddTrailer("Reverts-Tool-Use-Id", id)
			}
		}
		for _, p := range tx.Paths() {
			tx.AddTrailer(TrailerPath, "/memories/"+p)
		}
		return nil
	})
}

// changedFrom tells whether the memory in the transaction differs from
// the one in root, a tree the transaction held before (trees are not
// edited in place: an edit makes a new root).
func (tx *Tx) changedFrom(root *node) bool {
	changed := false
	diffNodes(lookup(root, memDir), lookup(tx.root, memDir), "", func(string, plumbing.Hash) { changed = true })
	return changed
}

// movedAfter maps a path to where the renames in later (oldest first)
// follow it.
func movedAfter(later []histRec) func(string) string {
	return func(p string) string {
		for i := range later {
			h := &later[i]
			if h.command != "rename" {
				continue
			}
			p = movePath(p, strings.TrimPrefix(h.path, "/memories/"), strings.TrimPrefix(h.newPath, "/memories/"))
		}
		return p
	}
}

// undo applies the inverse of commit c to tx. moved says where a path of
// c's time lives now, after later renames.
func undo(ctx context.Context, s opStore, tx *Tx, c Commit, theirs bool, moved func(string) string) ([]FileConflict, error) {
	if c.Trailer(TrailerCommand) == "rename" {
		from := strings.TrimPrefix(c.Trailer(TrailerPath), "/memories/")
		to := strings.TrimPrefix(c.Trailer(TrailerNewPath), "/memories/")
		to = moved(to)
		_, errTo := tx.Stat(to)
		_, errFrom := tx.Stat(from)
		if errTo != nil && errFrom == nil {
			// Moved back already (a revert of this revert's twin): nothing
			// to undo when the file is back as the rename found it.
			was, _, err := at(ctx, s, c.Hash, strings.TrimPrefix(c.Trailer(TrailerNewPath), "/memories/"))
			if err != nil {
				return nil, err
			}
			if now, _, err := tx.content(from); err == nil && bytes.Equal(now, was) {
				return nil, nil
			}
		}
		taken := []FileConflict{{Path: to, Reason: fmt.Sprintf("cannot move it back to /memories/%s: it has since been moved, or that path is taken", from)}}
		if errTo != nil || errFrom == nil {
			return taken, nil
		}
		if err := tx.Rename(to, from); errors.Is(err, ErrExist) {
			// By a file made by hand (Tx.Rename): named as where a
			// revert of a delete would bring a file back onto one.
			if reason := tx.handMadeAt(from); reason != "" {
				return []FileConflict{{Path: from, Reason: reason}}, nil
			}
			return taken, nil
		} else if err != nil {
			return nil, err
		}
		return nil, nil
	}
	parent := ""
	if len(c.Parents) > 0 {
		parent = c.Parents[0]
	}
	var out []FileConflict
	for _, old := range c.Paths {
		p := moved(old)
		base, baseOK, err := at(ctx, s, c.Hash, old)
		if err != nil {
			return nil, err
		}
		before, beforeOK, err := at(ctx, s, parent, old)
		if err != nil {
			return nil, err
		}
		ours, oursOK, err := tx.content(p)
		if err != nil {
			return nil, err
		}
		if !oursOK && beforeOK {
			// Brought back where a file made by hand may sit, as a
			// rename moved back (Tx.Rename): written, the hand file
			// would be merged with it between conflict markers.
			if reason := tx.handMadeAt(p); reason != "" {
				out = append(out, FileConflict{Path: p, Reason: reason})
				continue
			}
		}
		switch {
		case oursOK == baseOK && bytes.Equal(ours, base): // untouched since: plain undo
			err = tx.set(p, before, beforeOK)
		case oursOK == beforeOK && bytes.Equal(ours, before): // undone already
			continue
		case baseOK && beforeOK && oursOK:
			merged, cs := merge(splitKeep(string(base)), splitKeep(string(ours)), splitKeep(string(before)), theirs)
			if len(cs) > 0 && !theirs {
				out = append(out, FileConflict{Path: p, Reason: "later edits overlap the reverted lines", Conflicts: cs})
				continue
			}
			err = tx.WriteFile(p, []byte(strings.Join(merged, "")))
		case theirs:
			err = tx.set(p, before, beforeOK)
		default:
			reason := "it was changed again after this commit"
			switch {
			case !oursOK:
				reason = "it was deleted after this commit"
			case !baseOK:
				reason = "it was created again after this commit deleted it"
			}
			out = append(out, FileConflict{Path: p, Reason: reason})
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// at returns a file's content at a commit ("" means before the first).
func at(ctx context.Context, s opStore, commit, p string) ([]byte, bool, error) {
	if commit == "" {
		return nil, false, nil
	}
	data, err := s.ReadFileAt(ctx, commit, p)
	if errors.Is(err, ErrNotExist) {
		return nil, false, nil
	}
	return data, err == nil, err
}

// RestoreOptions tune a restore.
type RestoreOptions struct {
	Paths  []string // memory paths relative to memories/; none: all memory
	Delete bool     // a file that did not exist then is deleted (else AbsentError)
	Author Signature
	DryRun bool  // compute the changes, commit nothing
	Check  Check // an operator's precondition (see Check)
}

// AbsentError says that paths did not exist at the commit — given to
// Restore, or files the restore would delete — so restoring would delete
// them, which needs RestoreOptions.Delete.
type AbsentError struct {
	Paths []string // relative to memories/
	Rev   string
}

func (e *AbsentError) Error() string {
	return fmt.Sprintf("gitmem: %s did not exist at %s", strings.Join(e.Paths, ", "), e.Rev)
}

// Restore makes the memory, or the given paths, what they were at commit
// c, as one new commit, and returns it with the files it changed. History
// is not rewritten. Nothing to change is ErrNoChange.
func (r *Repo) Restore(ctx context.Context, c Commit, opt RestoreOptions) (Commit, []FileChange, error) {
	if err := r.awaitStartCheck(ctx); err != nil {
		return Commit{}, nil, err
	}
	return restore(ctx, r, c, opt)
}

func restore(ctx context.Context, s opStore, c Commit, opt RestoreOptions) (Commit, []FileChange, error) {
	what := "all memory"
	if len(opt.Paths) > 0 {
		var shown []string
		for _, p := range opt.Paths {
			shown = append(shown, "/memories/"+p)
		}
		what = strings.Join(shown, ", ")
	}
	meta := Meta{Subject: "memory: restore " + what + " to " + c.Hash[:7], Author: authorOr(opt.Author, s.Operator()),
		Trailers: []Trailer{{TrailerCommand, "restore"}, {"Restored-From", c.Hash}}}
	return operate(ctx, s, meta, opt.DryRun, opt.Check, func(tx *Tx) error {
		then, err := s.Files(c.Hash, opt.Paths...)
		if err != nil {
			return err
		}
		now := map[string]string{}
		if len(opt.Paths) == 0 {
			now = tx.listed("")
		}
		for _, p := range opt.Paths {
			maps.Copy(now, tx.listed(p))
		}
		if !opt.Delete { // a restore deletes nothing unless asked to
			var absent []string
			for _, p := range opt.Paths {
				if !touches(slices.Collect(maps.Keys(then)), []string{p}) {
					absent = append(absent, p)
				}
			}
			for _, p := range slices.Sorted(maps.Keys(now)) {
				if _, keep := then[p]; !keep && !touches([]string{p}, absent) {
					absent = append(absent, p)
				}
			}
			if len(absent) > 0 {
				slices.Sort(absent)
				return &AbsentError{Paths: absent, Rev: c.Hash[:7]}
			}
		}
		for _, p := range slices.Sorted(maps.Keys(now)) {
			if _, keep := then[p]; !keep {
				if err := tx.Remove(p); err != nil {
					return err
				}
			}
		}
		for _, p := range slices.Sorted(maps.Keys(then)) {
			if now[p] == then[p] {
				continue
			}
			data, err := s.readFile(plumbing.NewHash(then[p]), p)
			if err != nil {
				return err
			}
			if n := lookup(tx.root, full(p)); n.isDir() { // a folder now where a file was then
				if err := tx.Remove(p); err != nil {
					return err
				}
			} else if n == nil && tx.handMadeAt(p) != "" {
				return &HandMadeError{Path: p}
			}
			if err := tx.WriteFile(p, data); err != nil {
				return err
			}
		}
		for _, p := range tx.Paths() {
			tx.AddTrailer(TrailerPath, "/memories/"+p)
		}
		return nil
	})
}

// Stale is a file expire would delete.
type Stale struct {
	Path        string // relative to memories/
	LastTouched time.Time
	Commit      string // the last commit that changed it
}

// StaleFiles lists the files at HEAD whose last change is older than
// cutoff, skipping paths that match a keep glob (matched against the path
// relative to memories/; ** crosses folders). One pass over the history
// index, newest first.
func (r *Repo) StaleFiles(ctx context.Context, cutoff time.Time, keep []string, progress Progress) ([]Stale, error) {
	if err := r.awaitStartCheck(ctx); err != nil {
		return nil, err
	}
	return staleFiles(ctx, r, cutoff, keep, progress)
}

func staleFiles(ctx context.Context, s opStore, cutoff time.Time, keep []string, progress Progress) ([]Stale, error) {
	hist, err := s.indexed(ctx, progress)
	if err != nil {
		return nil, err
	}
	return staleIn(hist, headFiles(s, hist), cutoff, keep)
}

func headFiles(s opStore, hist []histRec) map[string]string {
	if len(hist) == 0 {
		return map[string]string{}
	}
	files, _ := s.Files(hist[len(hist)-1].hash.String())
	return files
}

func staleIn(hist []histRec, files map[string]string, cutoff time.Time, keep []string) ([]Stale, error) {
	for _, g := range keep {
		if err := policy.CheckGlob(g); err != nil {
			return nil, fmt.Errorf("gitmem: a glob of paths to keep: %w", err)
		}
	}
	// The last change to a file is the newest commit, on either side of
	// any merge, that changed it. A merge commit lists what it brought
	// from the other side, whose own commits are in the history too: it
	// counts only for the files it resolved a conflict in. Newest goes by
	// the commits' order: of two changes, the one that descends from the
	// other is the later, whatever their times say (many commits share a
	// second, and a clock may go back); only two changes neither of which
	// descends from the other (two agents' edits, merged) go by time.
	last := map[string]int{} // path -> its last change's position in hist
	descends := ancestry(hist)
	for i := range hist {
		h := &hist[i]
		var resolved map[string]bool
		if len(h.parents) > 1 {
			resolved = h.conflictPaths()
		}
		for _, p := range h.paths {
			if _, ok := files[p]; !ok || (resolved != nil && !resolved[p]) {
				continue
			}
			// hist is in topological order: an earlier record never
			// descends from a later one.
			if j, ok := last[p]; !ok || !h.when.Before(hist[j].when) || descends(i, j) {
				last[p] = i
			}
		}
	}
	var out []Stale
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if slices.ContainsFunc(keep, func(g string) bool { ok, _ := doublestar.Match(g, p); return ok }) {
			continue
		}
		var h *histRec
		if j, ok := last[p]; ok {
			h = &hist[j]
		} else if len(hist) > 0 {
			h = &hist[0]
		}
		if h != nil && h.when.Before(cutoff) {
			out = append(out, Stale{Path: p, LastTouched: h.when, Commit: h.hash.String()})
		}
	}
	return out, nil
}

// ancestry returns a test of whether hist[i] descends from hist[j] (j <
// i; hist in topological order): a walk back from i over the parents
// that stops below j. Only changes whose times run against their order
// ask it.
func ancestry(hist []histRec) func(i, j int) bool {
	var pos map[plumbing.Hash]int
	return func(i, j int) bool {
		if pos == nil {
			pos = make(map[plumbing.Hash]int, len(hist))
			for k := range hist {
				pos[hist[k].hash] = k
			}
		}
		seen := map[int]bool{}
		stack := []int{i}
		for len(stack) > 0 {
			k := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if k == j {
				return true
			}
			if k < j || seen[k] {
				continue
			}
			seen[k] = true
			for _, p := range hist[k].parents {
				if q, ok := pos[p]; ok {
					stack = append(stack, q)
				}
			}
		}
		return false
	}
}

// ExpireOptions tune an expire.
type ExpireOptions struct {
	Keep     []string // globs of paths never expired (see StaleFiles)
	Author   Signature
	Progress Progress
	Check    Check // an operator's precondition (see Check)
}

// Expire deletes the stale files (see StaleFiles) as one commit that
// lists them, so it can be reverted. Nothing to expire: no commit.
func (r *Repo) Expire(ctx context.Context, cutoff time.Time, opt ExpireOptions) ([]Stale, Commit, error) {
	if err := r.awaitStartCheck(ctx); err != nil {
		return nil, Commit{}, err
	}
	return expire(ctx, r, cutoff, opt)
}

func expire(ctx context.Context, s opStore, cutoff time.Time, opt ExpireOptions) ([]Stale, Commit, error) {
	var stale []Stale
	meta := Meta{Author: authorOr(opt.Author, s.Operator()), Trailers: []Trailer{{TrailerCommand, "expire"}, {"Expired-Before", cutoff.UTC().Format(time.RFC3339)}}}
	c, err := s.Update(ctx, meta, func(tx *Tx) error {
		hist, err := s.history(tx.head, saveHeld, opt.Progress)
		if err != nil {
			return err
		}
		stale, err = staleIn(hist, tx.files(""), cutoff, opt.Keep)
		if err != nil {
			return err
		}
		if len(stale) == 0 {
			return errNothing
		}
		for _, f := range stale {
			if err := tx.Remove(f.Path); err != nil {
				return err
			}
			tx.AddTrailer(TrailerPath, "/memories/"+f.Path)
		}
		tx.SetSubject(fmt.Sprintf("memory: expire %d file(s) untouched since %s", len(stale), cutoff.UTC().Format(time.RFC3339)))
		if opt.Check == nil {
			return nil
		}
		changes, err := tx.changes()
		if err != nil {
			return err
		}
		return opt.Check(tx.Head(), changes)
	})
	if errors.Is(err, errNothing) {
		return nil, Commit{}, nil
	}
	return stale, c, err
}

var errNothing = errors.New("nothing to do")

// authorOr is the author of an operator command: who, or, when it names
// no one, the memory's operator (Options.Operator).
func authorOr(who, operator Signature) Signature {
	if who == (Signature{}) {
		return operator
	}
	return who
}

// movePath is where path p is after its file or a folder above it moved
// from `from` to `to` (p itself when the move does not concern it).
func movePath(p, from, to string) string {
	if p == from {
		return to
	}
	if rest, ok := strings.CutPrefix(p, from+"/"); ok {
		return to + "/" + rest
	}
	return p
}
