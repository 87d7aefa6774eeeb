package gitmem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A group whose log write fails (before or at its fdatasync): every call
// in it gets a storage error, none is half-applied (no commit, no id
// taken), and once the fault is gone the next call succeeds, the failed
// ids can be retried, and the log never replays the failed group.
func TestFailedGroupChangesNothing(t *testing.T) {
	t.Parallel()
	for _, step := range []string{gd.StepWAL, gd.StepWALSync} {
		t.Run(step, func(t *testing.T) { testFailedGroup(t, step) })
	}
}

// A failed fdatasync whose records reach the disk anyway: a crash right
// after must not replay them.
func TestFailedSyncIsNeverReplayed(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t0", "a.md", "before\n")
	stop := failAt(t, r, gd.StepWALSync, ".git/gitmem/wal")
	if _, err := r.Update(context.Background(), Meta{Subject: "x", Trailers: []Trailer{{TrailerToolUseID, "lost"}}}, func(tx *Tx) error {
		return tx.WriteFile("lost.md", []byte("lost\n"))
	}); err == nil {
		t.Fatal("the fault did not fail the call")
	}
	stop()
	crash(r)
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if log := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)"); strings.Contains(log, "lost") {
		t.Fatalf("a call told it failed is in the history:\n%s", log)
	}
}

func testFailedGroup(t *testing.T, step string) {
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t0", "a.md", "before\n")
	before, _ := r.Snapshot(context.Background())
	stop := failAt(t, r, step, ".git/gitmem/wal")
	errs := make([]error, 8)
	// Rounds of concurrent calls, the same ids each time (a client
	// retries): a group fails while later calls are being queued.
	for range 20 {
		var wg sync.WaitGroup
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = r.Update(context.Background(), Meta{Subject: "x", Trailers: []Trailer{{TrailerToolUseID, fmt.Sprint("g", i)}}}, func(tx *Tx) error {
					return tx.WriteFile(fmt.Sprintf("g%d.md", i), []byte("lost\n"))
				})
			}()
		}
		wg.Wait()
		for i, err := range errs {
			var se *StorageError
			if !errors.As(err, &se) {
				t.Fatalf("call %d: %v, want a StorageError", i, err)
			}
		}
		// Nothing of the failed calls is left behind: no id waiting for
		// a write that will never come, no commit queued or built on.
		r.toolIDs.mu.RLock()
		waiting := len(r.toolIDs.inFlight)
		r.toolIDs.mu.RUnlock()
		tip, _ := r.state.tipOf()
		head := r.snapshotHead()
		queued := r.committer.queued()
		if waiting != 0 || queued != 0 || tip != head {
			t.Fatalf("after a failed group: %d id(s) waiting, %d commit(s) queued, tip moved: %v", waiting, queued, tip != head)
		}
	}
	if v, _ := r.Snapshot(context.Background()); v.Head() != before.Head() {
		t.Fatal("a failed group moved HEAD")
	}
	stop()
	for i := range errs { // the same ids again: applied now, once
		write(t, r, fmt.Sprint("g", i), fmt.Sprintf("g%d.md", i), "kept\n")
	}
	settle(t, r)
	crash(r) // the log must not bring back anything of the failed group
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	log := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)")
	for i := range errs {
		if n := strings.Count(log, fmt.Sprintf("g%d\n", i)); n != 1 {
			t.Errorf("g%d is in the history %d times", i, n)
		}
		if got := read(t, r, fmt.Sprintf("g%d.md", i)); got != "kept\n" {
			t.Errorf("g%d.md = %q", i, got)
		}
	}
}

// Objects that cannot be written to git's files (a full disk): the
// acknowledged change stays readable from the log, new changes are
// refused, and once the fault is gone everything lands.
func TestMaterialisationFailureRefusesNewChanges(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	settle(t, r)
	stop := failAt(t, r, gd.StepPack, "")
	write(t, r, "t1", "a.md", "acknowledged\n")
	if err := r.materialize(); err == nil {
		t.Fatal("the fault did not fail materialisation")
	}
	r.state.refuse(&StorageError{Op: "write an object", Err: os.ErrInvalid}) // what the background loop records
	if got := read(t, r, "a.md"); got != "acknowledged\n" {
		t.Fatalf("an acknowledged change is not readable: %q", got)
	}
	if _, err := r.Update(context.Background(), Meta{Subject: "refused"}, func(tx *Tx) error { return tx.WriteFile("b.md", []byte("x")) }); err == nil {
		t.Fatal("a change was accepted while git's files cannot follow")
	}
	stop()
	write(t, r, "t2", "b.md", "after\n")
	settle(t, r)
	if got := gittest.Git(t, dir, "log", "--format=%s", "-2"); got != "w b.md\nw a.md\n" {
		t.Fatalf("history:\n%s", got)
	}
	gittest.Fsck(t, dir)
}

