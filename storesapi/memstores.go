package storesapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
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

// The Memory Stores API (docs/memory-stores.md): the routes of Anthropic's
// hosted memory stores, as the official SDKs call them, over the same
// stores, tokens and checks as the rest of the server. A store's id is
// its folder name; memories and versions are package memstore's.

// DefaultMaxMemories is the most memories a store holds through the
// Memory Stores API when Options.MaxMemories is 0: the hosted service's.
const DefaultMaxMemories = 2000

func (s *storesServer) memoryStoreRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/memory_stores", s.createMemoryStore)
	mux.HandleFunc("GET /v1/memory_stores", s.listMemoryStores)
	mux.HandleFunc("GET /v1/memory_stores/{store}", s.ms(readAny, s.getMemoryStore))
	mux.HandleFunc("POST /v1/memory_stores/{store}", s.msMeta(s.updateMemoryStore))
	mux.HandleFunc("DELETE /v1/memory_stores/{store}", s.msMeta(s.deleteMemoryStore))
	mux.HandleFunc("POST /v1/memory_stores/{store}/archive", s.msMeta(s.archiveMemoryStore))
	mux.HandleFunc("POST /v1/memory_stores/{store}/memories", s.ms(writeAny, s.createMemory))
	mux.HandleFunc("GET /v1/memory_stores/{store}/memories", s.ms(readAny, s.listStoreMemories))
	mux.HandleFunc("GET /v1/memory_stores/{store}/memories/{memory}", s.ms(readAny, s.getStoreMemory))
	mux.HandleFunc("POST /v1/memory_stores/{store}/memories/{memory}", s.ms(writeAny, s.updateMemory))
	mux.HandleFunc("DELETE /v1/memory_stores/{store}/memories/{memory}", s.ms(writeAny, s.deleteStoreMemory))
	mux.HandleFunc("GET /v1/memory_stores/{store}/memory_versions", s.ms(readAny, s.listMemoryVersions))
	mux.HandleFunc("GET /v1/memory_stores/{store}/memory_versions/{version}", s.ms(readAny, s.getMemoryVersion))
	mux.HandleFunc("POST /v1/memory_stores/{store}/memory_versions/{version}/redact", s.ms(writeOperator, s.redactMemoryVersion))
}

// What a route needs of the token: any token may read the stores in its
// scope, a read-write one change their memories, a read-write operator
// token change the stores themselves and redact.
type need int

const (
	readAny need = iota
	writeAny
	writeOperator
)

// allowed checks the token against a route's need (false: answered).
func allowed(w http.ResponseWriter, p principal, n need) bool {
	switch {
	case n == writeOperator && !p.Operator():
		apiError(w, http.StatusForbidden, errPermission, "token "+p.Name+" is an agent token; changing a memory store or redacting needs an operator token")
	case n != readAny && p.ReadOnly():
		apiError(w, http.StatusForbidden, errPermission, "token "+p.Name+" is read-only")
	default:
		return true
	}
	final(w)
	return false
}

// msStore is a request on one memory store: the store in use, and its
// metadata and repository while the handler runs.
type msStore struct {
	st   *stores.Store
	repo *gitmem.Repo
	meta stores.Meta
	ix   *memstore.Index
}

func (m msStore) id() string { return m.st.Name() }

type indexKey struct{}

// scoped checks the token's need and its scope over the request's store
// (false: answered).
func scoped(w http.ResponseWriter, r *http.Request, n need) (principal, string, bool) {
	p := principalOf(r)
	id := r.PathValue("store")
	if policy.CheckStoreName(id) != nil { // no store has such an id: nothing to learn
		final(w)
		apiError(w, http.StatusNotFound, errNotFound, "memory store "+policy.ClipName(id)+" not found")
		return p, id, false
	}
	if !allowed(w, p, n) {
		return p, id, false
	}
	if !p.Allows(id) {
		final(w)
		apiError(w, http.StatusForbidden, errPermission, "token "+p.Name+" may not use memory store "+policy.ClipName(id))
		return p, id, false
	}
	return p, id, true
}

// msMeta wraps a change of a store itself (its metadata, archived, its
// deletion): made through the Dir, which waits for every use of the store
// to end.
func (s *storesServer) msMeta(fn func(w http.ResponseWriter, r *http.Request, p principal, id string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if p, id, ok := scoped(w, r, writeOperator); ok {
			fn(w, r, p, id)
		}
	}
}

