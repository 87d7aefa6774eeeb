package gitmem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/policy"
)

// Redaction is what to remove from every commit: a memory path (the file
// or folder's tree entry goes), a blob (every entry holding it goes), or a
// pattern (every match in every file becomes [REDACTED]). Exactly one.
type Redaction struct {
	Path  string         // relative to memories/
	Blob  string         // a blob hash
	Match *regexp.Regexp // matched against file contents
	// Placeholder, with Blob, keeps every entry that held the blob, with
	// this content instead: each commit still changes the files it
	// changed. It redacts only the past: a blob a memory file holds at
	// HEAD is refused (*InUseError) and nothing is changed.
	Placeholder []byte
	// taken maps commits to what the rewrite takes for them, unread:
	// a remote's redaction applied here takes the remote's rewrite of
	// its own commits (themselves, or the commits that replaced them)
	// rather than rewriting them again (see applyRedactions).
	taken map[plumbing.Hash]plumbing.Hash
}

// InUseError is a redaction of content that memory files hold now (Paths,
// relative to memories/), refused: Redaction.Placeholder redacts only the
// past.
type InUseError struct{ Paths []string }

func (e *InUseError) Error() string {
	return "gitmem: the content to redact is what " + strings.Join(e.Paths, ", ") + " holds now"
}

// inUse lists the memory files of mem, HEAD's memories/, that hold blob
// h. Called with the turn (t) held, settled.
func inUse(t *writerTurn, mem *node, h string) error {
	var paths []string
	walkFiles(mem, "", func(p string, n *node) {
		if n.hash.String() == h {
			paths = append(paths, p)
		}
	})
	if len(paths) > 0 {
		return &InUseError{Paths: paths}
	}
	return nil
}

// Rewrite pairs a commit with the commit that replaces it.
type Rewrite struct {
	Old, New string
	Subject  string
}

// RedactReport says what a redaction changed (or, dry, would change).
type RedactReport struct {
	Rewritten []Rewrite // oldest first; commits whose hash changes
	Refs      []string  // refs that move
	Renamed   []string  // memory paths (relative to memories/) a pattern renamed, as they are named now
	Removed   []string  // blobs the redaction deleted (no longer in any commit), sorted
}

const redacted = "[REDACTED]"

// Redact rewrites the history so that the redacted content is in no
// commit: every commit from the first that held it is rewritten with the
// same message, trailers, author and dates (a pattern is also replaced in
// file and folder names, messages, trailers and identities); every ref
// moves to the rewritten commits; then the worktree, the index and the
// history index are rebuilt and every object no ref reaches is deleted (a
// full GC), reflogs included, so `git cat-file` cannot find the old
// content. With dry true nothing is written and the report says what would
// change. Cancelling ctx before the refs move leaves the repository as it
// was; a crash after that is finished at the next start (a record of the
// moves is written before the first ref moves).
//
// The remotes keep the old history: when the memory has one, the commits
// rewritten are noted so that no pull takes them back (see
// RedactedRemoteError); RedactShared redacts a remote too.
func (r *Repo) Redact(ctx context.Context, red Redaction, dry bool, progress Progress) (RedactReport, error) {
	if err := r.awaitStartCheck(ctx); err != nil {
		return RedactReport{}, err
	}
	remotes, _ := r.Remotes()
	return r.redact(ctx, red, dry, progress, len(remotes) > 0)
}

