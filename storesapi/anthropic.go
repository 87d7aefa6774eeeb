package storesapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/memstore"
)

// Errors of the Memory Stores API are Anthropic's: {"type": "error",
// "error": {"type": ..., "message": ...}, "request_id": ...}, with the
// status the SDKs map to their error classes, a request-id header on
// every answer, and x-should-retry: false on every final refusal (the
// SDKs retry a 409 otherwise, a create included).

// Error types, as the SDKs name them.
const (
	errInvalidRequest       = "invalid_request_error"
	errAuthentication       = "authentication_error"
	errPermission           = "permission_error"
	errNotFound             = "not_found_error"
	errRequestTooLarge      = "request_too_large"
	errRateLimit            = "rate_limit_error"
	errAPI                  = "api_error"
	errOverloaded           = "overloaded_error"
	errConflict             = "conflict_error"
	errPreconditionFailed   = "memory_precondition_failed_error"
	errMemoryPathConflict   = "memory_path_conflict_error"
	memoryStoresPathPrefix  = "/v1/memory_stores"
	headerRequestID         = "request-id"
	headerShouldRetry       = "x-should-retry"
	headerIdempotencyKey    = "Idempotency-Key"
	maxIdempotencyKeyLength = 255
)

// errorTypeOf is the type of an error answered with status and no type of
// its own (a refusal of the checks every gitmem route has).
func errorTypeOf(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return errAuthentication
	case http.StatusForbidden:
		return errPermission
	case http.StatusNotFound:
		return errNotFound
	case http.StatusConflict:
		return errConflict
	case http.StatusRequestEntityTooLarge:
		return errRequestTooLarge
	case http.StatusTooManyRequests:
		return errRateLimit
	case http.StatusServiceUnavailable, 529:
		return errOverloaded
	}
	if status >= 500 {
		return errAPI
	}
	return errInvalidRequest
}

type errorBody struct {
	Type      string         `json:"type"`
	Error     map[string]any `json:"error"`
	RequestID string         `json:"request_id"`
}

// apiError answers a Memory Stores request with an Anthropic error;
// extra fields go into "error" beside type and message.
func apiError(w http.ResponseWriter, status int, typ, msg string, extra ...any) {
	e := map[string]any{"type": typ, "message": msg}
	for i := 0; i+1 < len(extra); i += 2 {
		e[extra[i].(string)] = extra[i+1]
	}
	handler.WriteJSON(w, status, errorBody{Type: "error", Error: e, RequestID: w.Header().Get(headerRequestID)})
}

// final marks an error answer as one a retry cannot change.
func final(w http.ResponseWriter) { w.Header().Set(headerShouldRetry, "false") }

// memoryStoresErrors gives every request under /v1/memory_stores a
// request id, and turns the refusals of the checks every gitmem route has
// ({"error": "..."}: a missing token, a body too large, a server busy, an
// unknown route) into Anthropic errors of the type their status has.
func memoryStoresErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != memoryStoresPathPrefix && !strings.HasPrefix(r.URL.Path, memoryStoresPathPrefix+"/") {
			next.ServeHTTP(w, r)
			return
		}
		id := newRequestID()
		w.Header().Set(headerRequestID, id)
		if bodiless(r) {
			// The SDKs send archive and redact with no body and no
			// Content-Type, which the browser guard refuses for a POST:
			// taken as an empty JSON body. (A browser's cross-site POST is
			// refused before, by its Origin or Sec-Fetch-Site.)
			r.Header.Set("Content-Type", "application/json")
		}
		ew := &errorWriter{ResponseWriter: w}
		next.ServeHTTP(ew, r)
		ew.finish(id)
	})
}

func newRequestID() string { return memstore.NewID("req_", time.Now()) }

// errorWriter holds back an error answer's body until it is complete.
type errorWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (e *errorWriter) WriteHeader(status int) {
	if status < 400 {
		e.ResponseWriter.WriteHeader(status)
		return
	}
	e.status = status
}

func (e *errorWriter) Write(b []byte) (int, error) {
	if e.status == 0 {
		return e.ResponseWriter.Write(b)
	}
	return e.body.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (e *errorWriter) Unwrap() http.ResponseWriter { return e.ResponseWriter }

func (e *errorWriter) finish(id string) {
	if e.status == 0 {
		return
	}
	w, body := e.ResponseWriter, e.body.Bytes()
	h := w.Header()
	if h.Get(headerShouldRetry) == "" && e.status < 500 && e.status != http.StatusRequestTimeout && e.status != http.StatusTooManyRequests {
		h.Set(headerShouldRetry, "false")
	}
	var typed struct{ Type string }
	if json.Unmarshal(body, &typed) == nil && typed.Type == "error" {
		w.WriteHeader(e.status)
		w.Write(body)
		return
	}
	var plain struct{ Error string }
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &plain) == nil && plain.Error != "" {
		msg = plain.Error
	}
	if msg == "" {
		msg = strconv.Itoa(e.status) + " " + http.StatusText(e.status)
	}
	apiError(w, e.status, errorTypeOf(e.status), msg)
}

// bodiless reports whether a request is an archive or a redaction sent as
// the SDKs send them: a POST with no body and no Content-Type.
func bodiless(r *http.Request) bool {
	return r.Method == http.MethodPost && r.ContentLength == 0 && len(r.TransferEncoding) == 0 && r.Header.Get("Content-Type") == "" &&
		(strings.HasSuffix(r.URL.Path, "/archive") || strings.HasSuffix(r.URL.Path, "/redact"))
}
