package storesapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/memstore"
	"github.com/gitmem-dev/gitmem/operator"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
)

// The operator API: JSON over HTTP, documented in docs/openapi.yaml (a
// test validates every response against it). Each endpoint calls the same
// function as the CLI command that does the same thing.

func (s *storesServer) operatorRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/stores", s.listStores)
	mux.HandleFunc("POST /v1/stores", s.createStore)
	mux.HandleFunc("GET /v1/stores/{store}", s.op(read, s.getStore))
	mux.HandleFunc("PATCH /v1/stores/{store}", s.op(write, s.updateStore))
	mux.HandleFunc("DELETE /v1/stores/{store}", s.op(write, s.deleteStore))
	mux.HandleFunc("POST /v1/stores/{store}/archive", s.op(write, s.archiveStore(true)))
	mux.HandleFunc("POST /v1/stores/{store}/unarchive", s.op(write, s.archiveStore(false)))
	mux.HandleFunc("GET /v1/stores/{store}/memories", s.op(read, s.listMemories))
	mux.HandleFunc("GET /v1/stores/{store}/memory", s.op(read, s.getMemory))
	mux.HandleFunc("PUT /v1/stores/{store}/memory", s.op(write, s.putMemory))
	mux.HandleFunc("DELETE /v1/stores/{store}/memory", s.op(write, s.deleteMemory))
	mux.HandleFunc("GET /v1/stores/{store}/versions", s.op(read, s.listVersions))
	mux.HandleFunc("GET /v1/stores/{store}/versions/{rev}", s.op(read, s.getVersion))
	mux.HandleFunc("POST /v1/stores/{store}/revert", s.op(write, s.revert))
	mux.HandleFunc("POST /v1/stores/{store}/restore", s.op(write, s.restore))
	mux.HandleFunc("POST /v1/stores/{store}/redact", s.op(write, s.redact))
}

const (
	read  = false
	write = true
)

// op wraps an operator request on one store: an operator token whose scope
// covers the store, a read-write one when the request changes something.
func (s *storesServer) op(writes bool, fn func(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store)) http.HandlerFunc {
	return s.store(true, func(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store) {
		if writes && p.ReadOnly() {
			handler.HTTPError(w, http.StatusForbidden, "token "+p.Name+" is read-only")
			return
		}
		fn(w, r, p, st)
	})
}

// operator checks a request that names no store: an operator token.
func (s *storesServer) operator(w http.ResponseWriter, r *http.Request, writes bool) (principal, bool) {
	p, ok := principalOf(r), true
	switch {
	case !p.Operator():
		handler.HTTPError(w, http.StatusForbidden, "token "+p.Name+" is an agent token; the operator API needs an operator token")
		ok = false
	case writes && p.ReadOnly():
		handler.HTTPError(w, http.StatusForbidden, "token "+p.Name+" is read-only")
		ok = false
	}
	return p, ok
}

func (s *storesServer) now() time.Time {
	if s.opt.Now != nil {
		return s.opt.Now()
	}
	return time.Now()
}

// decode reads a JSON request body into v: one object, no unknown field
// (decodeObject, as the Memory Stores API reads one).
func (s *storesServer) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, ok := handler.ReadBody(w, r)
	if !ok {
		return false
	}
	if msg := decodeObject(body, v); msg != "" {
		handler.HTTPError(w, http.StatusBadRequest, msg)
		return false
	}
	return true
}

// notUTF8 is the refusal of a body with a string that is not valid UTF-8
// (encoding/json would have stored U+FFFD in its place without a word).
func notUTF8(name string) string {
	return name + " is not valid UTF-8 (nor is an escaped lone surrogate); nothing was changed"
}

// listPage is a page of a listing.
type listPage[T any] struct {
	Data     []T     `json:"data"`
	NextPage *string `json:"next_page"`
}

