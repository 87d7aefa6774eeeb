package gitmem

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// The child half of TestKillNineDuringTheStartsLookLosesNothing: open the
// repository, whose start's look at every file never ends (it holds the
// writer turn from the start on), say so, and wait to be killed.
func init() {
	dir := os.Getenv("GITMEM_STARTCHECK_CHILD")
	if dir == "" {
		return
	}
	h := &testHooks{startCheck: func() { select {} }} // the look never ends
	if _, err := Open(context.Background(), dir, Options{Logf: func(string, ...any) {}, Operator: Signature{"op", "op@x"}, hooks: h}); err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	fmt.Println("opened")
	time.Sleep(time.Hour)
}

// startGate holds a server's start's look at every worktree file for
// hand edits (checkLater) until open, and tells when a call waits for it.
type startGate struct {
	once    sync.Once
	gate    chan struct{}
	waiting chan struct{}
}

func newStartGate() *startGate {
	return &startGate{gate: make(chan struct{}), waiting: make(chan struct{}, 16)}
}

func (g *startGate) hooks() *testHooks {
	return &testHooks{env: new(gd.Env),
		startCheck: func() { <-g.gate },
		awaitCheck: func() { g.waiting <- struct{}{} }}
}

func (g *startGate) open() { g.once.Do(func() { close(g.gate) }) }

