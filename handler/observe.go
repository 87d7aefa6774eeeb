package handler

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/gitmem-dev/gitmem/policy"
)

// Outcomes of a tool call (Call.Outcome).
const (
	OutcomeOK      = "ok"      // answered without error (a view, or a change committed or replayed)
	OutcomeError   = "error"   // refused with an error result: a bad block, path or parameter, a limit
	OutcomeFailure = "failure" // the store failed (disk, repository); the model was told nothing changed
)

// Call is one tool call as the handler answered it: what Options.OnCall
// receives, and what the log line of the call says.
type Call struct {
	ID      string
	Command string // "" when the block had none
	Path    string // as given (rename: "old -> new"), cut to 256 bytes
	Caller  Caller
	Outcome string
	// Err is the cause of a failure (never shown to the model).
	Err      error
	Duration time.Duration
	// Commit is the commit the call made, or, Replayed, the commit an
	// earlier call with its id made.
	Commit   string
	Replayed bool
	// CommitDuration is the time the commit took (the writer lock, the
	// change and the durable commit), when the call made one.
	CommitDuration time.Duration
}

// defaultLogger is a library user's: warnings and errors (store failures)
// to stderr; a server passes its own logger, which also logs every call.
var defaultLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// DefaultLogger is the logger of Options without one (defaultLogger).
func DefaultLogger() *slog.Logger { return defaultLogger }

// observe logs a call, one line, and hands it to OnCall.
func (h *Handler) observe(c Call) {
	level := slog.LevelInfo
	attrs := []slog.Attr{slog.String("id", policy.Clip(c.ID, policy.MaxToolUseIDBytes)), slog.String("command", c.Command), slog.String("path", c.Path),
		slog.String("outcome", c.Outcome), slog.Duration("duration", c.Duration)}
	if c.Commit != "" {
		attrs = append(attrs, slog.String("commit", short(c.Commit)))
	}
	if c.Replayed {
		attrs = append(attrs, slog.Bool("replayed", true))
	}
	if c.Caller.Session != "" {
		attrs = append(attrs, slog.String("session", policy.CommitText(c.Caller.Session, policy.MaxCallerBytes)))
	}
	if c.Caller.Agent != "" {
		attrs = append(attrs, slog.String("agent", policy.CommitText(c.Caller.Agent, policy.MaxCallerBytes)))
	}
	if c.Err != nil {
		level = slog.LevelError
		attrs = append(attrs, slog.String("err", c.Err.Error()))
	}
	h.log.LogAttrs(context.Background(), level, "tool call", attrs...)
	if h.onCall != nil {
		h.onCall(c)
	}
}

// startKey is the request context's key for the time the server began
// on the request: its headers read, before every check and queue.
type startKey struct{}

// requestStart is when the server began on r (now, outside accessLog).
func requestStart(r *http.Request) time.Time {
	if t, ok := r.Context().Value(startKey{}).(time.Time); ok {
		return t
	}
	return time.Now()
}

func short(hash string) string { return hash[:min(len(hash), 12)] }

// accessLog writes one line per HTTP request: method, path, status,
// bytes written, duration and the client's address.
func accessLog(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		r = r.WithContext(context.WithValue(r.Context(), startKey{}, start))
		next.ServeHTTP(rec, r)
		log.LogAttrs(r.Context(), slog.LevelInfo, "http request", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.Int("status", rec.status), slog.Int64("bytes", rec.bytes),
			slog.Duration("duration", time.Since(start)), slog.String("remote", r.RemoteAddr))
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	n, err := s.ResponseWriter.Write(b)
	s.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