// A start on a disk still full: the acknowledged changes replayed from
// the log cannot be written to git's files, and .git/index is not
// written for them either: it would name blobs git does not have (git
// fsck --strict: "missing blob", and git status, git commit with them)
// until the next start with room. The start wrote it (an attacker's pass,
// 2 starts in 12 on a 4 MiB tmpfs); once there is room, all lands.
func TestStartOnAFullDiskWritesNoIndexAheadOfTheObjects(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t0", "base.md", "base\n")
	settle(t, r)
	full := func(step, p string) error {
		if step == gd.StepPack {
			return &os.PathError{Op: "write", Path: p, Err: syscall.ENOSPC}
		}
		return nil
	}
	opt.hooks.env.SetFault(full)
	write(t, r, "t1", "a.md", "acknowledged\n")
	if err := r.Close(); err == nil {
		t.Fatal("Close checkpointed with objects that cannot be written")
	}
	r, err = Open(context.Background(), dir, opt) // the disk still full
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, r, "a.md"); got != "acknowledged\n" {
		t.Fatalf("the acknowledged change reads %q", got)
	}
	gittest.Fsck(t, dir)
	if got := gittest.Git(t, dir, "ls-files"); got != "memories/base.md\n" {
		t.Fatalf(".git/index names files git's objects do not hold yet:\n%s", got)
	}
	r.Close()
	opt.hooks.env.SetFault(nil) // room again
	r, err = Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	if got := gittest.Git(t, dir, "log", "--format=%s", "-2"); got != "w a.md\nw base.md\n" {
		t.Fatalf("history:\n%s", got)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
}

// Checkpoints that fail again and again (a full disk) never empty a log
// file that holds acknowledged changes: a crash after any number of failed
// attempts loses nothing, whether the changes reached git's files (a sync
// fails) or not (objects cannot be written). The second failed attempt
// used to switch back to the file the first had switched from, and empty
// it; a single failed sync must keep the log as well.
func TestRepeatedFailedCheckpointsKeepTheLog(t *testing.T) {
	t.Parallel()
	for _, step := range []string{gd.StepPack, gd.StepSync} {
		t.Run(step, func(t *testing.T) {
			dir := gittest.TempDir(t)
			r, _, err := Init(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			keepWriterLock(t, r)
			write(t, r, "c", "b.md", "first") // the id map is read: later writes need nothing but the log
			settle(t, r)
			r.disk.hold() // the changes stay in the log only, until the fault is in place
			for i := range 3 {
				write(t, r, fmt.Sprint("c", i), "a.md", fmt.Sprint(i))
			}
			stop := failAt(t, r, step, "")
			r.disk.mu.Unlock()
			for range 3 {
				if err := r.checkpoint(); err == nil {
					t.Fatal("the fault did not fail the checkpoint")
				}
			}
			crash(r)
			stop()
			r, err = Open(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			settle(t, r)
			log := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)")
			for i := range 3 {
				if !strings.Contains(log, fmt.Sprintf("c%d\n", i)) {
					t.Errorf("acknowledged c%d was lost:\n%s", i, log)
				}
			}
			if got := readDisk(t, dir, "a.md"); got != "2" {
				t.Errorf("worktree a.md = %q, want the last acknowledged content", got)
			}
		})
	}
}

// A checkpoint failing again for the same reason is logged once, though
// the file it names (a temporary one) is new at every attempt.
func TestFailureKind(t *testing.T) {
	t.Parallel()
	enospc := func(path string) error {
		return fmt.Errorf("write the object: %w", &fs.PathError{Op: "write", Path: path, Err: syscall.ENOSPC})
	}
	if failureKind(enospc(".git/objects/aa/gitmem_obj_123")) != failureKind(enospc(".git/objects/bb/gitmem_obj_456")) {
		t.Error("the same failure on two temporary files reads as two reasons")
	}
	if failureKind(enospc("x")) == failureKind(&fs.PathError{Op: "write", Path: "x", Err: syscall.EACCES}) {
		t.Error("no space and no permission read as one reason")
	}
	if failureKind(errors.New("a")) == failureKind(errors.New("b")) {
		t.Error("two errors read as one")
	}
}

// keepHandEdits takes as gitmem's own, for every path a group of commits
// changes, the file each of them left there, whatever else changed in
// between: a folder renamed or removed above the path, a file where a
// folder comes, a file written twice. (It looks a path up only in the
// commits that may have changed it.)
func TestKeepHandEditsKnowsEveryVersion(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	keepWriterLock(t, r)
	write(t, r, "t0", "a.md", "v0\n")
	write(t, r, "t1", "d/b.md", "b0\n")
	write(t, r, "t2", "e", "a file\n")
	if err := r.materialize(); err != nil {
		t.Fatal(err)
	}
	r.disk.hold() // the group waits to be materialised
	steps := []func(tx *Tx) error{
		func(tx *Tx) error { return tx.WriteFile("a.md", []byte("v1\n")) },
		func(tx *Tx) error { return tx.WriteFile("c.md", []byte("c\n")) },
		func(tx *Tx) error { return tx.Rename("d", "d2") },
		func(tx *Tx) error { return tx.WriteFile("a.md", []byte("v2\n")) },
		func(tx *Tx) error { return tx.WriteFile("d2/b.md", []byte("b1\n")) },
		func(tx *Tx) error { return tx.Rename("d2", "d") },
		func(tx *Tx) error { return tx.Remove("e") },
		func(tx *Tx) error { return tx.WriteFile("e/f.md", []byte("f\n")) },
		func(tx *Tx) error { return tx.Remove("c.md") },
		func(tx *Tx) error { return tx.WriteFile("d/b.md", []byte("b2\n")) },
	}
	for i, fn := range steps {
		if _, err := r.Update(context.Background(), Meta{Subject: fmt.Sprintf("step %d", i)}, fn); err != nil {
			r.disk.mu.Unlock()
			t.Fatal(err)
		}
	}
	r.backlog.mu.Lock()
	items := slices.Clone(r.backlog.items) // the materialiser clears what it takes
	r.backlog.mu.Unlock()
	var paths []string
	for _, p := range items {
		paths = union(paths, p.paths)
	}
	base := r.disk.tree
	_, checks := r.keepHandEdits(items, r.disk.head, base, paths, nil)
	r.disk.mu.Unlock() // the background materialiser may now move r.disk.tree on
	if len(items) != len(steps) {
		t.Fatalf("%d commits wait to be materialised, want %d", len(items), len(steps))
	}
	for _, q := range paths {
		want := map[plumbing.Hash]bool{}
		for _, tr := range append([]*node{base}, itemTrees(items)...) {
			if n := lookup(tr, q); n.isFile() {
				want[n.hash] = true
			}
		}
		of := checks[q]
		if of == nil {
			if len(want) > 0 {
				t.Errorf("%s: not checked", q)
			}
			continue
		}
		if !maps.Equal(of.hashes, want) {
			t.Errorf("%s: taken as gitmem's own %v, want %v", q, of.hashes, want)
		}
	}
}

func itemTrees(items []*prepared) []*node {
	var out []*node
	for _, p := range items {
		out = append(out, p.tree)
	}
	return out
}

// Flush (the index rewrite serve schedules every second under load)
// makes no call wait: it holds neither the writer lock nor, while it
// writes the index, the materialiser's. It held the writer lock while it
// materialised a backlog, and every call waited for it.
func TestFlushLetsCallsThrough(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	keepWriterLock(t, r)
	write(t, r, "t0", "a.md", "v0\n")
	r.disk.hold() // a materialisation under way
	id, flushed := inBackground(func() error { return r.Flush(context.Background()) })
	for !waitsIn(id, "(*Repo).Flush(", "(*Repo).holdContext(") { // Flush waits for the materialiser
		runtime.Gosched()
	}
	wrote := make(chan struct{})
	go func() {
		write(t, r, "t1", "b.md", "b\n")
		close(wrote)
	}()
	select {
	case <-wrote:
	case <-time.After(20 * time.Second):
		r.disk.mu.Unlock()
		t.Fatal("a call waited for Flush")
	}
	r.disk.mu.Unlock()
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
}

// inBackground runs fn in a goroutine of its own and returns that
// goroutine's id (for waitsIn), and the channel fn's error comes on.
func inBackground(fn func() error) (id string, done <-chan error) {
	ids, errs := make(chan string, 1), make(chan error, 1)
	go func() {
		buf := make([]byte, 64) // "goroutine 123 [running]:"
		ids <- strings.Fields(string(buf[:runtime.Stack(buf, false)]))[1]
		errs <- fn()
	}()
	return <-ids, errs
}

// waitsIn reports whether the stack of goroutine id names every one of
// fns. Only that goroutine's: the tests run in parallel, and another
// test's goroutine may be in the same functions at that moment (a match
// there ended a wait before this test's call got to it).
func waitsIn(id string, fns ...string) bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if !strings.HasPrefix(g, "goroutine "+id+" [") {
			continue
		}
		for _, fn := range fns {
			if !strings.Contains(g, fn) {
				return false
			}
		}
		return true
	}
	return false
}