// redact is Redact; note says whether to note the commits it rewrites
// for pulls (not for RedactShared's, nor a remote's redaction applied
// here).
func (r *Repo) redact(ctx context.Context, red Redaction, dry bool, progress Progress, note bool) (RedactReport, error) {
	if r.opt.ReadOnly && !dry {
		return RedactReport{}, ErrReadOnly
	}
	if err := red.check(); err != nil {
		return RedactReport{}, err
	}
	mode := exclusive | withOwn // no collection meanwhile
	if dry {
		mode = 0
	}
	t, err := r.beginWrite(ctx, mode)
	if err != nil {
		return RedactReport{}, err
	}
	defer t.end()
	if !dry {
		r.committer.drain()
		if err := r.settle(); err != nil {
			return RedactReport{}, err
		}
	}
	if red.Placeholder != nil {
		if err := inUse(t, lookup(r.snapshotTree(), memDir), red.Blob); err != nil {
			return RedactReport{}, err
		}
	}
	// The rewrite reads through a view of its own: the tool calls' reads
	// go on meanwhile (a preview's too).
	st := r.objects.st.View()
	st.Hold()
	rep, moved, pack, err := rewrite(ctx, r.gitDir, st, red, dry, progress, r.opt.hooks)
	st.Unhold()
	st.Close()
	if !pack.IsZero() {
		r.withObjects(func(st *gd.Store) error {
			st.AddPack(pack) // for the reads once the refs move
			return nil
		})
		defer gd.Settle(r.gitDir, pack) // once the refs name what it holds (or it is left behind, for a full gc)
	}
	if err != nil || dry || len(moved) == 0 {
		return rep, err
	}
	unnote := func() {}
	if note {
		// Before the first ref moves: a crash after it must not leave
		// the rewrite without its note (a pull would take the old
		// history back).
		if unnote, err = noteUndoably(r.gitDir, r.opt.Now(), red, rep, moved); err != nil {
			return rep, wrap("note the redaction for the next pull", err)
		}
	}
	if err := writeRedactRecord(r.gitDir, movesRecord(moved)); err != nil {
		return rep, wrap("write the redaction record", err)
	}
	// Every ref's lock before the first moves: a lock git holds (git gc
	// holds a branch's while it expires its reflog) stops the redaction
	// here, having changed nothing, rather than half-way.
	tx, err := r.objects.st.LockRefs(r.life, moved, true)
	if err != nil {
		os.Remove(redactPath(r.gitDir))
		unnote()
		return rep, wrap("move the refs", err)
	}
	if err := r.opt.hooks.atRedactRecord(); err != nil {
		return rep, err // as if killed: the next start finishes it
	}
	if err := r.finishRedaction(t, tx); err != nil {
		return rep, err
	}
	if err := r.withObjects(func(st *gd.Store) error { return checkRedacted(t, st, r.gitDir, rep) }); err != nil {
		return rep, err
	}
	r.objects.lock()
	rep.Removed = slices.DeleteFunc(rep.Removed, func(h string) bool { return r.objects.st.HasObject(plumbing.NewHash(h)) })
	r.objects.unlock()
	return rep, nil
}

// check refuses a redaction that cannot be made: a pattern that matches
// empty text (ErrEmptyMatch), a placeholder for no blob.
func (red Redaction) check() error {
	if red.Match != nil && policy.MatchesEmpty(red.Match) {
		return ErrEmptyMatch
	}
	if red.Placeholder != nil && red.Blob == "" {
		return errors.New("gitmem: a placeholder replaces a blob; name the blob")
	}
	return nil
}

// noteUndoably notes the redaction made now for the next pull
// (noteRedaction), and returns what takes the note back: a redaction
// that stops before it can move a ref, for pulls would refuse the
// history as it still is.
func noteUndoably(gitDir string, now time.Time, red Redaction, rep RedactReport, moved map[plumbing.ReferenceName][2]plumbing.Hash) (unnote func(), err error) {
	size := int64(0)
	if fi, err := os.Stat(redactedPath(gitDir)); err == nil {
		size = fi.Size()
	}
	if err := noteRedaction(gitDir, now, red, rep, moved); err != nil {
		return func() {}, err
	}
	return func() { os.Truncate(redactedPath(gitDir), size) }, nil
}

