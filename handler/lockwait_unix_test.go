//go:build unix

package handler_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

// A call over HTTP whose client goes away while the call waits for the
// writer lock another process holds (gitmem gc, say) stops waiting: it
// lets go of its place in the queue (the intent lock) while the other
// still holds the lock, commits nothing, and the next call, once the
// lock is free, is applied. (The call waited until the lock was free,
// then committed: a request's context did not reach the store.)
func TestHTTPCallWhoseClientGoesAwayStopsWaitingForTheWriterLock(t *testing.T) {
	t.Parallel()
	h, repo := newHandler(t, policy.DefaultLimits)
	if r := call(h, "toolu_0", `{"command":"create","path":"/memories/a.md","file_text":"zero\n"}`); r.IsError {
		t.Fatal(r.Content)
	}
	srv := httptest.NewServer(h.HTTP(handler.HTTPOptions{}))
	t.Cleanup(srv.Close)

	// Another process: a second Repo on the folder takes the writer lock
	// and keeps it while its change is under way.
	other, err := gitmem.Open(context.Background(), repo.Dir(), gitmem.Options{Now: func() time.Time { return epoch }, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() }) // after the change is let go
	letGo := holdWriter(t, other)       // (before srv.Close, which waits for the call)
	head, _ := repo.Commit(context.Background(), "HEAD")

	intent := filepath.Join(repo.Dir(), ".git", "gitmem", "intent")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/tool_use",
		bytes.NewReader(block("toolu_gone", `{"command":"create","path":"/memories/gone.md","file_text":"x\n"}`)))
	req.Header.Set("Content-Type", "application/json")
	sent := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		sent <- err
	}()
	gittest.WaitFor(t, "the call waits for the writer lock (holds the intent lock)", func() bool { return gittest.LockHeld(t, intent) })
	cancel() // the client goes away
	if err := <-sent; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client's request: %v", err)
	}
	gittest.WaitFor(t, "the call stops waiting (lets the intent lock go)", func() bool { return !gittest.LockHeld(t, intent) })
	letGo()

	if r := call(h, "toolu_next", `{"command":"create","path":"/memories/next.md","file_text":"y\n"}`); r.IsError {
		t.Fatalf("the next call: %s", r.Content)
	}
	commits := commitsSince(t, repo, head.Hash)
	if len(commits) != 1 || commits[0].Trailer(gitmem.TrailerToolUseID) != "toolu_next" {
		t.Fatalf("commits after the call that gave up: %+v, want only the next call's", commits)
	}
	if _, err := repo.ReadFileAt(context.Background(), "HEAD", "memories/gone.md"); !errors.Is(err, gitmem.ErrNotExist) {
		t.Fatalf("gone.md at HEAD: %v", err)
	}
	// The repository's git fsck --strict: at the end (newHandler).
}
