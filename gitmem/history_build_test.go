package gitmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// importedHistory is a repository where gitmem made one commit (toolu_1)
// and plain git (fast-import) then n more, each with a tool_use id
// (toolu_imp_0, ...), as a history imported or made beside gitmem, with
// the worktree checked out: the history index does not hold them.
func importedHistory(t *testing.T, n int) string {
	t.Helper()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "toolu_1", "a.md", "one\n")
	r.Close()
	var b strings.Builder
	head := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD"))
	for i := range n {
		msg := fmt.Sprintf("memory: create /memories/imp/%d.md\n\nTool-Use-Id: toolu_imp_%d\nMemory-Command: create\nMemory-Path: /memories/imp/%d.md\n", i, i, i)
		fmt.Fprintf(&b, "commit refs/heads/main\ncommitter gitmem <gitmem@gitmem.invalid> %d +0000\ndata %d\n%s", 1767225600+i, len(msg), msg)
		if i == 0 {
			fmt.Fprintf(&b, "from %s\n", head)
		}
		fmt.Fprintf(&b, "M 100644 inline memories/imp/%d.md\ndata 2\n%d\n\n", i, i%10)
	}
	gittest.GitIn(t, dir, b.String(), "fast-import", "--quiet")
	gittest.Git(t, dir, "reset", "-q", "--hard")
	return dir
}

// Issue 21 item 32: a read-only process that had to rebuild the history
// index (commits made with plain git) saves it, under the writer lock and
// atomically, so the next one does not rebuild it again; while another
// process holds the writer lock it saves nothing (that writer saves what
// it builds).
func TestReaderSavesTheIndexItRebuilt(t *testing.T) {
	t.Parallel()
	dir := importedHistory(t, 30)
	head := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD"))
	path := filepath.Join(dir, ".git", "gitmem", "history")
	ro := Options{ReadOnly: true, Logf: t.Logf}
	first := func(r *Repo) string {
		var hash string
		if err := r.Log(context.Background(), LogOptions{Limit: 1}, nil, func(c Commit) error { hash = c.Hash; return nil }); err != nil {
			t.Fatal(err)
		}
		return hash
	}

	// Another process holds the writer lock: the reader rebuilds in
	// memory and leaves the file as it is.
	before, _ := os.ReadFile(path)
	held, err := gd.OpenFileLock(filepath.Join(dir, ".git", "gitmem", "lock"))
	if err != nil {
		t.Fatal(err)
	}
	held.Lock()
	r, err := Open(context.Background(), dir, ro)
	if err != nil {
		t.Fatal(err)
	}
	if got := first(r); got != head {
		t.Fatalf("log -n 1 gave %s, want HEAD %s", got, head)
	}
	r.Close()
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("a reader wrote the history index while a writer held the lock")
	}
	held.Unlock()
	held.Close()

	// No one holds it: the reader saves what it rebuilt.
	r, err = Open(context.Background(), dir, ro)
	if err != nil {
		t.Fatal(err)
	}
	first(r)
	r.Close()
	r, err = Open(context.Background(), dir, ro)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if tip := r.histIndex.fileTip(); tip.String() != head {
		t.Fatalf("the saved index ends at %s, want HEAD %s", tip, head)
	}
	if d := r.histIndex.damage(); d != "" {
		t.Fatal(d)
	}
	if got := first(r); got != head {
		t.Fatalf("log -n 1 gave %s, want HEAD %s", got, head)
	}
	if r.histIndex.isLoaded() {
		t.Fatal("the next reader rebuilt the index again instead of reading the saved file")
	}
	n := 0
	r.Log(context.Background(), LogOptions{}, nil, func(Commit) error { n++; return nil })
	if want := strings.TrimSpace(gittest.Git(t, dir, "rev-list", "--count", "HEAD")); fmt.Sprint(n) != want {
		t.Fatalf("log lists %d commits, git %s", n, want)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".git", "gitmem", "history-*")); len(m) > 0 {
		t.Fatalf("temporary files left: %v", m)
	}
	gittest.Fsck(t, dir)
}

// Issue 21 item 32: a writer's first tool call never waits for the
// history index to be rebuilt (it is built in the background), and its
// retry check is right all the same: the ids of commits the index lacks
// are read from them. The background build is held at its start until
// the calls are done: a call that waited for it would never return.
func TestToolCallsDoNotWaitForTheIndex(t *testing.T) {
	t.Parallel()
	n := 4 * inlineCatchUp // more commits than a call records itself
	dir := importedHistory(t, n)
	os.Remove(filepath.Join(dir, ".git", "gitmem", "history"))                                   // missing, as after a plain git clone
	imported := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", fmt.Sprintf("HEAD~%d", n-8))) // toolu_imp_7

	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	opt := testOptions(t)
	opt.hooks = &testHooks{catchUp: func() {
		once.Do(func() { close(started) })
		<-release
	}}
	r, err := Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer func() { // before Close, which waits for the build
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	done := make(chan error, 1)
	go func() {
		// A retry of a call the imported history made, of one gitmem
		// made, then a new call.
		_, err := r.Update(context.Background(), Meta{Subject: "again", Trailers: []Trailer{{TrailerToolUseID, "toolu_imp_7"}}}, func(tx *Tx) error {
			return tx.WriteFile("imp/7.md", []byte("again\n"))
		})
		var applied *AppliedError
		if !errors.As(err, &applied) || applied.Commit.Hash != imported {
			done <- fmt.Errorf("a retry of toolu_imp_7: %v (want its commit %s)", err, imported)
			return
		}
		_, err = r.Update(context.Background(), Meta{Subject: "again", Trailers: []Trailer{{TrailerToolUseID, "toolu_1"}}}, func(tx *Tx) error {
			return tx.WriteFile("a.md", []byte("again\n"))
		})
		if !errors.As(err, &applied) {
			done <- fmt.Errorf("a retry of toolu_1: %v", err)
			return
		}
		_, err = r.Update(context.Background(), Meta{Subject: "new", Trailers: []Trailer{{TrailerToolUseID, "toolu_new"}}}, func(tx *Tx) error {
			return tx.WriteFile("new.md", []byte("new\n"))
		})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute): // never, unless a call waits for the held build
		t.Fatal("the tool calls wait for the history index to be built")
	}
	<-started // the ids were read before the first call was answered, and the build started then
	// The writer lock is let go (idle) before the build ends, as on a
	// busy machine: the calls moved the branch past what the build was
	// asked for, and it goes on to the branch's commit to save the index.
	for deadline := time.Now().Add(time.Minute); r.lease.Held(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the writer lock was not let go")
		}
	}
	close(release)
	r.histIndex.wg.Wait()
	if d := r.histIndex.damage(); d != "" {
		t.Fatal(d)
	}
	if tip := r.histIndex.fileTip(); tip.IsZero() {
		t.Fatal("the background build saved no index")
	}
	// A retry now, through the index.
	_, err = r.Update(context.Background(), Meta{Subject: "again", Trailers: []Trailer{{TrailerToolUseID, "toolu_new"}}}, func(tx *Tx) error {
		return tx.WriteFile("new.md", []byte("again\n"))
	})
	var applied *AppliedError
	if !errors.As(err, &applied) {
		t.Fatalf("a retry of toolu_new: %v", err)
	}
	r.Close()
	gittest.Fsck(t, dir)
	if got := strings.TrimSpace(gittest.Git(t, dir, "rev-list", "--count", "HEAD")); got != fmt.Sprint(3+n) {
		t.Fatalf("%s commits, want %d (init, toolu_1, the imported ones, toolu_new)", got, 3+n)
	}
}