// pendingFor keeps, of the pending paths, what a check of some paths can
// ask about: it answers covers for every path at, above or beneath them
// as the whole set does.
func TestPendingForAnswersAsTheWholeSet(t *testing.T) {
	t.Parallel()
	all := []string{"memories/a.md", "memories/d", "memories/e/f.md", "memories/ab.md", "memories/x/y/z.md"}
	r := newRepairs()
	for _, p := range all[1:] {
		r.inFlight(&prepared{paths: []string{p, p}})
	}
	r.inFlight(&prepared{paths: []string{"memories/gone.md"}})
	r.droppedPaths([]*prepared{{paths: []string{"memories/gone.md", "memories/d"}}})
	r.setPending(all[:1])
	whole := newPathSet(all)
	asked := []string{"memories", "memories/a.md", "memories/a", "memories/ab.md", "memories/d", "memories/d/g.md",
		"memories/e", "memories/e/f.md", "memories/e/g.md", "memories/x", "memories/x/y", "memories/x/y/z.md", "memories/q.md"}
	for _, paths := range [][]string{{"memories/a.md"}, {"memories/a"}, {"memories/d/g.md"}, {"memories/e"}, {"memories/x/y/z.md", "memories/q.md"}, {"memories"}} {
		got := r.pendingFor(paths)
		for _, q := range asked {
			if !under(q, paths) && !slices.ContainsFunc(paths, func(p string) bool { return within(p, q) }) {
				continue // not a path a check of paths asks about
			}
			if got.covers(q) != whole.covers(q) {
				t.Errorf("pendingFor(%q).covers(%q) = %v, want %v", paths, q, got.covers(q), whole.covers(q))
			}
		}
		if len(got) == len(all) && len(paths) == 1 && paths[0] != "memories" {
			t.Errorf("pendingFor(%q) copied every pending path", paths)
		}
	}
	for _, c := range []struct {
		p, root string
		want    bool
	}{{"a/b", "a", true}, {"a", "a", true}, {"ab", "a", false}, {"a", "a/b", false}, {"a/b/c", "a/b", true}, {"a/bc", "a/b", false}} {
		if within(c.p, c.root) != c.want {
			t.Errorf("within(%q, %q) = %v", c.p, c.root, !c.want)
		}
	}
}

