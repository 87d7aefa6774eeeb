package gitmem

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/gitmem/internal/remote"
)

// Redaction in a shared memory. A secret that reached the remote is in
// every clone too. `gitmem redact ... --push REMOTE` pulls (so that the
// memory holds all the remote has), redacts, and replaces the remote's
// branch with the rewritten one — the only forced update gitmem makes,
// and only with a lease: the remote's branch must still be what was
// fetched, else the new commits are fetched, redacted and merged first.
//
// With the branch goes a redaction record: refs/gitmem/redactions, a
// chain of commits whose tree holds one file, "redactions", a JSON line
// per redaction — the rule (a path, a blob, or a pattern), the blobs it
// removed and the old -> new commit map. Every other clone's next pull
// sees a record it has not applied, runs the same redaction over its own
// history — taking the shared part as the record maps it to the remote's
// commits (a gitmem of other rules would rewrite it otherwise; see
// takenFrom), rewriting its unpushed commits on top — and only then
// merges.
// A push refuses to send any object a known redaction removed.

const (
	redactionsRef          = plumbing.ReferenceName("refs/gitmem/redactions")
	redactionRecordFile    = "redactions"
	redactionRecordCommand = "redaction-record"
)

// remoteRedactionsRef is where the remote's record is kept once fetched
// (refs/gitmem/remotes/NAME/redactions).
func remoteRedactionsRef(name string) plumbing.ReferenceName {
	return plumbing.ReferenceName("refs/gitmem/remotes/" + name + "/redactions")
}

// readRedactionsRef reads the remote's record as fetched, or with name ""
// the repository's own.
func readRedactionsRef(gitDir, name string) plumbing.Hash {
	ref := redactionsRef
	if name != "" {
		ref = remoteRedactionsRef(name)
	}
	h, _ := gd.ReadRef(gitDir, ref)
	return h
}

// redactionEntry is one redaction of the record.
type redactionEntry struct {
	ID        string      `json:"id"`
	Time      time.Time   `json:"time"`
	Path      string      `json:"path,omitempty"`
	Blob      string      `json:"blob,omitempty"`
	Match     string      `json:"match,omitempty"`
	Removed   []string    `json:"removed,omitempty"`   // blobs the redaction deleted
	Rewritten [][2]string `json:"rewritten,omitempty"` // old -> new commit
}

// redaction returns the entry's rule; the entry was checked (check).
func (e redactionEntry) redaction() (Redaction, error) {
	red := Redaction{Path: e.Path, Blob: e.Blob}
	if e.Match != "" {
		re, err := regexp.Compile(e.Match)
		if err != nil {
			return red, fmt.Errorf("the redaction record %s holds a bad pattern: %v", e.ID, err)
		}
		red.Match = re
	}
	return red, nil
}

