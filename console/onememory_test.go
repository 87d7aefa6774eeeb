package console_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gitmem-dev/gitmem/console"
	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

// serve --http --token: the console of the one memory, at /console/m/,
// opened with the server's token; a repair is the operator's commit (the
// git identity, as the CLI's).
func TestConsoleOneMemory(t *testing.T) {
	dir := gittest.TempDir(t)
	clock := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	repo, _, err := gitmem.Init(context.Background(), dir, gitmem.Options{Now: func() time.Time { clock = clock.Add(time.Minute); return clock },
		Operator: gitmem.Signature{Name: "op", Email: "op@example.com"}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	h := handler.New(repo, handler.Options{Limits: policy.DefaultLimits})
	srv := httptest.NewServer(h.HTTP(handler.HTTPOptions{Token: "tok",
		Console: console.New(console.Options{Repo: repo, Login: console.SingleToken("tok")})}))
	t.Cleanup(srv.Close)
	call := func(id, input string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/v1/tool_use", bytes.NewReader([]byte(`{"type":"tool_use","id":"`+id+`","name":"memory","input":`+input+`}`)))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(handler.HeaderAgent, "helper")
		if status, body := do(t, req); status != 200 || strings.Contains(body, `"is_error":true`) {
			t.Fatalf("%s: %d %s", id, status, body)
		}
	}
	call("toolu_a", `{"command":"create","path":"/memories/todo.md","file_text":"Buy milk.\nCall Bob.\n"}`)
	call("toolu_b", `{"command":"str_replace","path":"/memories/todo.md","old_str":"Call Bob.","new_str":"Call Bob: he owes 500 EUR."}`)
	for i := range 21 {
		call(fmt.Sprintf("toolu_c%02d", i), fmt.Sprintf(`{"command":"create","path":"/memories/log/%02d.md","file_text":"entry %d\n"}`, i, i))
	}

	ctx := browser(t)
	run(t, ctx, "a wrong token", chromedp.Navigate(srv.URL+"/console/"), chromedp.SendKeys(chromedp.CSS("#token"), "nope\r"), chromedp.WaitVisible(chromedp.CSS("p.error")))
	run(t, ctx, "the token", chromedp.SendKeys(chromedp.CSS("#token"), "tok\r"), chromedp.WaitVisible(chromedp.CSS("#tree")))
	if got := text(t, ctx, "#tree"); !strings.Contains(got, "todo.md") || !strings.Contains(got, "toolu_b") || !strings.Contains(got, "helper") {
		t.Errorf("the tree:\n%s", got)
	}
	// The timeline by pages of 20: the init commit and 23 changes.
	run(t, ctx, "timeline", chromedp.Navigate(srv.URL+"/console/m/timeline"), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	if n, first := nodes(t, ctx, "#timeline > li[data-hash]"), text(t, ctx, "#timeline > li"); n != 20 || !strings.Contains(first, "toolu_c20") {
		t.Errorf("the first page: %d changes, the newest %q", n, first)
	}
	run(t, ctx, "older", chromedp.Click(`//a[text()="Older changes"]`), chromedp.WaitVisible(`//a[text()="Back to the newest changes"]`))
	if got := eval[string](t, ctx, `[...document.querySelectorAll("#timeline > li[data-hash] .subject")].map(e => e.textContent).join("|")`); got != "memory: create /memories/log/00.md|memory: str_replace /memories/todo.md|memory: create /memories/todo.md|memory: init" {
		t.Errorf("the second page: %s", got)
	}
	if n := nodes(t, ctx, `a[rel="next"]`); n != 0 {
		t.Error("the last page links to older changes")
	}
	run(t, ctx, "blame", chromedp.Navigate(srv.URL+"/console/m/blame?path=/memories/todo.md"), chromedp.WaitVisible(chromedp.CSS("#blame")))
	if got := text(t, ctx, "#L2"); !strings.Contains(got, "toolu_b") {
		t.Errorf("blame of line 2: %q", got)
	}
	run(t, ctx, "its change", chromedp.Click(chromedp.CSS("#L2 a")), chromedp.WaitVisible(chromedp.CSS("#revert-form")),
		chromedp.Click(chromedp.CSS("#revert-form button")), chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(chromedp.CSS("#done")))
	if err := repo.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, dir, "log", "-1", "--format=%an|%(trailers:key=Reverts-Tool-Use-Id,valueonly)"); got != "op|toolu_b\n\n" {
		t.Errorf("git log -1: %q", got)
	}
	if got := gittest.Git(t, dir, "show", "HEAD:memories/todo.md"); got != "Buy milk.\nCall Bob.\n" {
		t.Errorf("todo.md after the revert: %q", got)
	}
	// Restore the whole memory to toolu_b: the files made since would be
	// deleted, which is refused until asked for, then previewed.
	run(t, ctx, "restore everything", chromedp.Navigate(srv.URL+"/console/m/repair"),
		chromedp.SendKeys(chromedp.CSS("#restore-to"), "toolu_b\r"), chromedp.WaitVisible(chromedp.CSS("p.error")))
	if got := text(t, ctx, "p.error"); !strings.Contains(got, "/memories/log/00.md") || !strings.Contains(got, "Nothing was changed") {
		t.Errorf("the restore's refusal: %q", got)
	}
	run(t, ctx, "with the deletions", chromedp.Click(`//button[starts-with(text(),"Preview the restore that deletes")]`), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	if n := nodes(t, ctx, "section.file-diff"); n != 22 {
		t.Errorf("the restore's preview shows %d files", n)
	}
	run(t, ctx, "confirm", chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(chromedp.CSS("#done")))
	if err := repo.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD", "memories"); got != "memories/todo.md\n" {
		t.Errorf("after the restore HEAD holds:\n%s", got)
	}
	if got := gittest.Git(t, dir, "show", "HEAD:memories/todo.md"); got != "Buy milk.\nCall Bob: he owes 500 EUR.\n" {
		t.Errorf("todo.md after the restore: %q", got)
	}

	// The stores pages are not this server's.
	run(t, ctx, "a store's page", chromedp.Navigate(srv.URL+"/console/s/x/tree"), chromedp.WaitVisible(chromedp.CSS("p.error")))
}