// Past backlogMax commits answered and not yet in git's files, a call
// waits for the materialiser; it goes on once the backlog is written, and
// every change lands, in order.
func TestBacklogHoldsCallsBack(t *testing.T) {
	t.Parallel()
	r, dir := newRepoWith(t, &testHooks{backlogMax: 3})
	keepWriterLock(t, r)
	write(t, r, "t0", "a.md", "init\n") // (and the tool_use ids are loaded)
	if err := r.materialize(); err != nil {
		t.Fatal(err)
	}
	r.disk.hold() // the materialiser cannot run
	for i := range 3 {
		if _, err := r.Update(context.Background(), Meta{Subject: fmt.Sprintf("c%d", i)}, func(tx *Tx) error {
			return tx.WriteFile("a.md", []byte(fmt.Sprintf("%d\n", i)))
		}); err != nil {
			r.disk.mu.Unlock()
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Update(context.Background(), Meta{Subject: "c3"}, func(tx *Tx) error { return tx.WriteFile("a.md", []byte("3\n")) })
		done <- err
	}()
	select {
	case err := <-done:
		r.disk.mu.Unlock()
		t.Fatalf("a call past the backlog went through while nothing was materialised (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	r.disk.mu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := r.materialize(); err != nil {
		t.Fatal(err)
	}
	if got := readDisk(t, dir, "a.md"); got != "3\n" {
		t.Errorf("worktree a.md = %q, want the last change", got)
	}
	out := gittest.Git(t, dir, "log", "--format=%s")
	if want := "c3\nc2\nc1\nc0\n"; !strings.HasPrefix(out, want) {
		t.Errorf("git log:\n%s\nwant it to start with\n%s", out, want)
	}
}

// TestBacklogWaitEndsWithItsContext: a call held back by the backlog
// stops waiting when its context ends (the client went away), with the
// context's error, and not only after backlogWait.
func TestBacklogWaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	b := newBacklog()
	b.add([]*prepared{{}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	woken := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- b.await(ctx, func(n int) bool { return n >= 1 }, func() {
			select {
			case woken <- struct{}{}:
			default:
			}
		})
	}()
	<-woken // it waits, and has woken the materialiser
	select {
	case err := <-done:
		t.Fatalf("the wait ended before its context did: %v", err)
	default:
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("await = %v, want context.Canceled", err)
	}
}

// Past logMax bytes in the write-ahead log (answered, not yet
// checkpointed), a call waits as it does past backlogMax commits: under
// 8 clients inserting into files grown to tens of kilobytes the log
// reached 272 MiB (finding N5 of the attacker pass), bounded only in
// commits (8,192 of them). It goes on once a checkpoint has emptied the
// log, and every change lands, in order.
func TestLogBytesHoldCallsBack(t *testing.T) {
	t.Parallel()
	r, dir := newRepoWith(t, &testHooks{logMax: 100 << 10})
	keepWriterLock(t, r)
	write(t, r, "t0", "a.md", "init\n")
	settle(t, r)
	r.disk.hold() // neither the materialiser nor a checkpoint can run
	big := func(i int) []byte { return []byte(strings.Repeat(fmt.Sprintf("line %d\n", i), 40<<10/7)) }
	for i := range 3 { // 3 x 40 KiB: past logMax
		if _, err := r.Update(context.Background(), Meta{Subject: fmt.Sprintf("c%d", i)}, func(tx *Tx) error {
			return tx.WriteFile("a.md", big(i))
		}); err != nil {
			r.disk.mu.Unlock()
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Update(context.Background(), Meta{Subject: "c3"}, func(tx *Tx) error { return tx.WriteFile("a.md", big(3)) })
		done <- err
	}()
	select {
	case err := <-done:
		r.disk.mu.Unlock()
		t.Fatalf("a call past logMax went through while nothing was checkpointed (err %v; the log holds %d bytes)", err, r.log.size())
	case <-time.After(300 * time.Millisecond):
	}
	r.disk.mu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	if got := readDisk(t, dir, "a.md"); got != string(big(3)) {
		t.Errorf("worktree a.md holds %d bytes, want the last change", len(got))
	}
	out := gittest.Git(t, dir, "log", "--format=%s")
	if want := "c3\nc2\nc1\nc0\n"; !strings.HasPrefix(out, want) {
		t.Errorf("git log:\n%s\nwant it to start with\n%s", out, want)
	}
}

// A crash can leave git's branch at any commit the log holds: the
// materialiser had written some chunks of them. Replayed at the next
// start, they are materialised from there however many chunks they span:
// the branch is not taken for one moved outside gitmem, no file for a
// hand edit, and every change lands once, in order.
func TestReplayFromTheMiddleOfTheLog(t *testing.T) {
	t.Parallel()
	chunks := &testHooks{chunkMax: 2}
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	opt.hooks = chunks
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	keepWriterLock(t, r)
	write(t, r, "t0", "f0.md", "0\n")
	settle(t, r)
	r.disk.hold() // the materialiser waits
	for i := 1; i <= 7; i++ {
		if _, err := r.Update(context.Background(), Meta{Subject: fmt.Sprintf("c%d", i)}, func(tx *Tx) error {
			return tx.WriteFile(fmt.Sprintf("f%d.md", i%3), []byte(fmt.Sprintf("%d\n", i)))
		}); err != nil {
			r.disk.mu.Unlock()
			t.Fatal(err)
		}
	}
	for range 2 { // it writes two chunks; then the process dies
		if err := r.mat.materializeSome(diskTurn{&r.disk}, 2); err != nil { // (the disk lock is held)
			r.disk.mu.Unlock()
			t.Fatal(err)
		}
	}
	crashed := gittest.TempDir(t)
	out, err := exec.Command("cp", "-a", dir+"/.", crashed).CombinedOutput()
	r.disk.mu.Unlock()
	if err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	r.Close()
	if got := gittest.Git(t, crashed, "log", "-1", "--format=%s"); got != "c4\n" {
		t.Fatalf("the crashed process's branch is at %q, want c4", got)
	}

	opts := testOptions(t)
	opts.hooks = chunks
	var mu sync.Mutex
	var logs []string
	opts.Logf = func(format string, args ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(format, args...))
		mu.Unlock()
		t.Logf(format, args...)
	}
	r2, err := Open(context.Background(), crashed, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	settle(t, r2)
	want := "c7\nc6\nc5\nc4\nc3\nc2\nc1\nw f0.md\n"
	if got := gittest.Git(t, crashed, "log", "--format=%s"); !strings.HasPrefix(got, want) {
		t.Errorf("git log:\n%s\nwant it to start with\n%s", got, want)
	}
	if refs := gittest.Git(t, crashed, "for-each-ref", "refs/gitmem/displaced"); refs != "" {
		t.Errorf("gitmem's own commits were taken for a branch moved outside it:\n%s", refs)
	}
	mu.Lock()
	for _, l := range logs {
		if strings.Contains(l, "outside gitmem") || strings.Contains(l, "by hand") {
			t.Errorf("logged: %s", l)
		}
	}
	mu.Unlock()
	if st := gittest.Git(t, crashed, "status", "--porcelain"); st != "" {
		t.Errorf("git status:\n%s", st)
	}
	for i, want := range []string{"6\n", "7\n", "5\n"} {
		if got := readDisk(t, crashed, fmt.Sprintf("f%d.md", i)); got != want {
			t.Errorf("f%d.md = %q, want %q", i, got, want)
		}
	}
}

// Under load the log file appends do not go to is made large ahead of
// need (spareWant of the load), with no writer waiting, and the
// checkpoint moves the appends to it: neither file then grows while calls
// wait. A light load leaves both files small (TestSpareLogFollowsItsLoad).
func TestSpareLogTakesTheLoad(t *testing.T) {
	gittest.Serial(t, "a load test: writers as fast as they go until the spare log grows, with a deadline")
	r, _ := newRepo(t)
	keepWriterLock(t, r)
	if free := gd.FreeSpace(r.gitDir); free < 16*spareCap {
		t.Skipf("the temporary folder's file system has %d bytes free; a spare log is made only with %d", free, 16*spareCap)
	}
	write(t, r, "t0", "a.md", "small\n")
	first, firstSpare := logCaps(r)
	if first >= spareCap || firstSpare >= spareCap {
		t.Fatalf("after one small change the log files take %d and %d bytes", first, firstSpare)
	}
	firstActive := activeLog(r)
	big := strings.Repeat("x", 4000)
	for i := range 40 { // about 160 KB of log, far past spareAt, within a checkpoint's second
		write(t, r, fmt.Sprintf("t%d", i+1), fmt.Sprintf("f%d.md", i), big+fmt.Sprint(i))
	}
	// The spare grows past the active file (which may have grown itself
	// meanwhile, had its appends outrun the spare).
	var ready int64
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if a, s := logCaps(r); s > max(a, first) {
			ready = s
			break
		} else if activeLog(r) != firstActive && a > max(first, firstSpare) {
			// The loop made the spare ready and moved the appends to it
			// while the writes above went on (a machine slow for the
			// test, quick for the loop): what the rest waits for.
			return
		}
		if time.Now().After(deadline) {
			a, s := logCaps(r)
			t.Fatalf("no log file made ready for the load: %d and %d bytes", a, s)
		}
	}
	// Appends go on into the large file at the maintenance loop's next
	// checkpoint: once the small one is three quarters full, or when one
	// is due. How soon the loop comes round beside the writers is the
	// machine's speed: a loop held up (materialising on a loaded disk)
	// lets the writers fill the small file, which then grows, as
	// designed (prepareSpareLog), and 200 writes did not reach a spare
	// of 2.8 MB. So the writes stop once the small file is three
	// quarters full, and the test waits for the loop's switch.
	small, _ := logCaps(r)
	for i := 0; ; i++ {
		size, _ := r.log.fill()
		a, _ := logCaps(r)
		if a >= ready {
			break
		}
		if a != small {
			t.Fatalf("the small log file grew from %d to %d bytes while the spare took %d", small, a, ready)
		}
		if size > a*3/4 {
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if a, _ := logCaps(r); a >= ready {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("the appends never moved to the large log file: %d of %d bytes taken, the spare takes %d", size, a, ready)
				}
			}
		}
		write(t, r, fmt.Sprintf("u%d", i), fmt.Sprintf("g%d.md", i%8), big+fmt.Sprint(i))
	}
}

// activeLog is which of r's write-ahead log files appends go to.
func activeLog(r *Repo) int {
	r.disk.hold()
	defer r.disk.mu.Unlock()
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	return r.log.active
}

// logCaps is the sizes of r's write-ahead log files: the active one and
// the spare (which grows under the disk lock).
func logCaps(r *Repo) (active, spare int64) {
	r.disk.hold()
	defer r.disk.mu.Unlock()
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	return r.log.files[r.log.active].Cap(), r.log.files[1-r.log.active].Cap()
}

// The spare log file is made as large as its store's load needs, not
// larger: one change of 40 KB (past spareAt in one record) grows it to
// at most twenty times that (its rate over at least a tenth of a
// second, twice over), not to spareCap. 100 stores under a light load
// each wrote spareCap of zeros and an fsync at their first change after
// a start (36% of a many-stores server's CPU, 2 GB written per start).
func TestSpareLogFollowsItsLoad(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	keepWriterLock(t, r)
	if free := gd.FreeSpace(r.gitDir); free < 16*spareCap {
		t.Skipf("the temporary folder's file system has %d bytes free; a spare log is made only with %d", free, 16*spareCap)
	}
	first, _ := logCaps(r)
	const size = 40 << 10
	write(t, r, "t0", "a.md", strings.Repeat("x", size))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		a, s := logCaps(r)
		if big := max(a, s); big > first { // grown (by the append, or ahead of need)
			if big >= 20*(size+4<<10) || big >= spareCap {
				t.Fatalf("after one change of %d bytes a log file takes %d bytes", size, big)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log file grew past %d bytes: %d and %d", first, a, s)
		}
	}
}

// A spare log file that cannot be grown (here a full disk at that step)
// costs the calls nothing, and is said once, not at every change: it is
// tried again a minute later.
func TestSpareLogFailureIsSaidOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	said := 0
	opt := testOptions(t)
	opt.Logf = func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); strings.Contains(msg, "larger ahead of need") {
			mu.Lock()
			said++
			mu.Unlock()
		}
		t.Logf(format, args...)
	}
	r, _, err := Init(context.Background(), gittest.TempDir(t), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if free := gd.FreeSpace(r.gitDir); free < 16*spareCap {
		t.Skipf("the temporary folder's file system has %d bytes free; a spare log is made only with %d", free, 16*spareCap)
	}
	failAt(t, r, gd.StepWALGrow, ".git/gitmem/wal")
	big := strings.Repeat("x", 4000)
	for i := range 120 { // past spareAt many times over
		write(t, r, fmt.Sprintf("t%d", i), fmt.Sprintf("f%d.md", i%8), big+fmt.Sprint(i))
	}
	settle(t, r)
	mu.Lock()
	defer mu.Unlock()
	if said != 1 {
		t.Fatalf("the failure was said %d times, want once", said)
	}
}

