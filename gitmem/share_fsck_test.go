//go:build unix

package gitmem

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// The check of what a fetch brought (checkReceived, gitmem's
// transfer.fsckObjects) reads each commit and tree it brought once and
// no blob (none is a .gitmodules here), by path and over git://. Before,
// it read every object again through ReadObject, blobs too: one decode
// per object, which was most of a pull of many commits.
func TestFetchCheckDecodesNoBlob(t *testing.T) {
	t.Parallel()
	remote := bareRemote(t)
	a := agent(t, remote, "a")
	put(t, a, "a0", "seed.md", "seed\n")
	syncOK(t, a)
	url := gitDaemon(t, filepath.Dir(remote)) + "/" + filepath.Base(remote)
	b, c := agent(t, remote, "b"), agent(t, remote, "c")
	if err := c.AddRemote("daemon", url); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		put(t, a, fmt.Sprint("a", i+1), fmt.Sprintf("notes/n%02d.md", i%20), fmt.Sprintf("note %d\n%s", i, strings.Repeat("a line of the note\n", i)))
	}
	syncOK(t, a)
	for _, x := range []struct {
		r    *Repo
		name string
	}{{b, "origin"}, {c, "daemon"}} {
		u, err := remoteURL(x.r.gitDir, x.name)
		if err != nil {
			t.Fatal(err)
		}
		l := newLink(x.r, x.r.dir, x.r.gitDir, x.r.branch, x.name, u, SyncOptions{})
		before := l.st.Decoded()
		tip, err := l.fetch(context.Background())
		decoded := l.st.Decoded() - before
		l.close()
		if err != nil {
			t.Fatal(err)
		}
		came := map[string]int64{}
		var list strings.Builder
		for _, l := range strings.Split(strings.TrimSpace(gittest.Git(t, x.r.Dir(), "rev-list", "--objects", tip.String(), "--not", "HEAD")), "\n") {
			fmt.Fprintln(&list, strings.Fields(l)[0])
		}
		for _, l := range strings.Split(strings.TrimSpace(gittest.GitIn(t, x.r.Dir(), list.String(), "cat-file", "--batch-check=%(objecttype)")), "\n") {
			came[l]++
		}
		if came["commit"] != 40 || came["blob"] == 0 {
			t.Fatalf("%s: the fetch brought %v", x.name, came)
		}
		if want := came["commit"] + came["tree"]; decoded != want {
			t.Errorf("%s: the fetch decoded %d objects; it brought %v: its commits and trees are %d", x.name, decoded, came, want)
		}
	}
}

