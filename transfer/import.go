package transfer

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/pagination"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/memstore"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
)

// ImportError is a store that cannot be imported as it is there (an id,
// an actor, a time, a path, a content or metadata a gitmem store cannot
// hold, a history that does not follow), that the API does not give as
// any store is given (a listing without end, an answer over
// maxAnswerBytes), or whose copy did not come out the same (it changed
// while it was read). Nothing was imported.
type ImportError struct{ Msg string }

func (e *ImportError) Error() string { return e.Msg }

func importErr(format string, args ...any) error {
	return &ImportError{Msg: fmt.Sprintf(format, args...)}
}

// ImportOptions say how a store is imported.
type ImportOptions struct {
	Name     string          // the gitmem store's name (its folder under root)
	Repo     gitmem.Options  // how it is opened (log, identities); its clock is each version's time
	Progress gitmem.Progress // versions written of all; nil: none
}

// ImportResult is what an import made.
type ImportResult struct {
	Store      stores.Info
	Again      bool // the store was imported before: only what is new there was added
	Already    int  // versions here before this import (Again)
	Changed    bool // the store's name, description, metadata or archiving changed there since (Again)
	Memories   int  // live ones
	Versions   int  // imported by this run, one commit each
	Redacted   int  // of Versions, redacted there (a placeholder here)
	Redactions int  // commits recording redactions
	// A service that keeps versions for a while (the hosted one: 30 days)
	// may no longer have the first versions of a memory:
	Truncated   int // memories whose first version there is a modification: imported as their creation
	Unversioned int // memories with no version there: imported as one version (created, no actor) at their updated_at
	Skipped     int // deletions of memories with no earlier version there: not imported
}

// ErrNotImport is a store here, of the name an import was given, that is
// not an earlier import of the store there: made otherwise, or changed
// here since. Nothing was imported.
var ErrNotImport = errors.New("the store here is not an earlier import of the store there, or was changed here since")