// openRepo opens the repository in dir with the gate's seams.
func (g *startGate) openRepo(t *testing.T, dir string) *Repo {
	t.Helper()
	opt := testOptions(t)
	opt.hooks = g.hooks()
	r, err := Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// handEditedRepo is a closed repository whose a.md and d/b.md gitmem
// wrote, and in whose worktree a.md was then edited and d/new.md made by
// hand, each file older than the racy window.
func handEditedRepo(t *testing.T) string {
	t.Helper()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "one\n")
	write(t, r, "t2", "d/b.md", "b\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join(dir, "memories")
	if err := os.WriteFile(filepath.Join(mem, "a.md"), []byte("one\nby hand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mem, "d", "new.md"), []byte("made by hand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * gd.RacyWindow)
	return dir
}

// A server's start looks at every worktree file for hand edits after
// Open returned (checkLater), so that a first call is answered meanwhile.
// Until that look is done nothing sees a file as if the hand edits were
// not there: the first view of an edited file, the first view of a
// folder (which shows every file under it), the first change: each
// shows the edit and the made file, adopted in one adopt commit, made
// before anything else (the look held back here until the call waits).
func TestHandEditsAtStartAreSeenByTheFirstCall(t *testing.T) {
	t.Parallel()
	// Each waits until the call waits for the look, or has answered
	// (a start that looked before Open returned).
	waitTurn := func(t *testing.T, r *Repo, g *startGate, answered <-chan struct{}) {
		for deadline := time.Now().Add(time.Minute); r.lease.TurnWaiters() == 0; time.Sleep(time.Millisecond) {
			select {
			case <-answered:
				return
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("the change never waited for the writer turn")
			}
		}
	}
	waitLook := func(t *testing.T, r *Repo, g *startGate, answered <-chan struct{}) {
		select {
		case <-g.waiting:
		case <-answered:
		}
	}
	// view reads file in a view of at (a file or a folder), as the
	// memory tool's view does.
	view := func(at, file string) func(*Repo) (string, error) {
		return func(r *Repo) (string, error) {
			v, err := r.Snapshot(context.Background(), at)
			if err != nil {
				return "", err
			}
			data, err := v.ReadFile(file)
			return string(data), err
		}
	}
	const edited, made = "one\nby hand\n", "made by hand\n"
	for _, tc := range []struct {
		name string
		wait func(*testing.T, *Repo, *startGate, <-chan struct{})
		call func(*Repo) (string, error)
		want string
	}{
		{"view of the edited file", waitLook, view("a.md", "a.md"), edited},
		{"view of a folder", waitLook, view("d", "d/new.md"), made},
		{"view of the root", waitLook, view("", "d/new.md"), made},
		{"first change", waitTurn, func(r *Repo) (string, error) {
			var got string
			_, err := r.Update(context.Background(), Meta{Subject: "w a.md", Trailers: []Trailer{{TrailerToolUseID, "t3"}}}, func(tx *Tx) error {
				data, err := tx.ReadFile("a.md")
				if err != nil {
					return err
				}
				got = string(data)
				return tx.WriteFile("a.md", append(data, "by the model\n"...))
			})
			return got, err
		}, edited},
		{"history", waitLook, func(r *Repo) (string, error) {
			c, err := r.Commit(context.Background(), "HEAD")
			return c.Subject, err
		}, "memory: adopt changes made outside gitmem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := handEditedRepo(t)
			g := newStartGate()
			r := g.openRepo(t, dir)
			defer r.Close()
			defer g.open()
			type answer struct {
				got string
				err error
			}
			done, answered := make(chan answer, 1), make(chan struct{})
			go func() {
				got, err := tc.call(r)
				done <- answer{got, err}
				close(answered)
			}()
			tc.wait(t, r, g, answered) // the call waits for the look
			g.open()
			a := <-done
			if a.err != nil {
				t.Fatal(a.err)
			}
			if a.got != tc.want {
				t.Errorf("the first call got %q, want %q", a.got, tc.want)
			}
			settle(t, r)
			log := gittest.Git(t, dir, "log", "--format=%s%n%(trailers:key=Memory-Path,valueonly)")
			if n := strings.Count(log, "memory: adopt"); n != 1 || !strings.Contains(log, "memory: adopt changes made outside gitmem\n/memories/a.md\n/memories/d/new.md\n") {
				t.Errorf("want one adopt commit of both files:\n%s", log)
			}
			if tc.name == "first change" && !strings.HasPrefix(log, "w a.md\n\nmemory: adopt") {
				t.Errorf("the change is not right after the adopt commit:\n%s", log)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if st := gittest.Git(t, dir, "status", "--porcelain", "--untracked-files=all"); st != "" {
				t.Errorf("git status:\n%s", st)
			}
		})
	}
}

// A server's start reads no worktree file before Open returns: after the
// folder was copied (every file a new inode, so .git/index vouches for
// none) the start's look reads them all, after Open returned (held back
// here); it reads them once, and the next start none.
func TestStartReadsNoFileBeforeOpenReturns(t *testing.T) {
	t.Parallel()
	dir, files := copiedRepo(t)
	g := newStartGate()
	r := g.openRepo(t, dir)
	n := r.mirror.wt.reads.Load()
	g.open()
	if n != 0 {
		t.Errorf("the start read %d files before Open returned, want none", n)
	}
	// A view of one file reads that file alone.
	if got := read(t, r, "d0/f0.md"); got != "file 0\n" {
		t.Errorf("d0/f0.md = %q", got)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := r.mirror.wt.reads.Load(); n < files {
		t.Errorf("the start's look read %d files, want all %d", n, files)
	}
	if out := gittest.Git(t, dir, "diff-files", "--name-only"); out != "" {
		t.Fatalf("git diff-files lists files whose lstat data the index lacks:\n%s", out)
	}
	r, err := Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := r.mirror.wt.reads.Load(); n != 0 {
		t.Errorf("the next start read %d files, want none", n)
	}
	if got := subjects(t, dir); strings.Contains(got, "adopt") {
		t.Fatalf("an unchanged file was adopted:\n%s", got)
	}
}

// Close while the start's look at every file has yet to run loses
// nothing: Close waits for it, and the hand edits are in history after.
func TestCloseBeforeTheStartsLookLosesNothing(t *testing.T) {
	t.Parallel()
	dir := handEditedRepo(t)
	g := newStartGate()
	r := g.openRepo(t, dir)
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	<-r.life.Done() // Close began; it waits for the turn the look holds
	g.open()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	onlyAdopt(t, dir)
}

// kill -9 while the start's look at every file runs loses nothing: the
// next start adopts the hand edits, once.
func TestKillNineDuringTheStartsLookLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	t.Parallel()
	dir := handEditedRepo(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GITMEM_STARTCHECK_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "opened" {
		cmd.Process.Kill()
		t.Fatalf("child: %q", sc.Text())
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	gittest.Fsck(t, dir)
	r, err := Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	onlyAdopt(t, dir)
}

// onlyAdopt checks that the history of handEditedRepo's folder holds its
// hand edits in one adopt commit, and that the worktree matches HEAD.
func onlyAdopt(t *testing.T, dir string) {
	t.Helper()
	log := gittest.Git(t, dir, "log", "--format=%s%n%(trailers:key=Memory-Path,valueonly)")
	if !strings.HasPrefix(log, "memory: adopt changes made outside gitmem\n/memories/a.md\n/memories/d/new.md\n\n") || strings.Count(log, "adopt") != 1 {
		t.Errorf("want one adopt commit of both files, last:\n%s", log)
	}
	if got := gittest.Git(t, dir, "show", "HEAD:memories/a.md"); got != "one\nby hand\n" {
		t.Errorf("a.md at HEAD = %q", got)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Errorf("git status:\n%s", st)
	}
}