// ms wraps a handler of one memory store's requests: the token's need and
// scope, the store acquired and in use (no metadata change meanwhile).
func (s *storesServer) ms(n need, fn func(w http.ResponseWriter, r *http.Request, p principal, m msStore)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, id, ok := scoped(w, r, n)
		if !ok {
			return
		}
		p := principalOf(r)
		readBody(r)
		st, err := s.dir.Acquire(r.Context(), id)
		if err != nil {
			s.msError(w, id, err)
			return
		}
		defer st.Release()
		err = st.Use(func(repo *gitmem.Repo, meta stores.Meta) error {
			ix := st.Cache(indexKey{}, func() any { return memstore.NewIndex() }).(*memstore.Index)
			fn(w, r, p, msStore{st: st, repo: repo, meta: meta, ix: ix})
			return nil
		})
		if err != nil {
			s.msError(w, id, err)
		}
	}
}

// msError answers the failure of a Memory Stores request; nothing was
// changed.
func (s *storesServer) msError(w http.ResponseWriter, store string, err error) {
	var invalid *memstore.InvalidError
	var conflict *memstore.PathConflictError
	var other *memstore.ConflictError
	var replay *memstore.ReplayError
	var limit *policy.LimitError
	switch {
	case errors.Is(err, stores.ErrNotFound):
		final(w)
		apiError(w, http.StatusNotFound, errNotFound, "memory store "+policy.ClipName(store)+" not found")
	case errors.Is(err, stores.ErrInTheWay):
		final(w)
		apiError(w, http.StatusConflict, errConflict, "memory "+inTheWay(policy.ClipName(store)))
	case errors.Is(err, stores.ErrArchived):
		final(w)
		apiError(w, http.StatusBadRequest, errInvalidRequest, "memory store "+policy.ClipName(store)+" is archived: it is read-only (its memories can still be read, deleted and their versions redacted)")
	case errors.Is(err, memstore.ErrNotFound):
		final(w)
		apiError(w, http.StatusNotFound, errNotFound, "not found in memory store "+policy.ClipName(store))
	case errors.As(err, &invalid):
		final(w)
		apiError(w, http.StatusBadRequest, errInvalidRequest, invalid.Msg)
	case errors.As(err, &limit):
		final(w)
		apiError(w, http.StatusBadRequest, errInvalidRequest, limit.Msg)
	case errors.Is(err, memstore.ErrNotUTF8):
		final(w)
		apiError(w, http.StatusConflict, errPreconditionFailed, (&operator.PreconditionError{NotUTF8: true}).Error()) // as the operator API says it
	case errors.Is(err, memstore.ErrPrecondition):
		final(w)
		apiError(w, http.StatusConflict, errPreconditionFailed, "the memory's content_sha256 is not the expected one; nothing was changed (retrieve the memory for its current content)")
	case errors.As(err, &conflict):
		if conflict.MemoryID != "" {
			final(w)
		} else {
			w.Header().Set(headerShouldRetry, "true")
		}
		apiError(w, http.StatusConflict, errMemoryPathConflict, "the path overlaps the memory at "+"/"+conflict.Path+"; nothing was changed",
			"conflicting_memory_id", conflict.MemoryID, "conflicting_path", "/"+conflict.Path)
	case errors.As(err, &other):
		final(w)
		apiError(w, http.StatusConflict, errConflict, other.Msg)
	case errors.As(err, &replay):
		apiError(w, http.StatusInternalServerError, errAPI, "replay not answered") // the handlers answer it
	case errors.Is(err, memstore.ErrBusy):
		w.Header().Set(headerShouldRetry, "true")
		apiError(w, http.StatusConflict, errConflict, err.Error())
	case notBegun(err):
		w.Header().Set("Retry-After", "1")
		apiError(w, http.StatusServiceUnavailable, errOverloaded, notBegunMsg)
	default:
		if msg, ok := s.outOfFiles(w, policy.ClipName(store), err); ok {
			apiError(w, http.StatusServiceUnavailable, errOverloaded, "memory "+msg)
			return
		}
		if msg, ok := stores.Unopened(policy.ClipName(store), err); ok {
			s.opt.Logger.Error("memory store damaged or cannot be opened", "store", store, "err", err.Error())
			final(w)
			apiError(w, http.StatusInternalServerError, errAPI, "memory "+msg)
			return
		}
		s.opt.Logger.Error("memory store failure", "store", store, "err", err.Error())
		if !retryHelps(err) {
			final(w)
		}
		apiError(w, http.StatusInternalServerError, errAPI, "the store could not complete the request; nothing was changed")
	}
}

