package gitmem

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// Every writer's call after Close answers ErrClosed: each one waits for
// the writer turn and then finds the Repo closed (redact and the history
// index's rebuild took the turn and went on, to lock files Close had
// closed: "lock the repository: bad file descriptor").
func TestWritesAfterCloseAreClosed(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	write(t, r, "t0", "a.md", "sk-abc\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"redact": func() error {
			_, err := r.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`sk-[a-z]+`)}, false, nil)
			return err
		},
		"rebuild the history index": func() error { return r.rebuildHistoryIndex(context.Background()) },
		"gc": func() error {
			_, err := r.GC(context.Background(), false)
			return err
		},
		"update": func() error {
			_, err := r.Update(context.Background(), Meta{}, func(tx *Tx) error { return tx.WriteFile("b.md", []byte("b\n")) })
			return err
		},
		"snapshot": func() error {
			_, err := r.Snapshot(context.Background())
			return err
		},
	} {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// holdTurn takes r's writer turn as a writer would, for a test that
// stops the background work where it is.
func holdTurn(r *Repo) *writerTurn {
	r.lease.Turn(context.Background(), nil)
	return &writerTurn{r: r}
}

// waitUntil polls cond until it holds: how a test knows a call is blocked
// (a hang guard, not a timing assertion).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// updating runs a call with tool_use id that writes a.md, in the
// background: the goroutine's id (for waitsIn), and the channel its
// error comes on.
func updating(ctx context.Context, r *Repo, id string) (string, <-chan error) {
	return inBackground(func() error {
		_, err := r.Update(ctx, Meta{Trailers: []Trailer{{TrailerToolUseID, id}}}, func(tx *Tx) error {
			return tx.WriteFile("a.md", []byte("one\n"))
		})
		return err
	})
}

// returned waits for a call's error, failing the test if it never comes
// (a hang guard: the call still waits).
func returned(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s: still waiting", what)
		return nil
	}
}

// cancelled cancels a call waiting for a lock and checks that it gave up
// with context.Canceled (a hang guard, as returned).
func cancelled(t *testing.T, cancel context.CancelFunc, done <-chan error, what string) {
	t.Helper()
	cancel()
	if err := returned(t, done, what); !errors.Is(err, context.Canceled) {
		t.Fatalf("%s: %v, want context.Canceled", what, err)
	}
}