// The writer lock is given up after releaseIdle without changes, after a
// checkpoint. That checkpoint is made before the lock is taken: at the
// end of a 64-client run it took up to 200 ms, and a burst of calls that
// began meanwhile waited for all of it when it was made under the lock.
// Here the checkpoint's sync is held; a call must go through meanwhile.
func TestIdleCheckpointLeavesCallsFree(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	write(t, r, "t0", "a.md", "before\n") // the log holds it until a checkpoint
	syncing, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r.objects.st.Env.SetFault(func(step, _ string) error {
		if step == gd.StepSync {
			once.Do(func() { close(syncing) })
			<-proceed
		}
		return nil
	})
	defer r.objects.st.Env.SetFault(nil)
	defer close(proceed) // before the fault is removed: nothing stays blocked
	select {
	case <-syncing:
	case <-time.After(30 * time.Second):
		t.Fatal("no checkpoint after the repository went idle")
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Update(context.Background(), Meta{Subject: "w", Trailers: []Trailer{{TrailerToolUseID, "t1"}}}, func(tx *Tx) error {
			return tx.WriteFile("b.md", []byte("during the checkpoint\n"))
		})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a call waited for the idle checkpoint's sync: it was made under the writer lock")
	}
}

// An idle writer keeps the writer lock until .git/index holds its
// changes (the index's own rewrite, IndexDelay after the first change it
// lacks) instead of writing the whole index to let the lock go after
// releaseIdle: with 100 stores under load, each idle for 200 ms a few
// times a second, those rewrites were a third of the server's CPU (issue
// 25). Here the rewrite is not due for an hour: the lock stays held and
// the index unwritten through many idle polls, until Flush writes it;
// then the lock goes without another write.
func TestIdleReleaseWaitsForTheIndexRewrite(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	opt.IndexDelay = time.Hour
	opt.ReleaseIdle = time.Millisecond
	var writes atomic.Int32
	opt.hooks.env.SetFault(func(step, _ string) error {
		if step == gd.StepIndex {
			writes.Add(1)
		}
		return nil
	})
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	write(t, r, "t0", "a.md", "a\n")
	before := writes.Load()
	time.Sleep(100 * time.Millisecond) // a hundred times releaseIdle
	if n := writes.Load() - before; !r.lease.Held() || n != 0 {
		t.Fatalf("idle with the index's rewrite not due: writer lock held %v, .git/index written %d times; want held, none",
			r.lease.Held(), n)
	}
	settle(t, r)
	for deadline := time.Now().Add(30 * time.Second); r.lease.Held(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the writer lock was kept once .git/index held every change")
		}
	}
	if n := writes.Load() - before; n != 1 {
		t.Fatalf(".git/index written %d times, want once (by Flush)", n)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
}

