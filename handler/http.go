package handler

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// HTTPOptions configure the HTTP transports. Zero fields take the
// defaults (DefaultMaxBodyBytes and so on).
type HTTPOptions struct {
	// Token, when set, must be sent as "Authorization: Bearer <token>".
	Token string
	// MaxBodyBytes bounds a request body (default 32 MiB).
	MaxBodyBytes int64
	// MaxInflightBytes bounds the bodies of the requests in flight
	// together (default 128 MiB); MaxInflight the number of requests with
	// a body in flight (default 64). A request waits up to QueueWait
	// (default 5 s; negative: not at all) for room, then gets 503.
	MaxInflightBytes int64
	MaxInflight      int
	QueueWait        time.Duration
	// WriteTimeout is the server's write timeout (default WriteTimeout):
	// no call of a request is started within 10 s of it.
	WriteTimeout time.Duration
	// ReadHeaderTimeout, ReadTimeout, IdleTimeout and MaxHeaderBytes
	// bound a connection of the http.Server (Server): a client that has
	// not sent its headers within ReadHeaderTimeout (default 10 s), or its
	// whole request within ReadTimeout (default 60 s), is disconnected; a
	// keep-alive connection idle for IdleTimeout (default 120 s) is
	// closed; headers over MaxHeaderBytes (default 64 KiB) get 431.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	// Health, when set, gives lines /healthz adds after "ok": the state
	// of background work (serve --sync: the last successful sync, the
	// commits not yet pushed, the last error). ctx is the request's.
	Health func(ctx context.Context) []string
	// Metrics, when set, answers GET /metrics, without the token: it holds
	// counts and sizes, no memory content.
	Metrics http.Handler
	// Ready answers GET /readyz, without the token: 200 "ready" when it
	// returns nil (or is nil), else 503 with the reason.
	Ready func() error
	// Console, when set, is served at ConsolePath (package console),
	// behind the access log, the Host and Origin checks and the bounds
	// on requests, without the token (it has its own login) and with
	// form bodies (it checks each for its CSRF token).
	Console http.Handler
}

// ConsolePath is where HTTPOptions.Console is served.
const ConsolePath = "/console/"

// Headers that name the caller; they become the Session and Agent trailers.
const (
	HeaderSession = "Gitmem-Session"
	HeaderAgent   = "Gitmem-Agent"
)

// HTTP returns the HTTP transport:
//
//	POST /v1/tool_use  one tool_use block -> its tool_result; a JSON array
//	                   (an assistant message's content) -> the array of
//	                   tool_results for its memory tool_use blocks, run in order
//	GET  /healthz      "ok" (no token needed; nor for /readyz and /metrics)
func (h *Handler) HTTP(opt HTTPOptions) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tool_use", func(w http.ResponseWriter, r *http.Request) {
		h.ServeToolUse(w, r, Caller{Session: r.Header.Get(HeaderSession), Agent: r.Header.Get(HeaderAgent)})
	})
	return opt.Protect(h.log, opt.Token != "", opt.bearer, mux)
}

// bearer requires "Authorization: Bearer <token>" on every request when
// the options have a token.
func (o HTTPOptions) bearer(next http.Handler) http.Handler {
	if o.Token == "" {
		return next
	}
	want := []byte("Bearer " + o.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gitmem"`)
			HTTPError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ServeToolUse answers a request whose body is one tool_use block (with
// its tool_result) or a JSON array, an assistant message's content (with
// the array of tool_results for its memory tool_use blocks, run in order,
// as HandleArray), for caller c. Every HTTP transport answers tool calls
// through it, behind HTTPOptions.Protect.
func (h *Handler) ServeToolUse(w http.ResponseWriter, r *http.Request, c Caller) {
	start := requestStart(r)
	body, ok := ReadBody(w, r)
	if !ok {
		return
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		results, err := h.handleArray(r.Context(), c, trimmed, true)
		var ae *ArrayError
		switch {
		case errors.Is(err, errOutOfFiles):
			outOfFiles(w)
		case errors.As(err, &ae) && ae.TooMany:
			HTTPError(w, http.StatusRequestEntityTooLarge, ae.Msg)
		case err != nil:
			HTTPError(w, http.StatusBadRequest, "body is not a JSON array of content blocks")
		default:
			serverTiming(w, start)
			WriteJSON(w, http.StatusOK, results)
		}
		return
	}
	if !json.Valid(trimmed) {
		HTTPError(w, http.StatusBadRequest, "body is not a JSON tool_use block")
		return
	}
	res, call := h.handleJSON(r.Context(), c, trimmed)
	if call.outOfFiles() {
		outOfFiles(w)
		return
	}
	serverTiming(w, start)
	WriteJSON(w, http.StatusOK, res)
}

// outOfFiles answers a request whose call (or the first call of an
// array to change anything) failed for want of file descriptors before
// committing: nothing was changed, and nothing is wrong with the memory,
// so the answer is a 503 that clients retry (Retry-After, and the
// Anthropic SDKs' x-should-retry: true), not a tool error the model
// takes as final.
func outOfFiles(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	w.Header().Set("x-should-retry", "true")
	HTTPError(w, http.StatusServiceUnavailable, outOfFilesMsg)
}

// outOfFilesMsg is the answer to a request that failed for want of file
// descriptors before it changed anything.
const outOfFilesMsg = "the server has too many files open; nothing was changed; retry after 1 s"

// serverTiming says how long the server took over a call, from its
// headers read (every check and queue after that included) to its answer
// ready: a W3C Server-Timing header, which browsers' tools show and a
// client can set beside the time it measured.
func serverTiming(w http.ResponseWriter, start time.Time) {
	w.Header().Set("Server-Timing", fmt.Sprintf("call;dur=%.3f", float64(time.Since(start).Microseconds())/1000))
}

// ReadBody reads a request's body (readBody); when it cannot, it answers
// the request (413 past the limit, else 400) and reports false.
func ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := readBody(r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			HTTPError(w, http.StatusRequestEntityTooLarge, tooLarge(tooBig.Limit))
		} else {
			HTTPError(w, http.StatusBadRequest, "could not read the request body")
		}
		return nil, false
	}
	return body, true
}

// readBody reads a body the limiter has bounded, into a buffer of its
// exact size when its length is known.
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength >= 0 {
		buf := make([]byte, r.ContentLength)
		_, err := io.ReadFull(r.Body, buf)
		return buf, err
	}
	return io.ReadAll(r.Body)
}

// WriteJSON answers with status and v in JSON, as every gitmem HTTP route.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// HTTPError answers with status and {"error": msg}, as every refusal of a
// gitmem HTTP route.
func HTTPError(w http.ResponseWriter, status int, msg string) {
	WriteJSON(w, status, map[string]string{"error": msg})
}

// Server returns the http.Server gitmem serves h (a transport built with
// the same options) with: every timeout and bound of the options set, so
// that a slow or idle client cannot hold a connection for long.
func (o HTTPOptions) Server(h http.Handler) *http.Server {
	o.defaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
	}
}
