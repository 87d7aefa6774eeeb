package storesapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
)

// Options configure the multi-store HTTP server.
type Options struct {
	Limits policy.Limits
	// Author of the commits of calls made without a token (a server with
	// no token file, on loopback); a token's name is its calls' author.
	Author gitmem.Signature
	// Screen is the secret screening of stores that set none.
	Screen policy.ScreenMode
	// Tokens authenticate and scope every request; nil: none is needed
	// and every caller may do everything (for loopback use).
	Tokens *Tokens
	// HTTP bounds requests as on every gitmem HTTP route (its Token is
	// not used: Tokens are).
	HTTP handler.HTTPOptions
	// Logger and OnCall are as in handler.Options, for the calls of every store.
	Logger *slog.Logger
	OnCall func(handler.Call)
	// Now is the clock relative times (2h, yesterday) are read against
	// (default: time.Now).
	Now func() time.Time
	// MaxMemories is the most memories a store holds through the Memory
	// Stores API (0: DefaultMaxMemories; negative: no limit but
	// Limits.MaxFiles).
	MaxMemories int
}

// storesServer serves many stores: tool calls for each, and the operator
// API over them.
type storesServer struct {
	dir *stores.Dir
	opt Options

	idemMu        sync.Mutex            // serialises the store creates with an Idempotency-Key
	storeKeys     map[string]keyedStore // token and key -> the store it created
	storeKeyOrder []string              // oldest first
}

// New returns the multi-store HTTP server over the stores in d:
//
//	POST /v1/stores/{store}/tool_use  a tool_use block or an assistant
//	                                  message's content, as /v1/tool_use
//	GET  /healthz                     "ok", without a token (as /readyz, /metrics)
//
// and the operator API (docs/openapi.yaml). Every other request needs a
// token from opt.Tokens (when set): no token or an unknown one is 401, a
// store outside the token's scope 403, an operator request from an agent
// token 403. A read-only token's changing tool calls get a tool error.
// Every route is behind the checks and bounds of the other HTTP
// transports (handler.HTTPOptions.Protect), the token standing for --token.
func New(d *stores.Dir, opt Options) http.Handler {
	if opt.Logger == nil {
		opt.Logger = handler.DefaultLogger()
	}
	go policy.DefaultSecretRules() // compiled now (~0.1 s), not at the first screened call
	s := &storesServer{dir: d, opt: opt}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/stores/{store}/tool_use", s.store(false, s.toolUse))
	mux.HandleFunc("/v1/tool_use", func(w http.ResponseWriter, r *http.Request) {
		handler.HTTPError(w, http.StatusNotFound, "this server serves several stores: POST /v1/stores/{store}/tool_use")
	})
	s.operatorRoutes(mux)
	s.memoryStoreRoutes(mux)
	return memoryStoresErrors(opt.HTTP.Protect(opt.Logger, opt.Tokens != nil, s.authenticated, mux))
}

// principal is who makes a request: a token, or anyone when the server
// has no token file.
type principal struct {
	policy.Token
	anonymous bool
}

// author is who a principal's commits are attributed to (zero: the
// server's author, or the agent the request names).
func (p principal) author() gitmem.Signature {
	if p.anonymous {
		return gitmem.Signature{}
	}
	return gitmem.SignatureOf(p.Name)
}

type principalKey struct{}

