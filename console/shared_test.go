package console_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/stores"
)

// A shared memory: its remote's state (ahead, behind, last sync) and the
// conflicts a merge kept, each linked to its file.
func TestConsoleSharedMemory(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	remote := filepath.Join(gittest.TempDir(t), "shared.git")
	gittest.Git(t, "", "init", "-q", "--bare", "--initial-branch=main", remote)
	s.create("team-red", "Shared by the red team")
	s.call("team-red", "red-1", "r-1", "toolu_r1", map[string]any{"command": "create", "path": "/memories/plan.md", "file_text": "Ship on Friday.\n"})
	use := func(fn func(r *gitmem.Repo) error) {
		t.Helper()
		st, err := s.dir.Acquire(context.Background(), "team-red")
		if err != nil {
			t.Fatal(err)
		}
		defer st.Release()
		if err := st.Use(func(r *gitmem.Repo, _ stores.Meta) error { return fn(r) }); err != nil {
			t.Fatal(err)
		}
	}
	use(func(r *gitmem.Repo) error {
		if err := r.AddRemote("origin", remote); err != nil {
			return err
		}
		_, err := r.Push(ctx, "origin", gitmem.SyncOptions{})
		return err
	})
	// Another agent's clone changes the same line.
	other, _, err := gitmem.Clone(ctx, remote, filepath.Join(gittest.TempDir(t), "other"), gitmem.Options{Now: s.now}, gitmem.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Update(context.Background(), gitmem.Meta{Subject: "memory: create /memories/plan.md", Trailers: []gitmem.Trailer{{Key: gitmem.TrailerToolUseID, Value: "toolu_blue"}}},
		func(tx *gitmem.Tx) error { return tx.WriteFile("plan.md", []byte("Ship on Monday.\n")) }); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Push(ctx, "origin", gitmem.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	s.call("team-red", "red-1", "r-1", "toolu_r2", map[string]any{"command": "str_replace", "path": "/memories/plan.md", "old_str": "Friday", "new_str": "Thursday"})
	use(func(r *gitmem.Repo) error { _, err := r.Sync(ctx, "origin", gitmem.SyncOptions{}); return err })
	s.call("team-red", "red-1", "r-1", "toolu_r3", map[string]any{"command": "create", "path": "/memories/later.md", "file_text": "not pushed yet\n"})

	b := browser(t)
	login(t, b, s.url, "ops")
	run(t, b, "shared", chromedp.Navigate(s.url+"/console/s/team-red/shared"), chromedp.WaitVisible(chromedp.CSS("#remotes")))
	row := text(t, b, "#remotes tbody tr")
	for _, want := range []string{"origin", remote, "\t1\t0\t", "2026-03-01"} {
		if !strings.Contains(row, want) {
			t.Errorf("the remote's row lacks %q:\n%q", want, row)
		}
	}
	merges := text(t, b, ".merge")
	if !strings.Contains(merges, "content") || !strings.Contains(merges, "/memories/plan.md") || !strings.Contains(merges, "Memory-Conflict") {
		t.Errorf("the merges:\n%s", merges)
	}
	shot(t, b, "shared")

	run(t, b, "the conflicted file", chromedp.Click(chromedp.CSS(".merge li a")), chromedp.WaitVisible(chromedp.CSS("#content")))
	if got := text(t, b, "#content"); !strings.Contains(got, "<<<<<<<") || !strings.Contains(got, "Thursday") || !strings.Contains(got, "Monday") {
		t.Errorf("the conflicted file:\n%s", got)
	}

	// A redaction's preview names the remotes that keep the old history.
	run(t, b, "preview a redaction", chromedp.Navigate(s.url+"/console/s/team-red/repair"),
		chromedp.SendKeys(chromedp.CSS("#redact-path"), "/memories/plan.md"), chromedp.Submit(chromedp.CSS("#redact-path")),
		chromedp.WaitVisible(chromedp.CSS("#rewritten")))
	if got := text(t, b, "main"); !strings.Contains(got, "Remotes that still hold the old history") || !strings.Contains(got, "origin "+remote) {
		t.Errorf("the redaction's preview:\n%s", got)
	}
	run(t, b, "confirm it here only", chromedp.Click(chromedp.CSS(`#confirm input[name="push"][value=""]`)),
		chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(`//h2[starts-with(text(),"Rewritten")]`))
	if got := s.git("team-red", "log", "--all", "--format=%s", "--", "memories/plan.md"); got != "" {
		t.Errorf("after the redaction, commits still touch plan.md:\n%s", got)
	}
	run(t, b, "shared, after", chromedp.Navigate(s.url+"/console/s/team-red/shared"), chromedp.WaitVisible(chromedp.CSS("#remotes")))
	if got := text(t, b, "main"); !strings.Contains(got, "origin still holds history redacted here at") {
		t.Errorf("after a redaction here, the shared page:\n%s", got)
	}

	// A redaction that rewrites the remote too (as redact --push): the
	// remote then holds neither this one's text nor the redaction made
	// here only before, and syncs with it go on.
	if !strings.Contains(gittest.Git(t, remote, "cat-file", "--batch-all-objects", "--batch"), "Ship on Monday") {
		t.Fatal("the remote does not hold plan.md to begin with")
	}
	redact := func(text string, regex bool) {
		t.Helper()
		steps := []chromedp.Action[chromedp.Void]{chromedp.Navigate(s.url + "/console/s/team-red/repair"), chromedp.SendKeys(chromedp.CSS("#redact-text"), text)}
		if regex {
			steps = append(steps, chromedp.Click(chromedp.CSS(`input[name="regex"]`)))
		}
		run(t, b, "redact "+text+" with origin", append(steps, chromedp.Submit(chromedp.CSS("#redact-text")),
			chromedp.WaitVisible(chromedp.CSS("#rewritten")),
			chromedp.Click(chromedp.CSS(`#confirm input[name="push"][value="origin"]`)),
			chromedp.Click(chromedp.CSS("#confirm button")), chromedp.WaitVisible(`//h2[starts-with(text(),"Rewritten")] | //p[@class="error"]`))...)
	}
	// Plain text would be published in the redaction's record: refused.
	redact("not pushed yet", false)
	if got := text(t, b, "p.error"); !strings.Contains(got, "matches its own text") || !strings.Contains(got, "Nothing was changed") {
		t.Errorf("a plain text redaction with origin: %q", got)
	}
	redact("not push[e]d yet", true)
	if got := text(t, b, "main"); !strings.Contains(got, "Replaced origin's history") {
		t.Errorf("after the redaction with origin:\n%s", got)
	}
	if objects := gittest.Git(t, remote, "cat-file", "--batch-all-objects", "--batch"); strings.Contains(objects, "Ship on") || strings.Contains(objects, "not pushed yet") {
		t.Error("the remote still holds what was redacted")
	}
	run(t, b, "shared, at last", chromedp.Navigate(s.url+"/console/s/team-red/shared"), chromedp.WaitVisible(chromedp.CSS("#remotes")))
	if got := text(t, b, "main"); strings.Contains(got, "still holds history redacted here") {
		t.Errorf("after the redaction with origin, the shared page:\n%s", got)
	}
}
