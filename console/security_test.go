package console_test

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// Memory content is hostile: what an agent wrote (file and folder names,
// contents, its agent and session names, its tool_use id) renders as
// text on every page, and runs nowhere (a dialog, a script error or a
// CSP violation fails the test; no element of it is in the page).
func TestConsoleHostileMemory(t *testing.T) {
	s := newServer(t)
	const (
		desc    = `<script>alert("description")</script>`
		dir     = `<svg onload=alert('dir')>`
		file    = `<img src=x onerror=alert('file')>.md`
		content = `<script>alert('content')</script>`
		line2   = `"><img src=x onerror=alert('line')>`
		agent   = `<img src=x onerror=alert('agent')>`
		session = `"><script>alert('session')</script>`
		id      = `toolu_<b onmouseover=alert('id')>`
	)
	s.create("user-1", desc)
	s.call("user-1", "support-bot", "conv-1", "toolu_h0", map[string]any{"command": "create", "path": "/memories/plain.md", "file_text": "plain\n"})
	path := "/memories/" + dir + "/" + file
	s.call("user-1", agent, session, id, map[string]any{"command": "create", "path": path, "file_text": content + "\n" + line2 + "\n"})
	ctx := browser(t)
	u := s.url + "/console/s/user-1/"
	login(t, ctx, s.url, "ops")

	// noMarkup checks that the page shows each of want as text, and that
	// none of it became an element.
	noMarkup := func(where, sel string, want ...string) {
		t.Helper()
		got := text(t, ctx, sel)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s does not show %q as text:\n%s", where, w, got)
			}
		}
		if n := nodes(t, ctx, "main script, main img, main svg, main b, main [onerror], main [onload], main [onmouseover]"); n != 0 {
			t.Errorf("%s has %d element(s) made of memory content", where, n)
		}
	}
	run(t, ctx, "stores", chromedp.WaitVisible(chromedp.CSS("#stores")))
	noMarkup("the stores", "#stores", desc)
	run(t, ctx, "tree", chromedp.Navigate(u+"tree"), chromedp.WaitVisible(chromedp.CSS("#tree")))
	noMarkup("the tree", "#tree", dir+"/", id, agent)
	run(t, ctx, "open the folder", chromedp.Click(chromedp.CSS("a.dir")), chromedp.WaitVisible(chromedp.CSS("#tree")))
	noMarkup("the folder", "main", file, id)
	run(t, ctx, "open the file", chromedp.Click(chromedp.CSS("a.file")), chromedp.WaitVisible(chromedp.CSS("#content")))
	noMarkup("the file", "main", path, content, line2)
	if got := text(t, ctx, "#L2"); !strings.Contains(got, line2) {
		t.Errorf("line 2 reads %q", got)
	}
	if title := eval[string](t, ctx, "document.title"); !strings.Contains(title, file) {
		t.Errorf("the title is %q", title)
	}
	run(t, ctx, "blame", chromedp.Click(`//a[text()="Blame"]`), chromedp.WaitVisible(chromedp.CSS("#blame")))
	noMarkup("blame", "#blame", content, id, agent, session)
	run(t, ctx, "timeline", chromedp.Navigate(u+"timeline"), chromedp.WaitVisible(chromedp.CSS("#timeline")),
		chromedp.Click(chromedp.CSS("#timeline details summary")), chromedp.WaitVisible(chromedp.CSS("#timeline details table.diff")))
	noMarkup("the timeline", "#timeline > li", path, id, agent, session, content, line2)
	run(t, ctx, "filter by the id", chromedp.Navigate(u+"timeline?tool_use_id="+url.QueryEscape(id)), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	if n := nodes(t, ctx, "#timeline > li[data-hash]"); n != 1 {
		t.Errorf("filtered by the hostile id, the timeline shows %d changes", n)
	}
	noMarkup("the filters", "main", id)
	if v := eval[string](t, ctx, `document.querySelector('#filters input[name="tool_use_id"]').value`); v != id {
		t.Errorf("the filter field holds %q", v)
	}
	run(t, ctx, "the change", chromedp.Click(chromedp.CSS("#timeline .hash a")), chromedp.WaitVisible(chromedp.CSS("#revert-form")))
	noMarkup("the change", "main", id, agent, session, content)
	run(t, ctx, "side by side", chromedp.Click(`//a[text()="Side by side"]`), chromedp.WaitVisible(chromedp.CSS("table.diff.split")))
	noMarkup("the change side by side", "main", content, line2)
	run(t, ctx, "its revert's preview", chromedp.Click(chromedp.CSS("#revert-form button")), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	noMarkup("the revert's preview", "main", id, path, content)
	run(t, ctx, "a diff by id", chromedp.Navigate(u+"diff?from=toolu_h0&to="+url.QueryEscape(id)), chromedp.WaitVisible(chromedp.CSS("table.diff")))
	noMarkup("the diff", "main", path, content)

	// A hostile change that lands while the timeline is open is added by
	// the page's script: as text too.
	run(t, ctx, "the live timeline", chromedp.Navigate(u+"timeline"), chromedp.WaitVisible(chromedp.CSS("#live-status")))
	s.call("user-1", agent, session, "toolu_live", map[string]any{"command": "str_replace", "path": path, "old_str": content, "new_str": "<iframe src=javascript:alert('live')>"})
	run(t, ctx, "it appears", chromedp.WaitVisible(chromedp.CSS("#timeline > li.new")))
	noMarkup("the live change", "#timeline > li.new", agent, session, "toolu_live")
	if n := nodes(t, ctx, "iframe"); n != 0 {
		t.Errorf("the live change made %d iframe(s)", n)
	}
}

// Who may do what: only operator tokens log in; a read-only token sees
// and cannot change; a scoped token sees its stores only; every POST
// needs the session's CSRF token; the cookie is HttpOnly, SameSite=Strict
// (and Secure off loopback); every answer has the CSP.
func TestConsoleAccess(t *testing.T) {
	s := newServer(t)
	seed(s)
	ctx := browser(t)
	u := s.url + "/console/s/user-4711/"

	// Without a session, a page sends to the login, and comes back after.
	run(t, ctx, "a page without a session", chromedp.Navigate(u+"blame?path=/memories/prefs.md"), chromedp.WaitVisible(chromedp.CSS("#token")))
	for _, tc := range []struct{ token, want string }{{"nobody", "not known"}, {"support-bot", "agent token"}} {
		eval[bool](t, ctx, "document.body.dataset.stale = 'yes'; true") // this page: the answer is the next one
		run(t, ctx, "log in as "+tc.token, chromedp.SendKeys(chromedp.CSS("#token"), "secret-"+tc.token+"\r"),
			chromedp.WaitVisible(chromedp.CSS("body:not([data-stale]) p.error")))
		if got := text(t, ctx, "p.error"); !strings.Contains(got, tc.want) {
			t.Errorf("logging in as %s: %q", tc.token, got)
		}
	}
	run(t, ctx, "log in as auditor", chromedp.SendKeys(chromedp.CSS("#token"), "secret-auditor\r"), chromedp.WaitVisible(chromedp.CSS("#blame")))
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	var session string
	for _, c := range res.Cookies {
		switch c.Name {
		case "gitmem_console":
			session = c.Value
			if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict || c.Secure {
				t.Errorf("the session cookie on loopback: HttpOnly %v, SameSite %q, Secure %v", c.HTTPOnly, c.SameSite, c.Secure)
			}
		default:
			t.Errorf("after the login the browser holds cookie %s", c.Name)
		}
	}
	if got := text(t, ctx, "header .who"); !strings.Contains(got, "auditor (read-only)") {
		t.Errorf("the header reads %q", got)
	}

	// Read-only: every page, no form that changes anything, and a POST
	// with the session's CSRF token is still refused.
	run(t, ctx, "a change", chromedp.Navigate(u+"change?rev=toolu_03"), chromedp.WaitVisible(chromedp.CSS("table.diff")))
	if n := nodes(t, ctx, "#revert-form"); n != 0 {
		t.Error("a read-only token is offered the revert")
	}
	run(t, ctx, "repair", chromedp.Navigate(u+"repair"), chromedp.WaitVisible(chromedp.CSS("#revert-rev")))
	if n := nodes(t, ctx, "main form button:not([disabled])"); n != 0 {
		t.Errorf("a read-only token has %d repair button(s) enabled", n)
	}
	csrf := eval[string](t, ctx, `document.querySelector('input[name="csrf"]').value`)
	head := s.git("user-4711", "rev-parse", "HEAD")
	post := func(path, session string, form url.Values) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", s.url+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: "gitmem_console", Value: session})
		return do(t, req)
	}
	for _, step := range []string{"", "confirm"} {
		if status, body := post("/console/s/user-4711/repair/revert", session, url.Values{"csrf": {csrf}, "rev": {"toolu_03"}, "step": {step}}); status != 403 || !strings.Contains(body, "read-only") {
			t.Errorf("a read-only revert (%q): %d %s", step, status, clip(body))
		}
	}
	if status, body := post("/console/s/user-4711/repair/redact", session, url.Values{"csrf": {csrf}, "kind": {"text"}, "text": {"tea"}, "step": {"confirm"}}); status != 403 {
		t.Errorf("a read-only redaction: %d %s", status, clip(body))
	}
	if status, body := post("/console/s/user-4711/repair/revert", session, url.Values{"rev": {"toolu_03"}}); status != 403 || !strings.Contains(body, "CSRF") {
		t.Errorf("a POST without the CSRF token: %d %s", status, clip(body))
	}
	if status, body := post("/console/s/user-4711/repair/revert", session, url.Values{"csrf": {"forged"}, "rev": {"toolu_03"}}); status != 403 || !strings.Contains(body, "CSRF") {
		t.Errorf("a POST with a wrong CSRF token: %d %s", status, clip(body))
	}
	if got := s.git("user-4711", "rev-parse", "HEAD"); got != head {
		t.Error("a refused POST made a commit")
	}

	// An archived store: seen, not changed (but for a redaction, as the
	// API allows), even by a read-write token.
	run(t, ctx, "log out", chromedp.Click(`//button[text()="Log out"]`), chromedp.WaitVisible(chromedp.CSS("#token")))
	login(t, ctx, s.url, "ops")
	run(t, ctx, "an archived store", chromedp.Navigate(s.url+"/console/s/old-user/repair"), chromedp.WaitVisible(chromedp.CSS("#revert-rev")))
	if got := text(t, ctx, "main .notice"); !strings.Contains(got, "archived") {
		t.Errorf("the archived store's repair page says %q", got)
	}
	if n, m := nodes(t, ctx, "#revert-rev:disabled, #restore-to:disabled, #expire-age:disabled"), nodes(t, ctx, "#redact-text:enabled"); n != 3 || m != 1 {
		t.Errorf("on an archived store %d of revert, restore, expire are disabled, and redact is enabled %d time(s)", n, m)
	}
	opsCSRF := eval[string](t, ctx, `document.querySelector('input[name="csrf"]').value`)
	ops := ""
	if res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{}); err == nil {
		for _, c := range res.Cookies {
			if c.Name == "gitmem_console" {
				ops = c.Value
			}
		}
	}
	if status, body := post("/console/s/old-user/repair/expire", ops, url.Values{"csrf": {opsCSRF}, "older_than": {"1d"}}); status != http.StatusConflict || !strings.Contains(body, "archived") {
		t.Errorf("an expire on an archived store: %d %s", status, clip(body))
	}

	// Logging out ends the session: its cookie opens nothing any more.
	run(t, ctx, "log out", chromedp.Click(`//button[text()="Log out"]`), chromedp.WaitVisible(chromedp.CSS("#token")))
	req, _ := http.NewRequest("GET", s.url+"/console/s/user-4711/tree", nil)
	req.AddCookie(&http.Cookie{Name: "gitmem_console", Value: session})
	if status, _ := do(t, req); status != http.StatusSeeOther {
		t.Errorf("the session's cookie after the logout: %d", status)
	}

	// A token scoped to team-* sees those stores only.
	run(t, ctx, "log in as team-ops", chromedp.SendKeys(chromedp.CSS("#token"), "secret-team-ops\r"), chromedp.WaitVisible(chromedp.CSS("#stores")))
	if got := text(t, ctx, "#stores tbody"); !strings.Contains(got, "team-red") || strings.Contains(got, "user-4711") {
		t.Errorf("team-ops sees the stores:\n%s", got)
	}
	run(t, ctx, "another store", chromedp.Navigate(u+"tree"), chromedp.WaitVisible(chromedp.CSS("p.error")))
	if got := text(t, ctx, "p.error"); !strings.Contains(got, "may not use store user-4711") {
		t.Errorf("team-ops on user-4711: %q", got)
	}

	// Every answer has the CSP; off loopback the cookies are Secure and
	// bound to the host.
	for _, path := range []string{"/console/login", "/console/assets/console.js", "/console/s/user-4711/tree"} {
		req, _ := http.NewRequest("GET", s.url+path, nil)
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
	}
	req, _ = http.NewRequest("GET", s.url+"/console/login", nil)
	req.Host = "gitmem.example"
	res2, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res2.Body.Close()
	if sc := res2.Header.Get("Set-Cookie"); !strings.HasPrefix(sc, "__Host-gitmem_console_login=") || !strings.Contains(sc, "; Secure") || !strings.Contains(sc, "; HttpOnly") || !strings.Contains(sc, "; SameSite=Strict") {
		t.Errorf("the login cookie off loopback: %s", sc)
	}
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// do sends req without following redirects, and returns the status and
// the body.
func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// Bidirectional controls in what the model wrote ("Trojan Source"): a
// file named notes<U+202E>dm.terces was listed as "notessecret.md", and a
// line holding one was shown reordered. Every page now shows each such
// control as "<U+202E>" in its text, and keeps it as it is where a form
// or a link must name the file (the restore form's paths); a form field
// that holds one has a note beside it that says so and shows its value
// so (the fields showed "notessecret.md", a note only on the pages).
func TestConsoleShowsBidiControls(t *testing.T) {
	s := newServer(t)
	s.create("user-1", "")
	const (
		name = "notes\u202edm.terces"
		line = "pay \u2066\u202eto bob\u2069 now"
	)
	s.call("user-1", "support-bot", "conv-1", "toolu_bidi", map[string]any{"command": "create", "path": "/memories/" + name, "file_text": line + "\n"})
	ctx := browser(t)
	u := s.url + "/console/s/user-1/"
	login(t, ctx, s.url, "ops")
	const shownName = "notes<U+202E>dm.terces"
	run(t, ctx, "tree", chromedp.Navigate(u+"tree"), chromedp.WaitVisible(chromedp.CSS("#tree")))
	if got := text(t, ctx, "#tree"); !strings.Contains(got, shownName) || strings.ContainsRune(got, '\u202e') {
		t.Errorf("the tree shows %q, want %q and no control", got, shownName)
	}
	run(t, ctx, "the file", chromedp.Click(chromedp.CSS("a.file")), chromedp.WaitVisible(chromedp.CSS("#content")))
	if got, want := text(t, ctx, "#L1"), "pay <U+2066><U+202E>to bob<U+2069> now"; !strings.Contains(got, want) {
		t.Errorf("line 1 reads %q, want %q", got, want)
	}
	if title := eval[string](t, ctx, "document.title"); !strings.Contains(title, shownName) {
		t.Errorf("the title is %q", title)
	}
	run(t, ctx, "restore it", chromedp.Click(`//a[text()="Restore or redact…"]`), chromedp.WaitVisible(chromedp.CSS("#restore-paths")))
	if v := eval[string](t, ctx, `document.querySelector('#restore-paths').value`); v != "/memories/"+name {
		t.Errorf("the restore form names %q, want the file as it is", v)
	}
	// The note beside a field: visible, and saying what the field holds.
	note := func(field string) {
		t.Helper()
		js := `(() => { const n = document.querySelector(` + strconv.Quote(field) + `).nextElementSibling;
			return n && n.classList.contains('bidi-note') && n.checkVisibility() ? n.innerText : '' })()`
		if got := eval[string](t, ctx, js); !strings.Contains(got, "/memories/"+shownName) || !strings.Contains(got, "invisible") || strings.ContainsRune(got, '\u202e') {
			t.Errorf("the note beside %s reads %q", field, got)
		}
	}
	note("#restore-paths")
	note("#redact-path")
	if n := eval[int](t, ctx, `document.querySelectorAll('.bidi-note').length`); n != 2 {
		t.Errorf("%d notes on the repair page, want 2 (the fields without a control have none)", n)
	}
	run(t, ctx, "timeline", chromedp.Navigate(u+"timeline"), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	if got := text(t, ctx, "#timeline"); !strings.Contains(got, shownName) || strings.ContainsRune(got, '\u202e') {
		t.Errorf("the timeline shows %q", got)
	}
	run(t, ctx, "the timeline of the file", chromedp.Navigate(u+"timeline?path="+url.QueryEscape("/memories/"+name)), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	if v := eval[string](t, ctx, `document.querySelector('input[name=path]').value`); v != "/memories/"+name {
		t.Errorf("the filter names %q, want the file as it is", v)
	}
	note("input[name=path]")
}