// authenticated finds each request's principal (401 when there is none)
// and gives it to next in the request's context.
func (s *storesServer) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principal{Token: policy.Token{Stores: []string{"*"}, Access: policy.ReadWrite, Role: policy.Operator}, anonymous: true}
		if s.opt.Tokens != nil {
			secret := bearerSecret(r.Header.Get("Authorization"))
			if secret == "" {
				secret = strings.TrimSpace(r.Header.Get("X-Api-Key")) // Anthropic's SDKs before TS 1.0 and Go v2
			}
			tok, ok := s.opt.Tokens.Lookup(secret)
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="gitmem"`)
				handler.HTTPError(w, http.StatusUnauthorized, "missing or unknown bearer token")
				return
			}
			p = principal{Token: tok}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// principalOf is the principal authenticated found for the request.
func principalOf(r *http.Request) principal {
	p, _ := r.Context().Value(principalKey{}).(principal)
	return p
}

// store wraps a handler of one store's requests: it authenticates, checks
// the token's scope (and its role when operator is true), and acquires
// the store for the request.
func (s *storesServer) store(operator bool, fn func(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := principalOf(r)
		name := r.PathValue("store")
		switch {
		case policy.CheckStoreName(name) != nil: // no store has such a name: nothing to learn, whatever the token
			handler.HTTPError(w, http.StatusNotFound, "there is no store "+policy.ClipName(name))
			return
		case operator && !p.Operator():
			handler.HTTPError(w, http.StatusForbidden, "token "+p.Name+" is an agent token; the operator API needs an operator token")
			return
		case !p.Allows(name):
			handler.HTTPError(w, http.StatusForbidden, "token "+p.Name+" may not use store "+name)
			return
		}
		body := readBody(r)
		if !operator && s.cleanView(w, r, p, name, body) {
			return
		}
		st, err := s.dir.Acquire(r.Context(), name)
		switch {
		case err != nil && !operator: // the tool route
			s.toolUseError(w, r, p, name, err)
			return
		case err != nil:
			s.storeError(w, name, err)
			return
		}
		defer st.Release()
		fn(w, r, p, st)
	}
}

// readBody reads the request's body (bounded by the server's limit)
// before its store is acquired: a client that sends its body slowly
// holds no store meanwhile (a delete of the store, which waits for the
// calls using it, would wait for the client). What the reading ends with
// (an error at the limit, say) is what the handler reads after the bytes.
// It returns the bytes when the whole body was read (nil when not).
func readBody(r *http.Request) []byte {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	b, err := io.ReadAll(r.Body)
	var body io.Reader = bytes.NewReader(b)
	if err != nil {
		body = io.MultiReader(body, errReader{err})
	}
	r.Body = io.NopCloser(body)
	if err != nil {
		return nil
	}
	return b
}

// cleanView answers a tool call that views a folder of a store no call
// has open from the store's clean mark and worktree, without opening it
// (stores.Dir.CleanView): a cold store's first call, `view /memories`,
// reads a few files where opening it reads some twenty-five, each a read
// of the disk when the store's files are out of the page cache. It
// reports false, having answered nothing, for any other call, and where
// the store must be opened (then acquired as before).
func (s *storesServer) cleanView(w http.ResponseWriter, r *http.Request, p principal, name string, body []byte) bool {
	rel, ok := handler.ViewedPath(body)
	if !ok {
		return false
	}
	v, ok := s.dir.CleanView(name)
	if !ok {
		return false
	}
	if info, err := v.Stat(rel); err != nil || !info.Dir {
		return false
	}
	handler.New(nil, s.handlerOptions(s.storeLog(name), stores.Meta{}, nil, nil, v)).ServeToolUse(w, r, toolCaller(r, p))
	return true
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// storeError answers a stores error: a store damaged or that cannot be
// opened as the Memory Stores API does (msError), in this API's shape.
func (s *storesServer) storeError(w http.ResponseWriter, name string, err error) {
	switch {
	case errors.Is(err, stores.ErrNotFound):
		handler.HTTPError(w, http.StatusNotFound, "there is no store "+name)
	case errors.Is(err, stores.ErrExists):
		handler.HTTPError(w, http.StatusConflict, "store "+name+" already exists")
	case errors.Is(err, stores.ErrInTheWay):
		handler.HTTPError(w, http.StatusConflict, inTheWay(name))
	case errors.Is(err, stores.ErrArchived):
		handler.HTTPError(w, http.StatusConflict, "store "+name+" is archived; unarchive it to change it")
	case notBegun(err):
		w.Header().Set("Retry-After", "1")
		handler.HTTPError(w, http.StatusServiceUnavailable, notBegunMsg)
	default:
		if msg, ok := s.outOfFiles(w, name, err); ok {
			handler.HTTPError(w, http.StatusServiceUnavailable, msg)
			return
		}
		if msg, ok := stores.Unopened(name, err); ok {
			s.opt.Logger.Error("store damaged or cannot be opened", "store", name, "err", err.Error())
			final(w)
			handler.HTTPError(w, http.StatusInternalServerError, msg)
			return
		}
		s.opt.Logger.Error("store failure", "store", name, "err", err.Error())
		if !retryHelps(err) {
			final(w)
		}
		handler.HTTPError(w, http.StatusInternalServerError, "the store could not complete the request; nothing was changed")
	}
}

// retryHelps says whether a store's failure err may pass without an
// operator: not when a folder is gone or the server may not write there
// (a stores folder removed, EACCES, a read-only mount); a full disk, say,
// may clear.
func retryHelps(err error) bool {
	return !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) && !errors.Is(err, syscall.EROFS) && !errors.Is(err, syscall.ENOTDIR)
}

// inTheWay is the answer to a create of the store name that found a file
// where its folder would be.
func inTheWay(name string) string {
	return "store " + name + " cannot be created: a file, not a store, is in its place on the server; nothing was changed (an operator moves it away)"
}

// outOfFiles answers the headers of a request on the store name that
// failed for want of file descriptors (stores.OutOfFiles: as it opened,
// or later before it changed anything): transient,
// a 503 the SDKs retry (Retry-After, x-should-retry: true), logged for
// the operator. It returns the message, or false for any other error.
func (s *storesServer) outOfFiles(w http.ResponseWriter, name string, err error) (string, bool) {
	msg, ok := stores.OutOfFiles(name, err)
	if ok {
		s.opt.Logger.Warn("store out of file descriptors: raise ulimit -n or lower --max-open-stores", "store", name, "err", err.Error())
		w.Header().Set("Retry-After", "1")
		w.Header().Set(headerShouldRetry, "true")
	}
	return msg, ok
}

// notBegun reports whether err says a request ended before it began: the
// server is stopping (its stores are closing, the requests' context ends)
// or the request's own context ended first (its client went away, or its
// time ran out while the store opened). Nothing was changed, and nothing
// is wrong with the store: a 503 with Retry-After, not a failure logged.
func notBegun(err error) bool {
	return errors.Is(err, gitmem.ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

const notBegunMsg = "the request ended before it began (the server is stopping, or the request was cancelled or ran out of time); nothing was changed; retry after 1 s"

// handler is the memory tool handler for one call on the store name with
// metadata m, archived at a commit as archivedAt says (stores.Store's
// ArchivedAt); down is why the store could not be opened or read (then r
// and archivedAt are nil).
func (s *storesServer) handler(name string, r *gitmem.Repo, m stores.Meta, archivedAt func(tip string) (bool, error), down error) *handler.Handler {
	return handler.New(r, s.handlerOptions(s.storeLog(name), m, archivedAt, down, nil))
}

// loggerKey keeps a store's logger (storeLog) with the open store.
type loggerKey struct{}

// storeLog is the logger of a store's calls.
func (s *storesServer) storeLog(name string) *slog.Logger { return s.opt.Logger.With("store", name) }

// handlerOptions are handler's options, log the store's logger
// (storeLog); clean is a store's clean view (cleanView), for a handler
// without the repository.
func (s *storesServer) handlerOptions(log *slog.Logger, m stores.Meta, archivedAt func(tip string) (bool, error), down error, clean *gitmem.View) handler.Options {
	screen := s.opt.Screen
	if m.Screening != "" {
		screen = m.Screening
	}
	return handler.Options{Limits: s.opt.Limits, Author: s.opt.Author, Archived: m.IsArchived(), ArchivedAt: archivedAt, Screen: screen,
		Logger: log, OnCall: s.opt.OnCall, Unavailable: down, View: clean}
}

func (s *storesServer) toolUse(w http.ResponseWriter, r *http.Request, p principal, st *stores.Store) {
	err := st.Use(func(repo *gitmem.Repo, m stores.Meta) error {
		// The store's logger is kept with the open store: made for each
		// call, it was 0.75% of the many-stores row's CPU (issue 25).
		log := st.Cache(loggerKey{}, func() any { return s.storeLog(st.Name()) }).(*slog.Logger)
		handler.New(repo, s.handlerOptions(log, m, st.ArchivedAt, nil, nil)).ServeToolUse(w, r, toolCaller(r, p))
		return nil
	})
	if err != nil {
		s.toolUseError(w, r, p, st.Name(), err)
	}
}

// toolUseError answers a tool call on a store that could not be opened
// or read. A storage failure (a damaged repository) is answered as the
// single-memory server answers one, a tool_result `Error: The memory store
// could not complete the command; nothing was changed` per call (the
// checks that need no repository first), its cause in the log; a store
// that is not there, or a request that did not begin or found the server
// out of file descriptors, as storeError says.
func (s *storesServer) toolUseError(w http.ResponseWriter, r *http.Request, p principal, name string, err error) {
	if errors.Is(err, stores.ErrNotFound) || errors.Is(err, stores.ErrArchived) || notBegun(err) || errors.Is(err, stores.ErrOutOfFiles) {
		s.storeError(w, name, err)
		return
	}
	s.handler(name, nil, stores.Meta{}, nil, err).ServeToolUse(w, r, toolCaller(r, p))
}

// toolCaller is who makes a tool call.
func toolCaller(r *http.Request, p principal) handler.Caller {
	c := handler.Caller{Session: r.Header.Get(handler.HeaderSession), Agent: r.Header.Get(handler.HeaderAgent), Author: p.author(), ReadOnly: p.ReadOnly()}
	if c.Agent == "" {
		c.Agent = p.Name // attribution that is not only self-asserted
	}
	return c
}
