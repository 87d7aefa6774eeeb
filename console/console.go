package console

import (
	"crypto/subtle"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/operator"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
)

// Options configure the console.
type Options struct {
	// Repo is the memory of a single-memory server (serve --http);
	// Stores the folder of a multi-store server (serve --stores). One of
	// them is set.
	Repo   *gitmem.Repo
	Stores *stores.Dir
	// Login finds the token whose secret an operator gives (SingleToken
	// for serve --token, storesapi.Tokens.Lookup for a token file). nil:
	// no token is needed (a loopback server without one) and every
	// visitor may do everything.
	Login func(secret string) (policy.Token, bool)
	// Sync is how a redaction rewrites a remote too (serve's remote
	// flags: credentials, limits).
	Sync gitmem.SyncOptions
	// Now is the clock relative times (2h, yesterday) are read against
	// (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// SingleToken is the Login of a server with one token (serve --token):
// that secret, a read-write operator without a name (its commits are the
// operator's git identity, as the CLI's).
func SingleToken(token string) func(string) (policy.Token, bool) {
	return func(secret string) (policy.Token, bool) {
		if token == "" || subtle.ConstantTimeCompare([]byte(secret), []byte(token)) != 1 {
			return policy.Token{}, false
		}
		return policy.Token{Stores: []string{"*"}, Access: policy.ReadWrite, Role: policy.Operator}, true
	}
}

// Console serves the console's pages.
type Console struct {
	opt      Options
	log      *slog.Logger
	pages    map[string]*template.Template
	sessions *sessions
	streams  chan struct{} // a slot per live timeline stream
	mux      *http.ServeMux
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// base is where the console is served.
const base = handler.ConsolePath

// New returns the console. It is served at /console/ by
// handler.HTTPOptions.Console, behind the server's Host and Origin
// checks.
func New(opt Options) *Console {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = handler.DefaultLogger()
	}
	c := &Console{opt: opt, log: opt.Logger, pages: parsePages(), sessions: newSessions(), streams: make(chan struct{}, maxStreams)}
	mux := http.NewServeMux()
	assets, _ := fs.Sub(assetFS, "assets")
	mux.Handle("GET "+base+"assets/", http.StripPrefix(base+"assets/", http.FileServerFS(assets)))
	mux.HandleFunc("GET "+base+"login", c.loginPage)
	mux.HandleFunc("POST "+base+"login", c.login)
	mux.HandleFunc("POST "+base+"logout", c.auth(c.logout))
	mux.HandleFunc("GET "+base+"{$}", c.auth(c.home))
	for _, prefix := range []string{base + "m/", base + "s/{store}/"} {
		mux.HandleFunc("GET "+prefix+"{$}", c.memory(c.tree))
		mux.HandleFunc("GET "+prefix+"tree", c.memory(c.tree))
		mux.HandleFunc("GET "+prefix+"file", c.memory(c.file))
		mux.HandleFunc("GET "+prefix+"timeline", c.memory(c.timeline))
		mux.HandleFunc("GET "+prefix+"change", c.memory(c.change))
		mux.HandleFunc("GET "+prefix+"diff", c.memory(c.diff))
		mux.HandleFunc("GET "+prefix+"blame", c.memory(c.blame))
		mux.HandleFunc("GET "+prefix+"shared", c.memory(c.shared))
		mux.HandleFunc("GET "+prefix+"repair", c.memory(c.repairPage))
		mux.HandleFunc("POST "+prefix+"repair/{action}", c.memory(c.repair))
		mux.HandleFunc("GET "+prefix+"events", c.auth(c.events))
	}
	mux.HandleFunc(base, c.auth(func(w http.ResponseWriter, r *http.Request, s *visit) {
		c.fail(w, r, s, http.StatusNotFound, "There is no such page.")
	}))
	c.mux = mux
	return c
}

// contentSecurityPolicy allows the console's own files and nothing else:
// no inline script or style, no frame, no form to another site.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if strings.HasPrefix(r.URL.Path, base+"assets/") {
		h.Set("Cache-Control", "no-cache")
	} else {
		h.Set("Cache-Control", "no-store") // pages hold memory content
	}
	c.mux.ServeHTTP(w, r)
}

