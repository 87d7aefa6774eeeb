package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// Every HTTP server gitmem runs is built by handler.HTTPOptions.Server,
// with its bounds on a connection: headers far past 64 KiB get 431 (a
// bare http.Server would read up to 1 MiB of them).
func TestServeHTTPBoundsConnections(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"http", []string{"--http"}},
		{"mcp-http", []string{"--mcp-http"}},
		{"stores", []string{"--http", "--stores", filepath.Join(gittest.TempDir(t), "stores")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := filepath.Join(gittest.TempDir(t), "memory")
			base, stop := serveHTTPProcess(t, env, repo, tc.args[0], tc.args[1:]...)
			defer stop()
			// On a connection of the test's own, written whole and read
			// after, whatever the write returned: the server answers
			// before it has read all the headers and resets the
			// connection half a second later, and Go's client, still
			// writing then on a loaded machine, got "connection reset by
			// peer" and no answer (handler's TestSlowAndOversizedClients
			// failed so). The answer stays readable after the reset.
			u, _ := url.Parse(base)
			conn, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: " + u.Host + "\r\nX-Big: " + strings.Repeat("a", 128<<10) + "\r\n\r\n"))
			conn.SetReadDeadline(time.Now().Add(time.Minute))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("128 KiB of headers: %d", res.StatusCode)
			}
		})
	}
}

// The address serve announces is the one the operator gave (0.0.0.0 is
// not rewritten to [::]; no host is every interface, 0.0.0.0), with the port the listener got when it was 0.
func TestServeAnnouncesTheAddressGiven(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ given, listener, want string }{
		{"0.0.0.0:7077", "[::]:7077", "0.0.0.0:7077"},
		{"0.0.0.0:0", "[::]:41234", "0.0.0.0:41234"},
		{"127.0.0.1:0", "127.0.0.1:41234", "127.0.0.1:41234"},
		{"[::1]:0", "[::1]:41234", "[::1]:41234"},
		{"localhost:7077", "127.0.0.1:7077", "localhost:7077"},
		{":7077", "[::]:7077", "0.0.0.0:7077"}, // every interface, in a URL one can read
		{"localhost:http", "127.0.0.1:80", "localhost:80"},
	} {
		if got := announceAddr(tc.given, fakeAddr(tc.listener)); got != tc.want {
			t.Errorf("announceAddr(%q, %s) = %q, want %q", tc.given, tc.listener, got, tc.want)
		}
	}

	// And the real line, from the process.
	cmd := exec.Command("gitmem", "--repo", filepath.Join(gittest.TempDir(t), "memory"), "serve", "--http", "0.0.0.0:0", "--token", "s3cret")
	cmd.Env = testEnv(t)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if l := lines.Text(); strings.Contains(l, "serving the memory tool") {
			if !regexp.MustCompile(`serving the memory tool on http://0\.0\.0\.0:[1-9][0-9]*/v1/tool_use`).MatchString(l) {
				t.Errorf("announced: %s", l)
			}
			return
		}
	}
	t.Fatal("serve ended without announcing its address")
}

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

// serve --http serves the console at /console/: with --token, a login
// with that token opens the memory's pages; with --stores (here on
// loopback without tokens), the stores list opens without one.
func TestServeConsole(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	get := func(c *http.Client, url string) (int, string, string) {
		t.Helper()
		res, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Request.URL.Path, string(b)
	}
	newClient := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Jar: jar}
	}

	base, stop := serveHTTPProcess(t, env, filepath.Join(gittest.TempDir(t), "memory"), "--http", "--token", "s3cret")
	defer stop()
	c := newClient()
	status, path, body := get(c, base+"/console/")
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if status != 200 || path != "/console/login" || csrf == nil {
		t.Fatalf("/console/ without a session: %d at %s:\n%s", status, path, body)
	}
	res, err := c.PostForm(base+"/console/login", url.Values{"csrf": {csrf[1]}, "token": {"s3cret"}, "next": {"/console/"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Request.URL.Path != "/console/m/tree" || !strings.Contains(string(b), `id="tree"`) {
		t.Errorf("after the login: %d at %s:\n%s", res.StatusCode, res.Request.URL.Path, b)
	}
	stop()

	stores := filepath.Join(gittest.TempDir(t), "stores")
	gitmemOut(t, env, "store", "create", "user-1", "--stores", stores, "--description", "A customer")
	base, stop = serveHTTPProcess(t, env, filepath.Join(gittest.TempDir(t), "unused"), "--http", "--stores", stores)
	defer stop()
	if status, path, body := get(newClient(), base+"/console/"); status != 200 || path != "/console/" || !strings.Contains(body, "user-1") || !strings.Contains(body, "A customer") {
		t.Errorf("the stores' console: %d at %s:\n%s", status, path, body)
	}
}