// checkRedacted fails, naming them, when refs still reach a commit the
// redaction rewrote (the full gc kept it): a git command made them while
// the redaction ran (git branch beside it), after it listed the refs to
// move. st is the object store the readers share, its lock held; called
// with the turn (t) held.
func checkRedacted(t *writerTurn, st *gd.Store, gitDir string, rep RedactReport) error {
	old := map[plumbing.Hash]bool{}
	kept := false
	for _, rw := range rep.Rewritten {
		h := plumbing.NewHash(rw.Old)
		old[h] = true
		kept = kept || st.HasObject(h)
	}
	if !kept {
		return nil
	}
	refs, err := gd.ListTips(gitDir)
	if err != nil {
		return wrap("read the refs", err)
	}
	var names []string
	for name, tip := range refs {
		if !redactsRef(name.String()) {
			continue
		}
		commits, err := topoOrder(st, map[plumbing.ReferenceName]plumbing.Hash{name: tip})
		if err != nil {
			return err
		}
		if slices.ContainsFunc(commits, func(c *object.Commit) bool { return old[c.Hash] }) {
			names = append(names, name.String())
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return fmt.Errorf("gitmem: the redaction is incomplete: refs a git command made while it ran still reach the old history, which holds what was redacted (%s); run the redaction again",
		strings.Join(names, ", "))
}

// redactRecord is written (fsynced) before a redaction moves its first
// ref, and removed when the redaction is complete: a start that finds it
// finishes the redaction before anything else, so a crash can never let
// the old worktree be adopted back into history. Refs is what is left to
// move (name -> old, new); once the refs, the worktree and the indexes
// follow, only GC stays true until the old objects are gone.
type redactRecord struct {
	Refs map[string][2]string `json:"refs,omitempty"`
	GC   bool                 `json:"gc,omitempty"`
}

// movesRecord is the record of a redaction that moves the refs moved
// (name -> old, new).
func movesRecord(moved map[plumbing.ReferenceName][2]plumbing.Hash) redactRecord {
	rec := redactRecord{Refs: map[string][2]string{}}
	for name, m := range moved {
		rec.Refs[name.String()] = [2]string{m[0].String(), m[1].String()}
	}
	return rec
}

func redactPath(gitDir string) string { return filepath.Join(gitDir, "gitmem", "redact") }

func writeRedactRecord(gitDir string, rec redactRecord) error {
	data, _ := json.Marshal(rec)
	dir := filepath.Dir(redactPath(gitDir))
	if err := gd.WriteFileSync(dir, "redact-", redactPath(gitDir), data, 0o600); err != nil {
		return err
	}
	return gd.SyncDir(dir)
}

// finishRedaction completes a redaction whose record is on disk: refs
// still at their old commit move, reflogs and the history index go, the
// worktree and .git/index are rebuilt from the new HEAD (nothing in the
// worktree is a hand edit: it is the old history's copy), and a full GC
// deletes the old objects. tx holds the refs' locks when Redact took
// them; nil, they are taken here (after a crash: the locks a killed
// redaction took are its own, and removed). Called with the turn and the
// writer lock held.
func (r *Repo) finishRedaction(t *writerTurn, tx *gd.RefTx) error {
	refs, found, why := readRedactRecord(r.gitDir)
	if !found {
		if tx != nil {
			tx.Abort()
		}
		return nil
	}
	damaged := func(why string) error {
		if tx != nil {
			tx.Abort()
		}
		return &DamagedError{Problem: "the record of an interrupted redaction (.git/gitmem/redact) is damaged (" + why + ")",
			Repair: "delete .git/gitmem/redact, check the repository with gitmem fsck, then run the redaction again (gitmem redact ... --yes)"}
	}
	if why != "" {
		return damaged(why)
	}
	if len(refs) > 0 {
		// Every ref is checked before the first moves: each is one a
		// redaction moves, each hash as git writes it, each new commit in
		// the repository.
		moved := map[plumbing.ReferenceName][2]plumbing.Hash{}
		for _, name := range slices.Sorted(maps.Keys(refs)) {
			m := refs[name]
			if why := badRedactMove(name, m); why != "" {
				return damaged(why)
			}
			r.objects.lock()
			_, err := r.objects.st.Commit(plumbing.NewHash(m[1]))
			r.objects.unlock()
			if err != nil {
				return damaged(fmt.Sprintf("%s would move to %s, which is not a commit of this repository", name, m[1]))
			}
			n, old := plumbing.ReferenceName(name), plumbing.NewHash(m[0])
			if tx != nil {
				continue // Redact's: locked and checked
			}
			// A lock file holding the new hash is a killed redaction's.
			lock := filepath.Join(r.gitDir, filepath.FromSlash(name)) + ".lock"
			if b, err := gd.ReadFileMax(lock, gd.RefMax); err == nil && string(b) == m[1]+"\n" {
				gd.RemoveLock(lock)
			}
			if cur, err := r.readRef(n); err == nil && cur == old {
				moved[n] = [2]plumbing.Hash{old, plumbing.NewHash(m[1])}
			}
		}
		if tx == nil {
			var err error
			if tx, err = r.objects.st.LockRefs(r.life, moved, true); err != nil {
				return wrap("move the refs", err)
			}
		}
		if err := r.switchHistory(t, tx); err != nil {
			return err
		}
		if err := r.writeIndex(); err != nil {
			return wrap("write the index", err)
		}
		// The rebuilt worktree must be on disk before the record says so.
		if err := gd.SyncFS(r.objects.st.Env, r.dir, r.mirror.flushList()); err != nil {
			return wrap("sync the worktree", err)
		}
		if err := writeRedactRecord(r.gitDir, redactRecord{GC: true}); err != nil {
			return wrap("write the redaction record", err)
		}
	}
	if _, err := r.collector.collectAll(r.gcTarget(), true); err != nil {
		return wrap("delete the old objects (run gitmem gc --full once the cause is fixed)", err)
	}
	os.Remove(redactPath(r.gitDir))
	return nil
}

// readRedactRecord reads the redaction's record (redactPath) as its
// refs left to move, name -> [old, new], unchecked (see badRedactMove).
// found is false when there is none; why, when it is not "", says why
// the record is damaged.
func readRedactRecord(gitDir string) (refs map[string][]string, found bool, why string) {
	data, err := gd.ReadFile(redactPath(gitDir)) // a regular file only: a FIFO put there hung the start
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, ""
	}
	if err != nil {
		return nil, true, "it cannot be read"
	}
	// As redactRecord, with lists of any length (JSON into a [2]string
	// drops a third element silently).
	var w struct {
		Refs map[string][]string `json:"refs,omitempty"`
		GC   bool                `json:"gc,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil || dec.More() {
		if err == nil {
			err = errors.New("more than one object")
		}
		return nil, true, fmt.Sprintf("it is not JSON of the record's form: %v", err)
	}
	return w.Refs, true, ""
}

// badRedactMove says why the record's move of the ref name (m: old,
// new) is not one a redaction makes, or "": the ref is one a redaction
// moves, and each hash is written as git writes it.
func badRedactMove(name string, m []string) string {
	switch {
	case !gd.ValidRefName(name) || !strings.HasPrefix(name, "refs/") || !redactsRef(name):
		return fmt.Sprintf("%s is not a ref a redaction moves", quoteField(name))
	case len(m) != 2:
		return fmt.Sprintf("it is not JSON of the record's form: %s holds %d hashes, not a pair", name, len(m))
	case !isObjectHash(m[0]) || !isObjectHash(m[1]):
		return fmt.Sprintf("%s holds %s, not an object hash (40 lowercase hex digits)", name, quoteField(m[0]+" -> "+m[1]))
	}
	return ""
}

// switchHistory moves the refs tx holds to the rewritten history and
// brings the state and the worktree to it, holding the materialiser's
// lock throughout: a materialisation or a check for a branch moved by git
// (gitMoved, from Flush) that ran meanwhile took the redaction's move of
// the branch for git's and put the branch back on the old history, which
// kept the secret (in the objects, and in the worktree rebuilt from it).
// Called with the turn and the writer lock held.
func (r *Repo) switchHistory(t *writerTurn, tx *gd.RefTx) error {
	dt := r.disk.hold()
	defer dt.release()
	moveErr := tx.Commit()
	// Whatever moved, what gitmem knows follows the branch as it is now.
	r.state.forget()
	r.toolIDs.forget() // the old hashes are gone
	// Not from a start's .git/index: it is rebuilt below, and refresh
	// takes no index lock under disk.mu.
	if err := r.refresh(t, nil, true); err != nil {
		return err
	}
	// What the worktree mirrors is the new tree (it is synced below),
	// and no hand edit is pending: the worktree's old copy is the old
	// history's, never an edit. Else the next materialisation took the
	// redacted files for hand edits made on the old versions.
	dt.resetTo(r.state.snapshot())
	if moveErr != nil {
		return wrap("move the refs", moveErr)
	}
	if err := rewritePackedRefs(r.gitDir, tx); err != nil {
		return wrap("move the refs", err)
	}
	// The refs moved: from here the old history is unreachable.
	if err := r.log.scrub(dt, r.objects.st.Env, r.gitDir); err != nil {
		return wrap("scrub the write-ahead log", err)
	}
	r.mat.dropHeld(dt) // no fold may write the old objects again
	os.RemoveAll(filepath.Join(r.gitDir, "logs"))
	for _, f := range []string{"ORIG_HEAD", "FETCH_HEAD", "MERGE_HEAD", "COMMIT_EDITMSG", "gitmem/pending"} {
		os.Remove(filepath.Join(r.gitDir, filepath.FromSlash(f)))
	}
	r.mirror.reset()
	r.histIndex.remove()
	return wrap("bring the worktree to the redacted history", r.mirror.sync(memDir, lookup(r.snapshotTree(), memDir), r.objects.readBlob))
}

// redactsRef reports whether a redaction rewrites what a ref holds:
// refs/gitmem/ holds gitmem's records of redactions (share_redact.go),
// not memory; but commits waiting to be merged back
// (refs/gitmem/displaced/) are memory.
func redactsRef(name string) bool {
	return !strings.HasPrefix(name, "refs/gitmem/") || strings.HasPrefix(name, displacedRefs)
}

// rewriter rewrites trees and blobs, remembering each answer.
type rewriter struct {
	st      *gd.Store // the rewrite's view of the objects
	red     Redaction
	put     func(plumbing.ObjectType, []byte) (plumbing.Hash, error)
	finish  func() error  // completes what put wrote
	pack    plumbing.Hash // the pack it wrote
	trees   map[treeKey]plumbing.Hash
	blobs   map[plumbing.Hash]plumbing.Hash
	renamed map[string]bool                     // memory paths renamed, by their new name
	dropped map[plumbing.Hash]bool              // blobs replaced or removed (some may still be in other files)
	message func(*regexp.Regexp, string) string // redactMessage (a test's, as another version's)
	// placeholder is the blob of Redaction.Placeholder, once written.
	placeholder plumbing.Hash
}

// treeKey caches a rewritten tree: a pattern renames entries only inside
// memories/, so the same tree may be rewritten differently above it.
type treeKey struct {
	h   plumbing.Hash
	mem bool
}

// rewrite computes (and unless dry, writes) the rewritten history,
// reading it through st, a view of the objects of its own. It returns the
// refs to move: name -> (old, new), and the pack it wrote, in flight
// until the refs move (see gd.Keep), for the caller to add to the object
// store the readers share.
func rewrite(ctx context.Context, gitDir string, st *gd.Store, red Redaction, dry bool, progress Progress, hooks *testHooks) (_ RedactReport, _ map[plumbing.ReferenceName][2]plumbing.Hash, pack plumbing.Hash, err error) {
	var rep RedactReport
	rw := &rewriter{st: st, red: red, trees: map[treeKey]plumbing.Hash{}, blobs: map[plumbing.Hash]plumbing.Hash{}, renamed: map[string]bool{},
		dropped: map[plumbing.Hash]bool{}, message: redactMessage,
		put: func(t plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
			return plumbing.ComputeHash(t, data), nil
		}}
	if hooks != nil && hooks.redactMessage != nil {
		rw.message = hooks.redactMessage
	}
	if !dry {
		// One pack, in flight until the refs name what it holds (git
		// prune deletes loose objects no ref reaches yet; see gd.Keep).
		pb, perr := st.NewPack()
		if perr != nil {
			return rep, nil, plumbing.ZeroHash, wrap("write the rewritten objects", perr)
		}
		defer func() {
			if err != nil {
				pb.Abort()
			}
		}()
		rw.put = pb.Add
		rw.finish = func() error {
			h, err := pb.Finish()
			if err == nil {
				rw.pack = h
			}
			return err
		}
	}
	refs, err := gd.ListTips(gitDir)
	if err != nil {
		return rep, nil, plumbing.ZeroHash, wrap("read the refs", err)
	}
	maps.DeleteFunc(refs, func(name plumbing.ReferenceName, _ plumbing.Hash) bool { return !redactsRef(name.String()) })
	order, err := topoOrder(st, refs)
	if err != nil {
		return rep, nil, plumbing.ZeroHash, err
	}
	mapped := map[plumbing.Hash]plumbing.Hash{}
	for i, c := range order {
		if i%256 == 0 && ctx.Err() != nil {
			return rep, nil, plumbing.ZeroHash, ctx.Err()
		}
		if err := rw.commit(c, mapped, &rep); err != nil {
			return rep, nil, plumbing.ZeroHash, err
		}
		if progress != nil {
			progress(i+1, len(order))
		}
	}
	if !dry {
		if err := rw.finish(); err != nil {
			return rep, nil, plumbing.ZeroHash, wrap("write the rewritten objects", err)
		}
	}
	moved := map[plumbing.ReferenceName][2]plumbing.Hash{}
	for name, h := range refs {
		if n, ok := mapped[h]; ok && n != h {
			moved[name] = [2]plumbing.Hash{h, n}
			rep.Refs = append(rep.Refs, name.String())
		}
	}
	slices.Sort(rep.Refs)
	rep.Renamed = slices.Sorted(maps.Keys(rw.renamed))
	for h := range rw.dropped {
		rep.Removed = append(rep.Removed, h.String())
	}
	slices.Sort(rep.Removed)
	return rep, moved, rw.pack, nil
}

// topoOrder lists every commit the refs reach, parents before children,
// read from st. An annotated tag is refused: it would keep the old commit
// alive.
func topoOrder(st *gd.Store, refs map[plumbing.ReferenceName]plumbing.Hash) ([]*object.Commit, error) {
	var order []*object.Commit
	state := map[plumbing.Hash]int{} // 1 visiting, 2 done
	type frame struct {
		c    *object.Commit
		next int
	}
	for name, tip := range refs {
		obj, err := st.Encoded(plumbing.AnyObject, tip) // gitmem's reader: it lists the packs again when one is gone
		if err != nil {
			return nil, wrap("read "+name.String(), err)
		}
		if obj.Type() != plumbing.CommitObject {
			return nil, fmt.Errorf("gitmem: %s is not a commit (an annotated tag?); delete it before redacting", name)
		}
		if state[tip] != 0 {
			continue
		}
		c, err := st.Commit(tip)
		if err != nil {
			return nil, wrap("read a commit", err)
		}
		stack := []frame{{c, 0}}
		state[tip] = 1
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next < len(top.c.ParentHashes) {
				p := top.c.ParentHashes[top.next]
				top.next++
				if state[p] != 0 {
					continue
				}
				pc, err := st.Commit(p)
				if err != nil {
					return nil, wrap("read a commit", err)
				}
				state[p] = 1
				stack = append(stack, frame{pc, 0})
				continue
			}
			state[top.c.Hash] = 2
			order = append(order, top.c)
			stack = stack[:len(stack)-1]
		}
	}
	return order, nil
}

// commit rewrites the commit c, whose parents mapped maps to their
// rewritten hashes (themselves when unchanged), and adds it there and,
// when it changed, to rep.
func (rw *rewriter) commit(c *object.Commit, mapped map[plumbing.Hash]plumbing.Hash, rep *RedactReport) error {
	if h, ok := rw.red.taken[c.Hash]; ok {
		mapped[c.Hash] = h
		if h != c.Hash {
			nc, err := rw.st.Commit(h)
			if err != nil {
				return wrap("read a commit", err)
			}
			subject, _, _ := parseMessage(nc.Message)
			rep.Rewritten = append(rep.Rewritten, Rewrite{Old: c.Hash.String(), New: h.String(), Subject: subject})
		}
		return nil
	}
	tree, err := rw.tree(c.TreeHash, "")
	if err != nil {
		return wrap("rewrite a tree", err)
	}
	nc := *c
	nc.TreeHash, nc.PGPSignature = tree, ""
	nc.ParentHashes = make([]plumbing.Hash, len(c.ParentHashes))
	for j, p := range c.ParentHashes {
		nc.ParentHashes[j] = mapped[p]
	}
	if m := rw.red.Match; m != nil {
		nc.Message = rw.message(m, c.Message)
		for _, sig := range []*object.Signature{&nc.Author, &nc.Committer} {
			sig.Name = m.ReplaceAllLiteralString(sig.Name, redacted)
			sig.Email = m.ReplaceAllLiteralString(sig.Email, redacted)
		}
	}
	changed := tree != c.TreeHash || !slices.Equal(nc.ParentHashes, c.ParentHashes) || nc.Message != c.Message ||
		nc.Author != c.Author || nc.Committer != c.Committer
	if !changed {
		mapped[c.Hash] = c.Hash
		return nil
	}
	obj := &plumbing.MemoryObject{}
	if err := nc.EncodeWithoutSignature(obj); err != nil {
		return wrap("encode a commit", err)
	}
	rd, _ := obj.Reader()
	var buf bytes.Buffer
	buf.ReadFrom(rd)
	h, err := rw.put(plumbing.CommitObject, buf.Bytes())
	if err != nil {
		return wrap("write a commit", err)
	}
	mapped[c.Hash] = h
	subject, _, _ := parseMessage(nc.Message)
	rep.Rewritten = append(rep.Rewritten, Rewrite{Old: c.Hash.String(), New: h.String(), Subject: subject})
	return nil
}

// keptTrailers are the trailers whose values gitmem and its stores write
// as a word of their own, a number, a time or a hash (docs/protocol.md),
// never a caller's or the model's text: a redaction's pattern leaves
// such a value, as it leaves every trailer's key, so that a commit still
// says what it is (a pattern of "every long token" would otherwise turn
// every gitmem commit into one of no command, path or store). A value of
// another form under one of these keys (a commit made by hand, or by
// another program) is redacted as any other.
var keptTrailers = map[string]func(string) bool{
	TrailerCommand: isWord, "Store-Action": isWord, "Store-Secret-Screening": isWord,
	TrailerLine: isNumber,
	"Reverts":   isHash, "Restored-From": isHash, "Merge-Head": isHash,
	"Expired-Before": isTime, "Store-Created": isTime, "Store-Archived": isTime,
}

func isWord(v string) bool {
	return len(v) > 0 && len(v) <= 32 && strings.Trim(v, "abcdefghijklmnopqrstuvwxyz_-") == ""
}

func isNumber(v string) bool {
	return len(v) > 0 && len(v) <= 10 && strings.Trim(v, "0123456789") == ""
}

func isHash(v string) bool { return len(v) == 40 && strings.Trim(v, "0123456789abcdef") == "" }

func isTime(v string) bool { _, err := time.Parse(time.RFC3339, v); return err == nil }

// redactMessage replaces m's matches in a commit message with the
// placeholder: in its subject and body, and in the values of its trailers
// (the last paragraph, when every line of it is one, as parseMessage
// reads them) but for keptTrailers' values; never in a trailer's key.
func redactMessage(m *regexp.Regexp, msg string) string {
	red := func(s string) string { return m.ReplaceAllLiteralString(s, redacted) }
	text := strings.TrimRight(msg, "\n")
	subject, rest, _ := strings.Cut(text, "\n")
	body := strings.TrimLeft(rest, "\n")
	paras := strings.Split(body, "\n\n")
	last := paras[len(paras)-1]
	lines := strings.Split(last, "\n")
	for _, line := range lines {
		if k, _, ok := strings.Cut(line, ": "); !ok || k == "" || strings.ContainsAny(k, " \t") {
			return red(text) + msg[len(text):]
		}
	}
	for i, line := range lines {
		if k, v, _ := strings.Cut(line, ": "); keptTrailers[k] == nil || !keptTrailers[k](v) {
			lines[i] = k + ": " + red(v)
		}
	}
	out := red(subject) + "\n" + rest[:len(rest)-len(body)]
	if head := body[:len(body)-len(last)]; head != "" { // the paragraphs before, and the blank line after them
		out += red(strings.TrimSuffix(head, "\n\n")) + "\n\n"
	}
	return out + strings.Join(lines, "\n") + msg[len(text):]
}

// tree returns the rewritten tree of h found at path prefix.
func (rw *rewriter) tree(h plumbing.Hash, prefix string) (plumbing.Hash, error) {
	target := ""
	inMem := prefix == memDir || strings.HasPrefix(prefix, memDir+"/")
	key := treeKey{h, inMem}
	if rw.red.Path != "" {
		target = memDir + "/" + rw.red.Path
		if prefix != "" && target != prefix && !strings.HasPrefix(target, prefix+"/") {
			return h, nil // the path is not under this subtree
		}
	} else if n, ok := rw.trees[key]; ok {
		return n, nil
	}
	t, err := rw.st.Tree(h)
	if err != nil {
		return h, err
	}
	var out []object.TreeEntry
	changed := false
	for _, e := range t.Entries {
		p := join2(prefix, e.Name)
		switch {
		case p == target:
			changed = true
			if err := rw.drop(e); err != nil {
				return h, err
			}
			continue
		case e.Mode == filemode.Dir:
			n, err := rw.tree(e.Hash, p)
			if err != nil {
				return h, err
			}
			if n != e.Hash {
				changed = true
				if n == emptyTree {
					continue // git keeps no empty folders
				}
				e.Hash = n
			}
		case e.Mode.IsFile() && rw.red.Blob != "" && e.Hash.String() == rw.red.Blob:
			changed = true
			rw.dropped[e.Hash] = true
			if rw.red.Placeholder == nil {
				continue
			}
			if rw.placeholder.IsZero() {
				if rw.placeholder, err = rw.put(plumbing.BlobObject, rw.red.Placeholder); err != nil {
					return h, err
				}
			}
			e.Hash = rw.placeholder
		case e.Mode.IsFile() && rw.red.Match != nil:
			n, err := rw.blob(e.Hash)
			if err != nil {
				return h, err
			}
			if n != e.Hash {
				changed, e.Hash = true, n
			}
		}
		out = append(out, e)
	}
	if rw.red.Match != nil && inMem && rw.renameEntries(out, prefix) {
		changed = true
	}
	n := h
	if changed {
		gd.SortEntries(out)
		if n, err = rw.put(plumbing.TreeObject, gd.EncodeEntries(out)); err != nil {
			return h, err
		}
	}
	if rw.red.Path == "" {
		rw.trees[key] = n
	}
	return n, nil
}

// renameEntries replaces the pattern in entry names (a secret in a file
// or folder name), keeping names unique: a name that would clash gets
// "-2", "-3", ... It reports whether any name changed.
func (rw *rewriter) renameEntries(entries []object.TreeEntry, prefix string) bool {
	taken := map[string]bool{}
	var hit []int
	for i, e := range entries {
		if rw.red.Match.MatchString(e.Name) {
			hit = append(hit, i)
		} else {
			taken[e.Name] = true
		}
	}
	for _, i := range hit {
		base := rw.red.Match.ReplaceAllLiteralString(entries[i].Name, redacted)
		name := base
		for k := 2; taken[name]; k++ {
			name = fmt.Sprintf("%s-%d", base, k)
		}
		taken[name] = true
		entries[i].Name = name
		rw.renamed[strings.TrimPrefix(join2(prefix, name), memDir+"/")] = true
	}
	return len(hit) > 0
}

var emptyTree = plumbing.ComputeHash(plumbing.TreeObject, nil)

func (rw *rewriter) blob(h plumbing.Hash) (plumbing.Hash, error) {
	if n, ok := rw.blobs[h]; ok {
		return n, nil
	}
	data, err := rw.st.Blob(h)
	if err != nil {
		return h, err
	}
	n := h
	if rw.red.Match.Match(data) {
		if n, err = rw.put(plumbing.BlobObject, rw.red.Match.ReplaceAllLiteral(data, []byte(redacted))); err != nil {
			return h, err
		}
	}
	rw.blobs[h] = n
	if n != h {
		rw.dropped[h] = true
	}
	return n, nil
}

// drop notes the blobs of a removed tree entry.
func (rw *rewriter) drop(e object.TreeEntry) error {
	if e.Mode != filemode.Dir {
		rw.dropped[e.Hash] = true
		return nil
	}
	t, err := rw.st.Tree(e.Hash)
	if err != nil {
		return err
	}
	for _, k := range t.Entries {
		if err := rw.drop(k); err != nil {
			return err
		}
	}
	return nil
}

// rewritePackedRefs writes the new hashes of the refs tx moved over
// their lines in packed-refs (git pack-refs left them there; the loose
// files that now shadow them are git's answer, but the old hashes stay
// no longer), under packed-refs.lock as git writes it.
func rewritePackedRefs(gitDir string, tx *gd.RefTx) error {
	moved := tx.Moved()
	path := filepath.Join(gitDir, "packed-refs")
	for try := 0; ; try++ {
		data, err := gd.ReadFile(path)
		if err != nil {
			return nil
		}
		lines := strings.SplitAfter(string(data), "\n")
		changed := false
		for i, l := range lines {
			if len(l) >= 41 && plumbing.IsHash(l[:40]) {
				if h, ok := moved[plumbing.ReferenceName(strings.TrimSpace(l[41:]))]; ok {
					lines[i], changed = h.String()+l[40:], true
				}
			}
		}
		if !changed {
			return nil
		}
		err = gd.ReplaceLocked(context.Background(), path, []byte(strings.Join(lines, "")), func() error {
			if now, err := gd.ReadFile(path); err != nil || !bytes.Equal(now, data) {
				return errPackedRefsChanged // git packed refs meanwhile: read again
			}
			return nil
		})
		if !errors.Is(err, errPackedRefsChanged) || try == 2 {
			if err != nil {
				return err
			}
			return gd.SyncDir(gitDir)
		}
	}
}

var errPackedRefsChanged = errors.New("packed-refs changed while it was rewritten")