// visit is an authenticated request: who makes it, and their session.
type visit struct {
	token policy.Token
	sess  *session
	store string // the store the page is about ("" for one memory, or none)
	mem   *memRef
}

// author is who the visitor's commits are attributed to: the token
// (zero: the operator's git identity, as the CLI's).
func (v *visit) author() gitmem.Signature {
	if v.token.Name == "" {
		return gitmem.Signature{}
	}
	return gitmem.SignatureOf(v.token.Name)
}

// memRef is the memory a page shows: one store, or the server's memory.
type memRef struct {
	Store    string // "" for a single-memory server
	Title    string
	Base     string // its pages' URL prefix
	Archived bool
}

// URL is the address of one of the memory's pages with its query
// parameters (name, value, ...), empty values left out.
func (m *memRef) URL(page string, kv ...string) string {
	return pageURL(m.Base+page, kv...)
}

func pageURL(path string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// memory wraps a page of one memory: the visitor's scope covers it.
func (c *Console) memory(fn func(w http.ResponseWriter, r *http.Request, v *visit, repo *gitmem.Repo)) http.HandlerFunc {
	return c.auth(func(w http.ResponseWriter, r *http.Request, v *visit) {
		name := r.PathValue("store")
		if (name == "") != (c.opt.Stores == nil) {
			c.fail(w, r, v, http.StatusNotFound, "There is no such page on this server.")
			return
		}
		if c.opt.Stores == nil {
			v.mem = &memRef{Title: "memory", Base: base + "m/"}
			fn(w, r, v, c.opt.Repo)
			return
		}
		if !v.token.Allows(name) {
			c.fail(w, r, v, http.StatusForbidden, "Token "+v.token.Name+" may not use store "+name+".")
			return
		}
		v.store = name
		st, err := c.opt.Stores.Acquire(r.Context(), name)
		if err != nil {
			c.failErr(w, r, v, err)
			return
		}
		defer st.Release()
		err = st.Use(func(repo *gitmem.Repo, m stores.Meta) error {
			info := stores.Info{Name: name, Meta: m}
			v.mem = &memRef{Store: name, Title: info.Title(), Base: base + "s/" + pathEscape(name) + "/", Archived: m.IsArchived()}
			fn(w, r, v, repo)
			return nil
		})
		if err != nil {
			c.failErr(w, r, v, err)
		}
	})
}

// page is what every template gets.
type page struct {
	Title    string
	User     string // the token's name ("" for none, or anonymous)
	LoggedIn bool   // a logout makes sense
	ReadOnly bool
	CSRF     string
	Mem      *memRef
	Nav      string // the current tab
	Notice   string
	Data     any
}

// render writes a page with status.
func (c *Console) render(w http.ResponseWriter, v *visit, status int, name, title, nav string, data any) {
	p := page{Title: title, Nav: nav, Data: data}
	if v != nil {
		p.User, p.ReadOnly, p.Mem = v.token.Name, v.token.ReadOnly(), v.mem
		if v.sess != nil {
			p.CSRF, p.LoggedIn = v.sess.csrf, c.opt.Login != nil
		}
	}
	t := c.pages[name]
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", p); err != nil {
		c.log.Error("console: render", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte(showBidi(b.String())))
}

// fail answers with an error page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, v *visit, status int, msg string) {
	c.render(w, v, status, "error.html", http.StatusText(status), "", msg)
}

// failErr answers with the error page an error of the operations calls
// for: the words the API uses for it, or, for a failure of the store, a
// generic one (logged with its cause, which may name host files).
func (c *Console) failErr(w http.ResponseWriter, r *http.Request, v *visit, err error) {
	status, msg := explain(v.store, err)
	if status == http.StatusInternalServerError {
		c.log.Error("console: store failure", "store", v.store, "path", r.URL.Path, "err", err.Error())
	}
	c.fail(w, r, v, status, msg)
}

