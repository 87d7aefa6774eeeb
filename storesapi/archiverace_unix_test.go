//go:build unix

package storesapi_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
)

// A tool call that began before another process archived its store (the
// CLI's `store archive`), and waited for the writer lock meanwhile, is
// refused as archived and commits nothing after the archive: the
// archived flag is checked under the writer lock against the commit the
// write builds on (N6 F15). It was read when the request began only, and
// the create was committed after the archive.
func TestToolCallRacingAnArchiveByAnotherProcessIsRefused(t *testing.T) {
	t.Parallel()
	a := newStoresAPI(t, policy.ScreenOff)
	a.createStores("alice")
	if _, res := a.tool("ops", "alice", "toolu_1", `{"command":"create","path":"/memories/a.md","file_text":"a\n"}`); res.IsError {
		t.Fatal(res.Content)
	}
	dir := filepath.Join(a.dir.Root(), "alice")

	// Another process takes the writer lock for its archive commit (with
	// the trailers gitmem store archive writes) and holds it until the
	// call waits for it.
	other, err := gitmem.Open(context.Background(), dir, gitmem.Options{Now: func() time.Time { return epoch }, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	held, free, archived := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	var once sync.Once
	go func() {
		_, err := other.Update(context.Background(), gitmem.Meta{Subject: "memory: store archive"}, func(tx *gitmem.Tx) error {
			once.Do(func() { close(held) })
			<-free
			for _, tr := range [][2]string{{gitmem.TrailerCommand, stores.CommandStore}, {stores.TrailerAction, "archive"},
				{stores.TrailerCreated, epoch.Format(time.RFC3339)}, {stores.TrailerDescription, `"Memory of alice"`},
				{stores.TrailerArchived, epoch.Format(time.RFC3339)}} {
				tx.AddTrailer(tr[0], tr[1])
			}
			return nil
		})
		archived <- err
	}()
	<-held

	type answer struct {
		code int
		res  handler.Result
	}
	answered := make(chan answer, 1)
	go func() {
		code, res := a.tool("ops", "alice", "toolu_2", `{"command":"create","path":"/memories/b.md","file_text":"b\n"}`)
		answered <- answer{code, res}
	}()
	intent := filepath.Join(dir, ".git", "gitmem", "intent")
	gittest.WaitFor(t, "the call waits for the writer lock (holds the intent lock)", func() bool { return gittest.LockHeld(t, intent) })
	close(free)
	if err := <-archived; err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	got := <-answered
	if got.code != http.StatusOK || !got.res.IsError || got.res.Content != "Error: This memory is archived: view works, but create is not allowed; nothing was changed" {
		t.Errorf("the call that began before the archive: %d %+v", got.code, got.res)
	}
	if log := gittest.Git(t, dir, "log", "--format=%s"); !strings.HasPrefix(log, "memory: store archive\n") || strings.Contains(log, "b.md") {
		t.Errorf("a change after the archive:\n%s", log)
	}
	if _, res := a.tool("ops", "alice", "toolu_3", `{"command":"view","path":"/memories/a.md"}`); res.IsError {
		t.Errorf("a view of the archived store: %s", res.Content)
	}
}
