package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

const secret = "sk-ant-api03-Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0LzXcVbNm-AAAA"

// seed makes the stores of the story: a customer's memory the support
// agent wrote over two sessions (one wrong line, a secret, a rename),
// another store, and an archived one.
func seed(s *server) {
	s.create("user-4711", "What the support agent knows about this customer")
	s.create("team-red", "Notes shared by the red team's agents")
	s.create("old-user", "A customer who left")
	if _, err := s.dir.Archive("old-user", true, s.dirAuthor()); err != nil {
		s.t.Fatal(err)
	}
	u := "user-4711"
	s.call(u, "support-bot", "conv-1", "toolu_01", map[string]any{"command": "create", "path": "/memories/prefs.md",
		"file_text": "# Preferences\nContact: email, never phone.\nLikes tea.\nLanguage: German.\nTimezone: CET.\n"})
	s.call(u, "support-bot", "conv-1", "toolu_02", map[string]any{"command": "create", "path": "/memories/projects/acme.md",
		"file_text": "Works at Acme.\nRuns the billing migration.\n"})
	s.call(u, "support-bot", "conv-2", "toolu_03", map[string]any{"command": "str_replace", "path": "/memories/prefs.md",
		"old_str": "Likes tea.", "new_str": "Likes coffee, hates tea."})
	s.call(u, "support-bot", "conv-2", "toolu_04", map[string]any{"command": "create", "path": "/memories/creds.md",
		"file_text": "Their API key, pasted in chat: " + secret + "\n"})
	s.call(u, "support-bot", "conv-2", "toolu_05", map[string]any{"command": "rename", "old_path": "/memories/projects/acme.md",
		"new_path": "/memories/projects/acme-corp.md"})
	s.call(u, "triage-bot", "conv-3", "toolu_06", map[string]any{"command": "insert", "path": "/memories/projects/acme-corp.md",
		"insert_line": 2, "insert_text": "Deadline: end of March.\n"})
	s.call(u, "support-bot", "conv-3", "toolu_07", map[string]any{"command": "str_replace", "path": "/memories/prefs.md",
		"old_str": "Timezone: CET.", "new_str": "Timezone: CET (Berlin)."})
	s.call("team-red", "red-1", "r-1", "toolu_r1", map[string]any{"command": "create", "path": "/memories/plan.md", "file_text": "Ship on Friday.\n"})
}

