//go:build unix

package storesapi_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
)

// A write that began before another process archived its store (the
// CLI's `store archive`), and waited for the writer lock meanwhile, is
// refused as archived and commits nothing after the archive: the
// archived flag is checked under the writer lock against the commit the
// write builds on (N6 F15). It was read when the request began only, and
// the write was committed after the archive. So too the operator API's
// writes: a PUT, a revert and a restore were committed after the archive
// (200, and "memory: put /memories/b.md" etc. over "memory: store
// archive").
func TestWritesRacingAnArchiveByAnotherProcessAreRefused(t *testing.T) {
	t.Parallel()
	const archivedMsg = "is archived: it is read-only"
	for _, c := range []struct {
		name string
		// write makes the change and says what it was answered when
		// that is not the refusal of an archived store.
		// rev is the commit that created the memory.
		write func(a *storesAPI, store, memory, rev string) string
	}{
		{"tool call", func(a *storesAPI, store, _, _ string) string {
			code, res := a.tool("ops", store, "toolu_2", `{"command":"create","path":"/memories/b.md","file_text":"b\n"}`)
			if code == http.StatusOK && res.IsError && res.Content == "Error: This memory is archived: view works, but create is not allowed; nothing was changed" {
				return ""
			}
			return fmt.Sprintf("%d %+v", code, res)
		}},
		{"memory stores create", func(a *storesAPI, store, _, _ string) string {
			var e msError
			code := a.call("ops", "POST", "/v1/memory_stores/"+store+"/memories", map[string]any{"path": "/b.md", "content": "b\n"}, &e)
			if code == http.StatusBadRequest && strings.Contains(e.Error.Message, archivedMsg) {
				return ""
			}
			return fmt.Sprintf("%d %+v", code, e)
		}},
		{"memory stores update", func(a *storesAPI, store, memory, _ string) string {
			var e msError
			code := a.call("ops", "POST", "/v1/memory_stores/"+store+"/memories/"+memory, map[string]any{"content": "b\n"}, &e)
			if code == http.StatusBadRequest && strings.Contains(e.Error.Message, archivedMsg) {
				return ""
			}
			return fmt.Sprintf("%d %+v", code, e)
		}},
		{"operator put", func(a *storesAPI, store, _, _ string) string {
			var e struct{ Error string }
			code := a.call("ops", "PUT", "/v1/stores/"+store+"/memory?path=/memories/b.md", map[string]any{"content": "b\n"}, &e)
			return operatorRefused(store, code, e.Error)
		}},
		{"operator revert", func(a *storesAPI, store, _, rev string) string {
			var e struct{ Error string }
			code := a.call("ops", "POST", "/v1/stores/"+store+"/revert", map[string]any{"revisions": []string{rev}}, &e)
			return operatorRefused(store, code, e.Error)
		}},
		{"operator restore", func(a *storesAPI, store, _, rev string) string {
			var e struct{ Error string }
			code := a.call("ops", "POST", "/v1/stores/"+store+"/restore", map[string]any{"to": rev + "~1", "delete": true}, &e)
			return operatorRefused(store, code, e.Error)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := newStoresAPI(t, policy.ScreenOff)
			var st, mem msObject
			a.call("ops", "POST", "/v1/memory_stores", map[string]any{"name": "Alice"}, &st)
			store := st.str("id")
			if code := a.call("ops", "POST", "/v1/memory_stores/"+store+"/memories", map[string]any{"path": "/a.md", "content": "a\n"}, &mem); code != http.StatusOK {
				t.Fatalf("the first memory: %d %v", code, mem)
			}
			dir := filepath.Join(a.dir.Root(), store)
			var versions struct{ Data []struct{ Hash string } }
			if code := a.call("ops", "GET", "/v1/stores/"+store+"/versions?path=/memories/a.md", nil, &versions); code != http.StatusOK || len(versions.Data) != 1 {
				t.Fatalf("the memory's versions: %d %+v", code, versions)
			}

			// Another process takes the writer lock for its archive
			// commit (with the trailers gitmem store archive writes) and
			// holds it until the write waits for it.
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
						{stores.TrailerCreated, epoch.Format(time.RFC3339)}, {stores.TrailerDescription, `""`}, {stores.TrailerName, `"Alice"`},
						{stores.TrailerArchived, epoch.Format(time.RFC3339)}} {
						tx.AddTrailer(tr[0], tr[1])
					}
					return nil
				})
				archived <- err
			}()
			<-held

			answered := make(chan string, 1)
			go func() { answered <- c.write(a, store, mem.str("id"), versions.Data[0].Hash) }()
			intent := filepath.Join(dir, ".git", "gitmem", "intent")
			gittest.WaitFor(t, "the write waits for the writer lock (holds the intent lock)", func() bool { return gittest.LockHeld(t, intent) })
			close(free)
			if err := <-archived; err != nil {
				t.Fatal(err)
			}
			if err := other.Close(); err != nil {
				t.Fatal(err)
			}
			if got := <-answered; got != "" {
				t.Errorf("the write that began before the archive: %s", got)
			}
			if log := gittest.Git(t, dir, "log", "--format=%s"); !strings.HasPrefix(log, "memory: store archive\n") {
				t.Errorf("a change after the archive:\n%s", log)
			}
		})
	}
}

// operatorRefused says what the operator API answered when that is not
// the refusal of a change to an archived store.
func operatorRefused(store string, code int, msg string) string {
	if code == http.StatusConflict && msg == "store "+store+" is archived; unarchive it to change it" {
		return ""
	}
	return fmt.Sprintf("%d %s", code, msg)
}
