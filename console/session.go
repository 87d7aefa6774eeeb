package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/policy"
)

// Sessions live in the server's memory: a restart logs everyone out.
const (
	sessionIdle   = time.Hour
	sessionMax    = 12 * time.Hour
	maxSessions   = 10000
	loginCookie   = "gitmem_console_login" // the login form's CSRF token (no session yet)
	sessionCookie = "gitmem_console"
)

// session is a logged-in browser. The secret it logged in with is kept
// (in memory only) and looked up again at every request, so a token
// removed from the token file, or whose scope changed, takes effect at
// once.
type session struct {
	id, csrf string
	secret   string
	created  time.Time
	seen     time.Time
}

type sessions struct {
	mu sync.Mutex
	m  map[string]*session
}

func newSessions() *sessions { return &sessions{m: map[string]*session{}} }

// random is 32 bytes from the system's random source, as text.
func random() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (ss *sessions) create(secret string, now time.Time) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.m) >= maxSessions { // drop the expired, then the oldest
		var oldest *session
		for id, s := range ss.m {
			if now.Sub(s.seen) > sessionIdle || now.Sub(s.created) > sessionMax {
				delete(ss.m, id)
			} else if oldest == nil || s.seen.Before(oldest.seen) {
				oldest = s
			}
		}
		if len(ss.m) >= maxSessions && oldest != nil {
			delete(ss.m, oldest.id)
		}
	}
	s := &session{id: random(), csrf: random(), secret: secret, created: now, seen: now}
	ss.m[s.id] = s
	return s
}

func (ss *sessions) get(id string, now time.Time) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[id]
	if s == nil {
		return nil
	}
	if now.Sub(s.seen) > sessionIdle || now.Sub(s.created) > sessionMax {
		delete(ss.m, id)
		return nil
	}
	s.seen = now
	return s
}

func (ss *sessions) drop(id string) {
	ss.mu.Lock()
	delete(ss.m, id)
	ss.mu.Unlock()
}

// secure says whether the browser reached the console by a name other
// than a loopback one: its cookies are then Secure (sent over HTTPS
// only; put a TLS proxy in front of a server off loopback) and take the
// __Host- prefix, which binds them to this host.
func secure(r *http.Request) bool { return !handler.LoopbackHost(r.Host) }

func cookieName(r *http.Request, name string) string {
	if secure(r) {
		return "__Host-" + name
	}
	return name
}

func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: cookieName(r, name), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode})
}

func cookie(r *http.Request, name string) string {
	if ck, err := r.Cookie(cookieName(r, name)); err == nil {
		return ck.Value
	}
	return ""
}

func same(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// formPost reads a POST's form: url-encoded only (what the console's
// forms send).
func formPost(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/x-www-form-urlencoded" && r.ParseForm() == nil
}

// auth wraps a page: it finds the visitor's session and token (a server
// without login gives every browser a session), sends a visitor who has
// none to the login page, and refuses a POST without the session's CSRF
// token.
func (c *Console) auth(fn func(w http.ResponseWriter, r *http.Request, v *visit)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		s := c.sessions.get(cookie(r, sessionCookie), now)
		var tok policy.Token
		switch {
		case c.opt.Login == nil:
			if s == nil {
				s = c.sessions.create("", now)
				setCookie(w, r, sessionCookie, s.id, 0)
			}
			tok = policy.Token{Stores: []string{"*"}, Access: policy.ReadWrite, Role: policy.Operator}
		case s != nil:
			var ok bool
			if tok, ok = c.opt.Login(s.secret); !ok || !tok.Operator() {
				c.sessions.drop(s.id)
				s = nil
			}
		}
		if s == nil {
			if r.Method != http.MethodGet {
				c.fail(w, r, nil, http.StatusUnauthorized, "Your session has ended: log in again. Nothing was changed.")
				return
			}
			http.Redirect(w, r, pageURL(base+"login", "next", r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		v := &visit{token: tok, sess: s}
		if r.Method == http.MethodPost && !(formPost(r) && same(r.PostForm.Get("csrf"), s.csrf)) {
			c.fail(w, r, v, http.StatusForbidden, "The form's CSRF token is missing or wrong: reload the page and send it again. Nothing was changed.")
			return
		}
		fn(w, r, v)
	}
}

// next is where a login goes: a console page, never another site.
func next(r *http.Request) string {
	n := r.FormValue("next")
	if !strings.HasPrefix(n, base) || strings.ContainsAny(n, "\\\r\n") {
		return base
	}
	return n
}

type loginData struct {
	Next, CSRF, Error string
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if c.opt.Login == nil {
		http.Redirect(w, r, next(r), http.StatusSeeOther)
		return
	}
	c.showLogin(w, r, http.StatusOK, "")
}

func (c *Console) showLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	csrf := random()
	setCookie(w, r, loginCookie, csrf, 3600)
	c.render(w, nil, status, "login.html", "Log in", "", loginData{Next: next(r), CSRF: csrf, Error: msg})
}

// login checks a token and starts a session. The form carries a CSRF
// token that its cookie must match, so that another site cannot log a
// browser in with a token of its own.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if c.opt.Login == nil {
		http.Redirect(w, r, base, http.StatusSeeOther)
		return
	}
	if !formPost(r) || !same(r.PostForm.Get("csrf"), cookie(r, loginCookie)) {
		msg := "The form had expired: enter the token again."
		if secure(r) && cookie(r, loginCookie) == "" {
			// A browser drops a Secure cookie sent over plain HTTP.
			msg = "The form had expired, or the browser refused the console's cookie: off localhost the console works over HTTPS only (put a TLS proxy in front). Enter the token again."
		}
		c.showLogin(w, r, http.StatusForbidden, msg)
		return
	}
	secret := strings.TrimSpace(r.PostForm.Get("token"))
	tok, ok := c.opt.Login(secret)
	switch {
	case !ok:
		c.showLogin(w, r, http.StatusUnauthorized, "That token is not known to this server.")
		return
	case !tok.Operator():
		c.showLogin(w, r, http.StatusForbidden, "Token "+tok.Name+" is an agent token; the console needs an operator token.")
		return
	}
	if old := c.sessions.get(cookie(r, sessionCookie), time.Now()); old != nil {
		c.sessions.drop(old.id) // a new session id at each login
	}
	s := c.sessions.create(secret, time.Now())
	setCookie(w, r, sessionCookie, s.id, int(sessionMax/time.Second))
	setCookie(w, r, loginCookie, "", -1)
	http.Redirect(w, r, next(r), http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, v *visit) {
	c.sessions.drop(v.sess.id)
	setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, base+"login", http.StatusSeeOther)
}
