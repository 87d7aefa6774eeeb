package handler_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

func newRepo(t testing.TB) *gitmem.Repo {
	t.Helper()
	r, _, err := gitmem.Init(context.Background(), gittest.TempDir(t), gitmem.Options{Now: func() time.Time { return epoch }, Logf: t.Logf,
		Operator: gitmem.Signature{Name: "op", Email: "op@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func commits(t *testing.T, r *gitmem.Repo) []gitmem.Commit {
	t.Helper()
	var out []gitmem.Commit
	if err := r.Log(context.Background(), gitmem.LogOptions{}, nil, func(c gitmem.Commit) error {
		out = append(out, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func callAs(h *handler.Handler, c handler.Caller, id, input string) handler.Result {
	return h.HandleJSON(context.Background(), c, []byte(fmt.Sprintf(`{"type":"tool_use","id":%q,"name":"memory","input":%s}`, id, input)))
}

func TestReadOnlyCallerAndArchivedMemory(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	rw := handler.New(r, handler.Options{Limits: policy.DefaultLimits, Logger: testLog(t)})
	if res := call(rw, "toolu_0", `{"command":"create","path":"/memories/a.md","file_text":"one\n"}`); res.IsError {
		t.Fatal(res.Content)
	}
	archived := handler.New(r, handler.Options{Limits: policy.DefaultLimits, Archived: true, Logger: testLog(t)})
	before := len(commits(t, r))
	for _, c := range []struct {
		h      *handler.Handler
		caller handler.Caller
		want   string
	}{
		{rw, handler.Caller{ReadOnly: true}, "Error: This memory is read-only for you: view works, but %s is not allowed; nothing was changed"},
		{archived, handler.Caller{}, "Error: This memory is archived: view works, but %s is not allowed; nothing was changed"},
	} {
		for i, in := range []struct{ cmd, input string }{
			{"create", `{"command":"create","path":"/memories/b.md","file_text":"x"}`},
			{"str_replace", `{"command":"str_replace","path":"/memories/a.md","old_str":"one","new_str":"two"}`},
			{"insert", `{"command":"insert","path":"/memories/a.md","insert_line":0,"insert_text":"x"}`},
			{"delete", `{"command":"delete","path":"/memories/a.md"}`},
			{"rename", `{"command":"rename","old_path":"/memories/a.md","new_path":"/memories/c.md"}`},
		} {
			res := callAs(c.h, c.caller, fmt.Sprintf("toolu_ro%d", i), in.input)
			if want := fmt.Sprintf(c.want, in.cmd); !res.IsError || res.Content != want {
				t.Errorf("%s: %q, want %q", in.cmd, res.Content, want)
			}
		}
		res := callAs(c.h, c.caller, "toolu_view", `{"command":"view","path":"/memories/a.md"}`)
		if res.IsError || !strings.HasSuffix(res.Content, "     1\tone\n     2\t") {
			t.Errorf("view: %+v", res)
		}
	}
	if after := len(commits(t, r)); after != before {
		t.Errorf("%d commits were made by refused calls", after-before)
	}
}

func TestCallerAuthorIsNotSelfAsserted(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	h := handler.New(r, handler.Options{Limits: policy.DefaultLimits, Logger: testLog(t)})
	token := gitmem.Signature{Name: "support-bot", Email: "support-bot@gitmem.invalid"}
	// The request names another agent: it becomes the Agent trailer, but
	// the author stays the token's name.
	callAs(h, handler.Caller{Agent: "planner", Author: token}, "toolu_1", `{"command":"create","path":"/memories/a.md","file_text":"x"}`)
	c := commits(t, r)[0]
	if c.Author != token || c.Trailer(gitmem.TrailerAgent) != "planner" {
		t.Errorf("author %+v, agent %q", c.Author, c.Trailer(gitmem.TrailerAgent))
	}
}

// An agent known by name alone is one identity on every transport: the
// name at gitmem.invalid, as a token of serve --stores is. (Over stdio,
// HTTP and MCP its email was --author's, support-bot
// <claude@gitmem.invalid>; under --stores the token's own, support-bot
// <support-bot@gitmem.invalid>.) A call that names no agent is
// Options.Author's.
func TestAnAgentIsOneIdentityOnEveryTransport(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	h := handler.New(r, handler.Options{Limits: policy.DefaultLimits, Logger: testLog(t), Author: gitmem.Signature{Name: "Claude", Email: "claude@gitmem.invalid"}})
	for i, c := range []handler.Caller{
		{Agent: "support-bot"}, // --agent, Gitmem-Agent
		{Agent: "support-bot", Author: gitmem.SignatureOf("support-bot")}, // a token's call under serve --stores
		{Agent: "Alice <alice@corp>/1.0"},                                 // an MCP client's name/version
		{},
		{Agent: "< >"},                       // a name that is nothing once cleaned: neither --author's name nor a mix of two identities
		{Agent: strings.Repeat("<bot>", 60)}, // 300 bytes, 180 once cleaned: cleaned first, then cut, so not cut at all
	} {
		if res := callAs(h, c, fmt.Sprintf("toolu_%d", i), fmt.Sprintf(`{"command":"create","path":"/memories/%d.md","file_text":"x"}`, i)); res.IsError {
			t.Fatal(res.Content)
		}
	}
	var got []string
	for _, c := range commits(t, r)[:6] {
		got = append(got, c.Author.Name+" <"+c.Author.Email+">")
	}
	slices.Reverse(got)
	want := []string{"support-bot <support-bot@gitmem.invalid>", "support-bot <support-bot@gitmem.invalid>",
		"Alice alice@corp/1.0 <Alice-alice-corp-1.0@gitmem.invalid>", "Claude <claude@gitmem.invalid>",
		"unknown <unknown@gitmem.invalid>", strings.Repeat("bot", 60) + " <" + strings.Repeat("bot", 60) + "@gitmem.invalid>"}
	if !slices.Equal(got, want) {
		t.Errorf("authors %q, want %q", got, want)
	}
}

func TestSecretScreening(t *testing.T) {
	t.Parallel()
	key := "ghp_" + strings.Repeat("aB3dE5gH7j", 3) + "K9mN0p"
	note := "Likes tea.\nGitHub token: " + key + "\n"
	for _, c := range []struct {
		mode  policy.ScreenMode
		steps []step
		file  string // the file afterwards
	}{
		{policy.ScreenOff, []step{
			ok(`{"command":"create","path":"/memories/a.md","file_text":`+q(note)+`}`, "File created successfully at: /memories/a.md"),
		}, note},
		{policy.ScreenRefuse, []step{
			bad(`{"command":"create","path":"/memories/a.md","file_text":`+q(note)+`}`,
				"The content holds what looks like a secret (github-pat) on line 2 of /memories/a.md; nothing was written. Keep secrets out of memory: note where a secret is kept, not its value"),
			ok(`{"command":"create","path":"/memories/a.md","file_text":"one\ntwo\nthree\n"}`, "File created successfully at: /memories/a.md"),
			bad(`{"command":"str_replace","path":"/memories/a.md","old_str":"two","new_str":"2\ntoken `+key+`"}`,
				"The content holds what looks like a secret (github-pat) on line 3 of /memories/a.md; nothing was written. Keep secrets out of memory: note where a secret is kept, not its value"),
			bad(`{"command":"insert","path":"/memories/a.md","insert_line":3,"insert_text":"token `+key+`"}`,
				"The content holds what looks like a secret (github-pat) on line 4 of /memories/a.md; nothing was written. Keep secrets out of memory: note where a secret is kept, not its value"),
		}, "one\ntwo\nthree\n"},
		{policy.ScreenMask, []step{
			ok(`{"command":"create","path":"/memories/a.md","file_text":`+q(note)+`}`,
				"File created successfully at: /memories/a.md\n\nPossible secrets were masked before saving; the file holds a placeholder instead of each: line 2 [REDACTED:github-pat]"),
			ok(`{"command":"str_replace","path":"/memories/a.md","old_str":"tea.","new_str":"tea.\nAWS AKIAZ3MHQ7XKP2LVN4RT"}`,
				"The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tLikes tea.\n     2\tAWS [REDACTED:aws-access-token]\n     3\tGitHub token: [REDACTED:github-pat]"+
					"\n\nPossible secrets were masked before saving; the file holds a placeholder instead of each: line 2 [REDACTED:aws-access-token]"),
			ok(`{"command":"insert","path":"/memories/a.md","insert_line":0,"insert_text":"db postgres://app:Tr0ub4dor3x@db.internal/prod\n"}`,
				"The file /memories/a.md has been edited.\n\nPossible secrets were masked before saving; the file holds a placeholder instead of each: line 1 [REDACTED:url-password]"),
		}, "db postgres://app:[REDACTED:url-password]@db.internal/prod\nLikes tea.\nAWS [REDACTED:aws-access-token]\nGitHub token: [REDACTED:github-pat]\n"},
	} {
		t.Run(string(c.mode), func(t *testing.T) {
			r := newRepo(t)
			h := handler.New(r, handler.Options{Limits: policy.DefaultLimits, Screen: c.mode, Logger: testLog(t)})
			run(t, h, c.steps)
			snap, err := r.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			data, err := snap.ReadFile("a.md")
			if err != nil || string(data) != c.file {
				t.Errorf("file %q (%v), want %q", data, err, c.file)
			}
			if c.mode != policy.ScreenMask {
				return
			}
			// The commit records what was masked, and a retried id gets
			// the same answer, note included.
			if got := commits(t, r)[1].Trailer(handler.TrailerMasked); got != "aws-access-token line 2" {
				t.Errorf("Memory-Masked trailer %q", got)
			}
			if res := call(h, "toolu_000", `{"command":"create","path":"/memories/a.md","file_text":`+q(note)+`}`); res.Content != c.steps[0].want {
				t.Errorf("retry: %q", res.Content)
			}
		})
	}
}

func q(s string) string { return fmt.Sprintf("%q", s) }

// A secret cannot get in by a side door: in pieces (new_str or
// insert_text completing what the file holds, or a str_replace removing
// what kept two halves apart), or in a file name (create's path, rename's
// new_path). The resulting file is screened where the call wrote, not only
// the text it sent. Refused calls change nothing and say so; mask masks
// the whole secret; a name is refused in either mode.
func TestSecretScreeningEdits(t *testing.T) {
	t.Parallel()
	key := "ghp_" + strings.Repeat("aB3dE5gH7j", 3) + "K9mN0p"
	k1, k2 := key[:20], key[20:]
	pem1 := "-----BEGIN OPENSSH PRIVATE KEY-----\n" + strings.Repeat("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW", 2) + "\n"
	pem2 := "-----END OPENSSH PRIVATE KEY-----"
	const refused = "nothing was written. Keep secrets out of memory: note where a secret is kept, not its value"
	start := "one\nGitHub: " + k1 + "\nthree\n"
	gap := "GitHub: " + k1 + "(gap)" + k2 + "\n"
	for _, c := range []struct {
		mode  policy.ScreenMode
		steps []step
		files map[string]string // afterwards
	}{
		{policy.ScreenRefuse, []step{
			ok(`{"command":"create","path":"/memories/a.md","file_text":`+q(start)+`}`, "File created successfully at: /memories/a.md"),
			bad(`{"command":"str_replace","path":"/memories/a.md","old_str":"\nthree","new_str":`+q(k2+"\nthree")+`}`,
				"The content holds what looks like a secret (github-pat) on line 2 of /memories/a.md; "+refused),
			ok(`{"command":"create","path":"/memories/gap.md","file_text":`+q(gap)+`}`, "File created successfully at: /memories/gap.md"),
			bad(`{"command":"str_replace","path":"/memories/gap.md","old_str":"(gap)","new_str":""}`,
				"The content holds what looks like a secret (github-pat) on line 1 of /memories/gap.md; "+refused),
			ok(`{"command":"create","path":"/memories/key.md","file_text":`+q("the server key:\n"+pem1)+`}`, "File created successfully at: /memories/key.md"),
			bad(`{"command":"insert","path":"/memories/key.md","insert_line":3,"insert_text":`+q(pem2)+`}`,
				"The content holds what looks like a secret (private-key) on line 2 of /memories/key.md; "+refused),
			bad(`{"command":"create","path":"/memories/`+key+`.md","file_text":"x"}`,
				"The path holds what looks like a secret (github-pat); "+refused),
			bad(`{"command":"create","path":"/memories/tokens/`+key+`/x.md","file_text":"x"}`,
				"The path holds what looks like a secret (github-pat); "+refused),
			bad(`{"command":"rename","old_path":"/memories/a.md","new_path":"/memories/`+key+`"}`,
				"The path holds what looks like a secret (github-pat); "+refused),
			// What the file held already does not stop an edit elsewhere.
			ok(`{"command":"str_replace","path":"/memories/gap.md","old_str":"\n","new_str":"\nmore\n"}`,
				"The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tGitHub: "+k1+"(gap)"+k2+"\n     2\tmore\n     3\t"),
		}, map[string]string{"a.md": start, "gap.md": gap + "more\n", "key.md": "the server key:\n" + pem1}},
		{policy.ScreenMask, []step{
			ok(`{"command":"create","path":"/memories/a.md","file_text":`+q(start)+`}`, "File created successfully at: /memories/a.md"),
			ok(`{"command":"str_replace","path":"/memories/a.md","old_str":"\nthree","new_str":`+q(k2+"\nthree")+`}`,
				"The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tone\n     2\tGitHub: [REDACTED:github-pat]\n     3\tthree\n     4\t"+
					"\n\nPossible secrets were masked before saving; the file holds a placeholder instead of each: line 2 [REDACTED:github-pat]"),
			ok(`{"command":"create","path":"/memories/gap.md","file_text":`+q(gap)+`}`, "File created successfully at: /memories/gap.md"),
			ok(`{"command":"str_replace","path":"/memories/gap.md","old_str":"(gap)","new_str":""}`,
				"The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tGitHub: [REDACTED:github-pat]\n     2\t"+
					"\n\nPossible secrets were masked before saving; the file holds a placeholder instead of each: line 1 [REDACTED:github-pat]"),
			ok(`{"command":"create","path":"/memories/key.md","file_text":`+q("the server key:\n"+pem1)+`}`, "File created successfully at: /memories/key.md"),
			ok(`{"command":"insert","path":"/memories/key.md","insert_line":3,"insert_text":`+q(pem2)+`}`,
				"The file /memories/key.md has been edited.\n\nPossible secrets were masked before saving; the file holds a placeholder instead of each: line 2 [REDACTED:private-key]"),
			bad(`{"command":"create","path":"/memories/`+key+`.md","file_text":"x"}`,
				"The path holds what looks like a secret (github-pat); "+refused),
			bad(`{"command":"rename","old_path":"/memories/a.md","new_path":"/memories/`+key+`"}`,
				"The path holds what looks like a secret (github-pat); "+refused),
		}, map[string]string{"a.md": "one\nGitHub: [REDACTED:github-pat]\nthree\n", "gap.md": "GitHub: [REDACTED:github-pat]\n",
			"key.md": "the server key:\n[REDACTED:private-key]\n"}},
	} {
		t.Run(string(c.mode), func(t *testing.T) {
			r := newRepo(t)
			h := handler.New(r, handler.Options{Limits: policy.DefaultLimits, Screen: c.mode, Logger: testLog(t)})
			run(t, h, c.steps)
			snap, err := r.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for p := range c.files {
				data, _ := snap.ReadFile(p)
				got[p] = string(data)
			}
			if !maps.Equal(got, c.files) {
				t.Errorf("files %q\nwant %q", got, c.files)
			}
			for _, cm := range commits(t, r) {
				if strings.Contains(cm.Subject, key) || strings.Contains(fmt.Sprint(cm.Trailers), key) {
					t.Errorf("a commit holds the key: %s", cm.Subject)
				}
			}
		})
	}
}
