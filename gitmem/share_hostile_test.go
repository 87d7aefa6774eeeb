//go:build unix

package gitmem

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

func rawTree(t *testing.T, dir string, entries ...object.TreeEntry) plumbing.Hash {
	return hashObject(t, dir, "tree", gd.EncodeEntries(entries))
}

// sharedBase is a bare remote and agent a, whose base.md ("base\n") is
// synced to it, and the remote's main there: what a hostile remote's
// commit is made on.
func sharedBase(t *testing.T) (remote string, a *Repo, base string) {
	remote = bareRemote(t)
	a = agent(t, remote, "a")
	put(t, a, "a1", "base.md", "base\n")
	syncOK(t, a)
	return remote, a, strings.TrimSpace(gittest.Git(t, remote, "rev-parse", "main"))
}

// A remote that holds what no memory may, in objects git accepts: a
// symlink to /etc, a gitlink, a .gitattributes, a file over the 1 MiB
// limit (2 MiB, incompressible: 50 MiB in long mode), an
// executable, files outside memories/. Pulling or cloning it takes the one
// good file and the executable's content, and leaves everything else out,
// named in the merge commit; nothing unsafe reaches the worktree or the
// tree. (What git fsck --strict refuses, a ".." entry or a name with a
// "/", is not fetched at all: TestRemoteObjectsGitFsckRefuses.)
func TestHostileRemote(t *testing.T) {
	t.Parallel()
	bigSize := gittest.Size(t, 2<<20, 50<<20)
	remote, a, base := sharedBase(t)

	big := make([]byte, bigSize)
	rand.Read(big)
	blob := func(s string) plumbing.Hash { return hashObject(t, remote, "blob", []byte(s)) }
	mem := []object.TreeEntry{
		{Name: ".gitattributes", Mode: filemode.Regular, Hash: blob("* filter=evil\n")},
		{Name: "base.md", Mode: filemode.Regular, Hash: blob("base\n")},
		{Name: "big.md", Mode: filemode.Regular, Hash: hashObject(t, remote, "blob", big)},
		{Name: "etc", Mode: filemode.Symlink, Hash: blob("/etc")},
		{Name: "ok.md", Mode: filemode.Regular, Hash: blob("a good file\n")},
		{Name: "run.sh", Mode: filemode.Executable, Hash: blob("echo hi\n")},
		{Name: "sub", Mode: filemode.Submodule, Hash: plumbing.NewHash(base)},
	}
	gd.SortEntries(mem)
	root := []object.TreeEntry{
		{Name: ".gitmodules", Mode: filemode.Regular, Hash: blob("[submodule \"x\"]\n\tpath = memories/sub\n\turl = ../evil\n")},
		{Name: "README.md", Mode: filemode.Regular, Hash: blob("readme\n")},
		{Name: "memories", Mode: filemode.Dir, Hash: rawTree(t, remote, mem...)},
	}
	gd.SortEntries(root)
	commit := fmt.Sprintf("tree %s\nparent %s\nauthor m <m@x> 1767225600 +0000\ncommitter m <m@x> 1767225600 +0000\n\nhostile\n",
		rawTree(t, remote, root...), base)
	evil := hashObject(t, remote, "commit", []byte(commit))
	gittest.Git(t, remote, "update-ref", "refs/heads/main", evil.String(), base)

	check := func(r *Repo, res SyncResult) {
		t.Helper()
		r.Flush(context.Background())
		gittest.Fsck(t, r.Dir())
		if got := onDisk(t, r); fmt.Sprint(got) != fmt.Sprint(map[string]string{"base.md": "base\n", "ok.md": "a good file\n", "run.sh": "echo hi\n"}) {
			t.Errorf("the worktree holds %v", got)
		}
		ents, _ := os.ReadDir(r.Dir())
		for _, e := range ents {
			if e.Name() != ".git" && e.Name() != memDir {
				t.Errorf("the repository folder holds %s", e.Name())
			}
		}
		filepath.WalkDir(r.Dir(), func(p string, d os.DirEntry, err error) error {
			if d != nil && d.Name() == ".git" && filepath.Dir(p) == r.Dir() {
				return filepath.SkipDir
			}
			if fi, err := os.Lstat(p); err == nil && (fi.Mode()&os.ModeSymlink != 0 || (fi.Mode().IsRegular() && fi.Mode()&0o111 != 0)) {
				t.Errorf("%s is a symlink or executable (%v)", p, fi.Mode())
			}
			return nil
		})
		tree := gittest.Git(t, r.Dir(), "ls-tree", "-r", "HEAD")
		for _, want := range []string{"100644 blob", "memories/base.md", "memories/ok.md", "memories/run.sh"} {
			if !strings.Contains(tree, want) {
				t.Errorf("HEAD's tree lacks %s:\n%s", want, tree)
			}
		}
		for _, bad := range []string{"120000", "160000", "100755", "README", ".git", "big.md", "x.md"} {
			if strings.Contains(tree, bad) {
				t.Errorf("HEAD's tree holds %s:\n%s", bad, tree)
			}
		}
		var ignored []string
		for _, ig := range res.Ignored {
			ignored = append(ignored, ig.Path+" ("+ig.Reason+")")
		}
		slices.Sort(ignored)
		want := []string{".gitmodules (outside memories/)", "README.md (outside memories/)", "memories/.gitattributes (not a valid memory path)",
			fmt.Sprintf("memories/big.md (%d bytes, over the limit of 1048576 per file)", bigSize), "memories/etc (a symlink)", "memories/sub (a submodule)"}
		if fmt.Sprint(ignored) != fmt.Sprint(want) {
			t.Errorf("ignored:\n%s\nwant\n%s", strings.Join(ignored, "\n"), strings.Join(want, "\n"))
		}
		msg := gittest.Git(t, r.Dir(), "log", "-1", "--format=%B")
		if strings.Count(msg, "Memory-Ignored: ") != len(want) {
			t.Errorf("the merge commit does not name what it left out:\n%s", msg)
		}
	}

	// An agent that pulls it.
	res, err := a.Pull(context.Background(), "origin", SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Merge == "" {
		t.Fatalf("a hostile commit was fast-forwarded to: %+v", res)
	}
	check(a, res)

	// An agent that joins by cloning it.
	b, res, err := Clone(context.Background(), remote, filepath.Join(gittest.TempDir(t), "b"), agentOptions(t, "b"), SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	check(b, res)

	// A fetch larger than the limit is refused, and stores nothing.
	gittest.Git(t, remote, "update-ref", "refs/heads/main", hashObject(t, remote, "commit", []byte(strings.Replace(commit, "hostile", "again", 1))).String())
	d := agent(t, bareRemote(t), "d")
	d.AddRemote("hostile", remote)
	_, err = d.Pull(context.Background(), "hostile", SyncOptions{MaxFetchBytes: 1 << 20})
	var tl *gd.TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("a %d-byte fetch under a 1 MiB limit: %v", bigSize, err)
	}
	if _, err := os.Stat(filepath.Join(d.Dir(), ".git", "refs", "remotes", "hostile")); err == nil {
		t.Error("a refused fetch moved the remote-tracking ref")
	}
	if tmp, _ := filepath.Glob(filepath.Join(d.Dir(), ".git", "objects", "pack", gd.TmpPackPrefix+"*")); len(tmp) > 0 {
		t.Errorf("a refused fetch left %v", tmp)
	}

	// A commit whose message is huge is not merged at all.
	huge := fmt.Sprintf("tree %s\nparent %s\nauthor m <m@x> 1767225600 +0000\ncommitter m <m@x> 1767225600 +0000\n\n%s\n",
		rawTree(t, remote, root...), base, strings.Repeat("x", 2<<20))
	gittest.Git(t, remote, "update-ref", "refs/heads/main", hashObject(t, remote, "commit", []byte(huge)).String())
	before, _ := d.Commit(context.Background(), "HEAD")
	_, err = d.Pull(context.Background(), "hostile", SyncOptions{})
	if err == nil || !strings.Contains(err.Error(), "has a message of 2097153 bytes, over the limit of 1048576; nothing was merged") {
		t.Fatalf("a 2 MiB commit message: %v", err)
	}
	if after, _ := d.Commit(context.Background(), "HEAD"); after.Hash != before.Hash {
		t.Error("a refused merge moved the branch")
	}
}

// TestRemoteObjectsGitFsckRefuses: a remote whose branch holds an object
// git fsck --strict refuses (a tree entry named .git, one named "..",
// twin entries, an author line with a bad time zone, a .gitmodules whose
// url reads as an option) is refused at the fetch, as git's
// transfer.fsckObjects refuses it. A pull, a sync and a clone fail naming
// the remote's commit and git's message id; nothing is fetched (no pack
// stays, no ref moves) and git fsck --strict stays clean. Before, the
// objects were fetched and kept as the merge's second parent: git fsck
// --strict failed for good. Over a path and over git://.
func TestRemoteObjectsGitFsckRefuses(t *testing.T) {
	t.Parallel()
	status := func(r *Repo, name string) SyncStatus {
		t.Helper()
		st, err := r.Status(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	remote := bareRemote(t)
	gittest.Damaged(t, remote, "the remote holds the objects git fsck --strict refuses (the clones are checked)")
	a := agent(t, remote, "a")
	put(t, a, "a1", "base.md", "base\n")
	syncOK(t, a)
	base := strings.TrimSpace(gittest.Git(t, remote, "rev-parse", "main"))
	baseTree := strings.TrimSpace(gittest.Git(t, remote, "rev-parse", "main^{tree}"))
	memTree := plumbing.NewHash(strings.TrimSpace(gittest.Git(t, remote, "rev-parse", "main:memories")))
	blob := func(s string) plumbing.Hash { return hashObject(t, remote, "blob", []byte(s)) }
	inner := rawTree(t, remote, object.TreeEntry{Name: "config", Mode: filemode.Regular, Hash: blob("[core]\n")})
	ok := blob("base\n")
	withRoot := func(extra ...object.TreeEntry) string {
		es := append([]object.TreeEntry{{Name: "memories", Mode: filemode.Dir, Hash: memTree}}, extra...)
		gd.SortEntries(es)
		return rawTree(t, remote, es...).String()
	}
	withMem := func(es ...object.TreeEntry) string {
		return rawTree(t, remote, object.TreeEntry{Name: "memories", Mode: filemode.Dir, Hash: rawTree(t, remote, es...)}).String()
	}
	commit := func(tree, author string) string {
		return hashObject(t, remote, "commit", []byte(fmt.Sprintf("tree %s\nparent %s\nauthor %s\ncommitter m <m@x> 1767225600 +0000\n\nhostile\n", tree, base, author))).String()
	}
	const who = "m <m@x> 1767225600 +0000"
	cases := []struct{ name, commit, id string }{
		{".git", commit(withMem(object.TreeEntry{Name: ".git", Mode: filemode.Dir, Hash: inner}, object.TreeEntry{Name: "base.md", Mode: filemode.Regular, Hash: ok}), who), "hasDotgit: contains '.git'"},
		{"..", commit(withRoot(object.TreeEntry{Name: "..", Mode: filemode.Dir, Hash: inner}), who), "hasDotdot: contains '..'"},
		{"twins", commit(withMem(object.TreeEntry{Name: "base.md", Mode: filemode.Regular, Hash: ok}, object.TreeEntry{Name: "base.md", Mode: filemode.Dir, Hash: inner}), who), "duplicateEntries"},
		{"time zone", commit(baseTree, "m <m@x> 1767225600 0000"), "badTimezone: invalid author/committer line - bad time zone"},
		{"gitmodules", commit(withRoot(object.TreeEntry{Name: ".gitmodules", Mode: filemode.Regular, Hash: blob("[submodule \"x\"]\n\tpath = x\n\turl = -evil\n")}), who), "gitmodulesUrl: disallowed submodule url: -evil"},
	}
	packFiles := func(r *Repo) []string {
		m, _ := filepath.Glob(filepath.Join(r.Dir(), ".git", "objects", "pack", "*"))
		return m
	}
	refused := func(r *Repo, remoteName string, err error, c struct{ name, commit, id string }, before []string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "its commit "+c.commit[:7]) || !strings.Contains(err.Error(), c.id) ||
			!strings.Contains(err.Error(), "nothing was fetched") {
			t.Errorf("%s: %v", c.name, err)
		}
		if !Refused(err) || !status(r, remoteName).Refused {
			t.Errorf("%s: the refusal does not read as one (Refused, Status.Refused): serve --sync would retry it as a failure that passes", c.name)
		}
		if got := readTracking(r.gitDir, r.branch, remoteName); got.String() != base {
			t.Errorf("%s: the refused fetch moved the remote-tracking ref to %s", c.name, got)
		}
		if after := packFiles(r); !slices.Equal(after, before) {
			t.Errorf("%s: a refused fetch left files in the pack folder: %v, before %v", c.name, after, before)
		}
		gittest.Fsck(t, r.Dir())
	}
	for _, c := range cases {
		gittest.Git(t, remote, "update-ref", "refs/heads/main", c.commit)
		before := packFiles(a)
		_, err := a.Pull(context.Background(), "origin", SyncOptions{})
		refused(a, "origin", err, c, before)
	}
	// Over git://, with sync.
	url := gitDaemon(t, filepath.Dir(remote)) + "/" + filepath.Base(remote)
	if err := a.AddRemote("daemon", url); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, remote, "update-ref", "refs/heads/main", base)
	if _, err := a.Sync(context.Background(), "daemon", SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, remote, "update-ref", "refs/heads/main", cases[0].commit)
	before := packFiles(a)
	_, err := a.Sync(context.Background(), "daemon", SyncOptions{})
	refused(a, "daemon", err, cases[0], before)
	// A clone: refused, and nothing is left.
	dir := filepath.Join(gittest.TempDir(t), "b")
	if _, _, err := Clone(context.Background(), url, dir, agentOptions(t, "b"), SyncOptions{}); err == nil || !strings.Contains(err.Error(), cases[0].id) {
		t.Errorf("clone: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("a refused clone left its folder")
	}
	if files(t, a)["base.md"] != "base\n" {
		t.Error("the memory changed")
	}
}
