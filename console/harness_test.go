package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gitmem-dev/gitmem/console"
	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
	"github.com/gitmem-dev/gitmem/storesapi"
)

var screenshots = flag.Bool("console.screenshots", false, "write screenshots of the console's main pages to docs/console/ (go test ./console -run 'TestConsoleStory|TestConsoleSharedMemory' -console.screenshots)")

// server is a real multi-store server on loopback (storesapi with the
// console, as serve --stores wires it), its token file, and a clock
// that moves only when the test moves it.
type server struct {
	t     *testing.T
	url   string
	root  string
	dir   *stores.Dir
	mu    sync.Mutex
	clock time.Time
}

// The tokens of the tests: the secret is "secret-" + the name.
var testTokens = []policy.Token{
	{Name: "ops", Stores: []string{"*"}, Access: policy.ReadWrite, Role: policy.Operator},
	{Name: "auditor", Stores: []string{"*"}, Access: policy.ReadOnly, Role: policy.Operator},
	{Name: "support-bot", Stores: []string{"*"}, Access: policy.ReadWrite, Role: policy.Agent},
	{Name: "team-ops", Stores: []string{"team-*"}, Access: policy.ReadWrite, Role: policy.Operator},
}

func (s *server) now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clock
}

// tick moves the clock on.
func (s *server) tick(d time.Duration) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock = s.clock.Add(d)
	return s.clock
}

func newServer(t *testing.T) *server {
	t.Helper()
	s := &server{t: t, root: gittest.TempDir(t), clock: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	d, err := stores.Open(s.root, stores.Options{Repo: gitmem.Options{Now: s.now, Logf: t.Logf,
		Operator: gitmem.Signature{Name: "op", Email: "op@example.com"}}, IdleClose: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s.dir = d
	f := policy.TokenFile{}
	for _, tok := range testTokens {
		tok.SHA256 = storesapi.HashToken("secret-" + tok.Name)
		f.Tokens = append(f.Tokens, tok)
	}
	data, _ := json.Marshal(f)
	file := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := storesapi.LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	c := console.New(console.Options{Stores: d, Login: tokens.Lookup, Now: s.now, Logger: log})
	srv := httptest.NewServer(storesapi.New(d, storesapi.Options{Limits: policy.DefaultLimits, Tokens: tokens, Logger: log, Now: s.now,
		HTTP: handler.HTTPOptions{Console: c}}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

func (s *server) create(name, description string) {
	s.t.Helper()
	if _, err := s.dir.Create(name, stores.Meta{Description: description}, gitmem.Signature{}); err != nil {
		s.t.Fatal(err)
	}
}

// call sends one memory tool call to a store as the agent token would,
// a minute after the last, and fails the test unless it succeeds.
func (s *server) call(store, agent, session, id string, input map[string]any) {
	s.t.Helper()
	s.tick(time.Minute)
	block, _ := json.Marshal(map[string]any{"type": "tool_use", "id": id, "name": "memory", "input": input})
	req, _ := http.NewRequest("POST", s.url+"/v1/stores/"+store+"/tool_use", bytes.NewReader(block))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer secret-support-bot")
	req.Header.Set(handler.HeaderAgent, agent)
	req.Header.Set(handler.HeaderSession, session)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var result struct {
		IsError bool   `json:"is_error"`
		Content string `json:"content"`
	}
	if err := json.Unmarshal(body, &result); err != nil || res.StatusCode != 200 || result.IsError {
		s.t.Fatalf("tool call %s: %d %s", id, res.StatusCode, body)
	}
}

// settled waits until git's own files hold every change the store
// acknowledged, and returns its folder: plain git reads it then.
func (s *server) settled(store string) string {
	s.t.Helper()
	st, err := s.dir.Acquire(context.Background(), store)
	if err != nil {
		s.t.Fatal(err)
	}
	defer st.Release()
	if err := st.Use(func(r *gitmem.Repo, _ stores.Meta) error { return r.Flush(context.Background()) }); err != nil {
		s.t.Fatal(err)
	}
	return filepath.Join(s.root, store)
}

// git runs git in a store, once git's files hold what it acknowledged.
func (s *server) git(store string, args ...string) string {
	s.t.Helper()
	return gittest.Git(s.t, s.settled(store), args...)
}

// The test binary's one headless Chromium, started by TestMain when
// there is one; each test gets a tab of its own in a fresh browser
// context (no cookies of another test).
var (
	shared     context.Context
	noChromium string // why there is none
)

func TestMain(m *testing.M) {
	flag.Parse()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	code := 0
	if path == "" {
		noChromium = "no Chromium installed: the console's browser tests need it (apt-get install chromium)"
		code = m.Run()
	} else {
		profile, err := os.MkdirTemp("", "gitmem-console-chromium-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path), chromedp.UserDataDir(profile), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
			chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
			chromedp.WindowSize(1280, 900))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(alloc)
		if err := chromedp.Do(ctx); err != nil { // starts the browser
			noChromium = "Chromium (" + path + ") does not start: " + err.Error()
		} else {
			shared = ctx
		}
		code = m.Run()
		cancel()
		cancelAlloc()
		os.RemoveAll(profile)
	}
	os.Exit(code)
}

// browser is a tab of the shared headless Chromium, driven through the
// DevTools protocol, in a browser context of its own. A CSP violation, a
// script error or a dialog (alert, confirm: what injected script would
// open) on any page fails the test. Without Chromium the test is skipped
// (it fails under CI, which installs it).
func browser(t *testing.T) context.Context {
	t.Helper()
	if shared == nil {
		if os.Getenv("CI") != "" {
			t.Fatal(noChromium + "; CI installs Debian's chromium package (.ci/run)")
		}
		t.Skip(noChromium)
	}
	ctx, cancelCtx := chromedp.NewContext(shared, chromedp.WithNewBrowserContext())
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx() })
	var mu sync.Mutex
	var problems []string
	if err := chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *cdplog.EventEntryAdded:
			// An error status is the page's to show (and the test's to
			// assert); any other error (a CSP violation, a script's) fails.
			if ev.Entry.Level == cdplog.EntryLevelError && ev.Entry.Source != cdplog.EntrySourceNetwork {
				msg = "log: " + ev.Entry.Text
			}
		case *page.EventJavascriptDialogOpening:
			msg = fmt.Sprintf("a %s dialog opened: %q", ev.Type, ev.Message)
			go chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		case *runtime.EventExceptionThrown:
			msg = "exception: " + ev.ExceptionDetails.Text
			if ex := ev.ExceptionDetails.Exception; ex != nil {
				msg += " " + ex.Description
			}
		}
		if msg != "" {
			mu.Lock()
			problems = append(problems, msg)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	for _, enable := range []cdp.Command[cdp.Empty, cdp.Empty]{cdplog.Enable, runtime.Enable} {
		if _, err := chromedp.Call(ctx, enable, cdp.Empty{}); err != nil {
			t.Fatalf("start chromium: %v", err)
		}
	}
	// The tab acts as the focused one (keyboard focus works the same
	// whatever other tab the shared browser has).
	if _, err := chromedp.Call(ctx, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Errorf("in the browser: %s", p)
		}
	})
	return ctx
}

// stepTimeout bounds one step of a test (a page to load, an element to
// appear): a step that waits for what never comes fails with the page
// it was on, rather than when the whole test times out.
const stepTimeout = 30 * time.Second

// run runs browser actions and fails the test on the first error.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	step, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(step, steps...); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("%s: %v\nat %s:\n%s", what, err, loc, clip(body))
	}
}