// The maintainer finds the writer lock idle, then takes the writer turn
// to let it go. A change made in between (the writer turn is free: it is
// prepared, published and acknowledged meanwhile) is one the look did not
// see: the lock was let go all the same, and .git/index written, though
// its rewrite was not due (TestIdleReleaseWaitsForTheIndexRewrite failed
// so, 1 run in several hundred). Here the maintainer is held between the
// two while a change is made: the lock must stay held, the index
// unwritten.
func TestIdleReleaseLooksAgainWithTheTurn(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	opt.IndexDelay = time.Hour
	opt.ReleaseIdle = time.Millisecond
	var writes atomic.Int32
	opt.hooks.env.SetFault(func(step, _ string) error {
		if step == gd.StepIndex {
			writes.Add(1)
		}
		return nil
	})
	idle, proceed, tried := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var stage atomic.Int32 // 0: hold the first "idle"; 1: tell of the next "tried"
	opt.hooks.maintain = func(s string) {
		switch {
		case s == "idle" && stage.CompareAndSwap(0, 1):
			close(idle)
			<-proceed
		case s == "tried" && stage.CompareAndSwap(1, 2):
			close(tried)
		}
	}
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	letGo := sync.OnceFunc(func() { close(proceed) })
	defer letGo() // before Close, which waits for the maintainer
	select {
	case <-idle:
	case <-time.After(30 * time.Second):
		t.Fatal("the maintainer never found the writer lock idle")
	}
	before := writes.Load()
	write(t, r, "t0", "a.md", "a\n")
	letGo()
	select {
	case <-tried:
	case <-time.After(30 * time.Second):
		t.Fatal("the maintainer did not try to let the writer lock go")
	}
	if n := writes.Load() - before; !r.lease.Held() || n != 0 {
		t.Fatalf("a change made as the maintainer took the turn to let the idle lock go: writer lock held %v, .git/index written %d times; want held, none",
			r.lease.Held(), n)
	}
	settle(t, r)
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
}