var recordID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{16}$`) })

// isObjectHash reports whether s is an object hash as git writes it: 40
// lowercase hex digits (plumbing.IsHash takes upper case too, and
// plumbing.NewHash anything, silently).
func isObjectHash(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// quoteField quotes a value read from a record for an error message,
// cut short: a hostile remote chooses it.
func quoteField(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}

// check says what is wrong with an entry read from a record, or "": every
// field is checked before any is used, as a model's input is.
func (e redactionEntry) check() string {
	if !recordID().MatchString(e.ID) {
		return fmt.Sprintf(`"id" holds %s, not 16 lowercase hex digits`, quoteField(e.ID))
	}
	n := 0
	for _, set := range []bool{e.Path != "", e.Blob != "", e.Match != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Sprintf("the redaction %s holds %d rules (path, blob, match), not one", e.ID, n)
	}
	switch {
	case e.Path != "" && checkRel(e.Path) != nil:
		return fmt.Sprintf(`"path" holds %s, not a valid memory path`, quoteField(e.Path))
	case e.Blob != "" && !isObjectHash(e.Blob):
		return fmt.Sprintf(`"blob" holds %s, not an object hash (40 lowercase hex digits)`, quoteField(e.Blob))
	}
	if e.Match != "" {
		if _, err := regexp.Compile(e.Match); err != nil {
			return fmt.Sprintf(`"match" is not a pattern (%v)`, err)
		}
	}
	for _, h := range e.Removed {
		if !isObjectHash(h) {
			return fmt.Sprintf(`"removed" holds %s, not an object hash (40 lowercase hex digits)`, quoteField(h))
		}
	}
	for _, m := range e.Rewritten {
		for _, h := range m {
			if !isObjectHash(h) {
				return fmt.Sprintf(`"rewritten" holds %s, not an object hash (40 lowercase hex digits)`, quoteField(h))
			}
		}
	}
	return ""
}

// readRecord reads the entries of a record commit (none for zero). A
// record that is not exactly what writeRecord writes — a line that is
// not JSON of the entry's form (an unknown field included), a field that
// does not check, an id twice — is refused whole.
func readRecord(st *gd.Store, h plumbing.Hash) ([]redactionEntry, error) {
	if h.IsZero() {
		return nil, nil
	}
	c, err := st.Commit(h)
	if err != nil {
		return nil, err
	}
	t, err := st.Tree(c.TreeHash)
	if err != nil {
		return nil, err
	}
	e, err := t.FindEntry(redactionRecordFile)
	if err != nil {
		return nil, fmt.Errorf("the redaction record %s has no %s file", h, redactionRecordFile)
	}
	if n, err := st.Size(e.Hash); err != nil || n > 256<<20 {
		return nil, fmt.Errorf("the redaction record %s is unreadable or too large", h)
	}
	data, err := st.Blob(e.Hash)
	if err != nil {
		return nil, err
	}
	damaged := func(line int, why string) error {
		return fmt.Errorf("the redaction record %s is damaged (line %d: %s); not applied", h, line, why)
	}
	var out []redactionEntry
	seen := map[string]bool{}
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		// As redactionEntry, with pairs of any length (JSON into a [2]string
		// drops a third element silently).
		var w struct {
			redactionEntry
			Rewritten [][]string `json:"rewritten,omitempty"`
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&w); err != nil {
			return nil, damaged(i+1, fmt.Sprintf("it is not JSON of the record's form (%v)", err))
		}
		if dec.More() {
			return nil, damaged(i+1, "it is not JSON of the record's form (more than one object)")
		}
		e := w.redactionEntry
		for _, m := range w.Rewritten {
			if len(m) != 2 {
				return nil, damaged(i+1, fmt.Sprintf(`"rewritten" holds a list of %d hashes, not a pair`, len(m)))
			}
			e.Rewritten = append(e.Rewritten, [2]string{m[0], m[1]})
		}
		if why := e.check(); why != "" {
			return nil, damaged(i+1, why)
		}
		if seen[e.ID] {
			return nil, damaged(i+1, "the id "+e.ID+" is there twice")
		}
		seen[e.ID] = true
		out = append(out, e)
	}
	return out, nil
}

// writeRecord writes a record commit holding entries, after parent, and
// points refs/gitmem/redactions at it.
func (s *session) writeRecord(entries []redactionEntry, parent plumbing.Hash) (plumbing.Hash, error) {
	var b strings.Builder
	for _, e := range entries {
		line, _ := json.Marshal(e)
		b.Write(line)
		b.WriteByte('\n')
	}
	blob := objectOf(plumbing.BlobObject, []byte(b.String()))
	tree := objectOf(plumbing.TreeObject, gd.EncodeEntries([]object.TreeEntry{{Name: redactionRecordFile, Mode: filemode.Regular, Hash: blob.Hash}}))
	msg := Meta{Subject: fmt.Sprintf("memory: redaction record (%d redaction(s))", len(entries)),
		Trailers: []Trailer{{TrailerCommand, redactionRecordCommand}}}.message()
	opt := s.memOpt
	raw, err := encodeCommit(tree.Hash, parentList(parent), opt.operator(), opt.Committer, opt.Now(), msg)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	c := objectOf(plumbing.CommitObject, raw)
	return c.Hash, s.writeNamed([]gd.Object{blob, tree, c}, func() error { return s.setRef(redactionsRef, c.Hash) })
}

// redactionCache holds the objects the repository's known redactions
// removed, for the check before every push.
type redactionCache struct {
	record  plumbing.Hash
	removed map[plumbing.Hash]string // object -> the redaction that removed it
}

// check refuses a push that would send an object a redaction of the
// record rec (the repository's) removed: a clone that still held it must
// never bring it back. The cache is read from st when rec moved.
func (c *redactionCache) check(st *gd.Store, rec plumbing.Hash, objects []plumbing.Hash) error {
	if rec.IsZero() {
		return nil
	}
	if c.record != rec {
		entries, err := readRecord(st, rec)
		if err != nil {
			return wrap("read the redaction record", err)
		}
		removed := map[plumbing.Hash]string{}
		for _, e := range entries {
			for _, h := range e.Removed {
				removed[plumbing.NewHash(h)] = e.ID
			}
			for _, m := range e.Rewritten {
				removed[plumbing.NewHash(m[0])] = e.ID
			}
		}
		*c = redactionCache{record: rec, removed: removed}
	}
	for _, h := range objects {
		if id, ok := c.removed[h]; ok {
			return fmt.Errorf("gitmem: refusing to push: the object %s was removed by the redaction %s; run gitmem fsck, then pull to apply the redaction", h, id)
		}
	}
	return nil
}

// applyRedactions runs the redactions of the remote's record that this
// repository has not applied, then takes the remote's record as its own.
//
// A record is applied only if the remote's history shows it: when the
// redaction would rewrite the commit the remote's branch was at when this
// clone last saw it, the record must map that commit to a new one, and
// the branch must hold that one now. A record that does not match (a
// remote rewritten some other way, or a record made up) is refused: a
// redaction rewrites this clone's history for good.
func (s *session) applyRedactions(ctx context.Context, tip plumbing.Hash) error {
	theirs := s.readRedactionsRef(s.name)
	ours := s.readRedactionsRef("")
	if theirs.IsZero() || theirs == ours {
		return nil
	}
	remoteEntries, err := readRecord(s.st, theirs)
	if err != nil {
		return s.remoteErr("fetch from", err)
	}
	localEntries, err := readRecord(s.st, ours)
	if err != nil {
		return wrap("read the redaction record", err)
	}
	applied := map[string]bool{}
	for _, e := range localEntries {
		applied[e.ID] = true
	}
	var todo []redactionEntry
	inRemote := map[string]bool{}
	for _, e := range remoteEntries {
		inRemote[e.ID] = true
		if !applied[e.ID] {
			todo = append(todo, e)
		}
	}
	at := s.prevTip // the remote's branch as last seen, through the redactions
	if err := s.checkChain(todo, at, tip); err != nil {
		return err
	}
	var remoteHas, held map[plumbing.Hash]bool
	if len(todo) > 0 {
		if remoteHas, err = s.commitsOf(tip); err != nil {
			return err
		}
		if held, err = s.commitsOf(at); err != nil {
			return err
		}
		// A hand edit not committed yet goes into history first: the
		// redaction rewrites it with the rest, where rebuilding the
		// worktree from the new history would lose it.
		if _, err := s.mem.Adopt(ctx); err != nil && !errors.Is(err, ErrNoChange) {
			return err
		}
	}
	for i, e := range todo {
		red, err := e.redaction()
		if err != nil {
			return s.remoteErr("fetch from", err)
		}
		if !at.IsZero() {
			if err := s.checkRecord(ctx, e, red, &at); err != nil {
				return err
			}
		}
		red.taken = takenFrom(todo[i:], remoteHas, held)
		// The redaction deletes old packs: nothing of this session may
		// hold them open.
		s.st.Close()
		s.memOpt.Logf("gitmem: applying the redaction %s from %s", e.ID, s.name)
		_, err = s.mem.redact(ctx, red, false, nil, false)
		s.reopen()
		if err != nil {
			return err
		}
		s.res.Redactions++
	}
	// Our own record becomes the remote's; a redaction of ours it lacks
	// (made here, not pushed yet) goes on top, to be pushed.
	next := theirs
	var extra []redactionEntry
	for _, e := range localEntries {
		if !inRemote[e.ID] {
			extra = append(extra, e)
		}
	}
	if len(extra) > 0 {
		_, err := s.writeRecord(append(slices.Clone(remoteEntries), extra...), theirs)
		return wrap("write the redaction record", err)
	}
	return wrap("update the redaction record", s.setRef(redactionsRef, next))
}

// commitsOf returns the commits of tip's history (none for zero).
func (s *link) commitsOf(tip plumbing.Hash) (map[plumbing.Hash]bool, error) {
	out := map[plumbing.Hash]bool{}
	if tip.IsZero() {
		return out, nil
	}
	cs, err := s.g.Exclusive([]plumbing.Hash{tip}, nil)
	if err != nil {
		return nil, wrap("read the remote's history", err)
	}
	for _, c := range cs {
		out[c.Hash] = true
	}
	return out, nil
}

// takenFrom returns what the redaction todo[0] of a remote's record
// takes as the remote made it (Redaction.taken) rather than rewriting it
// here: every commit of the remote's history (remoteHas) as it is, and
// every commit its branch held as last seen (held) as the record maps
// it, through the redactions after it (todo[1:]) too, when the remote's
// history holds the end. The remote rewrote those with its gitmem's
// rules, which may not be this one's (before 8cf1446 a pattern rewrote
// trailer keys too): rewritten again here they would be other commits,
// and the merge would bring both copies. The commits only this clone
// has are rewritten here, on top of the remote's.
func takenFrom(todo []redactionEntry, remoteHas, held map[plumbing.Hash]bool) map[plumbing.Hash]plumbing.Hash {
	byOld := make([]map[string]string, len(todo))
	for i, e := range todo {
		byOld[i] = map[string]string{}
		for _, m := range e.Rewritten {
			byOld[i][m[0]] = m[1]
		}
	}
	taken := make(map[plumbing.Hash]plumbing.Hash, len(remoteHas)+len(todo[0].Rewritten))
	for h := range remoteHas {
		taken[h] = h
	}
	for old, end := range byOld[0] {
		o := plumbing.NewHash(old)
		if !held[o] || remoteHas[o] {
			continue
		}
		for _, later := range byOld[1:] {
			if n, ok := later[end]; ok {
				end = n
			}
		}
		if n := plumbing.NewHash(end); remoteHas[n] {
			taken[o] = n
		}
	}
	return taken
}

// checkChain refuses the remote's redactions todo, before any rewrite,
// unless their records' maps, one after the other (several redactions
// may have been pushed at once), take at, the commit the remote's branch
// was at as last seen (zero: never seen), to one its branch (tip) holds.
func (s *link) checkChain(todo []redactionEntry, at, tip plumbing.Hash) error {
	if at.IsZero() || len(todo) == 0 {
		return nil
	}
	end := at
	for _, e := range todo {
		for _, m := range e.Rewritten {
			if m[0] == end.String() && plumbing.IsHash(m[1]) {
				end = plumbing.NewHash(m[1])
				break
			}
		}
	}
	if in, err := s.g.IsAncestor(end, tip); err != nil || !in {
		return s.remoteErr("fetch from", fmt.Errorf("the remote's redaction record %s does not match its history (%s is not in it); not applied (ask whoever redacted, or clone again)", todo[len(todo)-1].ID, end))
	}
	return nil
}

// checkRecord refuses a redaction record the remote's history does not
// show (see applyRedactions). at is the commit the remote's branch was at
// as last seen, moved along by each redaction checked (the end of the
// chain is checked against the remote's branch before).
func (s *session) checkRecord(ctx context.Context, e redactionEntry, red Redaction, at *plumbing.Hash) error {
	for _, m := range e.Rewritten {
		if m[0] == at.String() && plumbing.IsHash(m[1]) {
			*at = plumbing.NewHash(m[1])
			return nil
		}
	}
	// The record leaves that commit alone: so must the redaction here.
	dry, err := s.mem.redact(ctx, red, true, nil, false)
	if err != nil {
		return err
	}
	for _, rw := range dry.Rewritten {
		if rw.Old == at.String() {
			return s.remoteErr("fetch from", fmt.Errorf("the remote's redaction record %s would remove content from the commit %s it held, but its history keeps that commit; not applied (ask whoever redacted, or clone again)", e.ID, at))
		}
	}
	return nil
}

// redactionUpdate is the push of the repository's record, when the
// remote's is behind it.
func (s *link) redactionUpdate(refs remote.Refs) (remote.Update, bool) {
	ours := s.readRedactionsRef("")
	theirs := refs[redactionsRef]
	if ours.IsZero() || ours == theirs {
		return remote.Update{}, false
	}
	if !theirs.IsZero() {
		if in, err := s.g.IsAncestor(theirs, ours); err != nil || !in {
			return remote.Update{}, false
		}
	}
	return remote.Update{Name: redactionsRef, Old: theirs, New: ours}, true
}

// ErrPatternHoldsSecret refuses to publish a pattern that matches its own
// text: it most likely is the secret itself.
var ErrPatternHoldsSecret = errors.New("gitmem: the pattern matches its own text, so it likely holds the secret itself, and the redaction record that every clone reads would publish it; write a pattern for the secret's form (sk-[A-Za-z0-9]{20,})")

// RedactShared redacts the memory and the remote: it pulls, redacts,
// records the redaction, and replaces the remote's branch with the
// rewritten one under a lease (the branch must still be what was
// fetched; if another agent pushed meanwhile, its commits are fetched,
// redacted and merged, and the push is tried again). On a remote that is
// a repository on this machine, the old objects are deleted there too;
// a server keeps them until its own garbage collection.
func (r *Repo) RedactShared(ctx context.Context, name string, red Redaction, opt SyncOptions, progress Progress) (RedactReport, SyncResult, error) {
	if err := r.awaitStartCheck(ctx); err != nil {
		return RedactReport{}, SyncResult{}, err
	}
	if red.Match != nil && red.Match.MatchString(red.Match.String()) {
		return RedactReport{}, SyncResult{}, ErrPatternHoldsSecret
	}
	started := time.Now()
	var rep RedactReport
	var url string
	res, err := r.share(ctx, name, opt, func(s *session) error {
		err := s.redactShared(ctx, red, progress)
		rep, url = s.report, s.url
		return err
	})
	if err != nil {
		return rep, res, err
	}
	if err := remote.Prune(url, r.dir, started); err != nil && !errors.Is(err, remote.ErrNotLocal) {
		r.opt.Logf("gitmem: could not delete the old objects in %s: %v", name, scrubPaths(err))
	}
	return rep, res, nil
}

func (s *session) redactShared(ctx context.Context, red Redaction, progress Progress) error {
	// The remote's history may hold commits redactions made here without
	// --push already rewrote: it is fetched, rewritten by every one of
	// them and then by this one (the same rewrites, so the same commits),
	// and merged only then, so that no secret reaches HEAD again. Each of
	// them goes into the record, in order, for the other clones.
	s.takeRedacted = true
	tip, err := s.fetch(ctx)
	if err != nil {
		return err
	}
	if err := s.applyRedactions(ctx, tip); err != nil {
		return err
	}
	lease := s.readTracking() // what the remote's branch holds
	if err := s.noteLocalOnly(tip); err != nil {
		return err
	}
	rules, held, err := s.rulesFor(tip, red)
	if err != nil {
		return err
	}
	if !tip.IsZero() && !held {
		if err := s.integrate(ctx, tip); err != nil {
			return err
		}
	}
	sr := &sharedRedaction{rules: rules, entries: make([]redactionEntry, len(rules)), rewritten: map[string]bool{}}
	for i, r := range rules {
		sr.entries[i] = redactionEntry{ID: newID(), Time: s.memOpt.Now().UTC(), Path: r.Path, Blob: r.Blob}
		if r.Match != nil {
			sr.entries[i].Match = r.Match.String()
		}
	}
	if changed, err := s.redactAll(ctx, sr, progress); err != nil {
		return err
	} else if !changed {
		return nil // no commit held it: neither does the remote
	}
	if held {
		// The remote's branch, rewritten with every ref: what it holds
		// besides what this memory has is merged now.
		if err := s.integrate(ctx, s.readTracking()); err != nil {
			return err
		}
	}
	sr.prev = s.readRedactionsRef("")
	if sr.before, err = readRecord(s.st, sr.prev); err != nil {
		return wrap("read the redaction record", err)
	}
	if err := s.record(sr); err != nil {
		return err
	}
	s.memOpt.hooks.atRedactShared()
	return s.pushRedacted(ctx, sr, lease)
}

// sharedRedaction is what one RedactShared runs and records.
type sharedRedaction struct {
	rules     []Redaction      // the redactions made here the remote's history needs, then the new one
	entries   []redactionEntry // the record's entry of each rule
	rewritten map[string]bool  // the commits the rewrites made (the rest are on the remote already)
	prev      plumbing.Hash    // the repository's record before
	before    []redactionEntry // its entries
	rec       plumbing.Hash    // the record written (record)
}

// rulesFor returns the rules a shared redaction of red runs over the
// remote's history at tip: red after every redaction made here without
// --push from the first that rewrote a commit of that history (held).
func (s *session) rulesFor(tip plumbing.Hash, red Redaction) (rules []Redaction, held bool, err error) {
	lrs, first, _, err := s.redactedIn(tip)
	if err != nil {
		return nil, false, err
	}
	held = first >= 0
	for i := first; held && i < len(lrs); i++ {
		if lrs[i].sameRule(red) {
			continue
		}
		r, err := lrs[i].redaction()
		if err != nil {
			return nil, false, err
		}
		if r.Match != nil && r.Match.MatchString(r.Match.String()) {
			return nil, false, ErrPatternHoldsSecret // it would be published with the others
		}
		rules = append(rules, r)
	}
	return append(rules, red), held, nil
}

// redactAll runs every rule of sr here, noting in its entry what each
// removed and rewrote; changed says a commit was rewritten.
func (s *session) redactAll(ctx context.Context, sr *sharedRedaction, progress Progress) (changed bool, err error) {
	for i, r := range sr.rules {
		s.st.Close()
		rep, err := s.mem.redact(ctx, r, false, progress, false)
		s.reopen()
		if err != nil {
			return false, err
		}
		if i == len(sr.rules)-1 {
			s.report = rep
		}
		e := &sr.entries[i]
		e.Removed = append(e.Removed, rep.Removed...)
		for _, rw := range rep.Rewritten {
			e.Rewritten = append(e.Rewritten, [2]string{rw.Old, rw.New})
			sr.rewritten[rw.New] = true
		}
		changed = changed || len(rep.Rewritten) > 0
	}
	return changed, nil
}

// record writes the repository's record: the one before, and the
// entries of sr's rules that rewrote something.
func (s *session) record(sr *sharedRedaction) error {
	var add []redactionEntry
	for _, e := range sr.entries {
		if len(e.Rewritten) > 0 {
			add = append(add, e)
		}
	}
	var err error
	sr.rec, err = s.writeRecord(append(slices.Clone(sr.before), add...), sr.prev)
	return wrap("write the redaction record", err)
}

// pushRedacted replaces the remote's branch, which must still be at
// lease, with the rewritten history, and its record with sr's. When
// another agent pushed onto the old history meanwhile, its commits are
// fetched, redacted too and merged, and the push is tried again.
func (s *session) pushRedacted(ctx context.Context, sr *sharedRedaction, lease plumbing.Hash) error {
	for attempt := 0; ; attempt++ {
		err := s.forcePush(ctx, lease, sr.rec, sr.rewritten)
		var moved *leaseError
		if !errors.As(err, &moved) || attempt >= s.opt.Retries {
			return err
		}
		s.res.Retries++
		tip, err := s.fetch(ctx)
		if err != nil {
			return err
		}
		lease = tip
		if err := s.noteLocalOnly(tip); err != nil {
			return err
		}
		if _, err := s.redactAll(ctx, sr, nil); err != nil {
			return err
		}
		// The record covers these commits too: the clone that pushed
		// them finds them rewritten.
		if err := s.record(sr); err != nil {
			return err
		}
		if err := s.integrate(ctx, s.readTracking()); err != nil {
			return err
		}
	}
}

// noteLocalOnly adds to s.localOnly the commits of HEAD's history that
// the remote's branch (tip, as fetched) lacks.
func (s *link) noteLocalOnly(tip plumbing.Hash) error {
	head, err := s.store.headHash()
	if err != nil || head.IsZero() {
		return err
	}
	cs, err := s.g.Exclusive([]plumbing.Hash{head}, parentList(tip))
	if err != nil {
		return wrap("read the history", err)
	}
	if s.localOnly == nil {
		s.localOnly = map[plumbing.Hash]bool{}
	}
	for _, c := range cs {
		s.localOnly[c.Hash] = true
	}
	return nil
}

// leaseError: the remote's branch is no longer what the lease expects.
type leaseError struct{}

func (e *leaseError) Error() string { return "the remote moved during the redaction" }

// forcePush replaces the remote's branch (which must hold lease) with
// HEAD, and its redaction record with rec.
func (s *link) forcePush(ctx context.Context, lease, rec plumbing.Hash, rewritten map[string]bool) error {
	conn, err := remote.Dial(ctx, s.url, s.dir, s.opt.auth(), true)
	if err != nil {
		return s.remoteErr("push to", err)
	}
	defer conn.Close()
	refs := conn.Refs()
	if refs[s.branch] != lease {
		return &leaseError{}
	}
	head, err := s.store.headHash()
	if err != nil {
		return err
	}
	// What the remote has: its refs we still hold, and every commit of
	// its history the redaction did not rewrite (the parents of the first
	// rewritten ones) — not one only this memory had (localOnly), which
	// a merge of the remote's history now descends from.
	var haves []plumbing.Hash
	for _, h := range refs {
		if s.g.Has(h) {
			haves = append(haves, h)
		}
	}
	for h := range rewritten {
		c, err := s.g.Commit(plumbing.NewHash(h))
		if err != nil {
			continue
		}
		for _, p := range c.ParentHashes {
			if !rewritten[p.String()] && !s.localOnly[p] && s.g.Has(p) {
				haves = append(haves, p)
			}
		}
	}
	objects, commits, err := s.g.Missing([]plumbing.Hash{head, rec}, haves)
	if err != nil {
		return wrap("find what the remote lacks", err)
	}
	updates := []remote.Update{{Name: s.branch, Old: lease, New: head}, {Name: redactionsRef, Old: refs[redactionsRef], New: rec}}
	if err := conn.Push(ctx, s.st, objects, updates); err != nil {
		var rej *remote.RejectedError
		if errors.As(err, &rej) {
			return &leaseError{} // refetch to learn where it is
		}
		return s.remoteErr("push to", err)
	}
	s.res.Pushed += countCommits(commits, head)
	return wrap("update "+s.tracking().String(), s.setRef(s.tracking(), head))
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// A redaction made here without --push leaves the remotes with the old
// history. Taking their commits again would bring back what it removed,
// so the commits it rewrote are noted (.git/gitmem/redacted, a JSON line
// per redaction, never pushed: a pattern may hold the secret) and no pull
// takes a history that holds one: the fetch is refused before any object
// comes when the remote's branch is such a commit, the merge when any of
// the commits it would bring is. `redact --push REMOTE` redacts the remote
// too, after which its history holds none of them.

// localRedaction is one line of .git/gitmem/redacted: the rule, and the
// commits it rewrote as they were.
type localRedaction struct {
	Time    time.Time         `json:"time"`
	Path    string            `json:"path,omitempty"`
	Blob    string            `json:"blob,omitempty"`
	Match   string            `json:"match,omitempty"`
	Commits []string          `json:"commits"`
	Refs    map[string]string `json:"refs,omitempty"` // the refs it moved, to the commits they point at since
}

func (lr localRedaction) redaction() (Redaction, error) {
	red := Redaction{Path: lr.Path, Blob: lr.Blob}
	if lr.Match != "" {
		re, err := regexp.Compile(lr.Match)
		if err != nil {
			return red, &DamagedError{Problem: ".git/gitmem/redacted holds a bad pattern", Repair: "run the redaction again with --push"}
		}
		red.Match = re
	}
	return red, nil
}

func (lr localRedaction) sameRule(red Redaction) bool {
	m := ""
	if red.Match != nil {
		m = red.Match.String()
	}
	return lr.Path == red.Path && lr.Blob == red.Blob && lr.Match == m
}

func redactedPath(gitDir string) string { return filepath.Join(gitDir, "gitmem", "redacted") }

// noteRedaction appends the rule of the redaction made now, rep's
// rewritten commits and where the refs moved to the file, durably.
func noteRedaction(gitDir string, now time.Time, red Redaction, rep RedactReport, moved map[plumbing.ReferenceName][2]plumbing.Hash) error {
	lr := localRedaction{Time: now.UTC(), Path: red.Path, Blob: red.Blob}
	if red.Match != nil {
		lr.Match = red.Match.String()
	}
	for _, rw := range rep.Rewritten {
		lr.Commits = append(lr.Commits, rw.Old)
	}
	lr.Refs = map[string]string{}
	for name, m := range moved {
		lr.Refs[name.String()] = m[1].String()
	}
	line, _ := json.Marshal(lr)
	f, err := gd.OpenFile(redactedPath(gitDir), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// localRedactions reads the file (a line a crash cut short is skipped:
// its redaction had not moved a ref).
func localRedactions(gitDir string) []localRedaction {
	data, err := gd.ReadFile(redactedPath(gitDir))
	if err != nil {
		return nil
	}
	var out []localRedaction
	for line := range strings.Lines(string(data)) {
		var lr localRedaction
		if json.Unmarshal([]byte(line), &lr) == nil {
			out = append(out, lr)
		}
	}
	return out
}

// redactedHere returns the redactions made here without --push, in the
// order they were made, and the commits they rewrote, each with the
// index of the redaction that did (nil: none).
func redactedHere(gitDir string) ([]localRedaction, map[plumbing.Hash]int) {
	lrs := localRedactions(gitDir)
	if len(lrs) == 0 {
		return nil, nil
	}
	by := map[plumbing.Hash]int{}
	for i, lr := range lrs {
		for _, c := range lr.Commits {
			if isObjectHash(c) {
				by[plumbing.NewHash(c)] = i
			}
		}
	}
	return lrs, by
}

// redactedHere is the repository's, read once per session (each fetch
// asks twice: before and after it).
func (s *link) redactedHere() ([]localRedaction, map[plumbing.Hash]int) {
	if !s.redactedRead {
		s.redacted, s.redactedBy = redactedHere(s.gitDir)
		s.redactedRead = true
	}
	return s.redacted, s.redactedBy
}

// RedactedRemoteError refuses to take a remote's history that holds
// commits a redaction made here rewrote.
type RedactedRemoteError struct {
	Remote string
	Commit string    // one of them
	Time   time.Time // when it was redacted here
}

func (e *RedactedRemoteError) Error() string {
	return fmt.Sprintf("gitmem: %s still holds the history redacted here at %s (commit %s): taking it would bring back what the redaction removed; nothing was taken",
		e.Remote, e.Time.Format(time.RFC3339), e.Commit[:7])
}

// checkNewHistory refuses a fetched branch tip whose history holds a
// commit a redaction made here rewrote (the remote moved on from it).
func (s *link) checkNewHistory(tip plumbing.Hash) error {
	if s.takeRedacted {
		return nil
	}
	lrs, first, c, err := s.redactedIn(tip)
	if err != nil || first < 0 {
		return err
	}
	return &RedactedRemoteError{Remote: s.name, Commit: c.String(), Time: lrs[first].Time}
}

// redactedIn returns the redactions made here, in the order they were
// made, and the first of them that rewrote a commit of those tip brings
// (its history, less HEAD's), with that commit; first is -1 when none
// did. The ones after it rewrote what it made of that history, so a
// remote holding it needs every one of them from there on.
func (s *link) redactedIn(tip plumbing.Hash) (lrs []localRedaction, first int, commit plumbing.Hash, err error) {
	lrs, by := s.redactedHere()
	first = -1
	if tip.IsZero() || len(by) == 0 {
		return lrs, first, commit, nil
	}
	head, err := s.store.headHash()
	if err != nil {
		return nil, first, commit, err
	}
	var ours []plumbing.Hash
	if !head.IsZero() {
		ours = append(ours, head)
	}
	commits, err := s.g.Exclusive([]plumbing.Hash{tip}, ours)
	if err != nil {
		return nil, first, commit, wrap("read the remote's history", err)
	}
	for _, c := range commits {
		if i, ok := by[c.Hash]; ok && (first < 0 || i < first) {
			first, commit = i, c.Hash
		}
	}
	return lrs, first, commit, nil
}

// checkRedactedHere refuses commits (hashes) that a redaction made here
// rewrote, unless the session is the one that redacts the remote too.
func (s *link) checkRedactedHere(commits ...plumbing.Hash) error {
	if s.takeRedacted {
		return nil
	}
	lrs, by := s.redactedHere()
	for _, c := range commits {
		i, ok := by[c]
		if !ok {
			continue
		}
		if head, err := s.store.headHash(); err == nil && !head.IsZero() && s.g.Has(c) {
			if in, err := s.g.IsAncestor(c, head); err == nil && in {
				continue // still this memory's own: the redaction never moved a ref
			}
		}
		return &RedactedRemoteError{Remote: s.name, Commit: c.String(), Time: lrs[i].Time}
	}
	return nil
}
