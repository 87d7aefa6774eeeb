package gitmem_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/memstore"
	"github.com/gitmem-dev/gitmem/policy"
)

// A Memory Stores create whose Idempotency-Key a create still being
// written used (a client's retry racing its first attempt) waits for
// it, then answers the memory it made, or, when it failed, creates the
// memory itself. It was a final 404: the retry looked for the first's
// version before the store published it (an attacker's pass: 12
// parallel creates with one key, 1 to 5 answered "not found" in 4 runs
// of 8). Here the first create's commit is held at the log's sync
// (prepared, not yet durable) while the retry comes. Lives here, not
// in memstore, for the seam into the log (WithLogSyncFault).
func TestMemstoreCreateWaitsForTheCreateInFlightWithItsKey(t *testing.T) {
	t.Parallel()
	for _, firstFails := range []bool{false, true} {
		dir := gittest.TempDir(t)
		var armed atomic.Bool
		held, release := make(chan struct{}), make(chan error)
		var once sync.Once
		opt := gitmem.WithLogSyncFault(gitmem.Options{Logf: t.Logf, Operator: gitmem.Signature{Name: "op", Email: "op@example.com"}}, func() error {
			var err error
			if armed.Load() {
				once.Do(func() { close(held); err = <-release })
			}
			return err
		})
		r, _, err := gitmem.Init(context.Background(), dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		ix := memstore.NewIndex()
		by := memstore.Caller{APIKey: "k", Author: gitmem.Signature{Name: "k", Email: "k@gitmem.invalid"}}
		req := memstore.CreateRequest{Path: "idem.md", Content: []byte("one\n"), By: by, IdempotencyKey: "key-1", Limits: policy.DefaultLimits}
		if _, _, err := ix.Versions(context.Background(), r, memstore.VersionFilter{}, "", 1, false); err != nil {
			t.Fatal(err) // the index read before the race
		}
		type answer struct {
			m   memstore.Memory
			err error
		}
		first, retry := make(chan answer, 1), make(chan answer, 1)
		armed.Store(true)
		go func() { m, err := ix.Create(context.Background(), r, req); first <- answer{m, err} }()
		<-held
		go func() { m, err := ix.Create(context.Background(), r, req); retry <- answer{m, err} }()
		// The retry answered at once before the fix; now it waits for
		// the first. Its answer is checked whichever it does, so this
		// wait only gives the old code the time to show itself.
		var got answer
		answered := false
		select {
		case got = <-retry:
			answered = true
		case <-time.After(2 * time.Second):
		}
		var fail error
		if firstFails {
			fail = errors.New("injected: the log cannot be synced")
		}
		release <- fail
		a := <-first
		if !answered {
			got = <-retry
		}
		var replay *memstore.ReplayError
		switch {
		case !firstFails && a.err != nil:
			t.Fatalf("the first create: %v", a.err)
		case !firstFails && (!errors.As(got.err, &replay) || got.m.ID != a.m.ID || got.m.SHA256 != memstore.SHA256([]byte("one\n"))):
			t.Fatalf("the retry of a create in flight: %+v, %v; want the memory %s the first made", got.m, got.err, a.m.ID)
		case firstFails && a.err == nil:
			t.Fatal("the first create succeeded with its log sync failing")
		case firstFails && (errors.Is(got.err, memstore.ErrNotFound) || errors.As(got.err, &replay)):
			t.Fatalf("the retry of a create that failed: %v; want it to create the memory (or fail as the store does)", got.err)
		}
		if firstFails && got.err == nil {
			m, err := ix.Get(context.Background(), r, got.m.ID, true)
			if err != nil || string(m.Content) != "one\n" {
				t.Fatalf("the memory the retry made: %+v, %v", m, err)
			}
		}
		t.Logf("first fails %v: retry answered %v, %v", firstFails, got.m.ID, got.err)
		if err := r.Close(); err != nil && !firstFails {
			t.Fatal(err)
		}
	}
}
