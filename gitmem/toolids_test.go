package gitmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
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

// syncIDs reads the ids of the history up to a HEAD it read first (the
// history index file from its start, or the commits when the file is
// gone): a group published meanwhile (prepared before, durable now) keeps
// its ids, so that a retry of one finds its commit and is not made a
// second time.
func TestSyncIDsKeepsAGroupPublishedMeanwhile(t *testing.T) {
	t.Parallel()
	for _, fileGone := range []bool{false, true} {
		t.Run(fmt.Sprint("fileGone=", fileGone), func(t *testing.T) {
			t.Parallel()
			syncIDsBesidePublish(t, fileGone)
		})
	}
}

func syncIDsBesidePublish(t *testing.T, fileGone bool) {
	var publish atomic.Pointer[func()]
	r, dir := newRepoWith(t, &testHooks{syncIDs: func() {
		if f := publish.Swap(nil); f != nil {
			(*f)()
		}
	}})
	ctx := context.Background()
	write(t, r, "toolu_1", "a.md", "one")
	settle(t, r)
	wt, err := r.beginWrite(ctx, withOwn|writable)
	if err != nil {
		t.Fatal(err)
	}
	tx := r.newTx()
	if err := tx.WriteFile("b.md", []byte("two")); err != nil {
		t.Fatal(err)
	}
	meta := Meta{Subject: "w b.md", Trailers: []Trailer{{TrailerToolUseID, "toolu_2"}}}
	p, err := r.prepare(tx, meta)
	wt.end()
	if err != nil {
		t.Fatal(err)
	}
	// Others moved the branch: the ids are read again, from the history
	// index file's start (readIDs), or from the commits when the file is
	// gone (walkIDs).
	r.toolIDs.forgetFile(true)
	if fileGone {
		if err := os.Remove(r.histIndex.filePath()); err != nil {
			t.Fatal(err)
		}
	}
	durable := func() {
		if err := r.committer.durable(p); err != nil {
			t.Error(err)
		}
	}
	publish.Store(&durable)
	write(t, r, "toolu_3", "c.md", "three")
	if h, done, _, inFlight := r.toolIDs.lookup("toolu_2"); !done && !inFlight {
		t.Errorf("toolu_2 is neither in flight nor done (%s)", h)
	}
	_, err = r.Update(ctx, meta, func(tx *Tx) error { return tx.WriteFile("b.md", []byte("again")) })
	var applied *AppliedError
	if !errors.As(err, &applied) || applied.Commit.Hash != p.hash.String() {
		t.Fatalf("the retry of toolu_2: %v, want its commit %s", err, p.hash)
	}
	settle(t, r)
	if got := gittest.Git(t, dir, "log", "--format=%h", "--grep=toolu_2"); strings.Count(got, "\n") != 1 {
		t.Fatalf("commits of toolu_2:\n%s", got)
	}
}