// decodeBody reads a JSON object body into v, refusing unknown fields
// (false: answered with an invalid_request_error).
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, ok := handler.ReadBody(w, r)
	if !ok {
		return false
	}
	if msg := decodeObject(body, v); msg != "" {
		final(w)
		apiError(w, http.StatusBadRequest, errInvalidRequest, msg)
		return false
	}
	return true
}

// decodeObject decodes body, one JSON object and nothing after it, into
// v, refusing unknown fields and text that is not UTF-8. It returns what
// is wrong, worded for the caller, or "".
func decodeObject(body []byte, v any) string {
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return "the body must be a JSON object"
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te):
		return fmt.Sprintf("%s must be %s, not a JSON %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
	case err != nil && strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	case err != nil:
		return "the body is not valid JSON"
	case len(bytes.TrimSpace(body[dec.InputOffset():])) > 0: // another value, or a stray } or ]
		return "the body holds more than one JSON value"
	}
	if name, bad := handler.NotUTF8(body); bad {
		return notUTF8(name)
	}
	return ""
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "map", "struct":
		return "an object"
	case "ptr":
		return "an object or null"
	}
	return "a " + k
}

// badQuery answers an invalid query parameter.
func badQuery(w http.ResponseWriter, format string, args ...any) {
	final(w)
	apiError(w, http.StatusBadRequest, errInvalidRequest, fmt.Sprintf(format, args...))
}

// pageLimit reads limit (1 to 100, default 20) and view (basic or full,
// the default given; full caps the page at 20).
func pageLimit(w http.ResponseWriter, r *http.Request, defaultView string) (limit int, full bool, ok bool) {
	q := r.URL.Query()
	if full, ok = view(w, r, defaultView); !ok {
		return 0, false, false
	}
	limit = 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			badQuery(w, "limit must be an integer from 1 to 100, not %s", policy.ClipName(v))
			return 0, false, false
		}
		limit = n
	}
	if full {
		limit = min(limit, 20)
	}
	return limit, full, true
}

// view reads view=basic|full (def when absent): whether content is shown.
func view(w http.ResponseWriter, r *http.Request, def string) (full bool, ok bool) {
	v := r.URL.Query().Get("view")
	if v == "" {
		v = def
	}
	switch v {
	case "basic":
		return false, true
	case "full":
		return true, true
	}
	badQuery(w, "view must be basic or full, not %s", policy.ClipName(v))
	return false, false
}

// timeRange reads created_at[gte] and created_at[lte]: RFC 3339, or a
// date (its start, UTC).
func timeRange(w http.ResponseWriter, r *http.Request) (gte, lte time.Time, ok bool) {
	q := r.URL.Query()
	for _, f := range []struct {
		key string
		dst *time.Time
	}{{"created_at[gte]", &gte}, {"created_at[lte]", &lte}} {
		v := q.Get(f.key)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			if t, err = time.Parse("2006-01-02", v); err != nil {
				badQuery(w, "%s must be an RFC 3339 time, such as 2026-01-02T15:04:05Z, not %s", f.key, policy.ClipName(v))
				return gte, lte, false
			}
		}
		*f.dst = t
	}
	return gte, lte, true
}

// caller is who a principal's changes are attributed to.
func (s *storesServer) caller(r *http.Request, p principal) memstore.Caller {
	c := memstore.Caller{APIKey: p.Name, Session: r.Header.Get(handler.HeaderSession), Author: p.author()}
	if p.anonymous {
		c.APIKey, c.Author = "anonymous", s.opt.Author
	}
	return c
}

// Stores.

type storeBody struct {
	Name        *string            `json:"name"`
	Description *string            `json:"description"`
	Metadata    map[string]*string `json:"metadata"`
}