// newPage is a page of r's listing; after is where the next page starts
// ("" at the end), handed out as a cursor of r's listing.
func newPage[T any](r *http.Request, items []T, after string) listPage[T] {
	p := listPage[T]{Data: items}
	if p.Data == nil {
		p.Data = []T{}
	}
	if after != "" {
		next := memstore.Cursor(listing(r), after)
		p.NextPage = &next
	}
	return p
}

// pageAfter is where the page r asks for starts: the value of its cursor
// ("" for the first page), or an *memstore.InvalidError when r's listing
// did not make it.
func pageAfter(r *http.Request) (string, error) {
	return memstore.FromCursor(listing(r), r.URL.Query().Get("page"))
}

// opPageAfter is pageAfter for the operator API (false: answered 400).
func opPageAfter(w http.ResponseWriter, r *http.Request) (string, bool) {
	after, err := pageAfter(r)
	if err != nil {
		handler.HTTPError(w, http.StatusBadRequest, err.Error())
		return "", false
	}
	return after, true
}

// listing names the listing r reads, whose cursors alone it takes: its
// path (the route, the store) and its query but for what does not change
// which items it lists (page, limit, view, beta).
func listing(r *http.Request) string {
	q := r.URL.Query()
	for _, k := range []string{"page", "limit", "view", "beta"} {
		q.Del(k)
	}
	return r.URL.Path + "?" + q.Encode()
}

// limit reads ?limit= (1 to 100, default 20).
func limit(w http.ResponseWriter, r *http.Request) (int, bool) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return 20, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 100 {
		handler.HTTPError(w, http.StatusBadRequest, "limit must be an integer from 1 to 100")
		return 0, false
	}
	return n, true
}

// Stores.

func (s *storesServer) listStores(w http.ResponseWriter, r *http.Request) {
	p, ok := s.operator(w, r, read)
	if !ok {
		return
	}
	n, ok := limit(w, r)
	if !ok {
		return
	}
	after, ok := opPageAfter(w, r)
	if !ok {
		return
	}
	page, err := s.dir.List(stores.ListOptions{After: after, Limit: n, IncludeArchived: r.URL.Query().Get("include_archived") == "true", Allow: p.Allows})
	if err != nil {
		s.storeError(w, "", err)
		return
	}
	var out []any
	for _, info := range page.Items {
		if info.Err != nil {
			s.opt.Logger.Error("store cannot be read", "store", info.Name, "err", info.Err.Error())
		}
		out = append(out, info.ListJSON())
	}
	handler.WriteJSON(w, http.StatusOK, newPage(r, out, page.Next))
}

type storeRequest struct {
	Name            string            `json:"name"`
	Description     string            `json:"description"`
	Metadata        map[string]string `json:"metadata"`
	SecretScreening string            `json:"secret_screening"`
}