// What git fsck --strict refuses is refused also when the remote stores
// it as a delta of a sound object (git repack): a tree entry named .git,
// a .gitmodules whose url reads as an option. The bad object is the
// smaller, so git stores it as the delta; a fetch by path sends it as
// stored, git daemon too. (TestRemoteObjectsGitFsckRefuses has the
// objects loose.)
func TestRemoteObjectsGitFsckRefusesDeltas(t *testing.T) {
	t.Parallel()
	remote := bareRemote(t)
	gittest.Damaged(t, remote, "the remote holds the objects git fsck --strict refuses (the clones are checked)")
	a := agent(t, remote, "a")
	put(t, a, "a1", "base.md", "base\n")
	syncOK(t, a)
	url := gitDaemon(t, filepath.Dir(remote)) + "/" + filepath.Base(remote)
	if err := a.AddRemote("daemon", url); err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSpace(gittest.Git(t, remote, "rev-parse", "main"))
	memTree := plumbing.NewHash(strings.TrimSpace(gittest.Git(t, remote, "rev-parse", "main:memories")))
	blob := func(s string) plumbing.Hash { return hashObject(t, remote, "blob", []byte(s)) }
	commit := func(tree plumbing.Hash, parent string) string {
		return hashObject(t, remote, "commit", []byte(fmt.Sprintf("tree %s\nparent %s\nauthor %s\ncommitter %[3]s\n\nhostile\n", tree, parent, "m <m@x> 1767225600 +0000"))).String()
	}
	var notes []object.TreeEntry
	for i := range 60 {
		notes = append(notes, object.TreeEntry{Name: fmt.Sprintf("note-%02d.md", i), Mode: filemode.Regular, Hash: blob(fmt.Sprintf("note %d\n", i))})
	}
	inner := rawTree(t, remote, object.TreeEntry{Name: "config", Mode: filemode.Regular, Hash: blob("[core]\n")})
	mem := func(es []object.TreeEntry) plumbing.Hash {
		return rawTree(t, remote, object.TreeEntry{Name: "memories", Mode: filemode.Dir, Hash: rawTree(t, remote, es...)})
	}
	dotgit := append([]object.TreeEntry{{Name: ".git", Mode: filemode.Dir, Hash: inner}}, notes[:55]...)
	good1 := commit(mem(notes), base)
	bad1 := commit(mem(dotgit), good1)
	var mods strings.Builder
	for i := range 40 {
		fmt.Fprintf(&mods, "[submodule \"s%02d\"]\n\tpath = s%02d\n\turl = https://example.com/s%02d.git\n", i, i, i)
	}
	withModules := func(text string) plumbing.Hash {
		return rawTree(t, remote, object.TreeEntry{Name: ".gitmodules", Mode: filemode.Regular, Hash: blob(text)},
			object.TreeEntry{Name: "memories", Mode: filemode.Dir, Hash: memTree})
	}
	good2 := commit(withModules(mods.String()), base)
	evil := strings.Replace(mods.String(), "https://example.com/s07.git", "-evil", 1)
	bad2 := commit(withModules(evil[:len(evil)*3/4]), good2)
	gittest.Git(t, remote, "update-ref", "refs/heads/keep1", bad1)
	gittest.Git(t, remote, "update-ref", "refs/heads/keep2", bad2)
	gittest.Git(t, remote, "repack", "-adq")
	deltas := gittest.Git(t, remote, "verify-pack", "-v", mustGlobOne(t, filepath.Join(remote, "objects", "pack", "*.idx")))
	for _, obj := range []string{strings.TrimSpace(gittest.Git(t, remote, "rev-parse", bad1+":memories")), strings.TrimSpace(gittest.Git(t, remote, "rev-parse", bad2+":.gitmodules"))} {
		if !deltaIn(deltas, obj) {
			t.Fatalf("git repack stored %s whole:\n%s", obj, deltas)
		}
	}
	for _, name := range []string{"origin", "daemon"} {
		for _, c := range []struct{ commit, id string }{{bad1, "hasDotgit: contains '.git'"}, {bad2, "gitmodulesUrl: disallowed submodule url: -evil"}} {
			gittest.Git(t, remote, "update-ref", "refs/heads/main", c.commit)
			_, err := a.Pull(context.Background(), name, SyncOptions{})
			if err == nil || !strings.Contains(err.Error(), "its commit "+c.commit[:7]) || !strings.Contains(err.Error(), c.id) || !Refused(err) {
				t.Errorf("%s: %v", name, err)
			}
			if got := readTracking(a.gitDir, a.branch, name); !got.IsZero() && got.String() != base {
				t.Errorf("%s: the refused fetch moved the remote-tracking ref to %s", name, got)
			}
		}
	}
	gittest.Fsck(t, a.Dir())
}

// deltaIn reports whether git verify-pack -v's output stores obj as a
// delta (its line names a base).
func deltaIn(verify, obj string) bool {
	for _, l := range strings.Split(verify, "\n") {
		if f := strings.Fields(l); len(f) == 7 && f[0] == obj {
			return true
		}
	}
	return false
}

func mustGlobOne(t *testing.T, pattern string) string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) != 1 {
		t.Fatalf("%s: %v %v", pattern, m, err)
	}
	return m[0]
}