// value runs a browser action that gives a value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	step, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(step, a)
	if err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		t.Fatalf("%s: %v\nat %s", what, err, loc)
	}
	return v
}

func clip(s string) string {
	if len(s) > 3000 {
		return s[:3000] + "..."
	}
	return s
}

// text is the rendered text of the first element the CSS selector sel
// matches.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return value(t, ctx, "read "+sel, chromedp.Text(chromedp.CSS(sel)))
}

// eval runs a JavaScript expression in the page and returns its value.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	return value(t, ctx, "evaluate "+js, chromedp.Evaluate[T](js))
}

// login logs in with a token from the keyboard: the field has the focus,
// Enter sends the form.
func login(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	run(t, ctx, "log in as "+token,
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), "secret-"+token+"\r"),
		chromedp.WaitNotPresent(chromedp.CSS("#token")),
	)
}

// shot writes a screenshot of the whole page to docs/console/NAME.png
// when the test runs with -console.screenshots (a name ending in -phone:
// of the screen only).
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if !*screenshots {
		return
	}
	capture := chromedp.FullScreenshot(100) // 100: PNG
	if strings.HasSuffix(name, "-phone") {
		capture = chromedp.CaptureScreenshot()
	}
	png := value(t, ctx, "screenshot "+name, capture)
	dir := filepath.Join("..", "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote docs/console/%s.png", name)
}

// nodes counts the elements sel matches.
func nodes(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	return eval[int](t, ctx, fmt.Sprintf("document.querySelectorAll(%q).length", sel))
}

// dirAuthor is the operator of changes the test makes to stores directly.
func (s *server) dirAuthor() gitmem.Signature {
	return gitmem.Signature{Name: "op", Email: "op@example.com"}
}