// Import copies the store id of the Memory Stores API remote into the
// gitmem store opt.Name in the folder of stores root: its name,
// description, metadata and times, every version a commit in the order of
// their times, with its memory id, version id, actor and time (to the
// second, as git keeps it), a redacted version a redacted version (whose
// content it never had), and a redaction record at the time and by the
// actor it had there.
//
// Everything is read from the API before anything is written. A new
// store is built in a temporary folder root/.import-NAME-*, checked
// against what the API listed, field by field, and only then renamed
// into place: an import that fails leaves nothing. A store imported
// before (the same creation time, and no change made here since) gets
// what is new there, after the versions it has, and is checked the same
// way; one that is up to date gets no commit. Anything else at root/NAME
// is ErrNotImport.
func Import(ctx context.Context, remote Remote, root, id string, opt ImportOptions) (ImportResult, error) {
	var res ImportResult
	if err := policy.CheckStoreName(opt.Name); err != nil {
		return res, err
	}
	c := remote.client()
	st, err := c.Beta.MemoryStores.Get(ctx, id, anthropic.BetaMemoryStoreGetParams{})
	if err != nil {
		return res, remoteErr(err)
	}
	meta := stores.Meta{DisplayName: st.Name, Description: st.Description, Metadata: st.Metadata}
	for _, err := range []error{policy.CheckStoreDisplayName(st.Name), policy.CheckStoreDescription(st.Description), policy.CheckStoreMetadata(st.Metadata)} {
		if err != nil {
			return res, importErr("the store's name, description or metadata cannot be a gitmem store's: %v", err)
		}
	}
	for _, err := range []error{checkTime("the store's created_at", st.CreatedAt, false), checkTime("the store's updated_at", st.UpdatedAt, false),
		checkTime("the store's archived_at", st.ArchivedAt, true)} {
		if err != nil {
			return res, err
		}
	}
	versions, err := listVersions(ctx, c, id, remote.maxListed())
	if err != nil {
		return res, err
	}
	memories, err := listMemories(ctx, c, id, remote.maxListed())
	if err != nil {
		return res, err
	}
	var clock atomic.Int64
	ropt := opt.Repo
	ropt.Now = func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	dest := filepath.Join(root, opt.Name)
	if _, err := os.Lstat(dest); err == nil {
		return importAgain(ctx, c, root, st, versions, memories, opt, ropt, &clock)
	}
	p, err := plan(ctx, c, st, versions, memories, nil)
	if err != nil {
		return res, err
	}
	tmp, err := os.MkdirTemp(root, ".import-"+opt.Name+"-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp) // empty after a success
	d, err := stores.Open(tmp, stores.Options{Repo: ropt, IdleClose: -1})
	if err != nil {
		return res, err
	}
	defer d.Close()
	clock.Store(st.CreatedAt.UnixNano())
	info, err := d.Create(opt.Name, meta, gitmem.Signature{})
	if err != nil {
		return res, err
	}
	if res, err = p.run(ctx, d, opt, info, &clock); err != nil {
		return res, err
	}
	if err := d.Close(); err != nil {
		return res, err
	}
	if _, err := os.Lstat(dest); err == nil {
		return res, ErrNotImport // made meanwhile
	}
	if err := os.Rename(filepath.Join(tmp, opt.Name), dest); err != nil {
		return res, err
	}
	return res, nil
}

// importAgain brings the store opt.Name, imported from st before, up to
// date: the versions there that it does not have yet, after those it has.
func importAgain(ctx context.Context, c anthropic.Client, root string, st *anthropic.BetaManagedAgentsMemoryStore,
	versions []anthropic.BetaManagedAgentsMemoryVersion, memories []anthropic.BetaManagedAgentsMemoryListItemUnion,
	opt ImportOptions, ropt gitmem.Options, clock *atomic.Int64) (ImportResult, error) {
	d, err := stores.Open(root, stores.Options{Repo: ropt, IdleClose: -1})
	if err != nil {
		return ImportResult{}, err
	}
	defer d.Close()
	info, err := d.Get(opt.Name)
	if errors.Is(err, stores.ErrNotFound) {
		return ImportResult{}, fmt.Errorf("%w: it is not a gitmem store", ErrNotImport)
	}
	if err != nil {
		return ImportResult{}, err
	}
	if info.Created.Unix() != st.CreatedAt.Unix() {
		return ImportResult{}, fmt.Errorf("%w: it was created at %s, the store there at %s", ErrNotImport,
			info.Created.UTC().Format(time.RFC3339), st.CreatedAt.UTC().Format(time.RFC3339))
	}
	if info.IsArchived() && st.ArchivedAt.IsZero() {
		return ImportResult{}, fmt.Errorf("%w: it is archived, the store there is not", ErrNotImport)
	}
	pr := &prior{versions: map[string]memstore.Version{}, live: map[string]string{}}
	err = use(d, opt.Name, func(r *gitmem.Repo) error {
		ix := memstore.NewIndex()
		for page := ""; ; {
			vs, next, err := ix.Versions(ctx, r, memstore.VersionFilter{}, page, 1000, false)
			if err != nil {
				return err
			}
			for _, v := range vs {
				if pr.newest == "" {
					pr.newest = v.ID
				}
				pr.versions[v.ID] = v
			}
			if page = next; next == "" {
				break
			}
		}
		items, _, err := ix.List(ctx, r, memstore.ListOptions{Limit: math.MaxInt})
		for _, it := range items {
			pr.live[it.ID] = it.Path
		}
		return err
	})
	if err != nil {
		return ImportResult{}, err
	}
	if pr.newest != "" {
		there := slices.ContainsFunc(versions, func(a anthropic.BetaManagedAgentsMemoryVersion) bool { return a.ID == pr.newest }) ||
			slices.ContainsFunc(memories, func(m anthropic.BetaManagedAgentsMemoryListItemUnion) bool { return m.MemoryVersionID == pr.newest })
		if !there {
			return ImportResult{}, fmt.Errorf("%w: its newest version, %s, is not there", ErrNotImport, policy.ClipName(pr.newest))
		}
	}
	p, err := plan(ctx, c, st, versions, memories, pr)
	if err != nil {
		return ImportResult{}, err
	}
	res, err := p.run(ctx, d, opt, info, clock)
	res.Again, res.Already = true, len(pr.versions)
	return res, err
}

// prior is what a store imported before holds.
type prior struct {
	versions map[string]memstore.Version // by id
	live     map[string]string           // the path of each live memory, by id
	newest   string                      // the id of its newest version
}

func (pr *prior) has(id string) bool {
	if pr == nil {
		return false
	}
	_, ok := pr.versions[id]
	return ok
}

// run writes the plan's commits into the store opt.Name of d, whose
// metadata is info, each at its time, then checks the store against what
// the API listed.
func (p *importPlan) run(ctx context.Context, d *stores.Dir, opt ImportOptions, info stores.Info, clock *atomic.Int64) (ImportResult, error) {
	res := ImportResult{Truncated: len(p.truncated), Unversioned: p.unversioned, Skipped: p.skipped}
	st := p.store
	// The store's metadata as it is there, at its time: archiving sets
	// updated_at too, so an update at the time of the archiving is one only
	// when the metadata differs, and comes first.
	archive := !st.ArchivedAt.IsZero() && info.Archived.IsZero()
	differs := info.DisplayName != st.Name || info.Description != st.Description || !maps.Equal(info.Metadata, st.Metadata)
	if differs || st.UpdatedAt.Unix() != info.Updated.Unix() && !(archive && st.UpdatedAt.Unix() == st.ArchivedAt.Unix()) {
		p.events = append(p.events, event{at: st.UpdatedAt, update: true})
	}
	if archive {
		p.events = append(p.events, event{at: st.ArchivedAt, archive: true})
	}
	// Oldest first; a version before a record made in the same second.
	slices.SortStableFunc(p.events, func(a, b event) int { return a.at.Truncate(time.Second).Compare(b.at.Truncate(time.Second)) })
	ix := memstore.NewIndex()
	var err error
	for i, e := range p.events {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		clock.Store(e.at.UnixNano())
		switch {
		case e.archive:
			_, err = d.Archive(opt.Name, true, gitmem.Signature{})
			res.Changed = true
		case e.update:
			_, err = d.Update(opt.Name, changeTo(st, info.Metadata), gitmem.Signature{})
			res.Changed = true
		case e.redacted != nil:
			err = use(d, opt.Name, func(r *gitmem.Repo) error { return ix.ReplayRedaction(ctx, r, e.redacted, e.by) })
			res.Redactions++
		default:
			err = use(d, opt.Name, func(r *gitmem.Repo) error { return ix.Replay(ctx, r, e.v) })
			res.Versions++
			if !e.v.RedactedAt.IsZero() {
				res.Redacted++
			}
		}
		if err != nil {
			var inv *memstore.InvalidError
			var pc *memstore.PathConflictError
			if errors.As(err, &inv) || errors.As(err, &pc) {
				return res, importErr("version %s of memory %s cannot follow the versions before it: %v", policy.ClipName(e.v.ID), policy.ClipName(e.v.MemoryID), err)
			}
			return res, err
		}
		if opt.Progress != nil {
			opt.Progress(i+1, len(p.events))
		}
	}
	if err := use(d, opt.Name, func(r *gitmem.Repo) error { return p.check(ctx, ix, r) }); err != nil {
		return res, err
	}
	if res.Store, err = d.Get(opt.Name); err != nil {
		return res, err
	}
	if err := checkStore(st, res.Store); err != nil {
		return res, err
	}
	res.Memories = len(p.memories)
	return res, nil
}

// changeTo is the change that gives a store whose metadata is cur the
// name, description and metadata of st.
func changeTo(st *anthropic.BetaManagedAgentsMemoryStore, cur map[string]string) stores.Change {
	ch := stores.Change{DisplayName: &st.Name, Description: &st.Description, Metadata: map[string]*string{}}
	for k, v := range st.Metadata {
		ch.Metadata[k] = &v
	}
	for k := range cur {
		if _, ok := st.Metadata[k]; !ok {
			ch.Metadata[k] = nil
		}
	}
	return ch
}

// use runs fn with store name's repository.
func use(d *stores.Dir, name string, fn func(r *gitmem.Repo) error) error {
	s, err := d.Acquire(context.Background(), name)
	if err != nil {
		return err
	}
	defer s.Release()
	return s.Use(func(r *gitmem.Repo, _ stores.Meta) error { return fn(r) })
}

// listVersions lists every version, with its content, in the API's order,
// up to most (Remote.maxListed).
func listVersions(ctx context.Context, c anthropic.Client, id string, most int) ([]anthropic.BetaManagedAgentsMemoryVersion, error) {
	page, err := c.Beta.MemoryStores.MemoryVersions.List(ctx, id, anthropic.BetaMemoryStoreMemoryVersionListParams{
		View: anthropic.BetaManagedAgentsMemoryViewFull, Limit: param.NewOpt[int64](20)})
	return listAll("versions of store "+id, page, err, most, func(v anthropic.BetaManagedAgentsMemoryVersion) string { return v.ID })
}

// listMemories lists every memory, without content, up to most
// (Remote.maxListed).
func listMemories(ctx context.Context, c anthropic.Client, id string, most int) ([]anthropic.BetaManagedAgentsMemoryListItemUnion, error) {
	page, err := c.Beta.MemoryStores.Memories.List(ctx, id, anthropic.BetaMemoryStoreMemoryListParams{
		View: anthropic.BetaManagedAgentsMemoryViewBasic, Limit: param.NewOpt[int64](100)})
	items, err := listAll("memories of store "+id, page, err, most, func(it anthropic.BetaManagedAgentsMemoryListItemUnion) string {
		return it.Type + "\x00" + it.ID + "\x00" + it.Path
	})
	return slices.DeleteFunc(items, func(it anthropic.BetaManagedAgentsMemoryListItemUnion) bool { return it.Type != "memory" }), err
}

// maxIdlePages is the most pages in a row a listing may give that bring
// nothing new (empty, or only items it gave before), each with a
// next_page: the hosted service may send an empty page before the end.
const maxIdlePages = 10

// listAll is every item of a listing, from its first page on, following
// next_page; id names an item. A listing without end, of a source broken
// or hostile, would be followed for ever, holding every page: it stops,
// an *ImportError, at a next_page given a second time, at maxIdlePages
// pages in a row that bring nothing new, and past most items in all
// (repeats included). What it holds meanwhile is bounded with it: the
// items, their ids and a hash of each cursor.
func listAll[T any](what string, page *pagination.PageCursor[T], err error, most int, id func(T) string) ([]T, error) {
	var out []T
	ids := map[string]bool{}
	seen := map[[sha256.Size]byte]bool{}
	idle := 0
	for err == nil {
		fresh := false
		for _, it := range page.Data {
			if k := id(it); !ids[k] {
				ids[k], fresh = true, true
			}
		}
		out = append(out, page.Data...)
		if len(out) > most {
			return nil, importErr("the API lists the %s without end: more than %s items (the bound of one listing)", what, policy.Thousands(int64(most)))
		}
		next := page.NextPage
		if next == "" {
			return out, nil
		}
		if fresh {
			idle = 0
		} else {
			idle++
		}
		if idle >= maxIdlePages {
			return nil, importErr("the API lists the %s without end: %d pages in a row give nothing new, each with a next_page", what, idle)
		}
		h := sha256.Sum256([]byte(next))
		if seen[h] {
			return nil, importErr("the API lists the %s without end: it gives the next_page %s a second time", what, policy.QuoteName(next))
		}
		seen[h] = true
		page, err = page.GetNextPage()
	}
	return nil, remoteErr(err)
}

// gitTimes are the times a commit of gitmem's holds: from 1970 (git's
// dates are not negative) to 2262 (the clock counts nanoseconds in an
// int64).
var gitTimes = [2]time.Time{time.Unix(0, 0), time.Unix(0, math.MaxInt64)}

// checkTime refuses a time a commit here cannot hold as it is: what
// says whose. The zero time (none, as a version not redacted has) is
// taken only where optional: it is also what an empty, null or unreadable
// time decodes to.
func checkTime(what string, t time.Time, optional bool) error {
	if t.IsZero() && !optional {
		return importErr("%s is missing or not a time", what)
	}
	if !t.IsZero() && (t.Before(gitTimes[0]) || t.After(gitTimes[1])) {
		return importErr("%s %s is out of the times a git commit holds here (1970 to 2262)", what, t.UTC().Format(time.RFC3339))
	}
	return nil
}

// checkActor refuses an actor whose id a commit's trailer cannot hold as
// it is (memstore writes it through policy.CommitText): it would come
// out different. what says whose.
func checkActor(what string, a memstore.Actor) error {
	if policy.CommitText(a.ID, policy.MaxCallerBytes) != a.ID {
		return importErr("%s id %s cannot stand in a commit's trailer as it is (a control character, white space at an end or in a run, or over %d bytes)",
			what, policy.QuoteName(a.ID), policy.MaxCallerBytes)
	}
	return nil
}

func actorOf(a anthropic.BetaManagedAgentsActorUnion) memstore.Actor {
	switch a.Type {
	case memstore.APIActor:
		return memstore.Actor{Type: a.Type, ID: a.APIKeyID}
	case memstore.SessionActor:
		return memstore.Actor{Type: a.Type, ID: a.SessionID}
	case memstore.UserActor:
		return memstore.Actor{Type: a.Type, ID: a.UserID}
	case memstore.ServiceAccountActor:
		return memstore.Actor{Type: a.Type, ID: a.ServiceAccountID}
	}
	return memstore.Actor{}
}

// event is one commit of an import: a version, a redaction record, or a
// change of the store's metadata.
type event struct {
	at       time.Time
	v        memstore.Version
	redacted []string // a redaction record of these versions, by by
	by       memstore.Actor
	update   bool
	archive  bool
}

// importPlan is an import's commits, oldest first, and what to check the
// copy against.
type importPlan struct {
	store       *anthropic.BetaManagedAgentsMemoryStore
	prior       *prior // what the store here has: nil for a new one
	events      []event
	versions    []anthropic.BetaManagedAgentsMemoryVersion
	memories    []anthropic.BetaManagedAgentsMemoryListItemUnion
	truncated   map[string]bool // memories whose first version is not their creation
	created     map[string]bool // memories whose creation is listed
	unversioned int
	synthetic   map[string]bool // versions made here for memories with none there
	skipped     int
	skippedIDs  map[string]bool
}

// plan orders the versions by time (the API lists them newest first:
// reversed, versions of the same time keep their order) and makes each
// that the store here does not have (pr: nil for a new store) a version
// to replay: a redacted one at the path its memory had before (or has
// next: the API does not say), a memory's first version a creation, a
// memory's current content that no version holds (the service no longer
// keeps it) a version of its own. The versions here must be the oldest
// ones there, as they were there.
func plan(ctx context.Context, c anthropic.Client, st *anthropic.BetaManagedAgentsMemoryStore,
	versions []anthropic.BetaManagedAgentsMemoryVersion, memories []anthropic.BetaManagedAgentsMemoryListItemUnion, pr *prior) (*importPlan, error) {
	p := &importPlan{store: st, prior: pr, versions: versions, memories: memories, truncated: map[string]bool{}, created: map[string]bool{},
		synthetic: map[string]bool{}, skippedIDs: map[string]bool{}}
	vs, listed, err := p.listedVersions()
	if err != nil {
		return nil, err
	}
	unlisted, err := p.unversionedMemories(ctx, c, listed)
	if err != nil {
		return nil, err
	}
	vs = append(vs, unlisted...)
	slices.SortStableFunc(vs, func(a, b memstore.Version) int { return a.Created.Compare(b.Created) })
	redactions, err := p.replayEvents(vs)
	if err != nil {
		return nil, err
	}
	p.addRedactions(redactions)
	return p, nil
}

// listedVersions is p.versions oldest first (versions of the same time
// keep their order), each checked against its content_sha256, and the
// set of their ids.
func (p *importPlan) listedVersions() ([]memstore.Version, map[string]bool, error) {
	var vs []memstore.Version
	listed := map[string]bool{}
	for i := len(p.versions) - 1; i >= 0; i-- {
		a := p.versions[i]
		if listed[a.ID] {
			return nil, nil, importErr("version %s is listed twice", policy.ClipName(a.ID))
		}
		listed[a.ID] = true
		if a.Operation == memstore.Created {
			p.created[a.MemoryID] = true
		}
		v := memstore.Version{ID: a.ID, MemoryID: a.MemoryID, Operation: string(a.Operation), Created: a.CreatedAt, Path: a.Path,
			Content: []byte(a.Content), By: actorOf(a.CreatedBy)}
		of := "version " + policy.ClipName(a.ID) + ": its "
		for _, err := range []error{checkTime(of+"created_at", a.CreatedAt, false), checkTime(of+"redacted_at", a.RedactedAt, true),
			checkActor(of+"created_by", v.By), checkActor(of+"redacted_by", actorOf(a.RedactedBy))} {
			if err != nil {
				return nil, nil, err
			}
		}
		if len(v.Content) > memstore.MaxContentBytes {
			return nil, nil, importErr("version %s: its content is %s bytes, over the %s a memory holds", policy.ClipName(a.ID),
				policy.Thousands(int64(len(v.Content))), policy.Thousands(memstore.MaxContentBytes))
		}
		if !a.RedactedAt.IsZero() {
			v.RedactedAt, v.RedactedBy, v.Content = a.RedactedAt, actorOf(a.RedactedBy), nil
		} else if v.Operation != memstore.Deleted && memstore.SHA256(v.Content) != a.ContentSha256 {
			return nil, nil, importErr("version %s: its content does not have its content_sha256", policy.ClipName(a.ID))
		}
		vs = append(vs, v)
	}
	return vs, listed, nil
}

// unversionedMemories is a version of its own for each memory whose
// current content no version listed (or here) holds: the service no
// longer keeps it. It reads each such memory in full.
func (p *importPlan) unversionedMemories(ctx context.Context, c anthropic.Client, listed map[string]bool) ([]memstore.Version, error) {
	var vs []memstore.Version
	for _, m := range p.memories {
		if listed[m.MemoryVersionID] || p.prior.has(m.MemoryVersionID) {
			continue
		}
		full, err := c.Beta.MemoryStores.Memories.Get(ctx, m.ID, anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: p.store.ID,
			View: anthropic.BetaManagedAgentsMemoryViewFull})
		if err != nil {
			return nil, remoteErr(err)
		}
		if memstore.SHA256([]byte(full.Content)) != full.ContentSha256 {
			return nil, importErr("memory %s: its content does not have its content_sha256", policy.ClipName(m.ID))
		}
		if err := checkTime("memory "+policy.ClipName(m.ID)+": its updated_at", full.UpdatedAt, false); err != nil {
			return nil, err
		}
		vs = append(vs, memstore.Version{ID: full.MemoryVersionID, MemoryID: full.ID, Operation: memstore.Created, Created: full.UpdatedAt,
			Path: full.Path, Content: []byte(full.Content)})
		p.synthetic[full.MemoryVersionID] = true
		p.unversioned++
	}
	return vs, nil
}

