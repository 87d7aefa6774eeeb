package gitmem

import (
	"fmt"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// publish moves a tool_use id from in flight to done in one step: a
// retry's lookup meanwhile finds it in one or the other, never in neither
// (it would be made a second time).
func TestToolUseIDIsNeverInNeither(t *testing.T) {
	t.Parallel()
	x := newToolUseIDs()
	items := make([]*prepared, 2000)
	for i := range items {
		items[i] = &prepared{id: fmt.Sprint("toolu_", i), hash: plumbing.ComputeHash(plumbing.CommitObject, []byte(fmt.Sprint(i)))}
		x.expect(items[i])
	}
	published := make(chan struct{})
	go func() {
		defer close(published)
		for _, p := range items {
			x.durable([]*prepared{p})
		}
	}()
	for i := 0; ; i = (i + 1) % len(items) {
		select {
		case <-published:
			for _, p := range items {
				if h, done, _, inFlight := x.lookup(p.id); !done || inFlight || h != p.hash {
					t.Fatalf("%s after publish: done %v (%s), in flight %v", p.id, done, h, inFlight)
				}
			}
			return
		default:
		}
		if _, done, _, inFlight := x.lookup(items[i].id); !done && !inFlight {
			t.Fatalf("%s is neither in flight nor done", items[i].id)
		}
	}
}
