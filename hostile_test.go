package gitmem_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

// Caller names arrive in HTTP headers. Whatever they hold, the commits
// stay valid git objects of bounded size, the author email is gitmem's,
// and no value forges a trailer.
func TestHostileCallerNamesKeepTheRepositoryValid(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(gittest.TempDir(t), "memory")
	repo, _, err := gitmem.Init(context.Background(), dir, gitmem.Options{
		Now:      func() time.Time { return time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC) },
		Operator: gitmem.Signature{Name: "Op", Email: "op@example.com"},
		Logf:     t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	h := handler.New(repo, handler.Options{Limits: policy.DefaultLimits})
	srv := httptest.NewServer(h.HTTP(handler.HTTPOptions{}))
	defer srv.Close()

	huge := strings.Repeat("A", 900<<10)
	for i, names := range [][2]string{ // agent, session
		{"Alice <alice@corp>", "s1"},
		{"evil> <x", "s2 <y>"},
		{huge, "s3"},
		{"bad\xff\xfebytes", "Forged: yes\tTool-Use-Id: toolu_x"},
	} {
		id := "toolu_" + strconv.Itoa(i)
		body := `{"type":"tool_use","id":"` + id + `","name":"memory","input":{"command":"create","path":"/memories/f` + strconv.Itoa(i) + `.md","file_text":"x"}}`
		req, _ := http.NewRequest("POST", srv.URL+"/v1/tool_use", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(handler.HeaderAgent, names[0])
		req.Header.Set(handler.HeaderSession, names[1])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var r handler.Result
		json.NewDecoder(res.Body).Decode(&r)
		res.Body.Close()
		if res.StatusCode != 200 || r.IsError {
			t.Fatalf("call %d: %d %s", i, res.StatusCode, r.Content)
		}
	}
	repo.Flush(context.Background()) // git's files follow an acknowledged change within milliseconds
	gittest.Fsck(t, dir)
	// Each agent's email is its name at gitmem.invalid, with no character
	// an email's local part does not take as is (policy.AgentIdent).
	if emails := gittest.Git(t, dir, "log", "--format=%ae", "--reverse", "-4"); emails != "Alice-alice-corp@gitmem.invalid\nevil-x@gitmem.invalid\n"+
		strings.Repeat("A", 253)+"-@gitmem.invalid\nbad-bytes@gitmem.invalid\n" {
		t.Errorf("author emails:\n%.600s", emails)
	}
	if names := gittest.Git(t, dir, "log", "--format=%an|%(trailers:key=Agent,valueonly)", "--reverse", "-4"); !strings.HasPrefix(names,
		"Alice alice@corp|Alice <alice@corp>\n\nevil x|evil> <x\n\n"+strings.Repeat("A", 253)+"…|"+strings.Repeat("A", 253)+"…\n\nbad\uFFFDbytes|bad\uFFFDbytes\n") {
		t.Errorf("authors and Agent trailers:\n%.600s", names)
	}
	if forged := gittest.Git(t, dir, "log", "--format=%(trailers:key=Forged)%(trailers:key=Tool-Use-Id)", "-1"); forged != "Tool-Use-Id: toolu_3\n\n" {
		t.Errorf("trailers of the last commit: %q", forged)
	}
	for _, rev := range []string{"HEAD", "HEAD~1", "HEAD~2", "HEAD~3"} {
		if size, _ := strconv.Atoi(strings.TrimSpace(gittest.Git(t, dir, "cat-file", "-s", rev))); size > 2048 {
			t.Errorf("%s is %d bytes", rev, size)
		}
	}
}