// replayEvents makes each of vs (oldest first) that the store here does
// not have an event of p, as the store here is to replay it, and returns
// the redactions among them, one event each.
func (p *importPlan) replayEvents(vs []memstore.Version) ([]event, error) {
	pr := p.prior
	current := map[string]string{} // the path of each memory live at this point
	for _, m := range p.memories {
		current[m.ID] = m.Path // where a memory is at the end, for a redacted version with nothing after it
	}
	live := map[string]string{}
	if pr != nil {
		maps.Copy(live, pr.live)
	}
	var redactions []event
	appended := "" // the first version of this import
	for i, v := range vs {
		if pr.has(v.ID) {
			switch {
			case appended != "":
				return nil, fmt.Errorf("%w: it has version %s, not the earlier %s", ErrNotImport, policy.ClipName(v.ID), policy.ClipName(appended))
			case !v.RedactedAt.IsZero() && pr.versions[v.ID].RedactedAt.IsZero():
				return nil, importErr("version %s was redacted there after it was imported here, and an import does not rewrite history "+
					"(a new import, under another name, does not have it)", policy.ClipName(v.ID))
			}
			continue
		}
		path, here := live[v.MemoryID]
		switch {
		case v.Operation == memstore.Deleted && !here:
			p.skipped++
			p.skippedIDs[v.ID] = true
			continue
		case v.Operation == memstore.Modified && !here:
			v.Operation = memstore.Created
			p.truncated[v.MemoryID] = true
		case v.Operation == memstore.Created && here && p.synthetic[v.ID]:
			v.Operation = memstore.Modified
		}
		if !v.RedactedAt.IsZero() {
			v.Path = path
			if !here {
				v.Path = nextPath(vs[i+1:], v.MemoryID, current[v.MemoryID])
			}
			redactions = append(redactions, event{at: v.RedactedAt, redacted: []string{v.ID}, by: v.RedactedBy})
		}
		if v.Operation != memstore.Deleted {
			if _, err := memstore.ParseToolPath(v.Path); err != nil {
				return nil, importErr("version %s of memory %s: its path cannot be a gitmem memory's: %v", policy.ClipName(v.ID), policy.ClipName(v.MemoryID), err)
			}
		}
		if v.Operation == memstore.Deleted {
			delete(live, v.MemoryID)
		} else {
			live[v.MemoryID] = v.Path
		}
		if appended == "" {
			appended = v.ID
		}
		p.events = append(p.events, event{at: v.Created, v: v})
	}
	return redactions, nil
}

