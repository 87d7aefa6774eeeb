package gitmem

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// hashObject writes a raw object into a repository with the git CLI,
// malformed or not (--literally).
func hashObject(t *testing.T, dir, kind string, data []byte) plumbing.Hash {
	t.Helper()
	cmd := exec.Command("git", "-C", dir, "hash-object", "-w", "--literally", "-t", kind, "--stdin")
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git hash-object: %v", err)
	}
	return plumbing.NewHash(strings.TrimSpace(string(out)))
}

func rawTree(t *testing.T, dir string, entries ...object.TreeEntry) plumbing.Hash {
	return hashObject(t, dir, "tree", gd.EncodeEntries(entries))
}

// A remote that holds what no memory may: a symlink to /etc, a gitlink,
// a .gitattributes, a ".." entry, a 50 MiB file, an executable, files
// outside memories/. Pulling or cloning it takes the one good file and
// the executable's content, and leaves everything else out, named in the
// merge commit; nothing unsafe reaches the worktree or the tree.
func TestHostileRemote(t *testing.T) {
	remote := bareRemote(t)
	a := agent(t, remote, "a")
	put(t, a, "a1", "base.md", "base\n")
	syncOK(t, a)
	base := strings.TrimSpace(gitRun(t, remote, "rev-parse", "main"))

	big := make([]byte, 50<<20)
	rand.Read(big)
	blob := func(s string) plumbing.Hash { return hashObject(t, remote, "blob", []byte(s)) }
	inner := rawTree(t, remote, object.TreeEntry{Name: "x.md", Mode: filemode.Regular, Hash: blob("escaped\n")})
	mem := []object.TreeEntry{
		{Name: "..", Mode: filemode.Dir, Hash: inner},
		{Name: ".gitattributes", Mode: filemode.Regular, Hash: blob("* filter=evil\n")},
		{Name: "base.md", Mode: filemode.Regular, Hash: blob("base\n")},
		{Name: "big.md", Mode: filemode.Regular, Hash: hashObject(t, remote, "blob", big)},
		{Name: "etc", Mode: filemode.Symlink, Hash: blob("/etc")},
		{Name: "ok.md", Mode: filemode.Regular, Hash: blob("a good file\n")},
		{Name: "run.sh", Mode: filemode.Executable, Hash: blob("echo hi\n")},
		{Name: "sub", Mode: filemode.Submodule, Hash: plumbing.NewHash(base)},
	}
	gd.SortEntries(mem)
	mem = append(mem, object.TreeEntry{Name: "base.md/x", Mode: filemode.Regular, Hash: blob("a name with a slash\n")},
		object.TreeEntry{Name: "twin.md", Mode: filemode.Regular, Hash: blob("one twin\n")},
		object.TreeEntry{Name: "twin.md", Mode: filemode.Dir, Hash: inner})
	root := []object.TreeEntry{
		{Name: ".gitmodules", Mode: filemode.Regular, Hash: blob("[submodule \"x\"]\n\tpath = memories/sub\n\turl = ../evil\n")},
		{Name: "README.md", Mode: filemode.Regular, Hash: blob("readme\n")},
		{Name: "memories", Mode: filemode.Dir, Hash: rawTree(t, remote, mem...)},
	}
	gd.SortEntries(root)
	commit := fmt.Sprintf("tree %s\nparent %s\nauthor m <m@x> 1767225600 +0000\ncommitter m <m@x> 1767225600 +0000\n\nhostile\n",
		rawTree(t, remote, root...), base)
	evil := hashObject(t, remote, "commit", []byte(commit))
	gitRun(t, remote, "update-ref", "refs/heads/main", evil.String(), base)

	check := func(r *Repo, res SyncResult) {
		t.Helper()
		r.Flush()
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
		tree := gitRun(t, r.Dir(), "ls-tree", "-r", "HEAD")
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
		want := []string{".gitmodules (outside memories/)", "README.md (outside memories/)",
			"memories/../x.md (not a valid memory path)", "memories/.gitattributes (not a valid memory path)", "memories/base.md/x (not a valid memory path)",
			"memories/big.md (52428800 bytes, over the limit of 1048576 per file)", "memories/etc (a symlink)", "memories/sub (a submodule)", "memories/twin.md (named twice in its folder)"}
		if fmt.Sprint(ignored) != fmt.Sprint(want) {
			t.Errorf("ignored:\n%s\nwant\n%s", strings.Join(ignored, "\n"), strings.Join(want, "\n"))
		}
		msg := gitRun(t, r.Dir(), "log", "-1", "--format=%B")
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
	b, res, err := Clone(context.Background(), remote, filepath.Join(t.TempDir(), "b"), agentOptions(t, "b"), SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	check(b, res)

	// A fetch larger than the limit is refused, and stores nothing.
	gitRun(t, remote, "update-ref", "refs/heads/main", hashObject(t, remote, "commit", []byte(strings.Replace(commit, "hostile", "again", 1))).String())
	d := agent(t, bareRemote(t), "d")
	d.AddRemote("hostile", remote)
	_, err = d.Pull(context.Background(), "hostile", SyncOptions{MaxFetchBytes: 1 << 20})
	var tl *gd.TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("a 50 MiB fetch under a 1 MiB limit: %v", err)
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
	gitRun(t, remote, "update-ref", "refs/heads/main", hashObject(t, remote, "commit", []byte(huge)).String())
	before, _ := d.Commit("HEAD")
	_, err = d.Pull(context.Background(), "hostile", SyncOptions{})
	if err == nil || !strings.Contains(err.Error(), "has a message of 2097153 bytes, over the limit of 1048576; nothing was merged") {
		t.Fatalf("a 2 MiB commit message: %v", err)
	}
	if after, _ := d.Commit("HEAD"); after.Hash != before.Hash {
		t.Error("a refused merge moved the branch")
	}
}
