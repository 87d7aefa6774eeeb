package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// What git takes away from a running serve — the branch (git update-ref
// -d), HEAD (git checkout -b) — is put back and logged at ERROR, every
// call still succeeds, and after a clean exit git's view is whole.
func TestServeLogsWhatGitTookAwayAtError(t *testing.T) {
	t.Parallel()
	repo := filepath.Join(gittest.TempDir(t), "memory")
	var stderr lockedBuffer
	base, _, stop := startHTTPProcessTo(t, &stderr, testEnv(t), repo, "--http")
	call := func(id, input string) {
		t.Helper()
		if ok, err := postCall(http.DefaultClient, base, id, input); err != nil || !ok {
			t.Fatalf("%s: ok %v, %v\n%s", id, ok, err, stderr.String())
		}
	}
	call("toolu_1", `{"command":"create","path":"/memories/a.md","file_text":"one\n"}`)
	gittest.Git(t, repo, "update-ref", "-d", "refs/heads/main")
	call("toolu_2", `{"command":"create","path":"/memories/b.md","file_text":"two\n"}`)
	gittest.Git(t, repo, "checkout", "-q", "-b", "other")
	call("toolu_3", `{"command":"create","path":"/memories/c.md","file_text":"three\n"}`)
	stop() // SIGTERM: it must exit 0
	for _, want := range []string{
		`level=ERROR msg="the branch refs/heads/main was deleted outside gitmem`,
		`level=ERROR msg="HEAD was moved outside gitmem (switched to refs/heads/other`,
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the log has no %s:\n%s", want, stderr.String())
		}
	}
	if head := strings.TrimSpace(gittest.Git(t, repo, "symbolic-ref", "HEAD")); head != "refs/heads/main" {
		t.Errorf("HEAD names %s", head)
	}
	ids := gittest.Git(t, repo, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)")
	for _, id := range []string{"toolu_1", "toolu_2", "toolu_3"} {
		if !strings.Contains(ids, id+"\n") {
			t.Errorf("%s is not on the branch:\n%s", id, ids)
		}
	}
	gittest.Fsck(t, repo)
	if st := gittest.Git(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("git status after serve exited:\n%s", st)
	}
}