// heldByAnother opens a second Repo on dir, which takes the writer lock
// from r (as another gitmem process would: r lets go when it sees the
// intent), and keeps it with a change that stays under way until the
// function returned is called; that change then fails (no commit) and
// the second Repo is closed.
func heldByAnother(t *testing.T, dir string) (letGo func()) {
	t.Helper()
	other, err := Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	held, free, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		other.Update(context.Background(), Meta{Subject: "test: hold the writer lock"}, func(*Tx) error {
			close(held)
			<-free
			return errors.New("held only")
		})
	}()
	<-held
	once := false
	letGo = func() {
		if !once {
			once = true
			close(free)
			<-done
			if err := other.Close(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(letGo)
	return letGo
}

// A call waiting for the writer lock another process holds (a gitmem gc,
// say) gives up when its context is cancelled: Update returns
// context.Canceled while the other still holds the lock, and commits
// nothing; the next call, once the lock is free, commits. (Update took no
// context: it waited until the other let go.)
func TestCancelledUpdateStopsWaitingForTheWriterLock(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t0", "a.md", "zero\n")
	letGo := heldByAnother(t, dir)
	head := gittest.Git(t, dir, "rev-parse", "HEAD") // r let go: git's files hold what it committed

	ctx, cancel := context.WithCancel(context.Background())
	_, done := updating(ctx, r, "t1")
	waitUntil(t, "the call waits for the writer lock", func() bool { return r.lease.AcquireWaiters() == 1 })
	cancelled(t, cancel, done, "Update cancelled while waiting for the writer lock")
	// Answered while the other process still holds the lock (letGo has
	// not run), with nothing committed.
	if got := gittest.Git(t, dir, "rev-parse", "HEAD"); got != head {
		t.Fatalf("HEAD moved from %s to %s", head, got)
	}
	letGo()
	write(t, r, "t2", "a.md", "two\n")
	if got := read(t, r, "a.md"); got != "two\n" {
		t.Fatalf("a.md = %q after the next call", got)
	}
	if _, err := r.Update(context.Background(), Meta{Trailers: []Trailer{{TrailerToolUseID, "t1"}}}, func(tx *Tx) error {
		return tx.WriteFile("b.md", []byte("t1 again\n"))
	}); err != nil {
		t.Fatalf("the cancelled call's id was taken: %v", err)
	}
}

// A call waiting for this process's writer turn (another call holds it)
// gives up when its context is cancelled, before the other ends.
func TestCancelledUpdateStopsWaitingForTheTurn(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	write(t, r, "t0", "a.md", "zero\n")
	head := r.snapshotHead()
	held, free, first := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	var freeOnce sync.Once
	letGo := func() { freeOnce.Do(func() { close(free) }) }
	t.Cleanup(letGo) // a failure below must not leave Close waiting for the turn
	go func() {
		_, err := r.Update(context.Background(), Meta{}, func(tx *Tx) error {
			close(held)
			<-free
			return errors.New("held only")
		})
		first <- err
	}()
	<-held
	ctx, cancel := context.WithCancel(context.Background())
	call, done := updating(ctx, r, "t1")
	// The call's own goroutine waits in the turn's Lock: the background
	// (start's id sync, a save of the history index) may wait for the
	// turn too, so the waiters are not counted.
	waitUntil(t, "the call waits for the turn", func() bool {
		return waitsIn(call, "beginWrite", "lock.(*Mutex).Lock")
	})
	cancelled(t, cancel, done, "Update cancelled while waiting for the turn")
	letGo()
	<-first
	if got := r.snapshotHead(); got != head {
		t.Fatalf("HEAD moved from %s to %s", head, got)
	}
}

// Close while a call waits for the writer lock another process holds:
// the call gets ErrClosed and Close returns, neither waiting for the
// other process (Close waited behind the call, which waited for the lock).
func TestCloseStopsACallWaitingForTheWriterLock(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t0", "a.md", "zero\n")
	letGo := heldByAnother(t, dir)
	head := gittest.Git(t, dir, "rev-parse", "HEAD") // r let go: git's files hold what it committed
	_, done := updating(context.Background(), r, "t1")
	waitUntil(t, "the call waits for the writer lock", func() bool { return r.lease.AcquireWaiters() == 1 })
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	if err := returned(t, closed, "Close"); err != nil {
		t.Fatal(err)
	}
	if err := returned(t, done, "Update waiting for the writer lock at Close"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Update waiting for the writer lock at Close: %v, want ErrClosed", err)
	}
	if got := gittest.Git(t, dir, "rev-parse", "HEAD"); got != head {
		t.Fatalf("HEAD moved from %s to %s", head, got)
	}
	letGo()
}

// A sync waiting for the session under way (the sharer's lock) gives up
// when its context is cancelled, before that session ends.
func TestCancelledSyncStopsWaitingForTheSession(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	if err := r.sharer.mu.Lock(context.Background(), nil); err != nil { // a session under way
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Pull(ctx, "origin", SyncOptions{})
		done <- err
	}()
	waitUntil(t, "the pull waits for the session", func() bool { return r.sharer.mu.Waiting() == 1 })
	cancelled(t, cancel, done, "Pull cancelled while waiting for the session")
	r.sharer.mu.Unlock()
}

// Fsck waiting for the writer lock another process holds gives up when
// its context is done, having checked nothing (it waited, and ignored
// the lock's error).
func TestFsckStopsWaitingForTheWriterLock(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t0", "a.md", "zero\n")
	heldByAnother(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Fsck(ctx, dir, testOptions(t), false)
		done <- err
	}()
	waitUntil(t, "fsck waits for the writer lock", func() bool {
		held, _ := gd.HeldElsewhere(filepath.Join(dir, ".git", "gitmem", "lock"))
		return held
	})
	cancelled(t, cancel, done, "Fsck cancelled while waiting for the writer lock")
}

// Open waiting for the writer lock another process holds gives up when
// its context is cancelled (it waited until the lock was free: serve's
// start behind a gitmem gc --full).
func TestCancelledOpenStopsWaitingForTheWriterLock(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t0", "a.md", "zero\n")
	heldByAnother(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		r2, err := Open(ctx, dir, testOptions(t))
		if err == nil {
			r2.Close()
		}
		done <- err
	}()
	intent, err := gd.OpenFileLock(filepath.Join(dir, ".git", "gitmem", "intent"))
	if err != nil {
		t.Fatal(err)
	}
	defer intent.Close()
	waitUntil(t, "Open waits for the writer lock (holds the intent lock)", func() bool {
		free, _ := intent.TryLock()
		if free {
			intent.Unlock()
		}
		return !free
	})
	cancelled(t, cancel, done, "Open cancelled while waiting for the writer lock")
}

// A change made in the Repo's life (the merge back of commits git moved
// the branch to) that Close cuts short before its commit point answers
// ErrClosed, as every wait Close ends does, not context.Canceled (which
// the merge back logged as a failure, at every stop).
func TestUpdateCutShortByCloseIsClosed(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	head := r.snapshotHead()
	_, err := r.update(r.life, Meta{}, func(tx *Tx) error {
		r.cancel() // Close begins
		return tx.WriteFile("a.md", []byte("a\n"))
	})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("update cut short by Close: %v, want ErrClosed", err)
	}
	if h := r.snapshotHead(); h != head {
		t.Fatalf("HEAD moved from %s to %s", head, h)
	}
}
