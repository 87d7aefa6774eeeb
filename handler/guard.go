package handler

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/gitmem-dev/gitmem/policy"
)

// Defaults of the HTTP transports' bounds (HTTPOptions).
const (
	DefaultMaxBodyBytes     = 32 << 20
	DefaultMaxInflightBytes = 128 << 20
	DefaultMaxInflight      = 64
	DefaultQueueWait        = 5 * time.Second
	// The http.Server's bounds on a connection (HTTPOptions.Server).
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	// WriteTimeout is the http.Server's write timeout gitmem serves with:
	// a request must be answered within it, so the calls of one request
	// stop being started answerMargin before it runs out.
	WriteTimeout = 60 * time.Second
	answerMargin = 10 * time.Second
)

func (o *HTTPOptions) defaults() {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxInflightBytes <= 0 {
		o.MaxInflightBytes = DefaultMaxInflightBytes
	}
	o.MaxInflightBytes = max(o.MaxInflightBytes, o.MaxBodyBytes)
	if o.MaxInflight <= 0 {
		o.MaxInflight = DefaultMaxInflight
	}
	if o.QueueWait == 0 {
		o.QueueWait = DefaultQueueWait
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = WriteTimeout
	}
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
}

// Protect wraps a transport's routes (its own, or those of a server built
// on the handler, as package storesapi) in what every gitmem HTTP route
// gets, outermost first: the access log (one line per request), the
// browser guard (Host on loopback, Origin, Content-Type), the public
// routes (GET /healthz, /readyz and /metrics, which need no token),
// auth (the bearer token, or the stores server's tokens; hasToken says
// whether there is one), and the bounds on requests and body bytes in
// flight.
func (o HTTPOptions) Protect(log *slog.Logger, hasToken bool, auth func(http.Handler) http.Handler, routes http.Handler) http.Handler {
	o.defaults()
	public := http.NewServeMux()
	public.HandleFunc("GET /healthz", o.healthz)
	public.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if o.Ready != nil {
			if err := o.Ready(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "not ready: %v\n", err)
				return
			}
		}
		w.Write([]byte("ready\n"))
	})
	if o.Metrics != nil {
		public.Handle("GET /metrics", o.Metrics)
	}
	if mux, ok := routes.(*http.ServeMux); ok {
		routes = jsonRouting(mux)
	}
	lim := newLimiter(o)
	public.Handle("/", auth(lim.wrap(routes)))
	if o.Console != nil {
		public.Handle(ConsolePath, lim.wrap(o.Console))
	}
	return accessLog(log, browserGuard(hasToken, o.Console != nil, public))
}

// jsonRouting serves mux, answering a path no route serves (404) and a
// method no route of the path takes (405) in JSON, as every other
// refusal, where ServeMux answers in plain text.
func jsonRouting(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// ServeMux's own answer tells which of the two it is (and the
		// methods allowed, in Allow); its body is not sent.
		rec := &headerRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if rec.status == http.StatusMethodNotAllowed {
			methodNotAllowed(w, r, rec.header.Get("Allow"), "")
			return
		}
		HTTPError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+clipHeader(r.URL.Path))
	})
}

// methodNotAllowed refuses a method a route does not take, naming the
// ones it does (also in Allow), and why when there is more to say.
func methodNotAllowed(w http.ResponseWriter, r *http.Request, allowed, why string) {
	msg := fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, clipHeader(r.URL.Path), allowed)
	if why != "" {
		msg += ": " + why
	}
	w.Header().Set("Allow", allowed)
	HTTPError(w, http.StatusMethodNotAllowed, msg)
}

// headerRecorder keeps the status and headers a handler answers with.
type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header         { return h.header }
func (h *headerRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (h *headerRecorder) WriteHeader(status int)      { h.status = status }

// healthz answers "ok" to anyone: the process serves. The Health lines
// (the state of background work, such as serve --sync's) may name a
// remote or an error, so they go only to a caller with the token (or to
// anyone when the server has none).
func (o HTTPOptions) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	body := "ok\n"
	if o.Health != nil && (o.Token == "" || subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+o.Token)) == 1) {
		for _, l := range o.Health(r.Context()) {
			body += l + "\n"
		}
	}
	w.Write([]byte(body))
}