// Close closes the log before it marks the Repo closed, and the
// maintenance loop may run a checkpoint in between (a checkpoint failed
// earlier, and one is due): it panicked on the closed log ("nil pointer
// dereference" in WAL.Len: serve under load stopped with SIGTERM exited
// 2, TestServeStoppedUnderLoadLeavesACleanIndex, 1 run in 9).
func TestCheckpointAfterTheLogIsClosed(t *testing.T) {
	t.Parallel()
	r, _, err := Init(context.Background(), gittest.TempDir(t), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "a.md", "one\n")
	settle(t, r)
	turn := holdTurn(r)
	r.closeLog(false)
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("a checkpoint after the log was closed: panic: %v", p) // (the Repo is left: its locks are held)
			}
		}()
		err = r.checkpoint()
	}()
	turn.end()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// keepWriterLock keeps the writer lock, once taken, until the test ends,
// as a running collection does: for a test that writes with the disk lock
// held, or reads the log files the holder keeps open. Given up when the
// Repo was idle for releaseIdle (a stall of a loaded machine), the next
// write's settle-in waited for the disk lock the test held, or the
// release (the turn, then the disk lock) for the test, which waited for
// the turn: the test hung; or the log files were closed under it.
func keepWriterLock(t *testing.T, r *Repo) { t.Cleanup(r.collector.running()) }

// A one-command process (revert, restore) syncs its log twice: the
// record, its commit point, and the emptying of its file once a syncfs
// made git's files hold it. The checkpoint's switch of appends to the
// other file, which holds no record, is not synced (WAL.Renew): a third
// fdatasync of each command, which git revert does not make.
func TestOneCommandSyncsItsLogTwice(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t0", "a.md", "zero\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var syncs []string
	opt := testOptions(t)
	opt.hooks.gdEnv().SetDataSync(func(name string) {
		mu.Lock()
		syncs = append(syncs, filepath.Base(name))
		mu.Unlock()
	})
	r, err = Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	c := write(t, r, "t1", "a.md", "one\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := slices.Clone(syncs)
	mu.Unlock()
	if len(got) != 2 {
		t.Errorf("one commit and a close synced %v, want the record's log file and its emptying", got)
	}
	if head := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD")); head != c.Hash {
		t.Fatalf("HEAD is %s, want %s", head, c.Hash)
	}
	if got := gittest.Git(t, dir, "show", "HEAD:memories/a.md"); got != "one\n" {
		t.Fatalf("a.md at HEAD is %q", got)
	}
}

