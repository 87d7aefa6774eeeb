package handler

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
)

// HTTPOptions configure the HTTP transport.
type HTTPOptions struct {
	// Token, when set, must be sent as "Authorization: Bearer <token>".
	Token string
	// MaxBodyBytes bounds a request body (default 32 MiB).
	MaxBodyBytes int64
}

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
//	GET  /healthz      "ok"
func (h *Handler) HTTP(opt HTTPOptions) http.Handler {
	if opt.MaxBodyBytes == 0 {
		opt.MaxBodyBytes = defaultMaxBody
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("POST /v1/tool_use", func(w http.ResponseWriter, r *http.Request) {
		h.serveToolUse(w, r, Caller{Session: r.Header.Get(HeaderSession), Agent: r.Header.Get(HeaderAgent)}, opt.MaxBodyBytes)
	})
	return bearer(opt.Token, mux)
}

const defaultMaxBody = 32 << 20

func healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

// bearer requires "Authorization: Bearer <token>" on every request when
// token is set.
func bearer(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gitmem"`)
			httpError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serveToolUse answers a request whose body is one tool_use block (with
// its tool_result) or a JSON array, an assistant message's content (with
// the array of tool_results for its memory tool_use blocks, run in order).
// Every HTTP transport answers tool calls through it.
func (h *Handler) serveToolUse(w http.ResponseWriter, r *http.Request, c Caller, maxBody int64) {
	body, err := readBody(w, r, maxBody)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			httpError(w, http.StatusRequestEntityTooLarge, "request body is larger than the limit")
			return
		}
		httpError(w, http.StatusBadRequest, "could not read the request body")
		return
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var blocks []json.RawMessage
		if err := json.Unmarshal(trimmed, &blocks); err != nil {
			httpError(w, http.StatusBadRequest, "body is not a JSON array of content blocks")
			return
		}
		results := []Result{}
		for _, raw := range blocks {
			var b Block
			if json.Unmarshal(raw, &b) != nil || b.Type != "tool_use" || b.Name != ToolName {
				continue // text, thinking and other tools' blocks are not ours
			}
			results = append(results, h.Handle(c, b))
		}
		writeJSON(w, http.StatusOK, results)
		return
	}
	if !json.Valid(trimmed) {
		httpError(w, http.StatusBadRequest, "body is not a JSON tool_use block")
		return
	}
	writeJSON(w, http.StatusOK, h.HandleJSON(c, trimmed))
}

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	return buf.Bytes(), err
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func httpError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