// addRedactions appends the redactions to p's events: those made
// together (the same time and actor) as one record.
func (p *importPlan) addRedactions(redactions []event) {
	type key struct {
		at int64
		by memstore.Actor
	}
	group := map[key]int{}
	for _, r := range redactions {
		k := key{r.at.UnixNano(), r.by}
		if i, ok := group[k]; ok {
			p.events[i].redacted = append(p.events[i].redacted, r.redacted...)
			continue
		}
		group[k] = len(p.events)
		p.events = append(p.events, r)
	}
}

// nextPath is the path the first of vs that is memory mid's and has one
// gives it, else end (its path at the end), else a path of its own.
func nextPath(vs []memstore.Version, mid, end string) string {
	for _, v := range vs {
		if v.MemoryID == mid && v.RedactedAt.IsZero() {
			return v.Path
		}
	}
	if end != "" {
		return end
	}
	return "/redacted/" + mid
}

// check compares the copy with what the API listed, field by field (times
// to the second): every version, every memory.
func (p *importPlan) check(ctx context.Context, ix *memstore.Index, r *gitmem.Repo) error {
	local := map[string]memstore.Version{}
	for page := ""; ; {
		vs, next, err := ix.Versions(ctx, r, memstore.VersionFilter{}, page, 1000, false)
		if err != nil {
			return err
		}
		for _, v := range vs {
			local[v.ID] = v
		}
		if page = next; next == "" {
			break
		}
	}
	if err := p.checkVersions(local); err != nil {
		return err
	}
	return p.checkMemories(ctx, ix, r)
}