// A stream of changes is materialised together: a change waits up to
// Options.MaterialiseEvery to be written to git's files, the first after
// a quiet spell too, and the maintainer then writes all that wait as one
// pack and one move of the branch, where it wrote a pack and moved the
// branch for each group (under the load of many stores, a group per
// change: issue 25). With MaterialiseEvery, CheckpointEvery, IndexDelay
// and ReleaseIdle an hour, nothing writes them but Flush: one pack, one
// move. Counted through the fault seam: 20 changes, one every 20 ms
// (time for the maintainer, woken by each, to write it alone). The
// changes are durable meanwhile (the write-ahead log), and Close writes
// what waits (TestWaitingChangesWrittenAtClose).
func TestStreamOfChangesMaterialisedTogether(t *testing.T) {
	t.Parallel()
	r, dir := initWritingLate(t)
	defer r.Close()
	write(t, r, "t0", "a.md", "0\n")
	settle(t, r)
	var packs, moves atomic.Int32
	r.objects.st.Env.SetFault(func(step, p string) error {
		switch {
		case step == gd.StepPack:
			packs.Add(1)
		case step == gd.StepRef && p == string(r.branch):
			moves.Add(1)
		}
		return nil
	})
	defer r.objects.st.Env.SetFault(nil)
	const n = 20
	for i := range n {
		write(t, r, fmt.Sprint("t", i+1), "a.md", fmt.Sprintf("%d\n", i+1))
		time.Sleep(20 * time.Millisecond)
	}
	if p, m := packs.Load(), moves.Load(); p != 0 || m != 0 {
		t.Fatalf("%d changes: %d packs written, the branch moved %d times before Flush; want none", n, p, m)
	}
	settle(t, r)
	if p, m := packs.Load(), moves.Load(); p != 1 || m != 1 {
		t.Fatalf("%d changes: %d packs written, the branch moved %d times; want 1 each", n, p, m)
	}
	if got := strings.TrimSpace(gittest.Git(t, dir, "rev-list", "--count", "HEAD")); got != fmt.Sprint(n+2) { // with Init's
		t.Fatalf("git counts %s commits, want %d", got, n+2)
	}
	if got := gittest.Git(t, dir, "show", "HEAD:memories/a.md"); got != fmt.Sprintf("%d\n", n) {
		t.Fatalf("git's HEAD holds a.md = %q", got)
	}
}

// initWritingLate makes a repository whose changes wait to be written
// to git's files until something writes them (MaterialiseEvery,
// CheckpointEvery, IndexDelay and ReleaseIdle an hour).
func initWritingLate(t *testing.T) (*Repo, string) {
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	opt.MaterialiseEvery, opt.CheckpointEvery, opt.IndexDelay, opt.ReleaseIdle = time.Hour, time.Hour, time.Hour, time.Hour
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	return r, dir
}

// TestWaitingChangesWrittenAtClose: changes waiting to be written to
// git's files (MaterialiseEvery an hour) are written by Close, and a read
// of git's history through the Repo (Log) writes them first.
func TestWaitingChangesWrittenAtClose(t *testing.T) {
	t.Parallel()
	r, dir := initWritingLate(t)
	write(t, r, "t1", "a.md", "one\n")
	if err := r.Log(context.Background(), LogOptions{}, nil, func(Commit) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, dir, "show", "HEAD:memories/a.md"); got != "one\n" {
		t.Fatalf("after Log, git's HEAD holds a.md = %q", got)
	}
	write(t, r, "t2", "a.md", "two\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, dir, "show", "HEAD:memories/a.md"); got != "two\n" {
		t.Fatalf("after Close, git's HEAD holds a.md = %q", got)
	}
	if got := gittest.Git(t, dir, "status", "--porcelain"); got != "" {
		t.Fatalf("after Close, git status says %q", got)
	}
}

// The maintenance loop looks every 10 ms where changes are written at
// once, and less often where they wait to be written (MaterialiseEvery:
// serve --stores), up to 100 ms.
func TestPollEveryFollowsMaterialiseEvery(t *testing.T) {
	for _, c := range []struct{ every, want time.Duration }{
		{0, 10 * time.Millisecond},
		{100 * time.Millisecond, 10 * time.Millisecond},
		{time.Second, 50 * time.Millisecond},
		{2 * time.Second, 100 * time.Millisecond},
		{time.Hour, 100 * time.Millisecond},
	} {
		if got := (&Options{MaterialiseEvery: c.every}).pollEvery(); got != c.want {
			t.Errorf("MaterialiseEvery %v: the loop looks every %v, want %v", c.every, got, c.want)
		}
	}
}