// browserGuard refuses what a web page could make a browser send to a
// gitmem server on the user's machine (CSRF, DNS rebinding):
//   - a cross-origin request (Sec-Fetch-Site or Origin naming another
//     site) other than GET/HEAD/OPTIONS: 403;
//   - a request with a body that is not Content-Type application/json
//     (which a page can send only after a CORS preflight gitmem never
//     answers): 415 — but for the console's forms (when console is
//     set), which carry its CSRF token;
//   - without a token, on a loopback connection, a Host that is not a
//     loopback name (a rebound DNS name): 403.
func browserGuard(hasToken, console bool, next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from := r.Header.Get("Origin")
		if from == "" {
			from = "Sec-Fetch-Site: " + r.Header.Get("Sec-Fetch-Site")
		}
		HTTPError(w, http.StatusForbidden, fmt.Sprintf("cross-origin request refused (%s)", clipHeader(from)))
	}))
	return cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hasToken && onLoopback(r) && !LoopbackHost(r.Host) {
			HTTPError(w, http.StatusForbidden, fmt.Sprintf("Host %q is refused: a loopback server without a token answers only to localhost, 127.0.0.1 and [::1]", clipHeader(r.Host)))
			return
		}
		if hasBody(r) && !(console && strings.HasPrefix(r.URL.Path, ConsolePath)) {
			if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
				HTTPError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type must be application/json, got %q", clipHeader(r.Header.Get("Content-Type"))))
				return
			}
		}
		next.ServeHTTP(w, r)
	}))
}

func hasBody(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodDelete:
		return r.ContentLength > 0 || len(r.TransferEncoding) > 0
	}
	return true
}

func clipHeader(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// onLoopback reports whether the request came in on a loopback address.
func onLoopback(r *http.Request) bool {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// LoopbackHost reports whether a Host header names this machine:
// localhost (and *.localhost, which browsers resolve locally) or a
// loopback address, with or without a port.
func LoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// limiter bounds what the server holds at once: at most MaxInflight
// requests with a body, whose bodies add up to at most MaxInflightBytes
// (a body counts its Content-Length, or MaxBodyBytes when it is sent in
// chunks). A request waits up to QueueWait for room, then gets 503 with
// Retry-After. A body over MaxBodyBytes is refused (413) before it is read.
type limiter struct {
	opt   HTTPOptions
	reqs  *semaphore.Weighted
	bytes *semaphore.Weighted
	waits atomic.Int64 // requests that found no room at once and queued (tests count them)
}

func newLimiter(o HTTPOptions) *limiter {
	return &limiter{opt: o, reqs: semaphore.NewWeighted(int64(o.MaxInflight)), bytes: semaphore.NewWeighted(o.MaxInflightBytes)}
}

// retryAfter is the Retry-After of a 503, in seconds.
const retryAfter = 1

func (l *limiter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hasBody(r) {
			next.ServeHTTP(w, r)
			return
		}
		arrived := time.Now()
		if r.ContentLength > l.opt.MaxBodyBytes {
			HTTPError(w, http.StatusRequestEntityTooLarge, tooLarge(l.opt.MaxBodyBytes))
			return
		}
		weight := r.ContentLength
		if weight < 0 {
			weight = l.opt.MaxBodyBytes
		}
		// The wait for room, QueueWait from the first that found none, is
		// made only then: a request with room at once makes no timer for
		// it (one a call, 2% of the many-stores row's CPU; issue 25).
		var wait context.Context
		cancel := context.CancelFunc(func() {})
		defer func() { cancel() }()
		queue := func() context.Context {
			if wait == nil {
				l.waits.Add(1)
				wait, cancel = context.WithTimeout(r.Context(), l.opt.QueueWait)
			}
			return wait
		}
		if !l.acquire(queue, l.reqs, 1) {
			busy(w, fmt.Sprintf("%d requests are in flight", l.opt.MaxInflight))
			return
		}
		defer l.reqs.Release(1)
		if !l.acquire(queue, l.bytes, weight) {
			busy(w, fmt.Sprintf("request bodies in flight would exceed %s bytes", policy.Thousands(l.opt.MaxInflightBytes)))
			return
		}
		defer l.bytes.Release(weight)
		r.Body = http.MaxBytesReader(w, r.Body, weight)
		// The calls of this request are started only while there is time
		// left to answer before the server's write timeout.
		ctx, stop := context.WithDeadline(r.Context(), arrived.Add(l.opt.WriteTimeout-answerMargin))
		defer stop()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// acquire takes n from sem, waiting until the context queue makes ends
// (not at all when QueueWait is negative). Room that is free is taken
// even when the request's context has ended (the server is stopping, the
// client went away): the request is then answered as any other (its
// calls change nothing), not refused as busy.
func (l *limiter) acquire(queue func() context.Context, sem *semaphore.Weighted, n int64) bool {
	if ok := sem.TryAcquire(n); ok || l.opt.QueueWait < 0 {
		return ok
	}
	return sem.Acquire(queue(), n) == nil
}

func busy(w http.ResponseWriter, why string) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	HTTPError(w, http.StatusServiceUnavailable, "the server is busy: "+why+"; retry after "+strconv.Itoa(retryAfter)+" s")
}

func tooLarge(limit int64) string {
	return "request body is larger than the limit of " + policy.Thousands(limit) + " bytes"
}
