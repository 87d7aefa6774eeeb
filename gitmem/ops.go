package gitmem

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/sergi/go-diff/diffmatchpatch"
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
}

func (o LogOptions) match(h *histRec) bool {
	switch {
	case o.ToolUseID != "" && h.id != o.ToolUseID,
		o.Session != "" && h.session != o.Session,
		o.Agent != "" && h.agent != o.Agent,
		o.Command != "" && h.command != o.Command,
		!o.Since.IsZero() && h.when.Before(o.Since),
		!o.Until.IsZero() && h.when.After(o.Until):
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

// headHash is the branch's commit now.
func (r *Repo) headHash() (plumbing.Hash, error) {
	if r.owned.Load() { // git's files may lag: bring them up to date
		r.gitUpToDate()
		r.smu.RLock()
		defer r.smu.RUnlock()
		return r.head, nil
	}
	h, err := r.readHead()
	return h, wrap("read the branch", err)
}

// indexed returns the history index up to HEAD, catching it up first
// (and saving it under the writer lock when it had to).
func (r *Repo) indexed(progress Progress) ([]histRec, error) {
	head, err := r.headHash()
	if err != nil {
		return nil, err
	}
	r.hmu.Lock()
	fresh := r.histLoaded && r.histTip() == head
	r.hmu.Unlock()
	// Only the writer lock's holder saves the index file; others catch up
	// in memory.
	return r.history(head, !fresh && r.owned.Load(), progress)
}

// Log calls fn for each commit of the first-parent history that matches,
// newest first, until fn returns an error or Limit commits were given.
func (r *Repo) Log(ctx context.Context, opt LogOptions, progress Progress, fn func(Commit) error) error {
	var want func([]byte) bool
	switch {
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
	n := 0
	var ferr error
	err := r.scan(want, progress, func(h *histRec) bool {
		if n%4096 == 0 && ctx.Err() != nil {
			ferr = ctx.Err()
			return false
		}
		if !opt.match(h) {
			return true
		}
		if ferr = fn(h.commit()); ferr != nil {
			return false
		}
		n++
		return opt.Limit <= 0 || n < opt.Limit
	})
	if ferr != nil {
		return ferr
	}
	return err
}

// Resolve finds the commit a user names: a tool_use id (the commit it
// made), a full or abbreviated hash, or a git revision (HEAD~2, main).
func (r *Repo) Resolve(rev string) (Commit, error) {
	if rev == "" {
		return Commit{}, ErrUnknownRev
	}
	var found *histRec
	err := r.scan(contains(rev), nil, func(h *histRec) bool {
		if h.id == rev {
			found = h
		}
		return found == nil
	})
	if err != nil {
		return Commit{}, err
	}
	if found != nil {
		return r.commitWithPaths(found.hash.String())
	}
	return r.commitWithPaths(rev)
}

// commitWithPaths is Commit plus the files it changed, from the index.
func (r *Repo) commitWithPaths(rev string) (Commit, error) {
	c, err := r.Commit(rev)
	if err != nil {
		return c, err
	}
	err = r.scan(contains(c.Hash), nil, func(h *histRec) bool {
		if h.hash.String() == c.Hash {
			c.Paths = h.paths
			return false
		}
		return true
	})
	return c, err
}

// At returns the commit that was HEAD at time t: the newest on the
// first-parent history made at or before t. ErrUnknownRev if none.
func (r *Repo) At(t time.Time) (Commit, error) {
	var found *histRec
	err := r.scan(nil, nil, func(h *histRec) bool {
		if !h.when.After(t) {
			found = h
		}
		return found == nil
	})
	if err != nil {
		return Commit{}, err
	}
	if found == nil {
		return Commit{}, ErrUnknownRev
	}
	return r.commitWithPaths(found.hash.String())
}

// Files returns the memory files (relative to memories/) and their blob
// hashes at a commit, under the given paths ("" or none: all).
func (r *Repo) Files(rev string, paths ...string) (map[string]string, error) {
	r.omu.Lock()
	defer r.unlockObj()
	h, err := r.resolve(rev)
	if err != nil {
		return nil, err
	}
	return r.filesAt(h, paths)
}

// filesAt lists files with their blob hashes. Called with omu held.
func (r *Repo) filesAt(commit plumbing.Hash, paths []string) (map[string]string, error) {
	out := map[string]string{}
	if commit.IsZero() {
		return out, nil
	}
	c, err := r.obj.Commit(commit)
	if err != nil {
		return nil, wrap("read commit", err)
	}
	mem, err := r.memTree(c.TreeHash)
	if err != nil || mem.IsZero() {
		return out, wrap("read tree", err)
	}
	t, err := r.obj.Tree(mem)
	if err != nil {
		return nil, wrap("read tree", err)
	}
	err = t.Files().ForEach(func(f *object.File) error {
		if f.Mode != filemode.Symlink && f.Mode != filemode.Submodule && (len(paths) == 0 || touches([]string{f.Name}, paths)) {
			out[f.Name] = f.Hash.String()
		}
		return nil
	})
	return out, wrap("read tree", err)
}

// Blob returns an object's content by hash.
func (r *Repo) Blob(hash string) ([]byte, error) {
	if !plumbing.IsHash(hash) {
		return nil, ErrNotExist
	}
	data, err := r.readBlob(plumbing.NewHash(hash))
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
// memories/) at HEAD to the commit that last wrote it. It replays the
// file's versions from the history index, oldest first, with a line diff
// between each two, following the file back through renames.
func (r *Repo) Blame(ctx context.Context, p string) ([]BlameLine, error) {
	r.holdPacks()
	defer r.dropPacks()
	// The versions of the file, newest first, following renames back.
	type version struct {
		rec  *histRec
		blob plumbing.Hash // zero: the file was removed here
	}
	var versions []version
	cur := p
	curText := []byte(escaper.Replace(cur)) // what a line about cur contains
	want := func(line []byte) bool { return bytes.Contains(line, curText) }
	var ferr error
	err := r.scan(want, nil, func(h *histRec) bool {
		j, ok := slices.BinarySearch(h.paths, cur)
		if !ok {
			return true
		}
		h2 := *h
		versions = append(versions, version{&h2, h.blobs[j]})
		if h.command == "rename" { // older versions lived at the old path
			cur = movePath(cur, strings.TrimPrefix(h.newPath, "/memories/"), strings.TrimPrefix(h.path, "/memories/"))
			curText = []byte(escaper.Replace(cur))
		}
		if ferr = ctx.Err(); ferr != nil {
			return false
		}
		return true
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		return nil, err
	}
	if len(versions) == 0 {
		return nil, ErrNotExist
	}
	dmp := diffmatchpatch.New()
	var lines []string
	var owner []*histRec
	for i := len(versions) - 1; i >= 0; i-- {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		v := versions[i]
		if v.blob.IsZero() {
			lines, owner = nil, nil // deleted here; a later version starts over
			continue
		}
		data, err := r.readBlob(v.blob)
		if err != nil {
			return nil, wrap("read blob", err)
		}
		next := splitKeep(string(data))
		if owner == nil {
			owner = make([]*histRec, len(next))
			for j := range owner {
				owner[j] = v.rec
			}
			lines = next
			continue
		}
		a, b, table := dmp.DiffLinesToChars(strings.Join(lines, ""), string(data))
		diffs := dmp.DiffCharsToLines(dmp.DiffMain(a, b, false), table)
		var nowner []*histRec
		old := 0
		for _, d := range diffs {
			n := len(splitKeep(d.Text))
			switch d.Type {
			case diffmatchpatch.DiffEqual:
				nowner = append(nowner, owner[old:old+n]...)
				old += n
			case diffmatchpatch.DiffDelete:
				old += n
			case diffmatchpatch.DiffInsert:
				for range n {
					nowner = append(nowner, v.rec)
				}
			}
		}
		lines, owner = next, nowner
	}
	out := make([]BlameLine, len(lines))
	for i, l := range lines {
		out[i] = BlameLine{Line: i + 1, Text: strings.TrimSuffix(l, "\n"), Commit: owner[i].commit()}
	}
	return out, nil
}

// splitKeep splits text into lines that keep their "\n" (the last may
// have none); "" has no lines.
func splitKeep(s string) []string {
	var out []string
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