func (s *storesServer) createStore(w http.ResponseWriter, r *http.Request) {
	p, ok := s.operator(w, r, write)
	if !ok {
		return
	}
	var req storeRequest
	if !s.decode(w, r, &req) {
		return
	}
	if err := policy.CheckStoreName(req.Name); err != nil {
		handler.HTTPError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !p.Allows(req.Name) {
		handler.HTTPError(w, http.StatusForbidden, "token "+p.Name+" may not use store "+req.Name)
		return
	}
	m := stores.Meta{Description: req.Description, Metadata: req.Metadata}
	if req.SecretScreening != "" {
		mode, err := policy.ParseScreenMode(req.SecretScreening)
		if err != nil {
			handler.HTTPError(w, http.StatusBadRequest, err.Error())
			return
		}
		m.Screening = mode
	}
	info, err := s.dir.Create(req.Name, m, p.author())
	if err != nil {
		s.metaError(w, req.Name, err)
		return
	}
	handler.WriteJSON(w, http.StatusCreated, info.JSON())
}

// metaError answers a failed metadata change: a refused value is 400.
func (s *storesServer) metaError(w http.ResponseWriter, name string, err error) {
	var se *gitmem.StorageError
	if _, unopened := stores.Unopened(name, err); unopened || errors.Is(err, stores.ErrNotFound) || errors.Is(err, stores.ErrExists) || errors.Is(err, stores.ErrInTheWay) || errors.Is(err, stores.ErrArchived) || errors.As(err, &se) {
		s.storeError(w, name, err)
		return
	}
	handler.HTTPError(w, http.StatusBadRequest, err.Error())
}

func (s *storesServer) getStore(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store) {
	err := st.Use(func(_ *gitmem.Repo, m stores.Meta) error {
		handler.WriteJSON(w, http.StatusOK, stores.Info{Name: st.Name(), Meta: m}.JSON())
		return nil
	})
	if err != nil {
		s.storeError(w, st.Name(), err)
	}
}

func (s *storesServer) updateStore(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store) {
	var req struct {
		Description     *string            `json:"description"`
		Metadata        map[string]*string `json:"metadata"`
		SecretScreening *string            `json:"secret_screening"`
	}
	if !s.decode(w, r, &req) {
		return
	}
	ch := stores.Change{Description: req.Description, Metadata: req.Metadata}
	if req.SecretScreening != nil {
		mode := policy.ScreenMode("")
		if *req.SecretScreening != "" {
			var err error
			if mode, err = policy.ParseScreenMode(*req.SecretScreening); err != nil {
				handler.HTTPError(w, http.StatusBadRequest, err.Error())
				return
			}
		}
		ch.Screening = &mode
	}
	info, err := s.dir.Update(st.Name(), ch, p.author())
	if err != nil {
		s.metaError(w, st.Name(), err)
		return
	}
	handler.WriteJSON(w, http.StatusOK, info.JSON())
}

func (s *storesServer) archiveStore(archived bool) func(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store) {
	return func(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store) {
		info, err := s.dir.Archive(st.Name(), archived, p.author())
		if err != nil {
			s.metaError(w, st.Name(), err)
			return
		}
		handler.WriteJSON(w, http.StatusOK, info.JSON())
	}
}

func (s *storesServer) deleteStore(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store) {
	if err := s.dir.Delete(st.Name()); err != nil {
		s.storeError(w, st.Name(), err)
		return
	}
	handler.WriteJSON(w, http.StatusOK, map[string]any{"name": st.Name(), "deleted": true})
}

// Memories.

// memPath reads a memory path given as the model writes it
// (/memories/notes/a.md), relative to memories/.
func memPath(w http.ResponseWriter, p string) (string, bool) {
	rel, err := policy.ParsePath(p)
	if err != nil {
		handler.HTTPError(w, http.StatusBadRequest, err.Error())
		return "", false
	}
	return rel, true
}

// filePath reads the path of one memory file: not the root.
func filePath(w http.ResponseWriter, p string) (string, bool) {
	if p == "" {
		handler.HTTPError(w, http.StatusBadRequest, "the path parameter is required: ?path=/memories/...")
		return "", false
	}
	rel, ok := memPath(w, p)
	if ok && rel == "" {
		handler.HTTPError(w, http.StatusBadRequest, "path names the /memories folder itself; name a file in it")
		return "", false
	}
	return rel, ok
}

func (s *storesServer) listMemories(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store) {
	n, ok := limit(w, r)
	if !ok {
		return
	}
	prefix := r.URL.Query().Get("path_prefix")
	if prefix == "" {
		prefix = policy.Root
	}
	rel, ok := memPath(w, prefix)
	if !ok {
		return
	}
	after, ok := opPageAfter(w, r)
	if !ok {
		return
	}
	err := st.Use(func(repo *gitmem.Repo, _ stores.Meta) error {
		page, err := operator.ListMemories(r.Context(), repo, rel, after, n)
		if err != nil {
			return err
		}
		var out []operator.MemoryJSON
		for _, m := range page.Items {
			out = append(out, m.JSON(false))
		}
		handler.WriteJSON(w, http.StatusOK, newPage(r, out, page.Next))
		return nil
	})
	if err != nil {
		s.storeError(w, st.Name(), err)
	}
}

func (s *storesServer) getMemory(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store) {
	rel, ok := filePath(w, r.URL.Query().Get("path"))
	if !ok {
		return
	}
	err := st.Use(func(repo *gitmem.Repo, _ stores.Meta) error {
		m, err := operator.GetMemory(r.Context(), repo, rel)
		if err != nil {
			return err
		}
		handler.WriteJSON(w, http.StatusOK, m.JSON(true))
		return nil
	})
	s.memoryError(w, st.Name(), rel, err)
}

// memoryError answers the failure of a memory operation (nil: answered).
func (s *storesServer) memoryError(w http.ResponseWriter, store, rel string, err error) {
	var pe *operator.PreconditionError
	var le *policy.LimitError
	switch {
	case err == nil:
	case errors.Is(err, gitmem.ErrNotExist), errors.Is(err, gitmem.ErrIsDir):
		handler.HTTPError(w, http.StatusNotFound, "there is no memory file "+policy.Display(rel))
	case errors.Is(err, gitmem.ErrNotDir):
		handler.HTTPError(w, http.StatusConflict, "a parent folder of "+policy.Display(rel)+" is a file")
	case errors.As(err, &pe):
		handler.WriteJSON(w, http.StatusConflict, map[string]string{"error": pe.Error(), "content_sha256": pe.Current})
	case errors.As(err, &le):
		handler.HTTPError(w, http.StatusRequestEntityTooLarge, le.Error())
	default:
		s.storeError(w, store, err)
	}
}

// precondition is an optional condition on a memory's current content.
type precondition struct {
	Type          string `json:"type"`
	ContentSHA256 string `json:"content_sha256"`
}

func (pc *precondition) expect(w http.ResponseWriter) (*string, bool) {
	if pc == nil {
		return nil, true
	}
	if pc.Type != "content_sha256" || len(pc.ContentSHA256) != 64 {
		handler.HTTPError(w, http.StatusBadRequest, `precondition must be {"type":"content_sha256","content_sha256":"<64 hex digits>"}`)
		return nil, false
	}
	return &pc.ContentSHA256, true
}

func (s *storesServer) putMemory(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store) {
	rel, ok := filePath(w, r.URL.Query().Get("path"))
	if !ok {
		return
	}
	var req struct {
		Content      *string       `json:"content"`
		Precondition *precondition `json:"precondition"`
	}
	if !s.decode(w, r, &req) {
		return
	}
	if req.Content == nil {
		handler.HTTPError(w, http.StatusBadRequest, `the body needs "content", the memory's new text`)
		return
	}
	expect, ok := req.Precondition.expect(w)
	if !ok {
		return
	}
	err := st.Use(func(repo *gitmem.Repo, meta stores.Meta) error {
		if meta.IsArchived() {
			return stores.ErrArchived
		}
		_, created, err := operator.PutMemory(repo, rel, []byte(*req.Content), expect, s.opt.Limits, p.author(), unarchivedAt(st))
		if err != nil {
			return err
		}
		m, err := operator.GetMemory(r.Context(), repo, rel)
		if err != nil {
			return err
		}
		handler.WriteJSON(w, map[bool]int{true: http.StatusCreated, false: http.StatusOK}[created], m.JSON(false))
		return nil
	})
	s.memoryError(w, st.Name(), rel, err)
}

func (s *storesServer) deleteMemory(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store) {
	rel, ok := filePath(w, r.URL.Query().Get("path"))
	if !ok {
		return
	}
	var expect *string
	if e := r.URL.Query().Get("expected_content_sha256"); e != "" {
		if expect, ok = (&precondition{Type: "content_sha256", ContentSHA256: e}).expect(w); !ok {
			return
		}
	}
	err := st.Use(func(repo *gitmem.Repo, _ stores.Meta) error {
		c, err := operator.DeleteMemory(repo, rel, expect, p.author())
		if err != nil {
			return err
		}
		handler.WriteJSON(w, http.StatusOK, map[string]any{"path": policy.Display(rel), "deleted": true, "version": c.Hash})
		return nil
	})
	s.memoryError(w, st.Name(), rel, err)
}

// Versions.

func (s *storesServer) listVersions(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store) {
	n, ok := limit(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	opt := gitmem.LogOptions{ToolUseID: q.Get("tool_use_id"), Session: q.Get("session"), Agent: q.Get("agent"), Command: q.Get("command")}
	if path := q.Get("path"); path != "" {
		rel, ok := memPath(w, path)
		if !ok {
			return
		}
		opt.Paths = []string{rel}
	}
	for _, tf := range []struct {
		name string
		dst  *time.Time
	}{{"since", &opt.Since}, {"until", &opt.Until}} {
		if v := q.Get(tf.name); v != "" {
			t, err := policy.ParseTime(v, s.now())
			if err != nil {
				handler.HTTPError(w, http.StatusBadRequest, tf.name+": "+err.Error())
				return
			}
			*tf.dst = t
		}
	}
	after, ok := opPageAfter(w, r)
	if !ok {
		return
	}
	err := st.Use(func(repo *gitmem.Repo, _ stores.Meta) error {
		page, err := operator.Versions(r.Context(), repo, opt, after, n)
		if err != nil {
			return err
		}
		var out []operator.CommitJSON
		for _, c := range page.Items {
			out = append(out, operator.ToCommitJSON(c))
		}
		handler.WriteJSON(w, http.StatusOK, newPage(r, out, page.Next))
		return nil
	})
	if errors.Is(err, operator.ErrBadCursor) {
		handler.HTTPError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err != nil {
		s.storeError(w, st.Name(), err)
	}
}

func (s *storesServer) getVersion(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store) {
	err := st.Use(func(repo *gitmem.Repo, _ stores.Meta) error {
		c, err := operator.Revision(r.Context(), repo, r.PathValue("rev"), s.now(), false)
		if err != nil {
			return err
		}
		j := operator.ToCommitJSON(c)
		if j.Diff, err = operator.Patch(repo, c, nil); err != nil {
			return err
		}
		handler.WriteJSON(w, http.StatusOK, j)
		return nil
	})
	s.revError(w, st.Name(), err)
}

// revError answers a failed version operation (nil: answered).
func (s *storesServer) revError(w http.ResponseWriter, store string, err error) {
	var re *operator.RevError
	var ce *gitmem.ConflictError
	var ae *gitmem.AbsentError
	switch {
	case err == nil:
	case errors.As(err, &re) && re.Usage:
		handler.HTTPError(w, http.StatusBadRequest, re.Msg)
	case errors.As(err, &re):
		handler.HTTPError(w, http.StatusNotFound, re.Msg)
	case errors.As(err, new(*gitmem.AmbiguousError)): // Revert's: as a Usage RevError
		handler.HTTPError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, gitmem.ErrUnknownRev): // Revert's: worded as a RevError
		handler.HTTPError(w, http.StatusNotFound, strings.TrimPrefix(err.Error(), gitmem.ErrUnknownRev.Error()+": "))
	case errors.As(err, &ce):
		handler.WriteJSON(w, http.StatusConflict, conflictJSON(ce))
	case errors.As(err, &ae):
		paths, them := displayAll(ae.Paths), "them"
		if len(paths) == 1 {
			them = "it"
		}
		if len(paths) > 10 {
			paths = append(paths[:10], fmt.Sprintf("and %d more", len(ae.Paths)-10))
		}
		handler.HTTPError(w, http.StatusConflict, fmt.Sprintf("%s did not exist then: restoring would delete %s; nothing was changed (\"delete\": true deletes %[2]s)",
			strings.Join(paths, ", "), them))
	case errors.As(err, new(*gitmem.HandMadeError)):
		handler.HTTPError(w, http.StatusConflict, strings.TrimPrefix(err.Error(), "gitmem: "))
	case errors.Is(err, gitmem.ErrNoChange):
		handler.HTTPError(w, http.StatusConflict, "nothing to change: the memory is already so; no commit was made")
	default:
		s.memoryError(w, store, "", err)
	}
}

func displayAll(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = policy.Display(p)
	}
	return out
}

type conflictLines struct {
	BaseStart int      `json:"base_start"`
	BaseEnd   int      `json:"base_end"`
	Now       []string `json:"now"`
	Undo      []string `json:"undo"`
}

type fileConflictJSON struct {
	Path   string          `json:"path"`
	Reason string          `json:"reason"`
	Lines  []conflictLines `json:"lines"`
}

func conflictJSON(ce *gitmem.ConflictError) map[string]any {
	var files []fileConflictJSON
	for _, f := range ce.Files {
		fj := fileConflictJSON{Path: policy.Display(f.Path), Reason: f.Reason, Lines: []conflictLines{}}
		for _, k := range f.Conflicts {
			fj.Lines = append(fj.Lines, conflictLines{BaseStart: k.BaseStart + 1, BaseEnd: k.BaseEnd, Now: k.Ours, Undo: k.Theirs})
		}
		files = append(files, fj)
	}
	return map[string]any{"error": fmt.Sprintf("cannot revert %d file(s); nothing was changed (\"strategy\": \"theirs\" forces the undo where later edits overlap)", ce.NumFiles()),
		"conflicts": files}
}

// changeJSON is what a revert or restore did (or, dry, would do).
type changeJSON struct {
	DryRun  bool                 `json:"dry_run"`
	Version *operator.CommitJSON `json:"version"`
	Paths   []string             `json:"paths"`
	Diff    string               `json:"diff"`
}

func writeChange(w http.ResponseWriter, c gitmem.Commit, changes []gitmem.FileChange, dry bool) {
	out := changeJSON{DryRun: dry, Paths: []string{}}
	var diff strings.Builder
	for _, fc := range changes {
		out.Paths = append(out.Paths, policy.Display(fc.Path))
		diff.WriteString(fc.Unified())
	}
	out.Diff = diff.String()
	if !dry {
		j := operator.ToCommitJSON(c)
		j.Paths = out.Paths
		out.Version = &j
	}
	handler.WriteJSON(w, http.StatusOK, out)
}

func (s *storesServer) revert(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store) {
	var req struct {
		Revisions []string `json:"revisions"`
		Strategy  string   `json:"strategy"`
		DryRun    bool     `json:"dry_run"`
	}
	if !s.decode(w, r, &req) {
		return
	}
	if len(req.Revisions) == 0 || (req.Strategy != "" && req.Strategy != "theirs") {
		handler.HTTPError(w, http.StatusBadRequest, `the body needs "revisions" (commit hashes or tool_use ids); "strategy" can only be "theirs"`)
		return
	}
	err := st.Use(func(repo *gitmem.Repo, m stores.Meta) error {
		if m.IsArchived() && !req.DryRun {
			return stores.ErrArchived
		}
		c, changes, err := repo.Revert(r.Context(), req.Revisions, gitmem.RevertOptions{Theirs: req.Strategy == "theirs", Author: s.operatorAuthor(repo, p), DryRun: req.DryRun,
			Check: unarchivedChange(st)})
		if err != nil {
			return err
		}
		writeChange(w, c, changes, req.DryRun)
		return nil
	})
	s.revError(w, st.Name(), err)
}

// unarchivedChange is unarchivedAt as the check of an operator command
// (revert, restore).
func unarchivedChange(st *stores.Store) gitmem.Check {
	check := unarchivedAt(st)
	return func(tip string, _ []gitmem.FileChange) error { return check(tip) }
}

// operatorAuthor is who an operator command through the API is
// attributed to: the token, else the operator's git identity.
func (s *storesServer) operatorAuthor(repo *gitmem.Repo, p principal) gitmem.Signature {
	if a := p.author(); a != (gitmem.Signature{}) {
		return a
	}
	return repo.Operator()
}

func (s *storesServer) restore(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store) {
	var req struct {
		To     string   `json:"to"`
		Paths  []string `json:"paths"`
		Delete bool     `json:"delete"`
		DryRun bool     `json:"dry_run"`
	}
	if !s.decode(w, r, &req) {
		return
	}
	if req.To == "" {
		handler.HTTPError(w, http.StatusBadRequest, `the body needs "to": a revision, tool_use id or time (2h, yesterday, RFC 3339)`)
		return
	}
	var paths []string
	for _, path := range req.Paths {
		rel, ok := memPath(w, path)
		if !ok {
			return
		}
		paths = append(paths, rel)
	}
	err := st.Use(func(repo *gitmem.Repo, m stores.Meta) error {
		if m.IsArchived() && !req.DryRun {
			return stores.ErrArchived
		}
		target, err := operator.Revision(r.Context(), repo, req.To, s.now(), true)
		if err != nil {
			return err
		}
		c, changes, err := repo.Restore(r.Context(), target, gitmem.RestoreOptions{Paths: paths, Delete: req.Delete, DryRun: req.DryRun,
			Author: s.operatorAuthor(repo, p), Check: unarchivedChange(st)})
		if err != nil {
			return err
		}
		writeChange(w, c, changes, req.DryRun)
		return nil
	})
	s.revError(w, st.Name(), err)
}

func (s *storesServer) redact(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store) {
	var req struct {
		Path   string `json:"path"`
		Blob   string `json:"blob"`
		Match  string `json:"match"`
		DryRun bool   `json:"dry_run"`
	}
	if !s.decode(w, r, &req) {
		return
	}
	var path *string
	if req.Path != "" {
		rel, ok := memPath(w, req.Path)
		if !ok {
			return
		}
		path = &rel
	}
	red, err := operator.ParseRedaction(path, req.Blob, req.Match)
	var re *operator.RedactionError
	if errors.As(err, &re) {
		msg := re.Field + " " + re.Msg
		if re.Field == "" {
			msg = "redact " + re.Msg
		} else if re.Field == "path" {
			msg = re.Msg
		}
		handler.HTTPError(w, http.StatusBadRequest, msg)
		return
	}
	err = st.Use(func(repo *gitmem.Repo, _ stores.Meta) error {
		rep, err := repo.Redact(r.Context(), red, req.DryRun, nil)
		if err != nil {
			return err
		}
		type rewrite struct {
			Old     string `json:"old"`
			New     string `json:"new"`
			Subject string `json:"subject"`
		}
		out := struct {
			DryRun    bool      `json:"dry_run"`
			Rewritten []rewrite `json:"rewritten"`
			Refs      []string  `json:"refs"`
			Remotes   []string  `json:"remotes_hold_old_history,omitempty"` // their syncs are refused until the redaction is pushed
		}{DryRun: req.DryRun, Rewritten: []rewrite{}, Refs: rep.Refs}
		if !req.DryRun && len(rep.Rewritten) > 0 {
			rs, _ := repo.Remotes()
			for _, rm := range rs {
				out.Remotes = append(out.Remotes, rm.Name)
			}
		}
		if out.Refs == nil {
			out.Refs = []string{}
		}
		for _, rw := range rep.Rewritten {
			out.Rewritten = append(out.Rewritten, rewrite{rw.Old, rw.New, rw.Subject})
		}
		handler.WriteJSON(w, http.StatusOK, out)
		return nil
	})
	if err != nil {
		s.storeError(w, st.Name(), err)
	}
}