func (s *storesServer) createMemoryStore(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	if !allowed(w, p, writeOperator) {
		return
	}
	var req storeBody
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Name == nil {
		badQuery(w, "name is required: 1 to 255 characters")
		return
	}
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	m := stores.Meta{DisplayName: *req.Name, Metadata: map[string]string{}}
	if req.Description != nil {
		m.Description = *req.Description
	}
	for k, v := range req.Metadata {
		if v == nil {
			badQuery(w, "metadata %s: a new store's values are strings, not null", policy.ClipName(k))
			return
		}
		m.Metadata[k] = *v
	}
	if key != "" {
		s.idemMu.Lock()
		defer s.idemMu.Unlock()
		if made, ok := s.storeKeys[p.Name+"\x00"+key]; ok {
			s.answerKeyedStore(w, key, made, m)
			return
		}
	}
	id := memstore.NewID(memstore.PrefixStore, s.now())
	if !p.Allows(id) {
		final(w)
		apiError(w, http.StatusForbidden, errPermission, "token "+p.Name+" may not create memory stores: its scope does not cover the new store's id "+id+" (a scope of * or memstore_* does)")
		return
	}
	info, err := s.dir.Create(id, m, s.caller(r, p).Author)
	if err != nil {
		s.msMetaError(w, id, err)
		return
	}
	if key != "" {
		s.rememberStore(p.Name+"\x00"+key, keyedStore{id, m})
	}
	handler.WriteJSON(w, http.StatusOK, memoryStoreOf(info))
}

// keyedStore is what a store create with an Idempotency-Key made: the
// store, and the name, description and metadata it asked for.
type keyedStore struct {
	id   string
	meta stores.Meta
}

// answerKeyedStore answers a store create whose key made a store before:
// that store, as its retrieve does, when the create asks for what the
// first asked for and the store is still there; else 409 conflict_error,
// as a memory create's key that made another memory, or one deleted
// since, answers.
func (s *storesServer) answerKeyedStore(w http.ResponseWriter, key string, made keyedStore, m stores.Meta) {
	if made.meta.DisplayName != m.DisplayName || made.meta.Description != m.Description || !maps.Equal(made.meta.Metadata, m.Metadata) {
		final(w)
		apiError(w, http.StatusConflict, errConflict, "this Idempotency-Key created "+made.id+" with another name, description or metadata")
		return
	}
	info, err := s.dir.Get(made.id)
	if errors.Is(err, stores.ErrNotFound) {
		final(w)
		apiError(w, http.StatusConflict, errConflict, "this Idempotency-Key created "+made.id+", which was deleted since")
		return
	}
	if err != nil {
		s.msError(w, made.id, err)
		return
	}
	handler.WriteJSON(w, http.StatusOK, memoryStoreOf(info))
}

// rememberStore keeps the store a create with an idempotency key made,
// for this process's life, the newest maxStoreKeys. Called with idemMu
// held.
func (s *storesServer) rememberStore(key string, made keyedStore) {
	if s.storeKeys == nil {
		s.storeKeys = map[string]keyedStore{}
	}
	s.storeKeys[key] = made
	s.storeKeyOrder = append(s.storeKeyOrder, key)
	if len(s.storeKeyOrder) > maxStoreKeys {
		delete(s.storeKeys, s.storeKeyOrder[0])
		s.storeKeyOrder = s.storeKeyOrder[1:]
	}
}

const maxStoreKeys = 10000

// idempotencyKey reads the Idempotency-Key header ("" if none).
func idempotencyKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	k := r.Header.Get(headerIdempotencyKey)
	if len(k) > maxIdempotencyKeyLength || strings.ContainsFunc(k, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		badQuery(w, "Idempotency-Key must be 1 to %d printable ASCII characters", maxIdempotencyKeyLength)
		return "", false
	}
	return k, true
}

// msMetaError answers a failed store change: a refused value is 400.
func (s *storesServer) msMetaError(w http.ResponseWriter, id string, err error) {
	if _, unopened := stores.Unopened(id, err); unopened || errors.Is(err, stores.ErrNotFound) || errors.Is(err, stores.ErrExists) || errors.Is(err, stores.ErrInTheWay) ||
		errors.Is(err, stores.ErrArchived) || errors.As(err, new(*gitmem.StorageError)) {
		s.msError(w, id, err)
		return
	}
	final(w)
	apiError(w, http.StatusBadRequest, errInvalidRequest, err.Error())
}

