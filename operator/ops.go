package operator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
)

// TimeLayout is how operator output prints a time.
const TimeLayout = "2006-01-02 15:04:05 -0700"

// RevError is a revision that names no commit. Usage says the text itself
// is malformed (a time that does not parse), as opposed to naming nothing.
type RevError struct {
	Msg   string
	Usage bool
}

func (e *RevError) Error() string { return e.Msg }

// Revision finds the commit a user names: a tool_use id, a commit hash (7
// characters are enough), a git revision (HEAD~2), or a time as @{2h ago},
// @{yesterday}, @{2026-11-20}. With orTime, a bare time (2h, yesterday,
// RFC 3339) also names the commit that was HEAD then, as restore --to
// takes it. now is the clock times are read against. A name that is a
// tool_use id and names another commit as a revision or a time is
// refused (a Usage RevError): a caller chooses its ids.
func Revision(ctx context.Context, r *gitmem.Repo, rev string, now time.Time, orTime bool) (gitmem.Commit, error) {
	return revision(ctx, r, rev, now, orTime, r.Resolve)
}

// RevisionCommit is Revision without the files the commit changed
// (gitmem.Repo.ResolveCommit), for a caller that needs only the commit.
func RevisionCommit(ctx context.Context, r *gitmem.Repo, rev string, now time.Time, orTime bool) (gitmem.Commit, error) {
	return revision(ctx, r, rev, now, orTime, r.ResolveCommit)
}

func revision(ctx context.Context, r *gitmem.Repo, rev string, now time.Time, orTime bool, resolve func(context.Context, string) (gitmem.Commit, error)) (gitmem.Commit, error) {
	if inner, ok := strings.CutPrefix(rev, "@{"); ok && strings.HasSuffix(inner, "}") {
		t, err := policy.ParseTime(strings.TrimSuffix(inner, "}"), now)
		if err != nil {
			return gitmem.Commit{}, &RevError{Msg: err.Error(), Usage: true}
		}
		return at(ctx, r, t)
	}
	c, err := resolve(ctx, rev)
	if err == nil && orTime {
		// An id that reads as a time names two commits when the time
		// names another.
		if t, terr := policy.ParseTime(rev, now); terr == nil {
			if tc, aerr := r.At(ctx, t); aerr == nil && tc.Hash != c.Hash {
				err = &gitmem.AmbiguousError{Name: rev, ByID: c.Hash, AsRevType: "time", AsRev: tc.Hash}
			}
		}
	}
	if ae := (*gitmem.AmbiguousError)(nil); errors.As(err, &ae) {
		return gitmem.Commit{}, &RevError{Msg: ae.Error(), Usage: true}
	}
	if errors.Is(err, gitmem.ErrUnknownRev) {
		if t, terr := policy.ParseTime(rev, now); orTime && terr == nil {
			return at(ctx, r, t)
		}
		return c, &RevError{Msg: policy.QuoteName(rev) + " is not a commit, tool_use id or revision of this memory"}
	}
	return c, err
}

func at(ctx context.Context, r *gitmem.Repo, t time.Time) (gitmem.Commit, error) {
	c, err := r.At(ctx, t)
	if errors.Is(err, gitmem.ErrUnknownRev) {
		return c, &RevError{Msg: "the memory has no commit as old as " + t.Format(TimeLayout)}
	}
	return c, err
}

// Changes is what a commit changed against its first parent, file by
// file, under paths (relative to memories/; none: all).
func Changes(r *gitmem.Repo, c gitmem.Commit, paths []string) ([]gitmem.FileChange, error) {
	parent := ""
	if len(c.Parents) > 0 {
		parent = c.Parents[0]
	}
	return r.Diff(parent, c.Hash, paths...)
}

// Patch is the unified diff of a commit against its first parent, under
// paths (relative to memories/; none: all).
func Patch(r *gitmem.Repo, c gitmem.Commit, paths []string) (string, error) {
	changes, err := Changes(r, c, paths)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, fc := range changes {
		b.WriteString(fc.Unified())
	}
	return b.String(), nil
}