// A git:// server that sends a pack whose objects do not connect (commit
// C and its root tree, but not the memories/ tree that root names) is
// refused at the fetch, as git's connectivity check refuses it: a pull
// and a sync fail naming the missing tree, no pack stays, no ref moves,
// and git fsck --strict stays clean. Before, the pull failed later
// ("compare the remote's tree failed: object not found") with the
// remote-tracking ref already on C: git fsck --strict, git gc and gitmem
// gc --full failed until the remote was removed. (A path remote and git
// daemon never send such a pack; hostileDaemon does.)
func TestFetchRefusesAnIncompletePack(t *testing.T) {
	t.Parallel()
	remote, a, base := sharedBase(t)
	blob := hashObject(t, remote, "blob", []byte("new\n"))
	mem := rawTree(t, remote, object.TreeEntry{Name: "base.md", Mode: filemode.Regular, Hash: hashObject(t, remote, "blob", []byte("base\n"))},
		object.TreeEntry{Name: "new.md", Mode: filemode.Regular, Hash: blob})
	root := rawTree(t, remote, object.TreeEntry{Name: "memories", Mode: filemode.Dir, Hash: mem})
	c := hashObject(t, remote, "commit", []byte(fmt.Sprintf("tree %s\nparent %s\nauthor m <m@x> 1767225600 +0000\ncommitter m <m@x> 1767225600 +0000\n\nincomplete\n", root, base)))
	pack := gittest.GitIn(t, remote, fmt.Sprintf("%s\n%s\n%s\n", c, root, blob), "pack-objects", "--stdout", "-q")
	if err := a.AddRemote("hostile", hostileDaemon(t, c, pack)); err != nil {
		t.Fatal(err)
	}
	packs := func() []string {
		m, _ := filepath.Glob(filepath.Join(a.Dir(), ".git", "objects", "pack", "*"))
		return m
	}
	before := packs()
	for _, op := range []func(context.Context, string, SyncOptions) (SyncResult, error){a.Pull, a.Sync} {
		_, err := op(context.Background(), "hostile", SyncOptions{})
		if err == nil || !strings.Contains(err.Error(), "the remote did not send the tree "+mem.String()) || !strings.Contains(err.Error(), "nothing was fetched") || !Refused(err) {
			t.Errorf("an incomplete pack: %v", err)
		}
		if got := readTracking(a.gitDir, a.branch, "hostile"); !got.IsZero() {
			t.Errorf("the refused fetch moved the remote-tracking ref to %s", got)
		}
		if after := packs(); !slices.Equal(after, before) {
			t.Errorf("a refused fetch left files in the pack folder: %v, before %v", after, before)
		}
		gittest.Fsck(t, a.Dir())
	}
	if head, _ := a.Commit(context.Background(), "HEAD"); head.Hash != base {
		t.Errorf("HEAD moved to %s", head.Hash)
	}
}

// hostileDaemon serves, over git:// (protocol v0) on loopback, one
// branch main at tip, and answers every fetch with pack as it is,
// whatever was asked. It returns the URL.
func hostileDaemon(t *testing.T, tip plumbing.Hash, pack string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	pkt := func(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				read := func() (string, error) {
					var n [4]byte
					if _, err := io.ReadFull(r, n[:]); err != nil {
						return "", err
					}
					size, err := strconv.ParseUint(string(n[:]), 16, 16)
					if err != nil || size == 0 {
						return "", err // a flush
					}
					line := make([]byte, size-4)
					_, err = io.ReadFull(r, line)
					return string(line), err
				}
				if _, err := read(); err != nil { // git-upload-pack /path\0host=...\0
					return
				}
				io.WriteString(conn, pkt(tip.String()+" refs/heads/main\x00ofs-delta\n")+"0000")
				for {
					line, err := read()
					if err != nil {
						return
					}
					if line == "done\n" {
						break
					}
				}
				io.WriteString(conn, pkt("NAK\n")+pack)
			}()
		}
	}()
	return "git://" + ln.Addr().String() + "/memory.git"
}
