package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// serve's one repository has its changes written to git's files every
// few milliseconds (oneRepo), so that the calls of a burst share one
// pack and one move of the branch (issue 25's rename and delete rows):
// not at once after each call, as a zero MaterialiseEvery does, and
// within the milliseconds docs/operations.md gives plain git. Every
// other option passes through.
func TestServeWritesGitFilesEveryFewMilliseconds(t *testing.T) {
	in := gitmem.Options{MaxFiles: 7, ReleaseIdle: time.Second}
	opt := oneRepo(in)
	if opt.MaterialiseEvery <= 0 || opt.MaterialiseEvery > 20*time.Millisecond {
		t.Fatalf("MaterialiseEvery %v: want a few milliseconds", opt.MaterialiseEvery)
	}
	if opt.MaxFiles != in.MaxFiles || opt.ReleaseIdle != in.ReleaseIdle {
		t.Fatalf("options changed: %+v", opt)
	}
}

// A burst of calls to serve's one repository reaches git's files, each
// call a commit of its own, in order, while serve runs.
func TestServeBurstReachesGit(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	repo := gittest.TempDir(t) + "/memory"
	base, stop := serveHTTPProcess(t, env, repo, "--http", "--adopt-every", "0")
	defer stop()
	client := &http.Client{}
	const n = 20
	for i := range n {
		ok, err := postCall(client, base, fmt.Sprintf("toolu_%d", i), fmt.Sprintf(`{"command":"create","path":"/memories/n%d.md","file_text":"note %d\n"}`, i, i))
		if err != nil || !ok {
			t.Fatalf("call %d: %v %v", i, ok, err)
		}
	}
	waitForInGit(t, repo, fmt.Sprintf("toolu_%d", n-1))
	out := gittest.Git(t, repo, "log", fmt.Sprintf("-%d", n), "--format=%(trailers:key=Tool-Use-Id,valueonly)")
	ids := strings.Fields(out)
	if len(ids) != n {
		t.Fatalf("git log: %q", out)
	}
	for i, id := range ids {
		if want := fmt.Sprintf("toolu_%d", n-1-i); id != want {
			t.Fatalf("commit %d is %s, want %s", i, id, want)
		}
	}
}