// ChangesSHA256 is the digest of what a change does: each file's path
// and the content_sha256 of its content before and after it ("-" where
// the file does not exist), in path order. An operator who previewed a
// change confirms it with ExpectChanges of this digest: the API's
// content_sha256 precondition, on every file the change touches.
func ChangesSHA256(changes []gitmem.FileChange) string {
	side := func(data []byte, exists bool) string {
		if !exists {
			return "-"
		}
		return SHA256(data)
	}
	sorted := slices.Clone(changes)
	slices.SortFunc(sorted, func(a, b gitmem.FileChange) int { return strings.Compare(a.Path, b.Path) })
	h := sha256.New()
	for _, fc := range sorted {
		fmt.Fprintf(h, "%q %s %s\n", fc.Path, side(fc.Old, fc.OldFile), side(fc.New, fc.NewFile))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ErrPreviewChanged refuses a change that is no longer the one previewed:
// the memory changed since (another operator, an agent); nothing was
// changed.
var ErrPreviewChanged = errors.New("the memory changed since the preview, so this would no longer change what was shown; nothing was changed: look at the new preview")

// ExpectChanges is the precondition of a previewed change (a revert, a
// restore, an expire): checked under the writer lock, it refuses with
// ErrPreviewChanged changes whose ChangesSHA256 is not sum.
func ExpectChanges(sum string) gitmem.Check {
	return func(_ string, changes []gitmem.FileChange) error {
		if ChangesSHA256(changes) != sum {
			return ErrPreviewChanged
		}
		return nil
	}
}

// ExpirePreview is what an expire at cutoff would do now: the stale files
// (gitmem's StaleFiles) and their deletion as changes, to show and to
// confirm with ExpectChanges.
func ExpirePreview(ctx context.Context, r *gitmem.Repo, cutoff time.Time, keep []string) ([]gitmem.Stale, []gitmem.FileChange, error) {
	snap, err := r.Snapshot(ctx)
	if err != nil {
		return nil, nil, err
	}
	stale, err := r.StaleFiles(ctx, cutoff, keep, nil)
	if err != nil {
		return nil, nil, err
	}
	var changes []gitmem.FileChange
	for _, s := range stale {
		data, err := snap.ReadFile(s.Path)
		if err != nil {
			return nil, nil, err
		}
		changes = append(changes, gitmem.FileChange{Path: s.Path, Old: data, OldFile: true})
	}
	return stale, changes, nil
}

// Page is a page of a listing; Next is the cursor of the next page ("" at
// the end).
type Page[T any] struct {
	Items []T
	Next  string
}

// errStop ends a walk of the history early.
var errStop = errors.New("stop")

// ErrBadCursor is a page cursor that names nothing in the listing (the
// history was rewritten by a redaction since, say).
var ErrBadCursor = errors.New("the page cursor does not name an item of this listing")

// Versions lists the commits that match opt, newest first, after the
// commit named by the cursor `after` (a hash; "" from the newest), at most
// limit of them. Next is the hash of the last one when more follow.
func Versions(ctx context.Context, r *gitmem.Repo, opt gitmem.LogOptions, after string, limit int) (Page[gitmem.Commit], error) {
	var p Page[gitmem.Commit]
	skipping := after != ""
	opt.Limit = 0
	err := r.Log(ctx, opt, nil, func(c gitmem.Commit) error {
		if skipping {
			skipping = c.Hash != after
			return nil
		}
		if len(p.Items) == limit {
			p.Next = p.Items[len(p.Items)-1].Hash
			return errStop
		}
		p.Items = append(p.Items, c)
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	if err == nil && skipping {
		err = ErrBadCursor
	}
	return p, err
}

// Memory is a memory file with what last changed it.
type Memory struct {
	Path    string // relative to memories/
	Size    int64
	SHA256  string // hex, of the content
	Content []byte // only from GetMemory
	Last    gitmem.Commit
}

// SHA256 is the hex SHA-256 of content, as memories report it.
func SHA256(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// ListMemories lists the memory files at or under prefix (a memory path
// relative to memories/; "" for all), in path order, after the path
// `after`, at most limit: each with its size, SHA-256 and the last commit
// that changed it.
func ListMemories(ctx context.Context, r *gitmem.Repo, prefix, after string, limit int) (Page[Memory], error) {
	snap, err := r.Snapshot(ctx)
	if err != nil {
		return Page[Memory]{}, err
	}
	var paths []string
	var walk func(dir string) error
	walk = func(dir string) error {
		kids, err := snap.List(dir)
		if err != nil {
			return err
		}
		for _, k := range kids {
			p := join(dir, k.Name)
			if k.Dir {
				if err := walk(p); err != nil {
					return err
				}
			} else {
				paths = append(paths, p)
			}
		}
		return nil
	}
	switch info, err := snap.Stat(prefix); {
	case errors.Is(err, gitmem.ErrNotExist):
		return Page[Memory]{}, nil
	case err != nil:
		return Page[Memory]{}, err
	case info.Dir:
		err = walk(prefix)
	default:
		paths = []string{prefix}
	}
	if err != nil {
		return Page[Memory]{}, err
	}
	slices.Sort(paths)
	start, _ := slices.BinarySearch(paths, after)
	if after != "" && start < len(paths) && paths[start] == after {
		start++
	}
	var p Page[Memory]
	end := min(len(paths), start+limit)
	if end < len(paths) {
		p.Next = paths[end-1]
	}
	for _, path := range paths[start:end] {
		data, err := snap.ReadFile(path)
		if err != nil {
			return Page[Memory]{}, err
		}
		p.Items = append(p.Items, Memory{Path: path, Size: int64(len(data)), SHA256: SHA256(data)})
	}
	return p, withLastChanges(ctx, r, p.Items)
}

// Entry is a file or folder directly in a folder of the memory, with the
// commit that last changed it (for a folder, anything beneath it).
type Entry struct {
	gitmem.Info
	Path string // relative to memories/
	Last gitmem.Commit
}

// ListFolder lists the files and folders directly in the folder dir
// (relative to memories/; "" for /memories), by name, each with its size
// (a folder's: of the files beneath, and their count) and its last
// change. A file is gitmem.ErrNotDir.
func ListFolder(ctx context.Context, r *gitmem.Repo, dir string) ([]Entry, error) {
	snap, err := r.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	kids, err := snap.List(dir)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(kids))
	paths := make([]string, len(kids))
	for i, k := range kids {
		out[i] = Entry{Info: k, Path: join(dir, k.Name)}
		paths[i] = out[i].Path
	}
	last, err := lastChanges(ctx, r, paths)
	for i := range out {
		out[i].Last = last[out[i].Path]
	}
	return out, err
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// withLastChanges sets each memory's last change.
func withLastChanges(ctx context.Context, r *gitmem.Repo, ms []Memory) error {
	paths := make([]string, len(ms))
	for i, m := range ms {
		paths[i] = m.Path
	}
	last, err := lastChanges(ctx, r, paths)
	for i := range ms {
		ms[i].Last = last[ms[i].Path]
	}
	return err
}

// lastChanges finds the commit that last changed each of paths (a file,
// or a folder: a file beneath it): one pass over the history, newest
// first, until every one is found.
func lastChanges(ctx context.Context, r *gitmem.Repo, paths []string) (map[string]gitmem.Commit, error) {
	found := map[string]gitmem.Commit{}
	if len(paths) == 0 {
		return found, nil
	}
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	err := r.Log(ctx, gitmem.LogOptions{Paths: paths}, nil, func(c gitmem.Commit) error {
		for _, p := range c.Paths {
			for q := p; ; { // the file, then each folder above it
				if want[q] {
					found[q] = c
					delete(want, q)
				}
				i := strings.LastIndexByte(q, '/')
				if i < 0 {
					break
				}
				q = q[:i]
			}
		}
		if len(want) == 0 {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return found, err
}

// GetMemory reads one memory file with its last change. A folder is
// gitmem.ErrIsDir.
func GetMemory(ctx context.Context, r *gitmem.Repo, path string) (Memory, error) {
	snap, err := r.Snapshot(ctx)
	if err != nil {
		return Memory{}, err
	}
	data, err := snap.ReadFile(path)
	if err != nil {
		return Memory{}, err
	}
	ms := []Memory{{Path: path, Size: int64(len(data)), SHA256: SHA256(data), Content: data}}
	err = withLastChanges(ctx, r, ms)
	return ms[0], err
}

// PreconditionError is a write refused because the memory's content is
// not what the caller expected; nothing was changed. Current is the
// content's SHA-256 ("" when the memory does not exist). NotUTF8: the
// hash matched, but the content is not valid UTF-8, so what the caller
// read (JSON: U+FFFD in place of the bytes that are not) is not what the
// file holds, and writing it back would rewrite bytes nobody saw.
type PreconditionError struct {
	Current string
	NotUTF8 bool
}

func (e *PreconditionError) Error() string {
	if e.NotUTF8 {
		return "the memory is not valid UTF-8: read as JSON, it has U+FFFD in place of the bytes that are not, so no content read through the API is its content; nothing was changed (write it without a precondition to replace it)"
	}
	if e.Current == "" {
		return "the memory does not exist, so it cannot have the expected content_sha256; nothing was changed"
	}
	return "the memory's content_sha256 is " + e.Current + ", not the expected one; nothing was changed"
}

// Operator commands of the API, as Memory-Command values.
const (
	CommandPut    = "put"
	CommandDelete = "delete"
)

// PutMemory writes a memory file as an operator commit ("memory: put
// PATH", Memory-Command: put), creating or replacing it. When expect is
// set, the current content must have that SHA-256 (checked under the
// writer lock, so no change can come between), else *PreconditionError.
// It reports whether the file was created.
func PutMemory(r *gitmem.Repo, path string, content []byte, expect *string, limits policy.Limits, author gitmem.Signature, check func(tip string) error) (gitmem.Commit, bool, error) {
	display := policy.Display(path)
	created := false
	c, err := r.Update(context.Background(), operatorMeta(r, CommandPut, display, author), func(tx *gitmem.Tx) error {
		if check != nil {
			if err := check(tx.Head()); err != nil {
				return err
			}
		}
		old, err := tx.ReadFile(path)
		switch {
		case errors.Is(err, gitmem.ErrNotExist):
			created = true
		case err != nil:
			return err
		}
		if err := precondition(expect, old, created); err != nil {
			return err
		}
		if expect != nil && !utf8.Valid(old) {
			return &PreconditionError{Current: SHA256(old), NotUTF8: true}
		}
		var oldSize int64 = -1
		if !created {
			oldSize = int64(len(old))
		}
		u := tx.Usage()
		if err := limits.Check(display, policy.Usage{Files: u.Files, Bytes: u.Bytes}, oldSize, int64(len(content))); err != nil {
			return err
		}
		return tx.WriteFile(path, content)
	})
	return c, created, err
}

// DeleteMemory deletes a memory file as an operator commit ("memory:
// delete PATH", Memory-Command: delete), with the same precondition as
// PutMemory. A folder is gitmem.ErrIsDir.
func DeleteMemory(r *gitmem.Repo, path string, expect *string, author gitmem.Signature) (gitmem.Commit, error) {
	return r.Update(context.Background(), operatorMeta(r, CommandDelete, policy.Display(path), author), func(tx *gitmem.Tx) error {
		old, err := tx.ReadFile(path)
		if err != nil {
			return err
		}
		if err := precondition(expect, old, false); err != nil {
			return err
		}
		return tx.Remove(path)
	})
}

func precondition(expect *string, old []byte, absent bool) error {
	switch {
	case expect == nil:
		return nil
	case absent:
		return &PreconditionError{}
	case !strings.EqualFold(SHA256(old), *expect):
		return &PreconditionError{Current: SHA256(old)}
	}
	return nil
}

func operatorMeta(r *gitmem.Repo, command, display string, author gitmem.Signature) gitmem.Meta {
	if author == (gitmem.Signature{}) {
		author = r.Operator()
	}
	return gitmem.Meta{Subject: "memory: " + command + " " + display, Author: author, Trailers: []gitmem.Trailer{
		{Key: gitmem.TrailerCommand, Value: command},
		{Key: gitmem.TrailerPath, Value: display},
	}}
}

// RedactionError is a redaction that cannot be made as given. Field names
// what is wrong ("path", "blob", "match"; "" for the choice itself), so
// each transport can word it with its own spelling (--blob, "blob").
type RedactionError struct{ Field, Msg string }

func (e *RedactionError) Error() string { return e.Msg }

// ParseRedaction checks what a redaction removes: exactly one of a memory
// path (relative to memories/; the root is refused), a full blob hash, or
// a pattern that cannot match empty text.
func ParseRedaction(path *string, blob, match string) (gitmem.Redaction, error) {
	var red gitmem.Redaction
	given := 0
	if path != nil {
		if *path == "" {
			return red, &RedactionError{"path", "redact cannot remove the whole /memories folder; name a file or folder in it"}
		}
		red.Path, given = *path, given+1
	}
	if blob != "" {
		if len(blob) != 40 {
			return red, &RedactionError{"blob", "takes a full 40-character blob hash (git ls-tree -r HEAD shows them)"}
		}
		red.Blob, given = blob, given+1
	}
	if match != "" {
		re, err := regexp.Compile(match)
		if err != nil {
			return red, &RedactionError{"match", "is not a regular expression (" + err.Error() + ")"}
		}
		if policy.MatchesEmpty(re) {
			return red, &RedactionError{"match", fmt.Sprintf("%q matches empty text; give a pattern for the secret itself", match)}
		}
		red.Match, given = re, given+1
	}
	if given != 1 {
		return red, &RedactionError{"", "takes exactly one of a path, a blob or a match"}
	}
	return red, nil
}

// Leak is a secret found in a version of a memory file.
type Leak struct {
	Rule   string
	Path   string // relative to memories/
	Line   int
	Blob   string        // the file version's blob: gitmem redact --blob removes it
	Commit gitmem.Commit // the oldest commit that wrote this version there
}

// ScanHistory finds the secrets (by the rules) in every version of every
// memory file in the history, each version read once, newest first. It
// feeds redact: a leak names the blob that holds it.
func ScanHistory(ctx context.Context, r *gitmem.Repo, rules *policy.SecretRules, progress gitmem.Progress) ([]Leak, error) {
	type version struct{ path, blob string }
	first := map[version]gitmem.Commit{} // the oldest commit seen writing it
	var order []version
	err := r.Log(ctx, gitmem.LogOptions{}, progress, func(c gitmem.Commit) error {
		if len(c.Paths) == 0 {
			return nil
		}
		files, err := r.Files(c.Hash, c.Paths...)
		if err != nil {
			return err
		}
		for _, p := range c.Paths {
			blob, ok := files[p]
			if !ok {
				continue // deleted here
			}
			v := version{p, blob}
			if _, seen := first[v]; !seen {
				order = append(order, v)
			}
			first[v] = c
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var leaks []Leak
	for _, v := range order {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, err := r.Blob(v.blob)
		if err != nil {
			return nil, err
		}
		for _, f := range rules.Find(v.path, string(data)) {
			leaks = append(leaks, Leak{Rule: f.Rule, Path: v.path, Line: f.Line, Blob: v.blob, Commit: first[v]})
		}
	}
	return leaks, nil
}