// The operator's story, in a real browser: log in, find the store, the
// tool call that wrote a wrong line (by its tool_use id, and by blame),
// read its diff, revert it, restore a file to a time, expire, redact a
// secret from all history, and watch the timeline take new changes live.
func TestConsoleStory(t *testing.T) {
	s := newServer(t)
	seed(s)
	ctx := browser(t)
	u := s.url + "/console/s/user-4711/"

	login(t, ctx, s.url, "ops")
	// The stores: description, size, file count, last change, archived.
	run(t, ctx, "stores", chromedp.WaitVisible(chromedp.CSS("#stores")))
	list := text(t, ctx, "#stores")
	for _, want := range []string{"user-4711", "What the support agent knows about this customer", "team-red", "old-user", "archived"} {
		if !strings.Contains(list, want) {
			t.Errorf("the stores list lacks %q:\n%s", want, list)
		}
	}
	shot(t, ctx, "stores")
	run(t, ctx, "search stores", chromedp.SendKeys(chromedp.CSS("#q"), "4711\r"), chromedp.WaitVisible(chromedp.CSS(`#q[value="4711"]`)))
	if n := nodes(t, ctx, "#stores tbody tr"); n != 1 {
		t.Errorf("a search for 4711 lists %d stores", n)
	}

	// The tree, then a file with its line numbers.
	run(t, ctx, "open the store", chromedp.Click(chromedp.CSS("a.store-link")), chromedp.WaitVisible(chromedp.CSS("#tree")))
	tree := text(t, ctx, "#tree")
	for _, want := range []string{"prefs.md", "projects/", "creds.md", "toolu_07", "support-bot"} {
		if !strings.Contains(tree, want) {
			t.Errorf("the tree lacks %q:\n%s", want, tree)
		}
	}
	shot(t, ctx, "tree")
	// With the keyboard: the first Tab is the skip link, which leads to
	// the content; Tab on to prefs.md, Enter opens it.
	run(t, ctx, "Tab", chromedp.KeyEvent("\t"))
	if got := eval[string](t, ctx, "document.activeElement.textContent"); got != "Skip to the content" {
		t.Errorf("the first Tab focuses %q", got)
	}
	run(t, ctx, "Enter", chromedp.KeyEvent("\r"))
	if got := eval[string](t, ctx, "document.activeElement.id"); got != "main" {
		t.Errorf("the skip link leads to %q", got)
	}
	for i := 0; ; i++ {
		if i == 5 {
			t.Fatal("5 Tabs after the skip link do not reach prefs.md")
		}
		run(t, ctx, "Tab", chromedp.KeyEvent("\t"))
		if eval[string](t, ctx, "document.activeElement.textContent") == "prefs.md" {
			break
		}
	}
	run(t, ctx, "open prefs.md", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS("#content")))
	if got := text(t, ctx, "#L3"); !strings.Contains(got, "3") || !strings.Contains(got, "Likes coffee, hates tea.") {
		t.Errorf("line 3 of prefs.md reads %q", got)
	}
	shot(t, ctx, "file")

	// Blame: the wrong line is toolu_03's; lines that moved with a rename
	// are still blamed on the change that wrote them.
	run(t, ctx, "blame prefs.md", chromedp.Click(`//a[text()="Blame"]`), chromedp.WaitVisible(chromedp.CSS("#blame")))
	if row := text(t, ctx, "#L3"); !strings.Contains(row, "toolu_03") || !strings.Contains(row, "conv-2") || !strings.Contains(row, "Likes coffee") {
		t.Errorf("blame of line 3: %q", row)
	}
	if row := text(t, ctx, "#L1"); !strings.Contains(row, "toolu_01") {
		t.Errorf("blame of line 1: %q", row)
	}
	shot(t, ctx, "blame")
	run(t, ctx, "blame acme-corp.md", chromedp.Navigate(u+"blame?path=/memories/projects/acme-corp.md"), chromedp.WaitVisible(chromedp.CSS("#blame")))
	if row := text(t, ctx, "#L1"); !strings.Contains(row, "toolu_02") {
		t.Errorf("blame across the rename, line 1: %q", row)
	}
	if row := text(t, ctx, "#L3"); !strings.Contains(row, "toolu_06") || !strings.Contains(row, "triage-bot") {
		t.Errorf("blame after the rename, line 3: %q", row)
	}

	// The timeline, filtered by tool_use id: one change, with its
	// trailers and its diff.
	run(t, ctx, "timeline", chromedp.Navigate(u+"timeline"), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	if n := nodes(t, ctx, "#timeline > li[data-hash]"); n < 7 {
		t.Errorf("the timeline shows %d changes", n)
	}
	shot(t, ctx, "timeline")
	run(t, ctx, "filter by tool_use id",
		chromedp.SendKeys(chromedp.CSS(`#filters input[name="tool_use_id"]`), "toolu_03\r"),
		chromedp.WaitVisible(chromedp.CSS(`#filters input[name="tool_use_id"][value="toolu_03"]`)),
		chromedp.Click(chromedp.CSS("#timeline details summary")),
		chromedp.WaitVisible(chromedp.CSS("#timeline details table.diff")))
	if n := nodes(t, ctx, "#timeline > li[data-hash]"); n != 1 {
		t.Fatalf("filtered by toolu_03, the timeline shows %d changes", n)
	}
	entry := text(t, ctx, "#timeline > li")
	for _, want := range []string{"str_replace", "/memories/prefs.md", "Tool-Use-Id", "toolu_03", "Session", "conv-2", "Agent", "support-bot", "Likes tea.", "Likes coffee, hates tea."} {
		if !strings.Contains(entry, want) {
			t.Errorf("the change lacks %q:\n%s", want, entry)
		}
	}
	if del, add := text(t, ctx, "#timeline tr.del code"), text(t, ctx, "#timeline tr.add code"); del != "Likes tea." || add != "Likes coffee, hates tea." {
		t.Errorf("the diff removes %q and adds %q", del, add)
	}
	// Without colours, a line's sign says what happened to it.
	if del, add := text(t, ctx, "#timeline tr.del td.sign"), text(t, ctx, "#timeline tr.add td.sign"); del != "-" || add != "+" {
		t.Errorf("the diff's signs: %q and %q", del, add)
	}

	// The other filters: an agent, a time range.
	run(t, ctx, "filter by agent", chromedp.Navigate(u+"timeline?agent=triage-bot"), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	if n, got := nodes(t, ctx, "#timeline > li[data-hash]"), text(t, ctx, "#timeline"); n != 1 || !strings.Contains(got, "toolu_06") {
		t.Errorf("triage-bot's changes: %d\n%s", n, got)
	}
	run(t, ctx, "filter by time", chromedp.Navigate(u+"timeline?since=2026-03-01T09:02:30Z&until=2026-03-01T09:05:30Z&session=conv-2"), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	if got := eval[string](t, ctx, `[...document.querySelectorAll("#timeline > li[data-hash] .trailers")].map(e => e.innerText.match(/toolu_\w+/)[0]).join(" ")`); got != "toolu_05 toolu_04 toolu_03" {
		t.Errorf("conv-2's changes between 9:02:30 and 9:05:30, newest first: %q", got)
	}

	// A diff between two times: what the memory became in between.
	run(t, ctx, "diff between two times", chromedp.Navigate(u+"diff"),
		chromedp.SendKeys(chromedp.CSS(`input[name="from"]`), "2026-03-01T09:02:30Z"),
		chromedp.SendKeys(chromedp.CSS(`input[name="to"]`), "2026-03-01T09:03:30Z\r"),
		chromedp.WaitVisible(chromedp.CSS("table.diff")))
	if del, add := text(t, ctx, "tr.del code"), text(t, ctx, "tr.add code"); del != "Likes tea." || add != "Likes coffee, hates tea." {
		t.Errorf("the diff between 9:02:30 and 9:03:30 removes %q and adds %q", del, add)
	}
	shot(t, ctx, "diff")
	run(t, ctx, "the file's history", chromedp.Click(chromedp.CSS(".file-diff a.path")),
		chromedp.WaitVisible(chromedp.CSS(`#filters input[name="path"][value="/memories/prefs.md"]`)))
	if n := nodes(t, ctx, "#timeline > li[data-hash]"); n != 3 {
		t.Errorf("prefs.md's history lists %d changes", n)
	}

	// Back to toolu_03's page, side by side too; then revert it: a preview, a
	// confirmation, one new commit by the token, seen by git log.
	run(t, ctx, "open the change", chromedp.Navigate(u+"change?rev=toolu_03"), chromedp.WaitVisible(chromedp.CSS("#revert-form")))
	shot(t, ctx, "change")
	run(t, ctx, "side by side", chromedp.Click(`//a[text()="Side by side"]`), chromedp.WaitVisible(chromedp.CSS("table.diff.split")))
	if left, right := text(t, ctx, "table.split td.src.del"), text(t, ctx, "table.split td.src.add"); left != "Likes tea." || right != "Likes coffee, hates tea." {
		t.Errorf("side by side: %q beside %q", left, right)
	}
	if left, right := text(t, ctx, "table.split td.sign.del"), text(t, ctx, "table.split td.sign.add"); left != "-" || right != "+" {
		t.Errorf("side by side, the signs: %q and %q", left, right)
	}
	run(t, ctx, "preview the revert", chromedp.Click(chromedp.CSS("#revert-form button")), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	if got := text(t, ctx, "table.diff tr.add code"); got != "Likes tea." {
		t.Errorf("the revert's preview adds %q", got)
	}
	shot(t, ctx, "revert-preview")
	before := strings.TrimSpace(s.git("user-4711", "rev-parse", "HEAD"))
	if got := strings.TrimSpace(s.git("user-4711", "rev-parse", "HEAD")); got != before {
		t.Fatal("a preview made a commit")
	}
	run(t, ctx, "confirm the revert", chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(chromedp.CSS("#done")))
	if got := s.git("user-4711", "log", "-1", "--format=%an <%ae>|%s|%(trailers:key=Reverts-Tool-Use-Id,valueonly)"); !strings.HasPrefix(got, "ops <ops@gitmem.invalid>|memory: revert ") || !strings.Contains(got, "toolu_03") {
		t.Errorf("git log -1 after the revert: %q", got)
	}
	if got := s.git("user-4711", "show", "HEAD:memories/prefs.md"); got != "# Preferences\nContact: email, never phone.\nLikes tea.\nLanguage: German.\nTimezone: CET (Berlin).\n" {
		t.Errorf("prefs.md after the revert:\n%s", got)
	}

	// Restore a file to a time: as it was after the first session.
	afterFirst := time.Date(2026, 3, 1, 9, 2, 30, 0, time.UTC).Format(time.RFC3339)
	run(t, ctx, "restore prefs.md",
		chromedp.Navigate(u+"repair?paths=/memories/prefs.md"),
		chromedp.SendKeys(chromedp.CSS("#restore-to"), afterFirst),
		chromedp.Submit(chromedp.CSS("#restore-to")),
		chromedp.WaitVisible(chromedp.CSS("#confirm")))
	if got := text(t, ctx, "table.diff tr.del code"); got != "Timezone: CET (Berlin)." {
		t.Errorf("the restore's preview removes %q", got)
	}
	run(t, ctx, "confirm the restore", chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(chromedp.CSS("#done")))
	if got := s.git("user-4711", "show", "HEAD:memories/prefs.md"); got != "# Preferences\nContact: email, never phone.\nLikes tea.\nLanguage: German.\nTimezone: CET.\n" {
		t.Errorf("prefs.md after the restore:\n%s", got)
	}
	if got := s.git("user-4711", "log", "-1", "--format=%an|%s"); !strings.HasPrefix(got, "ops|memory: restore /memories/prefs.md to ") {
		t.Errorf("git log -1 after the restore: %q", got)
	}

	// Two operators: a preview another change overtook is not confirmed;
	// the new preview is shown and nothing is committed.
	run(t, ctx, "preview a revert of toolu_06",
		chromedp.Navigate(u+"repair?rev=toolu_06"),
		chromedp.Submit(chromedp.CSS("#revert-rev")),
		chromedp.WaitVisible(chromedp.CSS("#confirm")))
	s.call("user-4711", "triage-bot", "conv-4", "toolu_08", map[string]any{"command": "str_replace", "path": "/memories/projects/acme-corp.md",
		"old_str": "Deadline: end of March.", "new_str": "Deadline: end of March (moved to April 3)."})
	head := strings.TrimSpace(s.git("user-4711", "rev-parse", "HEAD"))
	run(t, ctx, "confirm an outdated revert", chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(chromedp.CSS("#outdated")))
	if got := strings.TrimSpace(s.git("user-4711", "rev-parse", "HEAD")); got != head {
		t.Error("a confirmation whose preview was overtaken made a commit")
	}

	// Expire: a hundred days on, what nobody touched since.
	s.tick(100 * 24 * time.Hour)
	run(t, ctx, "preview the expire",
		chromedp.Navigate(u+"repair"),
		chromedp.SendKeys(chromedp.CSS("#expire-age"), "90d"),
		chromedp.SendKeys(chromedp.CSS("#expire-keep"), "projects/**"),
		chromedp.Submit(chromedp.CSS("#expire-age")),
		chromedp.WaitVisible(chromedp.CSS("#stale")))
	if got := text(t, ctx, "#stale"); !strings.Contains(got, "/memories/creds.md") || !strings.Contains(got, "/memories/prefs.md") || strings.Contains(got, "acme") {
		t.Errorf("the expire would delete:\n%s", got)
	}
	run(t, ctx, "confirm the expire", chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(chromedp.CSS("#done")))
	if got := s.git("user-4711", "ls-tree", "-r", "--name-only", "HEAD", "memories"); got != "memories/projects/acme-corp.md\n" {
		t.Errorf("after the expire, HEAD holds:\n%s", got)
	}

	// Redact the secret from all history: the preview says what the
	// rewrite touches; after it, no git object holds the secret.
	if !strings.Contains(s.git("user-4711", "cat-file", "--batch-all-objects", "--batch"), secret) {
		t.Fatal("the secret is not in the history to begin with")
	}
	run(t, ctx, "preview the redaction",
		chromedp.Navigate(u+"repair"),
		chromedp.SendKeys(chromedp.CSS("#redact-text"), secret),
		chromedp.Submit(chromedp.CSS("#redact-text")),
		chromedp.WaitVisible(chromedp.CSS("#rewritten")))
	if got := text(t, ctx, "#rewritten"); !strings.Contains(got, "memory: create /memories/creds.md") {
		t.Errorf("the redaction would rewrite:\n%s", got)
	}
	shot(t, ctx, "redact-preview")
	run(t, ctx, "confirm the redaction", chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(`//h2[starts-with(text(),"Rewritten")]`))
	if strings.Contains(s.git("user-4711", "cat-file", "--batch-all-objects", "--batch"), secret) {
		t.Error("after the redaction a git object still holds the secret")
	}
	if got := s.git("user-4711", "log", "--all", "-p"); strings.Contains(got, secret) || !strings.Contains(got, "[REDACTED]") {
		t.Error("the rewritten history still shows the secret, or no [REDACTED]")
	}

	// Live: a change lands while the timeline is open, and appears
	// without a reload.
	run(t, ctx, "open the timeline", chromedp.Navigate(u+"timeline"), chromedp.WaitVisible(chromedp.CSS("#live-status")))
	eval[bool](t, ctx, "window.notReloaded = true")
	s.call("user-4711", "support-bot", "conv-5", "toolu_live", map[string]any{"command": "create", "path": "/memories/live.md", "file_text": "Just now.\n"})
	run(t, ctx, "the new change appears", chromedp.WaitVisible(chromedp.CSS("#timeline > li.new")))
	if got := text(t, ctx, "#timeline > li.new"); !strings.Contains(got, "toolu_live") {
		t.Errorf("the new change reads %q", got)
	}
	if !eval[bool](t, ctx, "window.notReloaded === true") {
		t.Error("the page was reloaded")
	}

	// Shared memory: no remote here, and no conflict.
	run(t, ctx, "shared", chromedp.Navigate(u+"shared"), chromedp.WaitVisible(chromedp.CSS("main h1")))
	if got := text(t, ctx, "main"); !strings.Contains(got, "not shared") {
		t.Errorf("the shared page reads:\n%s", got)
	}

	// A phone's width: no page is wider than the screen.
	run(t, ctx, "phone width", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	for _, page := range []string{"", "tree", "file?path=/memories/projects/acme-corp.md", "timeline", "blame?path=/memories/projects/acme-corp.md", "diff?from=toolu_01&view=split", "repair"} {
		run(t, ctx, "open "+page, chromedp.Navigate(u+page), chromedp.WaitVisible(chromedp.CSS("main")))
		if wide := eval[int](t, ctx, "document.documentElement.scrollWidth - window.innerWidth"); wide > 0 {
			t.Errorf("at 390 px, %s is %d px too wide", page, wide)
		}
	}
	run(t, ctx, "phone blame", chromedp.Navigate(u+"blame?path=/memories/projects/acme-corp.md"), chromedp.WaitVisible(chromedp.CSS("#blame")))
	shot(t, ctx, "blame-phone")
}
