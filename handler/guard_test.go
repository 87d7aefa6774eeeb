package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/policy"
)

// post sends body to url with the given headers and returns the status,
// the Retry-After header and the body.
func post(t *testing.T, url, body string, hdr ...string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Retry-After"), strings.TrimSpace(string(b))
}

const viewBlock = `{"type":"tool_use","id":"toolu_v","name":"memory","input":{"command":"view","path":"/memories"}}`

// A page in a browser must not reach a loopback server: no simple
// (text/plain, form) bodies, no foreign Origin, no rebound Host name.
func TestBrowserGuard(t *testing.T) {
	t.Parallel()
	h, repo := newHandler(t, policy.DefaultLimits)
	head, _ := repo.Commit(context.Background(), "HEAD")
	srv := httptest.NewServer(h.HTTP(handler.HTTPOptions{}))
	defer srv.Close()
	url := srv.URL + "/v1/tool_use"
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	create := `{"type":"tool_use","id":"toolu_c","name":"memory","input":{"command":"create","path":"/memories/pwned.md","file_text":"x"}}`
	for _, tc := range []struct {
		hdr    []string
		status int
		body   string
	}{
		{[]string{"Content-Type", "text/plain"}, 415, `{"error":"Content-Type must be application/json, got \"text/plain\""}`},
		{[]string{"Content-Type", "application/x-www-form-urlencoded"}, 415, `{"error":"Content-Type must be application/json, got \"application/x-www-form-urlencoded\""}`},
		{[]string{"Content-Type", ""}, 415, `{"error":"Content-Type must be application/json, got \"\""}`},
		{[]string{"Origin", "https://evil.example"}, 403, `{"error":"cross-origin request refused (https://evil.example)"}`},
		{[]string{"Origin", "null"}, 403, `{"error":"cross-origin request refused (null)"}`},
		{[]string{"Sec-Fetch-Site", "cross-site"}, 403, `{"error":"cross-origin request refused (Sec-Fetch-Site: cross-site)"}`},
		{[]string{"Host", "evil.example:" + port}, 403, `{"error":"Host \"evil.example:` + port + `\" is refused: a loopback server without a token answers only to localhost, 127.0.0.1 and [::1]"}`},
	} {
		status, _, body := post(t, url, create, tc.hdr...)
		if status != tc.status || body != tc.body {
			t.Errorf("%q: %d %s\nwant %d %s", tc.hdr, status, body, tc.status, tc.body)
		}
	}
	if now, _ := repo.Commit(context.Background(), "HEAD"); now.Hash != head.Hash {
		t.Fatal("a refused request made a commit")
	}
	// What a real client sends is accepted: same-origin, loopback names,
	// a charset parameter.
	for _, hdr := range [][]string{
		{"Content-Type", "application/json; charset=utf-8"},
		{"Origin", srv.URL},
		{"Host", "localhost:" + port},
		{"Host", "LOCALHOST"},
		{"Host", "app.localhost:" + port},
		{"Host", "[::1]:" + port},
		{"Host", "127.0.0.2"},
		{"Sec-Fetch-Site", "same-origin"},
	} {
		if status, _, body := post(t, url, viewBlock, hdr...); status != 200 {
			t.Errorf("%q: %d %s", hdr, status, body)
		}
	}
	// With a token, Host is not checked (a proxy in front may rename it).
	tsrv := httptest.NewServer(h.HTTP(handler.HTTPOptions{Token: "t"}))
	defer tsrv.Close()
	if status, _, body := post(t, tsrv.URL+"/v1/tool_use", viewBlock, "Host", "memory.example.com", "Authorization", "Bearer t"); status != 200 {
		t.Errorf("token and a proxy's Host: %d %s", status, body)
	}
}

