package console_test

import (
	"html"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A store that cannot be opened gets, on the console's pages, the words
// the operator API and the Memory Stores API give it (stores.Unopened):
// damaged, how, and what to run. Before, "The store could not complete
// the request; nothing was changed." (an attacker's pass), which told the
// operator looking for what is wrong the least of the three. So does the
// list of stores, which said only "unreadable" of it.
func TestConsoleDamagedStoreSaysWhatToRun(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.create("broken", "")
	dir := filepath.Join(s.root, "broken")
	if err := os.WriteFile(filepath.Join(dir, ".git", "refs", "heads", "main"), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Damaged(t, dir, "a store damaged on purpose")
	session := loginHTTP(t, s.url, "ops")
	sentence := "store broken is damaged: the branch refs/heads/main is damaged (its file holds 8 bytes that are not a commit hash); nothing was changed. " +
		"Retrying does not help: an operator repairs it on the server, where gitmem --repo STORES/broken fsck says how (STORES is the server's --stores folder)"
	want := html.EscapeString("S" + sentence[1:] + ".")
	for _, page := range []string{"tree", "timeline"} {
		req, _ := http.NewRequest("GET", s.url+"/console/s/broken/"+page, nil)
		req.AddCookie(session)
		status, body := do(t, req)
		if status != 500 || !strings.Contains(body, want) {
			t.Errorf("%s: %d %s\nwant 500 with %q", page, status, clip(body), want)
		}
		if strings.Contains(body, s.root) {
			t.Errorf("%s names a host path", page)
		}
	}
	req, _ := http.NewRequest("GET", s.url+"/console/", nil)
	req.AddCookie(session)
	status, body := do(t, req)
	said := `<strong>damaged</strong><br><span class="hint">` + html.EscapeString(sentence) + "</span>"
	if status != 200 || !strings.Contains(body, said) || strings.Contains(body, s.root) {
		t.Errorf("the list of stores: %d %s\nwant 200 with %q", status, clip(body), said)
	}
}

// loginHTTP logs in to the console at base with the test token name, as
// the login form does, and returns the session cookie.
func loginHTTP(t *testing.T, base, name string) *http.Cookie {
	t.Helper()
	res, err := noRedirect.Get(base + "/console/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var csrf *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "gitmem_console_login" {
			csrf = c
		}
	}
	if csrf == nil {
		t.Fatal("the login page set no CSRF cookie")
	}
	req, _ := http.NewRequest("POST", base+"/console/login", strings.NewReader(url.Values{"token": {"secret-" + name}, "csrf": {csrf.Value}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(csrf)
	if res, err = noRedirect.Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == "gitmem_console" && c.Value != "" {
			return c
		}
	}
	t.Fatalf("the login answered %d and no session", res.StatusCode)
	return nil
}
