package memorytool_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/memorytool"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
	"github.com/gitmem-dev/gitmem/storesapi"
)

func newHandler(t *testing.T) (*handler.Handler, *gitmem.Repo) {
	t.Helper()
	r, _, err := gitmem.Init(context.Background(), gittest.TempDir(t), gitmem.Options{
		Now:      func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
		Operator: gitmem.Signature{Name: "op", Email: "op@example.com"},
		Logf:     t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return handler.New(r, handler.Options{Limits: policy.DefaultLimits}), r
}

func message(t *testing.T, content string) *anthropic.BetaMessage {
	t.Helper()
	var msg anthropic.BetaMessage
	if err := json.Unmarshal([]byte(`{"id":"msg_1","type":"message","role":"assistant","stop_reason":"tool_use","content":`+content+`}`), &msg); err != nil {
		t.Fatal(err)
	}
	return &msg
}

// An assistant message mixing text, thinking, another tool and memory
// calls (one failing): the results, as the API receives them, in order and
// each with its id, are the same in process and through gitmem serve
// --http, and so are the commits.
func TestRunInProcessAndRemote(t *testing.T) {
	t.Parallel()
	msg := message(t, `[
		{"type":"thinking","thinking":"I should look.","signature":"sig"},
		{"type":"text","text":"Checking memory."},
		{"type":"tool_use","id":"toolu_1","name":"memory","input":{"command":"create","path":"/memories/n.md","file_text":"one\n"}},
		{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"city":"Paris"}},
		{"type":"tool_use","id":"toolu_3","name":"memory","input":{"command":"str_replace","path":"/memories/n.md","old_str":"two","new_str":"2"}},
		{"type":"tool_use","id":"toolu_4","name":"memory","input":{"command":"view","path":"/memories/n.md"}}]`)
	want := `[{"tool_use_id":"toolu_1","content":[{"text":"File created successfully at: /memories/n.md","type":"text"}],"type":"tool_result"},` +
		`{"tool_use_id":"toolu_3","is_error":true,"content":[{"text":"Error: No replacement was performed, old_str ` + "`two`" + ` did not appear verbatim in /memories/n.md.","type":"text"}],"type":"tool_result"},` +
		`{"tool_use_id":"toolu_4","content":[{"text":"Here's the content of /memories/n.md with line numbers:\n     1\tone\n     2\t","type":"text"}],"type":"tool_result"}]`

	local, localRepo := newHandler(t)
	remote, remoteRepo := newHandler(t)
	srv := httptest.NewServer(remote.HTTP(handler.HTTPOptions{Token: "s3cret"}))
	defer srv.Close()
	for name, tc := range map[string]struct {
		tool *memorytool.Tool
		repo *gitmem.Repo
	}{
		"in process": {memorytool.New(local, handler.Caller{Session: "s-1", Agent: "bot"}), localRepo},
		"remote":     {memorytool.Remote(srv.URL+"/v1/tool_use", memorytool.RemoteOptions{Token: "s3cret", Session: "s-1", Agent: "bot"}), remoteRepo},
	} {
		t.Run(name, func(t *testing.T) {
			for try := range 2 { // the second Run is a retry: same results, no new commit
				results, err := tc.tool.Run(context.Background(), msg)
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := json.Marshal(results); string(got) != want {
					t.Errorf("try %d:\n got %s\nwant %s", try, got, want)
				}
			}
			head, _ := tc.repo.Commit(context.Background(), "HEAD")
			parent, _ := tc.repo.Commit(context.Background(), head.Parents[0])
			if head.Trailer("Tool-Use-Id") != "toolu_1" || head.Trailer("Session") != "s-1" || head.Trailer("Agent") != "bot" || parent.Subject != "memory: init" {
				t.Errorf("commits: %+v, then %+v", parent, head)
			}
		})
	}
}

func TestRunWithoutMemoryCalls(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t)
	results, err := memorytool.New(h, handler.Caller{}).Run(context.Background(), message(t, `[{"type":"text","text":"Done."}]`))
	if results != nil || err != nil {
		t.Errorf("%v %v", results, err)
	}
}

func TestRemoteErrors(t *testing.T) {
	t.Parallel()
	h, _ := newHandler(t)
	srv := httptest.NewServer(h.HTTP(handler.HTTPOptions{Token: "s3cret"}))
	msg := message(t, `[{"type":"tool_use","id":"toolu_1","name":"memory","input":{"command":"view","path":"/memories"}}]`)
	_, err := memorytool.Remote(srv.URL+"/v1/tool_use", memorytool.RemoteOptions{Token: "wrong"}).Run(context.Background(), msg)
	if err == nil || !strings.Contains(err.Error(), "401 Unauthorized: missing or wrong bearer token") {
		t.Errorf("wrong token: %v", err)
	}
	srv.Close()
	if _, err := memorytool.Remote(srv.URL+"/v1/tool_use", memorytool.RemoteOptions{}).Run(context.Background(), msg); err == nil {
		t.Error("no error from a stopped server")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := memorytool.New(h, handler.Caller{}).Run(ctx, msg); err != context.Canceled {
		t.Errorf("cancelled: %v", err)
	}
}

// The SDK stays out of the core: only this package, package transfer (the
// CLI's store import and export) and examples import it; the server, the
// store and the CLI's own code do not.
func TestCoreDoesNotImportTheSDK(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "../handler", "../gitmem", "../policy", "../stores", "../memstore", "../storesapi", "../operator").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if strings.Contains(string(out), "anthropic-sdk-go") {
		t.Error("a core package imports github.com/anthropics/anthropic-sdk-go")
	}
	out, err = exec.Command("go", "list", "-f", "{{join .Imports \"\\n\"}}", "../cmd/gitmem").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if strings.Contains(string(out), "anthropic-sdk-go") {
		t.Error("cmd/gitmem imports github.com/anthropics/anthropic-sdk-go itself, not through package transfer")
	}
}

// One memory per end user behind one server (gitmem serve --http --stores):
// each user's Tool points at their store's endpoint, and sees only it.
func TestRemoteStorePerUser(t *testing.T) {
	t.Parallel()
	d, err := stores.Open(gittest.TempDir(t), stores.Options{Repo: gitmem.Options{Logf: t.Logf}, IdleClose: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, user := range []string{"alice", "bob"} {
		if _, err := d.Create(user, stores.Meta{Description: "what " + user + " told the assistant"}, gitmem.Signature{Name: "op", Email: "op@example.com"}); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(storesapi.New(d, storesapi.Options{Limits: policy.DefaultLimits}))
	defer srv.Close()
	mem := func(user string) *memorytool.Tool {
		return memorytool.Remote(srv.URL+"/v1/stores/"+user+"/tool_use", memorytool.RemoteOptions{Session: user + "-1"})
	}
	run := func(tool *memorytool.Tool, input string) string {
		t.Helper()
		results, err := tool.Run(context.Background(), message(t, `[{"type":"tool_use","id":"toolu_1","name":"memory","input":`+input+`}]`))
		if err != nil {
			t.Fatal(err)
		}
		return results[0].OfToolResult.Content[0].OfText.Text
	}
	if got := run(mem("alice"), `{"command":"create","path":"/memories/me.md","file_text":"alice likes tea\n"}`); got != "File created successfully at: /memories/me.md" {
		t.Errorf("alice: %q", got)
	}
	if got := run(mem("bob"), `{"command":"view","path":"/memories"}`); !strings.HasSuffix(got, "\n0B\t/memories") {
		t.Errorf("bob sees alice's memory: %q", got)
	}
}