func (s *storesServer) listMemoryStores(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	limit, _, ok := pageLimit(w, r, "basic")
	if !ok {
		return
	}
	gte, lte, ok := timeRange(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	archived := false
	switch v := q.Get("include_archived"); v {
	case "", "false":
	case "true":
		archived = true
	default:
		badQuery(w, "include_archived must be true or false, not %s", policy.ClipName(v))
		return
	}
	after, err := pageAfter(r)
	if err != nil {
		s.msError(w, "", err)
		return
	}
	page, err := s.dir.List(stores.ListOptions{After: after, Limit: limit, IncludeArchived: archived, Allow: p.Allows,
		Where: func(i stores.Info) bool {
			return (gte.IsZero() || !i.Created.Before(gte)) && (lte.IsZero() || !i.Created.After(lte))
		}})
	if err != nil {
		s.msError(w, "", err)
		return
	}
	out := []memoryStoreJSON{}
	for _, info := range page.Items {
		if info.Err != nil { // listed by gitmem store list, with what to do
			s.opt.Logger.Error("store cannot be read", "store", info.Name, "err", info.Err.Error())
			continue
		}
		out = append(out, memoryStoreOf(info))
	}
	handler.WriteJSON(w, http.StatusOK, newPage(r, out, page.Next))
}

func (s *storesServer) getMemoryStore(w http.ResponseWriter, r *http.Request, p principal, m msStore) {
	handler.WriteJSON(w, http.StatusOK, memoryStoreOf(stores.Info{Name: m.id(), Meta: m.meta}))
}

func (s *storesServer) updateMemoryStore(w http.ResponseWriter, r *http.Request, p principal, id string) {
	var req storeBody
	if !decodeBody(w, r, &req) {
		return
	}
	info, err := s.dir.Update(id, stores.Change{DisplayName: req.Name, Description: req.Description, Metadata: req.Metadata}, s.caller(r, p).Author)
	if err != nil {
		s.msMetaError(w, id, err)
		return
	}
	handler.WriteJSON(w, http.StatusOK, memoryStoreOf(info))
}

func (s *storesServer) archiveMemoryStore(w http.ResponseWriter, r *http.Request, p principal, id string) {
	info, err := s.dir.Archive(id, true, s.caller(r, p).Author)
	if err != nil {
		s.msMetaError(w, id, err)
		return
	}
	handler.WriteJSON(w, http.StatusOK, memoryStoreOf(info))
}

func (s *storesServer) deleteMemoryStore(w http.ResponseWriter, r *http.Request, p principal, id string) {
	if err := s.dir.Delete(id); err != nil {
		s.msError(w, id, err)
		return
	}
	handler.WriteJSON(w, http.StatusOK, deletedJSON{ID: id, Type: "memory_store_deleted"})
}

// Memories.

// memoryLimits are the limits of a store's memories: the most memories,
// and the server's total.
func (s *storesServer) memoryLimits() policy.Limits {
	n := s.opt.MaxMemories
	if n == 0 {
		n = DefaultMaxMemories
	}
	if n < 0 {
		n = 0
	}
	if s.opt.Limits.MaxFiles > 0 && (n == 0 || s.opt.Limits.MaxFiles < n) {
		n = s.opt.Limits.MaxFiles
	}
	return policy.Limits{MaxFiles: n, MaxTotalBytes: s.opt.Limits.MaxTotalBytes}
}

// writable refuses a change to an archived store (false: answered).
func (s *storesServer) writable(w http.ResponseWriter, m msStore) bool {
	if m.meta.IsArchived() {
		s.msError(w, m.id(), stores.ErrArchived)
		return false
	}
	return true
}

// unarchivedAt is the check of a change to st, made under the writer lock
// on tip, the commit the change builds on: it refuses the change when st
// is archived at tip, archived by another process since the request
// began (ErrArchived). Every write of the two APIs is checked so.
func unarchivedAt(st *stores.Store) func(tip string) error {
	return func(tip string) error {
		archived, err := st.ArchivedAt(tip)
		if err == nil && archived {
			err = stores.ErrArchived
		}
		return err
	}
}

type memoryBody struct {
	Path         *string       `json:"path"`
	Content      *string       `json:"content"`
	Precondition *precondition `json:"precondition"`
}

func (s *storesServer) createMemory(w http.ResponseWriter, r *http.Request, p principal, m msStore) {
	full, ok := view(w, r, "basic")
	if !ok {
		return
	}
	var req memoryBody
	if !decodeBody(w, r, &req) {
		return
	}
	switch {
	case req.Precondition != nil:
		badQuery(w, "unknown field \"precondition\": a create has none (it never overwrites)")
		return
	case req.Path == nil:
		badQuery(w, "path is required, such as \"/notes/todo.md\"")
		return
	case req.Content == nil:
		badQuery(w, "content is required: the memory's text (\"\" for an empty memory)")
		return
	}
	rel, err := memstore.ParsePath(*req.Path)
	if err != nil {
		s.msError(w, m.id(), err)
		return
	}
	key, ok := idempotencyKey(w, r)
	if !ok || !s.writable(w, m) {
		return
	}
	mem, err := m.ix.Create(r.Context(), m.repo, memstore.CreateRequest{Path: rel, Content: []byte(*req.Content), By: s.caller(r, p),
		IdempotencyKey: key, Limits: s.memoryLimits(), Check: unarchivedAt(m.st)})
	var replay *memstore.ReplayError
	if errors.As(err, &replay) {
		err = nil // the memory the first request made
	}
	if err != nil {
		s.msError(w, m.id(), err)
		return
	}
	handler.WriteJSON(w, http.StatusOK, memoryOf(m.id(), mem, full))
}

// sha256Param checks a content_sha256 given by a client (false: answered).
func sha256Param(w http.ResponseWriter, name, v string) bool {
	if len(v) != 64 || strings.ContainsFunc(v, func(r rune) bool { return !strings.ContainsRune("0123456789abcdefABCDEF", r) }) {
		badQuery(w, "%s must be 64 hexadecimal digits (a SHA-256), not %s", name, policy.ClipName(v))
		return false
	}
	return true
}

func (s *storesServer) getStoreMemory(w http.ResponseWriter, r *http.Request, p principal, m msStore) {
	full, ok := view(w, r, "full")
	if !ok {
		return
	}
	mem, err := m.ix.Get(r.Context(), m.repo, r.PathValue("memory"), full)
	if err != nil {
		s.notFound(w, m, "memory", r.PathValue("memory"), err)
		return
	}
	handler.WriteJSON(w, http.StatusOK, memoryOf(m.id(), mem, full))
}

// notFound answers the failure of an operation on a memory or a version
// (what), naming it (id) when it is not found.
func (s *storesServer) notFound(w http.ResponseWriter, m msStore, what, id string, err error) {
	if errors.Is(err, memstore.ErrNotFound) {
		final(w)
		apiError(w, http.StatusNotFound, errNotFound, what+" "+policy.ClipName(id)+" not found in memory store "+m.id())
		return
	}
	s.msError(w, m.id(), err)
}

func (s *storesServer) updateMemory(w http.ResponseWriter, r *http.Request, p principal, m msStore) {
	full, ok := view(w, r, "basic")
	if !ok {
		return
	}
	var req memoryBody
	if !decodeBody(w, r, &req) {
		return
	}
	u := memstore.UpdateRequest{By: s.caller(r, p), Limits: s.memoryLimits(), Check: unarchivedAt(m.st)}
	if req.Content != nil {
		u.Content, u.SetContent = []byte(*req.Content), true
	}
	if req.Path != nil {
		rel, err := memstore.ParsePath(*req.Path)
		if err != nil {
			s.msError(w, m.id(), err)
			return
		}
		u.Path = rel
	}
	if pc := req.Precondition; pc != nil {
		switch {
		case pc.Type != "content_sha256":
			badQuery(w, "precondition.type must be content_sha256, not %s", policy.ClipName(pc.Type))
			return
		case pc.ContentSHA256 == "":
			badQuery(w, "precondition.content_sha256 is required")
			return
		case !sha256Param(w, "precondition.content_sha256", pc.ContentSHA256):
			return
		}
		u.Expect = pc.ContentSHA256
	}
	if !s.writable(w, m) {
		return
	}
	mem, _, err := m.ix.Update(r.Context(), m.repo, r.PathValue("memory"), u)
	if err != nil {
		s.notFound(w, m, "memory", r.PathValue("memory"), err)
		return
	}
	handler.WriteJSON(w, http.StatusOK, memoryOf(m.id(), mem, full))
}

func (s *storesServer) deleteStoreMemory(w http.ResponseWriter, r *http.Request, p principal, m msStore) {
	expect := r.URL.Query().Get("expected_content_sha256")
	if expect != "" && !sha256Param(w, "expected_content_sha256", expect) {
		return
	}
	id := r.PathValue("memory")
	if err := m.ix.Delete(r.Context(), m.repo, id, expect, s.caller(r, p)); err != nil {
		s.notFound(w, m, "memory", id, err)
		return
	}
	handler.WriteJSON(w, http.StatusOK, deletedJSON{ID: id, Type: "memory_deleted"})
}

func (s *storesServer) listStoreMemories(w http.ResponseWriter, r *http.Request, p principal, m msStore) {
	limit, full, ok := pageLimit(w, r, "basic")
	if !ok {
		return
	}
	after, err := pageAfter(r)
	if err != nil {
		s.msError(w, m.id(), err)
		return
	}
	q := r.URL.Query()
	opt := memstore.ListOptions{After: after, Limit: limit, WithContent: full}
	if v := q.Get("path_prefix"); v != "" {
		prefix, err := memstore.ParsePrefix(v)
		if err != nil {
			s.msError(w, m.id(), err)
			return
		}
		opt.Prefix = prefix
	}
	if v := q.Get("depth"); v != "" {
		d, err := strconv.Atoi(v)
		if err != nil || d < 0 {
			badQuery(w, "depth must be an integer of 0 or more, not %s", policy.ClipName(v))
			return
		}
		opt.Depth = d
	}
	items, next, err := m.ix.List(r.Context(), m.repo, opt)
	if err != nil {
		s.msError(w, m.id(), err)
		return
	}
	out := []any{}
	for _, it := range items {
		if it.Prefix != "" {
			out = append(out, memoryPrefixJSON{Type: "memory_prefix", Path: it.Prefix})
		} else {
			out = append(out, memoryOf(m.id(), it.Memory, full))
		}
	}
	handler.WriteJSON(w, http.StatusOK, newPage(r, out, next))
}

// Versions.

func (s *storesServer) listMemoryVersions(w http.ResponseWriter, r *http.Request, p principal, m msStore) {
	limit, full, ok := pageLimit(w, r, "basic")
	if !ok {
		return
	}
	gte, lte, ok := timeRange(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	f := memstore.VersionFilter{MemoryID: q.Get("memory_id"), Operation: q.Get("operation"), SessionID: q.Get("session_id"),
		APIKeyID: q.Get("api_key_id"), ServiceAccountID: q.Get("service_account_id"), Since: gte, Until: lte}
	switch f.Operation {
	case "", memstore.Created, memstore.Modified, memstore.Deleted:
	default:
		badQuery(w, "operation must be created, modified or deleted, not %s", policy.ClipName(f.Operation))
		return
	}
	after, err := pageAfter(r)
	if err != nil {
		s.msError(w, m.id(), err)
		return
	}
	vs, next, err := m.ix.Versions(r.Context(), m.repo, f, after, limit, full)
	if err != nil {
		s.msError(w, m.id(), err)
		return
	}
	out := []memoryVersionJSON{}
	for _, v := range vs {
		out = append(out, memoryVersionOf(m.id(), v, full))
	}
	handler.WriteJSON(w, http.StatusOK, newPage(r, out, next))
}

func (s *storesServer) getMemoryVersion(w http.ResponseWriter, r *http.Request, p principal, m msStore) {
	full, ok := view(w, r, "full")
	if !ok {
		return
	}
	id := r.PathValue("version")
	v, err := m.ix.Version(r.Context(), m.repo, id, full)
	if err != nil {
		s.notFound(w, m, "memory version", id, err)
		return
	}
	handler.WriteJSON(w, http.StatusOK, memoryVersionOf(m.id(), v, full))
}

func (s *storesServer) redactMemoryVersion(w http.ResponseWriter, r *http.Request, p principal, m msStore) {
	io.Copy(io.Discard, r.Body) // the SDKs send none; anything sent is not read
	id := r.PathValue("version")
	v, err := m.ix.Redact(r.Context(), m.repo, id, s.caller(r, p))
	if err != nil {
		s.notFound(w, m, "memory version", id, err)
		return
	}
	handler.WriteJSON(w, http.StatusOK, memoryVersionOf(m.id(), v, false))
}