// explain is the status and the words of an error on store (a store
// that is damaged or cannot be opened: as the APIs say it, Unopened; one
// opened out of file descriptors: OutOfFiles, 503).
func explain(store string, err error) (int, string) {
	var re *operator.RevError
	var pe *policy.PathError
	var rde *operator.RedactionError
	var ae *gitmem.AbsentError
	switch {
	case errors.As(err, &re) && re.Usage:
		return http.StatusBadRequest, re.Msg
	case errors.As(err, &re):
		return http.StatusNotFound, re.Msg
	case errors.Is(err, gitmem.ErrUnknownRev):
		return http.StatusNotFound, strings.TrimPrefix(err.Error(), gitmem.ErrUnknownRev.Error()+": ")
	case errors.As(err, &pe):
		return http.StatusBadRequest, pe.Msg
	case errors.As(err, &rde):
		return http.StatusBadRequest, rde.Msg
	case errors.Is(err, gitmem.ErrNotExist), errors.Is(err, gitmem.ErrIsDir):
		return http.StatusNotFound, "There is no such memory file."
	case errors.Is(err, stores.ErrNotFound):
		return http.StatusNotFound, "There is no such store."
	case errors.Is(err, stores.ErrArchived):
		return http.StatusConflict, "The store is archived; unarchive it to change it. Nothing was changed."
	case errors.Is(err, gitmem.ErrNoChange):
		return http.StatusConflict, "Nothing to change: the memory is already so. No commit was made."
	case errors.Is(err, gitmem.ErrPatternHoldsSecret):
		return http.StatusBadRequest, "Rewriting a remote records the redaction's pattern for every clone to read, and this pattern matches its own text: it likely holds the secret itself, which the record would publish. Write a regular expression for the secret's form instead (sk-[A-Za-z0-9]{20,}), or rewrite this memory only. Nothing was changed."
	case errors.Is(err, operator.ErrPreviewChanged):
		return http.StatusConflict, "The memory changed since the preview, so this would no longer change what was shown. Nothing was changed: preview it again."
	case errors.As(err, &ae):
		return http.StatusConflict, "Restoring would delete " + strings.Join(displayAll(ae.Paths), ", ") + ", which did not exist then. Nothing was changed."
	case errors.As(err, new(*gitmem.HandMadeError)):
		return http.StatusConflict, strings.TrimPrefix(err.Error(), "gitmem: ")
	}
	if msg, ok := stores.OutOfFiles(store, err); ok {
		return http.StatusServiceUnavailable, strings.ToUpper(msg[:1]) + msg[1:] + "."
	}
	if msg, ok := stores.Unopened(store, err); ok {
		return http.StatusInternalServerError, strings.ToUpper(msg[:1]) + msg[1:] + "."
	}
	return http.StatusInternalServerError, "The store could not complete the request; nothing was changed."
}

func displayAll(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = policy.Display(p)
	}
	return out
}

// parsePages parses each page with the layout and the shared parts.
func parsePages() map[string]*template.Template {
	common := template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	names, _ := fs.Glob(templateFS, "templates/*.html")
	out := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimPrefix(n, "templates/")
		if name == "layout.html" {
			continue
		}
		out[name] = template.Must(template.Must(common.Clone()).ParseFS(templateFS, n))
	}
	return out
}

var funcs = template.FuncMap{
	"short": func(h string) string {
		if len(h) > 7 {
			return h[:7]
		}
		return h
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Format(operator.TimeLayout)
	},
	"iso":     func(t time.Time) string { return t.Format(time.RFC3339) },
	"size":    func(n int64) string { return policy.HumanSize(n) },
	"display": policy.Display,
	"trailer": func(c gitmem.Commit, key string) string { return c.Trailer(key) },
	"who":     who,
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	},
}

// who is who made a change: its agent, else its author.
func who(c gitmem.Commit) string {
	if a := c.Trailer(gitmem.TrailerAgent); a != "" {
		return a
	}
	return c.Author.Name
}

// pathEscape is a store name as a path segment.
func pathEscape(s string) string { return url.PathEscape(s) }
