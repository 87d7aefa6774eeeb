package gittest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// identity is the author and committer of what git commits for a test,
// and the configuration that keeps git from starting its automatic
// maintenance: a git commit, merge or fetch otherwise starts git
// maintenance run --auto (another git process, ~20 ms of CPU on this
// machine) after it, which in a test's small repository only finds
// nothing to do (git gc --auto waits for 6,700 loose objects). A test of
// gitmem beside git's gc runs git gc itself. It is given with -c first
// on the command line (git passes it on to the git it starts), so a
// test's own -c (later) and GIT_AUTHOR_NAME and friends in the
// environment win.
var identity = []string{"-c", "user.name=gittest", "-c", "user.email=gittest@example.com",
	"-c", "maintenance.auto=false", "-c", "gc.auto=0"}

// Command is git with args, to run in dir (the current folder when
// empty), in the environment every test runs git in: no system
// configuration, a HOME (and global configuration) of the test's own and
// the fixed identity. It is for a test that runs git otherwise than Git
// does (feeds it, times it, expects it to fail); Git is the usual way.
func Command(t testing.TB, dir string, args ...string) *exec.Cmd {
	t.Helper()
	return command(stateOf(t).home, dir, args...)
}

func command(home, dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", append(append([]string{}, identity...), args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+home, "GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"))
	return cmd
}

// Git runs git with args in dir and returns what it wrote to its
// standard output; when git fails, the test fails with what git wrote
// to its standard error.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return run(t, Command(t, dir, args...), args)
}

// GitIn is Git with stdin as git's standard input.
func GitIn(t testing.TB, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := Command(t, dir, args...)
	cmd.Stdin = strings.NewReader(stdin)
	return run(t, cmd, args)
}

func run(t testing.TB, cmd *exec.Cmd, args []string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return string(out)
}

// Fsck fails the test, with git's output, unless git fsck --strict finds
// the repository at dir (a worktree or a bare repository) clean.
func Fsck(t testing.TB, dir string) {
	t.Helper()
	if err := fsck(stateOf(t).home, dir); err != nil {
		t.Fatal(err)
	}
}

// FsckAtEnd checks, once the test is over, every git repository at or
// under dir then (bare ones included) as Fsck does, and fails the test
// with git's output for each that is not clean. Its check runs after the
// cleanups registered after it (they run last in, first out): call it
// before opening a repository in dir, whose Close is then done first.
// The git CLI must be installed.
func FsckAtEnd(t testing.TB, dir string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("gittest: the repositories are checked with the git CLI: %v", err)
	}
	s := stateOf(t)
	t.Cleanup(func() {
		n, err := fsckTree(s.home, dir, s.damaged)
		if err != nil {
			t.Errorf("at the end of the test: %v", err)
		} else if n == 1 {
			t.Logf("gittest: git fsck --strict is clean in the repository under %s", dir)
		} else if n > 1 {
			t.Logf("gittest: git fsck --strict is clean in the %d repositories under %s", n, dir)
		}
	})
}

// TempDir is t.TempDir, whose git repositories are checked at the end of
// the test (FsckAtEnd).
func TempDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	FsckAtEnd(t, dir)
	return dir
}

// Serial marks a test that does not call t.Parallel, and says why (it
// is logged, so a failure shows it): a load or crash test that keeps both
// cores busy, or one that sets something the whole process shares. Go
// runs a package's serial tests one at a time before its parallel ones,
// so such a test never runs beside another test of its package.
func Serial(t testing.TB, why string) {
	t.Helper()
	t.Logf("gittest: runs alone: %s", why)
}

// Long marks a long test (the Docker build, the longest load and crash
// tests: a minute or more on two cores) and says why: it runs only when
// GITMEM_LONG=1, which `./test.sh long` sets (CI runs both ./test.sh and
// ./test.sh long). Call it on the test's first line, in the test
// function itself: test.sh finds the long tests by it.
func Long(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("GITMEM_LONG") == "" {
		t.Skipf("a long test (GITMEM_LONG=1, ./test.sh long): %s", why)
	}
	t.Logf("gittest: a long test: %s", why)
}

// Size is the size of a test that draws cases (histories, rounds, files,
// bytes): quick in the quick part of the suite, long under GITMEM_LONG=1
// (./test.sh long). The quick size still draws every kind of case the
// test knows, so it still catches each kind of defect; the long size
// draws more of each. A test that calls Size runs in both parts: call it
// in the test function itself (not a helper), for test.sh finds such
// tests by it.
func Size(t testing.TB, quick, long int) int {
	t.Helper()
	if os.Getenv("GITMEM_LONG") == "" {
		return quick
	}
	t.Logf("gittest: the long size, %d (the quick part's: %d)", long, quick)
	return long
}