// copyDiffers is the error of a copy whose what of id is got, not want.
func copyDiffers(what, id string, got, want any) error {
	return importErr("the copy differs from the store there: %s of %s is %v here, %v there (did the store change while it was read? run the import again)", what, policy.ClipName(id), got, want)
}

// checkVersions compares the versions here (local, by id: it takes out
// those listed) with those the API listed, and says which was made here
// that is not listed.
func (p *importPlan) checkVersions(local map[string]memstore.Version) error {
	sec := zeroUnix
	for _, a := range p.versions {
		if p.skippedIDs[a.ID] {
			continue
		}
		v, ok := local[a.ID]
		redacted := !a.RedactedAt.IsZero()
		op := string(a.Operation)
		if !p.created[a.MemoryID] && op == memstore.Modified && v.Operation == memstore.Created {
			op = memstore.Created // its memory's first version here, its creation no longer there
		}
		switch {
		case !ok:
			return copyDiffers("version", a.ID, "missing", "listed")
		case v.MemoryID != a.MemoryID:
			return copyDiffers("the memory", a.ID, v.MemoryID, a.MemoryID)
		case v.Operation != op:
			return copyDiffers("the operation", a.ID, v.Operation, op)
		case sec(v.Created) != sec(a.CreatedAt):
			return copyDiffers("the time", a.ID, v.Created, a.CreatedAt)
		case v.By != actorOf(a.CreatedBy):
			return copyDiffers("created_by", a.ID, v.By, actorOf(a.CreatedBy))
		case redacted != !v.RedactedAt.IsZero() || sec(v.RedactedAt) != sec(a.RedactedAt) || v.RedactedBy != actorOf(a.RedactedBy):
			return copyDiffers("the redaction", a.ID, v.RedactedAt, a.RedactedAt)
		case !redacted && (v.Path != a.Path || v.SHA256 != a.ContentSha256 || v.Size != a.ContentSizeBytes):
			return copyDiffers("the path or content", a.ID, v.Path, a.Path)
		}
		delete(local, a.ID)
	}
	for id := range local {
		if !p.synthetic[id] && !p.prior.has(id) {
			return copyDiffers("version", id, "made", "not listed")
		}
	}
	return nil
}

