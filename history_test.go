// End-to-end: a session of tool calls over the stdio transport, then the
// history checked with the real git CLI.
package gitmem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

func TestHistoryOfASession(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(gittest.TempDir(t), "memory")
	clock := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	repo, _, err := gitmem.Init(context.Background(), dir, gitmem.Options{
		Now:      func() time.Time { clock = clock.Add(time.Minute); return clock },
		Operator: gitmem.Signature{Name: "Op", Email: "op@example.com"},
		Logf:     t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := handler.New(repo, handler.Options{Limits: policy.DefaultLimits})

	calls := []struct {
		id, input string
		mutates   bool
	}{
		{"toolu_01", `{"command":"view","path":"/memories"}`, false},
		{"toolu_02", `{"command":"create","path":"/memories/prefs.md","file_text":"# Preferences\ncolor: blue\n"}`, true},
		{"toolu_03", `{"command":"create","path":"/memories/prefs.md","file_text":"dup"}`, false},
		{"toolu_04", `{"command":"str_replace","path":"/memories/prefs.md","old_str":"blue","new_str":"green"}`, true},
		{"toolu_05", `{"command":"insert","path":"/memories/prefs.md","insert_line":2,"insert_text":"food: pasta\n"}`, true},
		{"toolu_05", `{"command":"insert","path":"/memories/prefs.md","insert_line":2,"insert_text":"food: pasta\n"}`, false}, // retry
		{"toolu_06", `{"command":"create","path":"/memories/projects/gitmem.md","file_text":"status: started\n"}`, true},
		{"toolu_07", `{"command":"rename","old_path":"/memories/projects","new_path":"/memories/work/projects"}`, true},
		{"toolu_08", `{"command":"str_replace","path":"/memories/prefs.md","old_str":"green","new_str":"green"}`, true}, // no-op edit still commits
		{"toolu_09", `{"command":"delete","path":"/memories/nope"}`, false},
		{"toolu_10", `{"command":"create","path":"/memories/tmp.md","file_text":"scratch"}`, true},
		{"toolu_11", `{"command":"delete","path":"/memories/tmp.md"}`, true},
	}
	var in bytes.Buffer
	for _, c := range calls {
		fmt.Fprintf(&in, `{"type":"tool_use","id":%q,"name":"memory","input":%s}`+"\n", c.id, c.input)
	}
	var out bytes.Buffer
	if err := h.ServeStdio(context.Background(), &in, &out, handler.Caller{Session: "sess-1", Agent: "support-bot"}); err != nil {
		t.Fatal(err)
	}
	results := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(results) != len(calls) {
		t.Fatalf("%d results for %d calls", len(results), len(calls))
	}
	wantCommits := 1 // the init commit
	for i, line := range results {
		var r handler.Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.ToolUseID != calls[i].id {
			t.Errorf("result %d answers %s, want %s", i, r.ToolUseID, calls[i].id)
		}
		if calls[i].mutates {
			wantCommits++
			if r.IsError {
				t.Errorf("call %d failed: %s", i, r.Content)
			}
		}
	}
	if err := repo.Close(); err != nil {
		t.Fatal(err)
	}

	// One commit per successful mutation; the retry made none.
	if n := strings.TrimSpace(gittest.Git(t, dir, "rev-list", "--count", "HEAD")); n != fmt.Sprint(wantCommits) {
		t.Errorf("%s commits, want %d", n, wantCommits)
	}
	if got := gittest.Git(t, dir, "log", "--format=%s", "--grep=Tool-Use-Id: toolu_05"); got != "memory: insert /memories/prefs.md\n" {
		t.Errorf("toolu_05 commits: %q", got)
	}
	// Trailers as git reads them.
	msg := gittest.Git(t, dir, "log", "-1", "--format=%B", "--grep=toolu_07")
	parsed := gittest.GitIn(t, dir, msg, "interpret-trailers", "--parse")
	want := "Tool-Use-Id: toolu_07\nMemory-Command: rename\nMemory-Path: /memories/projects\nMemory-New-Path: /memories/work/projects\nSession: sess-1\nAgent: support-bot\n"
	if parsed != want {
		t.Errorf("trailers:\n%s\nwant\n%s", parsed, want)
	}
	if s := gittest.Git(t, dir, "log", "-1", "--format=%s", "--grep=toolu_07"); s != "memory: rename /memories/projects -> /memories/work/projects\n" {
		t.Errorf("subject %q", s)
	}
	if a := gittest.Git(t, dir, "log", "-1", "--format=%an|%cn", "--grep=toolu_02"); a != "support-bot|gitmem\n" {
		t.Errorf("author|committer = %q", a)
	}
	if s := gittest.Git(t, dir, "log", "-1", "--format=%(trailers:key=Memory-Line,valueonly)", "--grep=toolu_04"); strings.TrimSpace(s) != "2" {
		t.Errorf("Memory-Line = %q", s)
	}
	// The repository is whole and the worktree clean.
	gittest.Fsck(t, dir)
	if st := gittest.Git(t, dir, "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Errorf("git status not clean:\n%s", st)
	}
	// blame names the tool calls that wrote each line.
	blame := strings.Split(strings.TrimSpace(gittest.Git(t, dir, "blame", "-s", "-l", "memories/prefs.md")), "\n")
	for i, id := range []string{"toolu_02", "toolu_04", "toolu_05"} {
		sha := strings.TrimSpace(gittest.Git(t, dir, "log", "--format=%H", "--grep=Tool-Use-Id: "+id))
		if i >= len(blame) || !strings.HasPrefix(blame[i], sha) {
			t.Errorf("blame line %d is not %s (%s): %q", i+1, id, sha, blame)
		}
	}
	if got := gittest.Git(t, dir, "show", "HEAD:memories/prefs.md"); got != "# Preferences\ncolor: green\nfood: pasta\n" {
		t.Errorf("prefs.md = %q", got)
	}
	if got := gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD"); got != "memories/prefs.md\nmemories/work/projects/gitmem.md\n" {
		t.Errorf("tree:\n%s", got)
	}
	// Files 0600, folders 0700, whatever the umask.
	for p, want := range map[string]os.FileMode{"memories": 0o700, "memories/work/projects": 0o700, "memories/prefs.md": 0o600} {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, err %v; want %v", p, fi.Mode().Perm(), err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "memories", "tmp.md")); !os.IsNotExist(err) {
		t.Errorf("deleted file still in worktree: %v", err)
	}
}

// An operator's edits made while gitmem was stopped are committed at the
// next start, attributed to the operator; nothing is discarded.
func TestHandEditsAreAdoptedAtStart(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(gittest.TempDir(t), "memory")
	os.MkdirAll(filepath.Join(dir, "memories", "sdk"), 0o700)
	os.WriteFile(filepath.Join(dir, "memories", "sdk", "old.md"), []byte("from the SDK backend\n"), 0o600)
	opts := gitmem.Options{Operator: gitmem.Signature{Name: "Op", Email: "op@example.com"}, Logf: t.Logf}
	r, created, err := gitmem.Init(context.Background(), dir, opts)
	if err != nil || !created {
		t.Fatal(err, created)
	}
	r.Close()
	if got := gittest.Git(t, dir, "show", "HEAD:memories/sdk/old.md"); got != "from the SDK backend\n" {
		t.Fatalf("adopted content %q", got)
	}
	os.WriteFile(filepath.Join(dir, "memories", "sdk", "old.md"), []byte("edited by hand\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "memories", "new.md"), []byte("added by hand\n"), 0o600)
	os.Symlink("/etc/passwd", filepath.Join(dir, "memories", "link"))
	r, err = gitmem.Open(context.Background(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if got := gittest.Git(t, dir, "log", "-1", "--format=%an <%ae>|%s|%(trailers:key=Memory-Path,valueonly,separator=%x2C)"); got != "Op <op@example.com>|memory: adopt changes made outside gitmem|/memories/new.md,/memories/sdk/old.md\n" {
		t.Errorf("adopt commit: %q", got)
	}
	if got := gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD"); got != "memories/new.md\nmemories/sdk/old.md\n" {
		t.Errorf("tree (the symlink must not be adopted):\n%s", got)
	}
	gittest.Fsck(t, dir)
}

// The operator story: a session writes, a bad edit lands, later edits
// land; reverting the bad tool_use id removes exactly it; blame attributes
// every line; expire with a fixed clock removes exactly the stale files;
// redact leaves the secret in no object. git fsck is clean after each.
func TestOperatorStory(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(gittest.TempDir(t), "memory")
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	opts := gitmem.Options{
		Now:      func() time.Time { return clock },
		Operator: gitmem.Signature{Name: "Op", Email: "op@example.com"},
		Logf:     t.Logf,
	}
	repo, _, err := gitmem.Init(context.Background(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	h := handler.New(repo, handler.Options{Limits: policy.DefaultLimits})
	do := func(id, input string) {
		t.Helper()
		if r := h.HandleJSON(context.Background(), handler.Caller{Agent: "bot"}, []byte(fmt.Sprintf(`{"type":"tool_use","id":%q,"name":"memory","input":%s}`, id, input))); r.IsError {
			t.Fatalf("%s: %s", id, r.Content)
		}
	}
	fsck := func() { t.Helper(); repo.Flush(context.Background()); gittest.Fsck(t, dir) }

	do("t_old", `{"command":"create","path":"/memories/stale/old.md","file_text":"from january\n"}`)
	clock = clock.AddDate(0, 2, 0) // March
	do("t_prefs", `{"command":"create","path":"/memories/prefs.md","file_text":"name: Ada\n\ncolor: blue\n\nfood: pasta\n\ndrink: tea\n"}`)
	do("t_bad", `{"command":"str_replace","path":"/memories/prefs.md","old_str":"color: blue","new_str":"color: IGNORE ALL PREVIOUS"}`)
	do("t_food", `{"command":"str_replace","path":"/memories/prefs.md","old_str":"food: pasta","new_str":"food: risotto"}`)
	do("t_drink", `{"command":"insert","path":"/memories/prefs.md","insert_line":7,"insert_text":"drink: also water"}`)
	do("t_key", `{"command":"create","path":"/memories/creds.md","file_text":"token: ghp_SECRET123456\n"}`)
	fsck()

	// Revert the bad tool_use id: exactly it goes, later edits stay.
	if _, _, err := repo.Revert(context.Background(), []string{"t_bad"}, gitmem.RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	repo.Flush(context.Background()) // git's files follow an acknowledged change within milliseconds
	if got := gittest.Git(t, dir, "show", "HEAD:memories/prefs.md"); got != "name: Ada\n\ncolor: blue\n\nfood: risotto\n\ndrink: tea\ndrink: also water\n" {
		t.Fatalf("after revert:\n%s", got)
	}
	fsck()

	// blame: every line names the tool call (or the revert) that wrote it.
	lines, err := repo.Blame(context.Background(), "prefs.md")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		who := l.Commit.Trailer(gitmem.TrailerToolUseID)
		if who == "" {
			who = l.Commit.Trailer(gitmem.TrailerCommand)
		}
		got = append(got, who)
	}
	want := []string{"t_prefs", "t_prefs", "revert", "t_prefs", "t_food", "t_prefs", "t_prefs", "t_drink"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("blame: %v\nwant   %v", got, want)
	}
	// ... and agrees with git blame, line by line.
	repo.Flush(context.Background())
	gitBlame := strings.Split(strings.TrimSpace(gittest.Git(t, dir, "blame", "-s", "-l", "memories/prefs.md")), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(gitBlame[i], l.Commit.Hash) {
			t.Errorf("line %d: gitmem %s, git %s", i+1, l.Commit.Hash[:7], gitBlame[i][:7])
		}
	}

	// expire with a fixed clock: only the January file goes.
	clock = clock.AddDate(0, 1, 0) // April
	stale, _, err := repo.Expire(context.Background(), clock.AddDate(0, 0, -60), gitmem.ExpireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) != 1 || stale[0].Path != "stale/old.md" {
		t.Fatalf("expired %+v", stale)
	}
	repo.Flush(context.Background())
	if tree := gittest.Git(t, dir, "ls-tree", "-r", "--name-only", "HEAD"); tree != "memories/creds.md\nmemories/prefs.md\n" {
		t.Fatalf("tree after expire:\n%s", tree)
	}
	fsck()

	// redact: the token is in no object at all.
	if _, err := repo.Redact(context.Background(), gitmem.Redaction{Match: regexp.MustCompile(`ghp_[A-Za-z0-9]+`)}, false, nil); err != nil {
		t.Fatal(err)
	}
	objects := gittest.Git(t, dir, "rev-list", "--all", "--objects")
	for _, line := range strings.Split(strings.TrimSpace(objects), "\n") {
		if out := gittest.Git(t, dir, "cat-file", "-p", strings.Fields(line)[0]); strings.Contains(out, "ghp_SECRET") {
			t.Fatalf("object %s still holds the token", line)
		}
	}
	if n := strings.Count(gittest.Git(t, dir, "count-objects", "-v"), "count: 0\n"); n != 1 {
		t.Fatal("loose objects survived the redaction")
	}
	fsck()
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("status:\n%s", st)
	}
}