// Damaged says that the test leaves the repository at dir (or those
// under it) damaged on purpose, and logs why: FsckAtEnd does not check
// it. t is the test that called FsckAtEnd.
func Damaged(t testing.TB, dir, why string) {
	t.Helper()
	s := stateOf(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.why[filepath.Clean(dir)] = why
	t.Logf("gittest: %s is not checked at the end: %s", dir, why)
}

// FsckTree checks every git repository at or under dir as FsckAtEnd
// does, running git with home as its HOME; the error holds git's output
// for each repository that is not clean. It is for tests that are not a
// testing.TB (testscript's scripts).
func FsckTree(home, dir string) error {
	_, err := fsckTree(home, dir, func(string) string { return "" })
	return err
}

// state is what the helpers keep for one test: its HOME, and the
// repositories it damaged. It is made at the first call for the test,
// and forgotten by a cleanup registered then, which so runs after every
// check registered later.
type state struct {
	home string
	mu   sync.Mutex
	why  map[string]string
}

var states sync.Map // testing.TB → *state

func stateOf(t testing.TB) *state {
	t.Helper()
	if s, ok := states.Load(t); ok {
		return s.(*state)
	}
	s := &state{home: t.TempDir(), why: map[string]string{}}
	if prev, loaded := states.LoadOrStore(t, s); loaded {
		return prev.(*state)
	}
	t.Cleanup(func() { states.Delete(t) })
	return s
}

// damaged says why the repository at dir is left damaged, or "".
func (s *state) damaged(dir string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if why, ok := s.why[d]; ok {
			return why
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// fsckTree checks the repositories at or under dir but the damaged ones,
// and says how many it checked.
func fsckTree(home, dir string, damaged func(string) string) (int, error) {
	repos, err := repositories(dir)
	if err != nil {
		return 0, fmt.Errorf("gittest: looking for the git repositories under %s: %w", dir, err)
	}
	n := 0
	var errs []error
	for _, r := range repos {
		if damaged(r) == "" {
			n++
			errs = append(errs, fsck(home, r))
		}
	}
	return n, errors.Join(errs...)
}

// fsck runs git fsck --strict in the repository at dir. Dangling objects
// are allowed (an interrupted write leaves some, and git gc prunes them):
// --no-dangling only keeps git from listing them. Anything else git
// says, but for its notices (an unborn branch, no references yet), is a
// failure, even when git exits 0: a stray file among the objects ("bad
// sha1 file") is.
func fsck(home, dir string) error {
	args := []string{"fsck", "--strict", "--no-dangling", "--no-progress"}
	// git fsck starts git commit-graph verify and git multi-pack-index
	// verify (two more processes) whether or not the repository has such
	// a file; with none there, they have nothing to check.
	if objs, ok := objectsDir(dir); ok {
		if !exists(filepath.Join(objs, "info", "commit-graph")) && !exists(filepath.Join(objs, "info", "commit-graphs")) {
			args = append([]string{"-c", "core.commitGraph=false"}, args...)
		}
		if !exists(filepath.Join(objs, "pack", "multi-pack-index")) {
			args = append([]string{"-c", "core.multiPackIndex=false"}, args...)
		}
	}
	out, err := command(home, dir, args...).CombinedOutput()
	if err == nil && complaints(string(out)) == "" {
		return nil
	}
	if err == nil {
		err = errors.New("git exited 0 but complained")
	}
	return fmt.Errorf("git fsck --strict in %s: %v\n%s", dir, err, out)
}

func complaints(out string) string {
	var bad []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" && !strings.HasPrefix(l, "notice: ") {
			bad = append(bad, l)
		}
	}
	return strings.Join(bad, "\n")
}

// repositories lists the git repositories at or under dir: a folder
// holding .git (a worktree, whose own folders may hold more), and a bare
// repository (HEAD, objects and refs in one folder). A dir that is gone
// holds none.
func repositories(dir string) ([]string, error) {
	var repos []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil && p == dir && errors.Is(err, fs.ErrNotExist):
			return filepath.SkipAll
		case err != nil:
			return err
		case !d.IsDir():
			return nil
		case d.Name() == ".git":
			return filepath.SkipDir
		case exists(filepath.Join(p, ".git")):
			repos = append(repos, p)
			return nil
		case isBare(p):
			repos = append(repos, p)
			return filepath.SkipDir
		}
		return nil
	})
	return repos, err
}

// objectsDir is the objects folder of the repository at dir, when it is
// its own: not when .git is a link to another folder or the objects
// borrow another repository's (alternates), whose files git fsck also
// checks.
func objectsDir(dir string) (string, bool) {
	objs := filepath.Join(dir, "objects")
	if fi, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
		if !fi.IsDir() {
			return "", false
		}
		objs = filepath.Join(dir, ".git", "objects")
	}
	if exists(filepath.Join(objs, "info", "alternates")) {
		return "", false
	}
	return objs, true
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func isBare(dir string) bool {
	head, err := os.Stat(filepath.Join(dir, "HEAD"))
	if err != nil || !head.Mode().IsRegular() {
		return false
	}
	for _, sub := range []string{"objects", "refs"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// Object is an object as git cat-file reads it: its type ("blob",
// "tree", "commit", "tag") and content.
type Object struct {
	Type string
	Data []byte
}

// CatFiles reads the objects named (hashes, or any name git cat-file
// takes) from the repository at dir with one git cat-file --batch, in
// the order named: one process where a git cat-file per object would
// start hundreds. A name git does not find fails the test.
func CatFiles(t testing.TB, dir string, names ...string) []Object {
	t.Helper()
	out := []byte(GitIn(t, dir, strings.Join(names, "\n")+"\n", "cat-file", "--batch"))
	objs := make([]Object, 0, len(names))
	for _, name := range names {
		header, rest, _ := bytes.Cut(out, []byte("\n"))
		var hash, typ string
		var size int
		if n, _ := fmt.Sscanf(string(header), "%s %s %d", &hash, &typ, &size); n != 3 || len(rest) < size+1 {
			t.Fatalf("git cat-file --batch on %s: %q", name, header)
		}
		objs = append(objs, Object{Type: typ, Data: rest[:size]})
		out = rest[size+1:]
	}
	return objs
}