// checkMemories compares the memories here with those the API listed.
func (p *importPlan) checkMemories(ctx context.Context, ix *memstore.Index, r *gitmem.Repo) error {
	sec := zeroUnix
	items, _, err := ix.List(ctx, r, memstore.ListOptions{Limit: len(p.memories) + 1})
	if err != nil {
		return err
	}
	if len(items) != len(p.memories) {
		return copyDiffers("the number of memories", "the store", len(items), len(p.memories))
	}
	redacted := map[string]bool{}
	for _, a := range p.versions {
		if !a.RedactedAt.IsZero() {
			redacted[a.ID] = true
		}
	}
	for _, a := range p.memories {
		m, err := ix.Get(ctx, r, a.ID, false)
		switch {
		case errors.Is(err, memstore.ErrNotFound):
			return copyDiffers("memory", a.ID, "missing", "listed")
		case err != nil:
			return err
		case m.Path != a.Path || m.VersionID != a.MemoryVersionID || sec(m.Updated) != sec(a.UpdatedAt):
			return copyDiffers("the path, version or time", a.ID, m.Path+" "+m.VersionID, a.Path+" "+a.MemoryVersionID)
		case !redacted[a.MemoryVersionID] && (m.SHA256 != a.ContentSha256 || m.Size != a.ContentSizeBytes):
			return copyDiffers("the content", a.ID, m.SHA256, a.ContentSha256)
		case p.created[a.ID] && sec(m.Created) != sec(a.CreatedAt):
			return copyDiffers("created_at", a.ID, m.Created, a.CreatedAt)
		}
	}
	return nil
}

// checkStore compares the copy's metadata with the store there.
func checkStore(st *anthropic.BetaManagedAgentsMemoryStore, info stores.Info) error {
	want := fmt.Sprintf("%q %q %v %d %d %d", st.Name, st.Description, st.Metadata, st.CreatedAt.Unix(), st.UpdatedAt.Unix(), zeroUnix(st.ArchivedAt))
	got := fmt.Sprintf("%q %q %v %d %d %d", info.DisplayName, info.Description, info.Metadata, info.Created.Unix(), info.Updated.Unix(), zeroUnix(info.Archived))
	if got != want {
		return importErr("the copy's name, description, metadata or times differ from the store there: %s here, %s there", got, want)
	}
	return nil
}

func zeroUnix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}