// The bounds on what is in flight: a body over the limit is refused
// before it is read; past the requests or bytes in flight a request waits
// QueueWait, then gets 503 with Retry-After.
func TestInflightBounds(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t, policy.DefaultLimits)
	for _, tc := range []struct {
		name string
		opt  handler.HTTPOptions
		body string
		want string
	}{
		{"requests", handler.HTTPOptions{MaxInflight: 1, QueueWait: 50 * time.Millisecond}, viewBlock,
			`{"error":"the server is busy: 1 requests are in flight; retry after 1 s"}`},
		{"bytes", handler.HTTPOptions{MaxBodyBytes: 1000, MaxInflightBytes: 1500, QueueWait: -1}, viewBlock + strings.Repeat(" ", 900),
			`{"error":"the server is busy: request bodies in flight would exceed 1,500 bytes; retry after 1 s"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(h.HTTP(tc.opt))
			defer srv.Close()
			url := srv.URL + "/v1/tool_use"
			// A request whose body has not all arrived holds its place.
			// The first probe can reach the server before it: the held
			// request then finds the server full itself (503). That is
			// not what is tested, and the round is run again.
			for round := 1; ; round++ {
				pr, pw := io.Pipe()
				held := make(chan int, 1)
				go func() {
					req, _ := http.NewRequest("POST", url, pr)
					req.ContentLength = int64(len(tc.body))
					req.Header.Set("Content-Type", "application/json")
					res, err := http.DefaultClient.Do(req)
					if err != nil {
						held <- 0
						return
					}
					res.Body.Close()
					held <- res.StatusCode
				}()
				fmt.Fprint(pw, tc.body[:10])
				var status int
				var retry, body string
				// Until the held request is admitted, or was answered
				// (503: it found the server full itself). A minute is a
				// hang guard: 100 probes, a second or so, were a bound a
				// loaded machine could miss, the probes then all answered
				// 200.
				for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
					status, retry, body = post(t, url, tc.body)
					if status == 503 || len(held) > 0 || time.Now().After(deadline) {
						break
					}
				}
				fmt.Fprint(pw, tc.body[10:])
				pw.Close()
				code := <-held
				if code == 503 && status != 503 && round < 5 {
					continue
				}
				if status != 503 || retry != "1" || body != tc.want {
					t.Errorf("while full: %d Retry-After %q %s", status, retry, body)
				}
				if code != 200 {
					t.Errorf("held request: %d", code)
				}
				break
			}
			if status, _, body := post(t, url, tc.body); status != 200 {
				t.Errorf("after: %d %s", status, body)
			}
		})
	}
	srv := httptest.NewServer(h.HTTP(handler.HTTPOptions{MaxBodyBytes: 100}))
	defer srv.Close()
	if status, _, body := post(t, srv.URL+"/v1/tool_use", viewBlock+strings.Repeat(" ", 100)); status != 413 ||
		body != `{"error":"request body is larger than the limit of 100 bytes"}` {
		t.Errorf("over the body limit: %d %s", status, body)
	}
}

// An array is bounded in blocks, and answered in full even when its time
// runs out: the calls not started get an error result, not silence.
func TestArrayBounds(t *testing.T) {
	t.Parallel()
	h, repo := newHandler(t, policy.DefaultLimits)
	head, _ := repo.Commit(context.Background(), "HEAD")
	srv := httptest.NewServer(h.HTTP(handler.HTTPOptions{}))
	defer srv.Close()
	creates := func(n int) string {
		var b []string
		for i := range n {
			b = append(b, fmt.Sprintf(`{"type":"tool_use","id":"toolu_%d","name":"memory","input":{"command":"create","path":"/memories/%d.md","file_text":"x"}}`, i, i))
		}
		return "[" + strings.Join(b, ",") + "]"
	}
	status, _, body := post(t, srv.URL+"/v1/tool_use", creates(101))
	if status != 413 || body != `{"error":"The array holds 101 content blocks, the limit is 100 per request; none was run"}` {
		t.Errorf("101 blocks: %d %s", status, body)
	}
	if now, _ := repo.Commit(context.Background(), "HEAD"); now.Hash != head.Hash {
		t.Fatal("a refused array made a commit")
	}

	// A write timeout so short that the time is up at once: the first
	// call is started all the same, and stopped before its commit point
	// (it runs in the request's context, whose time is up); the others
	// are not started.
	late := httptest.NewServer(h.HTTP(handler.HTTPOptions{WriteTimeout: time.Nanosecond}))
	defer late.Close()
	status, _, body = post(t, late.URL+"/v1/tool_use", creates(3))
	var results []handler.Result
	if err := json.Unmarshal([]byte(body), &results); err != nil || status != 200 || len(results) != 3 {
		t.Fatalf("late array: %d %s", status, body)
	}
	cancelled := "Error: The call was cancelled before its change was saved; nothing was changed"
	notRun := "Error: This call was not run (the request ran out of time, or the server is stopping); nothing was changed. Send it again"
	if results[0].Content != cancelled || results[1].Content != notRun || results[2].Content != notRun || results[2].ToolUseID != "toolu_2" {
		t.Errorf("late array: %+v", results)
	}
	if now, _ := repo.Commit(context.Background(), "HEAD"); now.Hash != head.Hash {
		t.Errorf("a late array made a commit: HEAD is %s", now.Subject)
	}
}

// The console (HTTPOptions.Console) is served at /console/ behind the
// same Host and Origin checks, without the token (it has its own login)
// and with form bodies, which it checks for its CSRF token; every other
// route still refuses them.
func TestConsoleBehindTheBrowserGuard(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t, policy.DefaultLimits)
	console := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		fmt.Fprintf(w, "console %s %s %s", r.Method, r.URL.Path, r.PostForm.Get("a"))
	})
	srv := httptest.NewServer(h.HTTP(handler.HTTPOptions{Token: "tok", Console: console}))
	defer srv.Close()
	form := func(path string, hdr ...string) (int, string) {
		t.Helper()
		status, _, body := post(t, srv.URL+path, "a=1", append([]string{"Content-Type", "application/x-www-form-urlencoded"}, hdr...)...)
		return status, body
	}
	if status, body := form("/console/x"); status != 200 || body != "console POST /console/x 1" {
		t.Errorf("a form to the console, without the bearer token: %d %s", status, body)
	}
	if status, body := form("/v1/tool_use", "Authorization", "Bearer tok"); status != 415 {
		t.Errorf("a form to the API: %d %s", status, body)
	}
	if status, body := form("/console/x", "Origin", "https://evil.example"); status != 403 {
		t.Errorf("a cross-origin form to the console: %d %s", status, body)
	}
	if status, body := form("/console/x", "Sec-Fetch-Site", "cross-site"); status != 403 {
		t.Errorf("a cross-site form to the console: %d %s", status, body)
	}
	res, err := http.Get(srv.URL + "/console")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.Request.URL.Path != "/console/" {
		t.Errorf("/console went to %s", res.Request.URL.Path)
	}
	// Without a token, a rebound Host name is refused there too.
	open := httptest.NewServer(h.HTTP(handler.HTTPOptions{Console: console}))
	defer open.Close()
	_, port, _ := net.SplitHostPort(open.Listener.Addr().String())
	req, _ := http.NewRequest("GET", open.URL+"/console/", nil)
	req.Host = "evil.example:" + port
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 403 {
		t.Errorf("a rebound Host on a tokenless console: %d", res.StatusCode)
	}
	for host, want := range map[string]bool{"localhost:7077": true, "127.0.0.1": true, "[::1]:80": true, "app.localhost": true, "example.com": false, "10.0.0.1:7077": false} {
		if handler.LoopbackHost(host) != want {
			t.Errorf("LoopbackHost(%q) is %v", host, !want)
		}
	}
}
