package gitmem

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

// bareRemote makes an empty bare repository with the git CLI, as an
// operator makes a shared remote.
func bareRemote(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(gittest.TempDir(t), "shared.git")
	gittest.Git(t, "", "init", "-q", "--bare", "--initial-branch=main", dir)
	return dir
}

var agentClock atomic.Int64

// agentOptions gives each agent its own name and a clock that moves on a
// second at every commit, shared by all agents of a test (commit order
// and times stay realistic, hashes reproducible within a run).
func agentOptions(t testing.TB, name string) Options {
	return Options{
		Author:   Signature{name, name + "@agents.example"},
		Operator: Signature{"op-" + name, "op@example.com"},
		Now: func() time.Time {
			return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(agentClock.Add(1)) * time.Second)
		},
		Logf:  func(f string, a ...any) { t.Logf(name+": "+f, a...) },
		hooks: &testHooks{env: new(gd.Env)}, // for failAt
	}
}

// agent starts a memory that shares remote: a clone of it.
func agent(t testing.TB, remote, name string) *Repo {
	t.Helper()
	return agentWith(t, remote, name, nil)
}

// agentWith is agent with the test's seams into the memory.
func agentWith(t testing.TB, remote, name string, h *testHooks) *Repo {
	t.Helper()
	opt := agentOptions(t, name)
	if h != nil {
		opt.hooks = h
	}
	r, _, err := Clone(context.Background(), remote, filepath.Join(gittest.TempDir(t), name), opt, SyncOptions{})
	if err != nil {
		t.Fatalf("clone for %s: %v", name, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// twoAgents makes a shared remote and two agents on it, a and b, from an
// empty memory.
func twoAgents(t testing.TB) (remote string, a, b *Repo) {
	t.Helper()
	remote = bareRemote(t)
	a = agent(t, remote, "a")
	syncOK(t, a)
	return remote, a, agent(t, remote, "b")
}

func put(t testing.TB, r *Repo, id, p, content string) {
	t.Helper()
	_, err := r.Update(context.Background(), Meta{Subject: "memory: create /memories/" + p, Trailers: []Trailer{{TrailerToolUseID, id}, {TrailerCommand, "create"}, {TrailerPath, "/memories/" + p}}},
		func(tx *Tx) error { return tx.WriteFile(p, []byte(content)) })
	if err != nil {
		t.Fatal(err)
	}
}

func del(t testing.TB, r *Repo, id, p string) {
	t.Helper()
	_, err := r.Update(context.Background(), Meta{Subject: "memory: delete /memories/" + p, Trailers: []Trailer{{TrailerToolUseID, id}, {TrailerCommand, "delete"}, {TrailerPath, "/memories/" + p}}},
		func(tx *Tx) error { return tx.Remove(p) })
	if err != nil {
		t.Fatal(err)
	}
}

func mv(t testing.TB, r *Repo, id, from, to string) {
	t.Helper()
	_, err := r.Update(context.Background(), Meta{Subject: "memory: rename", Trailers: []Trailer{{TrailerToolUseID, id}, {TrailerCommand, "rename"},
		{TrailerPath, "/memories/" + from}, {TrailerNewPath, "/memories/" + to}}},
		func(tx *Tx) error { return tx.Rename(from, to) })
	if err != nil {
		t.Fatal(err)
	}
}

func syncOK(t testing.TB, r *Repo) SyncResult {
	t.Helper()
	res, err := r.Sync(context.Background(), "origin", SyncOptions{})
	if err != nil {
		t.Fatalf("sync %s: %v", filepath.Base(r.Dir()), err)
	}
	return res
}

// files reads every memory file at HEAD.
func files(t testing.TB, r *Repo) map[string]string {
	t.Helper()
	v, err := r.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	walkFiles(lookup(v.root, memDir), "", func(p string, n *node) {
		data, err := v.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(data)
	})
	return out
}

// onDisk reads every file of the worktree's memories/ folder.
func onDisk(t testing.TB, r *Repo) map[string]string {
	t.Helper()
	out := map[string]string{}
	root := filepath.Join(r.Dir(), memDir)
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if d.Type().IsRegular() {
			data, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(root, p)
			out[filepath.ToSlash(rel)] = string(data)
		}
		return nil
	})
	return out
}

func TestPushPullFastForward(t *testing.T) {
	t.Parallel()
	remote := bareRemote(t)
	a := agent(t, remote, "a")
	put(t, a, "toolu_a1", "prefs.md", "tea\n")
	put(t, a, "toolu_a2", "notes/x.md", "x\n")
	res, err := a.Push(context.Background(), "origin", SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pushed != 3 { // the init commit and two changes
		t.Errorf("pushed %d commits, want 3", res.Pushed)
	}
	b := agent(t, remote, "b")
	if got := files(t, b); got["prefs.md"] != "tea\n" || got["notes/x.md"] != "x\n" {
		t.Fatalf("the clone holds %v", got)
	}
	if got := onDisk(t, b); got["prefs.md"] != "tea\n" || len(got) != 2 {
		t.Fatalf("the clone's worktree holds %v", got)
	}
	put(t, b, "toolu_b1", "prefs.md", "green tea\n")
	if _, err := b.Push(context.Background(), "origin", SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err = a.Pull(context.Background(), "origin", SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.FastForward == "" || res.Merge != "" {
		t.Fatalf("pull: %+v, want a fast-forward", res)
	}
	a.Flush(context.Background()) // the worktree follows a commit in the background
	if got := onDisk(t, a); got["prefs.md"] != "green tea\n" {
		t.Fatalf("a's worktree after the pull: %v", got)
	}
	ha, _ := a.Commit(context.Background(), "HEAD")
	hb, _ := b.Commit(context.Background(), "HEAD")
	if ha.Hash != hb.Hash {
		t.Fatalf("heads differ after a fast-forward: %s %s", ha.Hash, hb.Hash)
	}
	// b's tool_use id counts as applied in a: a retry is not applied twice.
	_, err = a.Update(context.Background(), Meta{Trailers: []Trailer{{TrailerToolUseID, "toolu_b1"}}}, func(tx *Tx) error { return tx.WriteFile("prefs.md", []byte("again\n")) })
	var ae *AppliedError
	if !errors.As(err, &ae) || ae.Commit.Hash != hb.Hash {
		t.Fatalf("retry of a merged-in id: %v", err)
	}
	// Nothing to do: up to date, no commit.
	res, err = a.Sync(context.Background(), "origin", SyncOptions{})
	if err != nil || !res.UpToDate || res.Pushed != 0 {
		t.Fatalf("second sync: %+v %v", res, err)
	}
	st, err := a.Status(context.Background(), "origin")
	if err != nil || st.Ahead != 0 || st.Behind != 0 || st.LastError != "" || st.LastSync.IsZero() {
		t.Fatalf("status: %+v %v", st, err)
	}
	gittest.Fsck(t, remote)
	gittest.Fsck(t, a.Dir())
	if out := gittest.Git(t, a.Dir(), "status", "--porcelain"); out != "" {
		// the index is written a second after the last change
		a.Flush(context.Background())
		if out := gittest.Git(t, a.Dir(), "status", "--porcelain"); out != "" {
			t.Fatalf("git status after a pull:\n%s", out)
		}
	}
}

// writeVersions commits versions from, from+1, ... up to to (not
// included) of 20 files in 4 folders, each a commit (delta chains once
// packed): "line V of file I", 40 times.
func writeVersions(t testing.TB, r *Repo, from, to int) {
	t.Helper()
	for v := from; v < to; v++ {
		_, err := r.Update(context.Background(), Meta{Subject: fmt.Sprint("v", v)}, func(tx *Tx) error {
			for i := range 20 {
				if err := tx.WriteFile(fmt.Sprintf("d%d/f%d.md", i%4, i), []byte(strings.Repeat(fmt.Sprintf("line %d of file %d\n", v, i), 40))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// versionsToPush makes a memory on a shared remote that holds the first
// of writeVersions' versions, and five more not pushed yet (for a test
// of reading packs, which are not mapped on Windows).
func versionsToPush(t *testing.T) (remote string, a *Repo) {
	if runtime.GOOS == "windows" {
		t.Skip("packs are not mapped here")
	}
	remote = bareRemote(t)
	a = agent(t, remote, "a")
	writeVersions(t, a, 0, 1)
	syncOK(t, a)
	writeVersions(t, a, 1, 6)
	return remote, a
}

// The worktree follows a pull with the blobs it writes read beforehand,
// in the order of the packs, mapped: not each as its file is written,
// which opened the pack again and read every link of the blob's delta
// chain with a pread (196,000 of them for a pull of 10,000 commits that
// wrote 6,367 files).
func TestPullWritesTheWorktreeFromBlobsReadMapped(t *testing.T) {
	t.Parallel()
	remote, a := versionsToPush(t)
	var b *Repo
	var writes, first, last atomic.Int64 // the files written, the pack entries read with a pread at the first write and at the last
	h := &testHooks{env: new(gd.Env), exchange: func(q string, open bool) {
		if !open {
			return
		}
		n := b.objects.st.PackFileReads()
		if writes.Add(1) == 1 {
			first.Store(n)
		}
		last.Store(n)
	}}
	b = agentWith(t, remote, "b", h)
	if _, err := a.Push(context.Background(), "origin", SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, remote, "repack", "-adf", "-q")
	if err := b.Flush(context.Background()); err != nil { // the clone's own writes done
		t.Fatal(err)
	}
	writes.Store(0)
	if res, err := b.Pull(context.Background(), "origin", SyncOptions{}); err != nil || res.FastForward == "" {
		t.Fatalf("pull: %+v %v", res, err)
	}
	if err := b.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := onDisk(t, b); len(got) != 20 || got["d1/f5.md"] != strings.Repeat("line 5 of file 5\n", 40) {
		t.Fatalf("b's worktree after the pull: %d files, d1/f5.md %q", len(got), got["d1/f5.md"])
	}
	if n := writes.Load(); n != 20 {
		t.Fatalf("the pull wrote %d files, not 20: not a test of the worktree's writes", n)
	}
	if n := last.Load() - first.Load(); n != 0 {
		t.Errorf("between the first file written and the last, %d pack entries were read with a system call each; want the blobs read mapped before", n)
	}
}

// A pull reads the packs mapped, as git does: the merge's walk of the
// history and of what changed (its own View of the store), and the tree
// the memory moves to (the Repo's store), where each pack entry was a
// pread (31,000 for a pull of 10,000 commits).
func TestPullReadsThePacksMapped(t *testing.T) {
	t.Parallel()
	remote, a := versionsToPush(t)
	var links []*gd.Store
	b := agentWith(t, remote, "b", &testHooks{env: new(gd.Env), link: func(st *gd.Store) { links = append(links, st) }})
	if _, err := a.Push(context.Background(), "origin", SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, remote, "repack", "-adf", "-q")
	if err := b.Close(); err != nil { // b's objects in git's packs, none held in memory
		t.Fatal(err)
	}
	b, err := Open(context.Background(), b.Dir(), b.opt)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	links = nil
	before := b.objects.st.PackFileReads()
	if res, err := b.Pull(context.Background(), "origin", SyncOptions{}); err != nil || res.FastForward == "" || res.Merged != 5 {
		t.Fatalf("pull: %+v %v", res, err)
	}
	if len(links) != 1 {
		t.Fatalf("the pull made %d links", len(links))
	}
	if n := links[0].PackFileReads(); n != 0 {
		t.Errorf("the pull's merge read %d pack entries with a system call each; want them read mapped", n)
	}
	if n := b.objects.st.PackFileReads() - before; n != 0 {
		t.Errorf("the pull read %d pack entries of the memory's store with a system call each; want them read mapped", n)
	}
}

func TestPushRefusesToOverwrite(t *testing.T) {
	t.Parallel()
	remote, a, b := twoAgents(t)
	put(t, a, "toolu_a1", "a.md", "a\n")
	put(t, b, "toolu_b1", "b.md", "b\n")
	syncOK(t, a)
	before := gittest.Git(t, remote, "rev-parse", "main")
	_, err := b.Push(context.Background(), "origin", SyncOptions{})
	if !errors.Is(err, ErrNonFastForward) {
		t.Fatalf("push over another agent's commit: %v, want ErrNonFastForward", err)
	}
	if after := gittest.Git(t, remote, "rev-parse", "main"); after != before {
		t.Fatal("a refused push moved the remote")
	}
	res := syncOK(t, b)
	if res.Merge == "" || res.Pushed == 0 {
		t.Fatalf("sync after a refused push: %+v", res)
	}
	syncOK(t, a)
	if fa, fb := files(t, a), files(t, b); fa["a.md"] != "a\n" || fa["b.md"] != "b\n" || fmt.Sprint(fa) != fmt.Sprint(fb) {
		t.Fatalf("after sync: a %v, b %v", fa, fb)
	}
	// A real two-parent merge; git sees both sides.
	m, _ := b.Commit(context.Background(), res.Merge)
	if len(m.Parents) != 2 || m.Trailer(TrailerCommand) != "merge" {
		t.Fatalf("merge commit %+v", m)
	}
	log := gittest.Git(t, remote, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)", "main")
	for _, id := range []string{"toolu_a1", "toolu_b1"} {
		if !strings.Contains(log, id) {
			t.Errorf("the remote's history lacks %s:\n%s", id, log)
		}
	}
	gittest.Fsck(t, remote)
}

// Every kind of conflict, resolved without losing either side.
func TestMergeConflicts(t *testing.T) {
	t.Parallel()
	remote := bareRemote(t)
	a := agent(t, remote, "a")
	put(t, a, "s0", "lines.md", "one\ntwo\nthree\nfour\nfive\n")
	put(t, a, "s1", "same.md", "title\nbody\n")
	put(t, a, "s2", "editdel.md", "keep me\n")
	put(t, a, "s3", "deledit.md", "keep me too\n")
	put(t, a, "s4", "moved.md", "first\nsecond\n")
	put(t, a, "s5", "movedboth.md", "x\n")
	syncOK(t, a)
	b := agent(t, remote, "b")

	put(t, a, "a1", "lines.md", "ONE\ntwo\nthree\nfour\nfive\n") // a: first line
	put(t, b, "b1", "lines.md", "one\ntwo\nthree\nfour\nFIVE\n") // b: last line
	put(t, a, "a2", "same.md", "title\nbody by a\n")             // overlap
	put(t, b, "b2", "same.md", "title\nbody by b\n")             //
	put(t, a, "a3", "editdel.md", "keep me, edited\n")           // a edits
	del(t, b, "b3", "editdel.md")                                // b deletes
	del(t, a, "a4", "deledit.md")                                // a deletes
	put(t, b, "b4", "deledit.md", "keep me too, edited\n")       // b edits
	mv(t, a, "a5", "moved.md", "archive/moved.md")               // a renames
	put(t, b, "b5", "moved.md", "first\nsecond, edited by b\n")  // b edits the old path
	put(t, a, "a6", "new.md", "a's new file\n")                  // both create
	put(t, b, "b6", "new.md", "b's new file\n")                  //
	mv(t, a, "a7", "movedboth.md", "m1.md")                      // both rename, differently
	mv(t, b, "b7", "movedboth.md", "m2.md")                      //
	put(t, b, "b8", "other.md", "only b\n")                      // different files

	syncOK(t, a)
	res := syncOK(t, b)
	syncOK(t, a)
	fa, fb := files(t, a), files(t, b)
	if fmt.Sprint(fa) != fmt.Sprint(fb) {
		t.Fatalf("the agents differ:\na %v\nb %v", fa, fb)
	}
	for _, p := range []string{"same.md", "new.md"} {
		t.Logf("%s:\n%s", p, fa[p])
	}
	if fa["lines.md"] != "ONE\ntwo\nthree\nfour\nFIVE\n" {
		t.Errorf("non-overlapping edits: %q", fa["lines.md"])
	}
	short := res.Merge[:7]
	wantSame := "title\n<<<<<<< local " + fa["same.md"][strings.Index(fa["same.md"], "local ")+6:strings.Index(fa["same.md"], "local ")+13] + "\nbody by b\n=======\nbody by a\n>>>>>>> origin/main "
	if !strings.HasPrefix(fa["same.md"], wantSame) || !strings.Contains(fa["same.md"], "body by a") || !strings.Contains(fa["same.md"], "body by b") {
		t.Errorf("overlapping edits:\n%s", fa["same.md"])
	}
	_ = short
	if fa["editdel.md"] != "keep me, edited\n" {
		t.Errorf("edit vs delete: %q", fa["editdel.md"])
	}
	if fa["deledit.md"] != "keep me too, edited\n" {
		t.Errorf("delete vs edit: %q", fa["deledit.md"])
	}
	if _, ok := fa["moved.md"]; ok || fa["archive/moved.md"] != "first\nsecond, edited by b\n" {
		t.Errorf("rename vs edit: %v", fa)
	}
	if !strings.Contains(fa["new.md"], "a's new file") || !strings.Contains(fa["new.md"], "b's new file") || !strings.Contains(fa["new.md"], "=======") {
		t.Errorf("both created: %q", fa["new.md"])
	}
	if fa["m1.md"] != "x\n" || fa["m2.md"] != "x\n" {
		t.Errorf("rename vs rename: %v", fa)
	}
	if fa["other.md"] != "only b\n" {
		t.Errorf("different files: %v", fa)
	}
	var kinds []string
	for _, c := range res.Conflicts {
		kinds = append(kinds, c.Kind+" "+c.Path)
	}
	slices.Sort(kinds)
	want := []string{"add/add new.md", "content same.md", "delete/edit editdel.md", "edit/delete deledit.md", "edit/rename archive/moved.md", "rename/rename m1.md"}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("conflicts %v\nwant      %v", kinds, want)
	}
	// The merge commit names every conflict; log --conflicts finds it.
	var found []Commit
	if err := b.Log(context.Background(), LogOptions{Conflicts: true}, nil, func(c Commit) error { found = append(found, c); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Hash != res.Merge {
		t.Fatalf("log --conflicts: %v", found)
	}
	var trailers []string
	for _, tr := range found[0].Trailers {
		if tr.Key == TrailerConflict {
			trailers = append(trailers, tr.Value)
		}
	}
	if len(trailers) != len(want) {
		t.Errorf("conflict trailers %v", trailers)
	}
	gittest.Fsck(t, remote)
}

// A file one side renames onto a path where the other side wrote a file
// keeps both, whatever the other side did to the renamed file (deleted,
// renamed elsewhere, edited); and a file the remote adds where the memory
// renamed a file it edited keeps the edit. Each lost a side once
// (TestAgentsShareAMemory found the first).
func TestMergeKeepsWhatARenameLandsOn(t *testing.T) {
	t.Parallel()
	remote := bareRemote(t)
	a := agent(t, remote, "a")
	put(t, a, "s0", "del.md", "base of del\n")
	put(t, a, "s1", "both.md", "base of both\n")
	put(t, a, "s2", "edit.md", "edit one\nedit two\n")
	put(t, a, "s3", "moved.md", "moved one\nmoved two\n")
	syncOK(t, a)
	b := agent(t, remote, "b")

	del(t, a, "a1", "del.md") // delete/rename onto a's new file
	put(t, a, "a2", "del-target.md", "a wrote del-target\n")
	mv(t, b, "b1", "del.md", "del-target.md")

	mv(t, a, "a3", "both.md", "both-a.md") // rename/rename, b's target new on a
	put(t, a, "a4", "both-b.md", "a wrote both-b\n")
	mv(t, b, "b3", "both.md", "both-b.md")

	put(t, a, "a5", "edit.md", "edit one by a\nedit two\n") // edit/rename onto a's new file
	put(t, a, "a6", "edit-target.md", "a wrote edit-target\n")
	mv(t, b, "b5", "edit.md", "edit-target.md")

	mv(t, a, "a7", "moved.md", "moved-target.md") // rename/edit, b adds the target
	put(t, b, "b7", "moved.md", "moved one\nmoved two by b\n")
	put(t, b, "b8", "moved-target.md", "b wrote moved-target\n")

	syncOK(t, b)
	res := syncOK(t, a)
	syncOK(t, b)
	fa, fb := files(t, a), files(t, b)
	if fmt.Sprint(fa) != fmt.Sprint(fb) {
		t.Fatalf("the agents differ:\na %v\nb %v", fa, fb)
	}
	for p, lines := range map[string][]string{
		"del-target.md":   {"a wrote del-target", "base of del"},
		"both-a.md":       {"base of both"},
		"both-b.md":       {"a wrote both-b", "base of both"},
		"edit-target.md":  {"a wrote edit-target", "edit one by a", "edit two"},
		"moved-target.md": {"b wrote moved-target", "moved one", "moved two by b"},
	} {
		for _, l := range lines {
			if !strings.Contains(fa[p], l+"\n") {
				t.Errorf("%s lacks %q:\n%s", p, l, fa[p])
			}
		}
	}
	for _, p := range []string{"del.md", "both.md", "edit.md", "moved.md"} {
		if _, ok := fa[p]; ok {
			t.Errorf("%s is still there: %q", p, fa[p])
		}
	}
	var kinds []string
	for _, c := range res.Conflicts {
		kinds = append(kinds, c.Kind+" "+c.Path)
	}
	slices.Sort(kinds)
	want := []string{"add/add both-b.md", "add/add del-target.md", "add/add edit-target.md", "add/add moved-target.md",
		"delete/rename del-target.md", "edit/rename edit-target.md", "rename/edit moved-target.md", "rename/rename both-b.md"}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("conflicts %v\nwant      %v", kinds, want)
	}
	gittest.Fsck(t, remote)
}

// keepsAll checks that both agents hold the same files and every line.
func keepsAll(t *testing.T, a, b *Repo, lines ...string) {
	t.Helper()
	fa, fb := files(t, a), files(t, b)
	if fmt.Sprint(fa) != fmt.Sprint(fb) {
		t.Errorf("agents differ:\n%q\n%q", fa, fb)
	}
	all := fmt.Sprint(fa)
	for _, l := range lines {
		if !strings.Contains(all, l) {
			t.Errorf("lost %q: %q", l, fa)
		}
	}
}

// A file/folder clash is written beside under a name nothing holds: not
// over a file of the memory's, of the remote's, or of an earlier clash;
// and a name is always found (ten taken, or one too long to suffix).
// Each case lost a file or stopped every sync once (an attacker's pass).
// a (the merging side) and b each write files; b syncs, a merges, b pulls.
func TestMergeBesideNameIsFree(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ a, b map[string]string }{
		"remote file onto local x.md~origin": {
			a: map[string]string{"x.md/in.md": "a in\n", "x.md~origin": "a tilde\n"},
			b: map[string]string{"x.md": "b file\n"}},
		"remote folder onto local x.md~origin/in.md": {
			a: map[string]string{"x.md": "a file\n", "x.md~origin/in.md": "a tilde in\n"},
			b: map[string]string{"x.md/in.md": "b in\n"}},
		"remote's own x.md~origin": {
			a: map[string]string{"x.md/in.md": "a in\n"},
			b: map[string]string{"x.md": "b file\n", "x.md~origin": "b tilde\n"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, a, b := twoAgents(t)
			var want []string
			for p, s := range c.a {
				put(t, a, "a"+p, p, s)
				want = append(want, s)
			}
			for p, s := range c.b {
				put(t, b, "b"+p, p, s)
				want = append(want, s)
			}
			syncOK(t, b)
			syncOK(t, a)
			syncOK(t, b)
			keepsAll(t, a, b, want...)
		})
	}
}

// A second clash at x.md keeps the x.md~origin the first made.
func TestMergeSecondClashKeepsTheFirst(t *testing.T) {
	t.Parallel()
	_, a, b := twoAgents(t)
	put(t, a, "a1", "x.md/in.md", "a in\n")
	put(t, b, "b1", "x.md", "b first file\n")
	syncOK(t, b)
	syncOK(t, a) // x.md~origin = "b first file"
	syncOK(t, b)
	del(t, a, "a2", "x.md") // a: folder -> file
	put(t, a, "a3", "x.md", "a second file\n")
	put(t, b, "b2", "x.md/other.md", "b other\n") // b: adds to the folder
	syncOK(t, a)
	syncOK(t, b) // clash 2 overwrites x.md~origin
	syncOK(t, a)
	keepsAll(t, a, b, "b first file", "a second file", "b other")
}

// The first beside names are taken, or too long: a free, valid one is
// found, and the sync goes through.
func TestMergeBesideNameAlwaysFound(t *testing.T) {
	t.Parallel()
	for name, taken := range map[string]int{"ten names taken": 10, "name too long": -1} {
		t.Run(name, func(t *testing.T) {
			_, a, b := twoAgents(t)
			x := "x.md"
			if taken < 0 {
				x = strings.Repeat("n", 252) + ".md"
			}
			put(t, a, "a0", x, "a file\n")
			for i := 1; i <= taken; i++ {
				p := x + "~origin"
				if i > 1 {
					p += fmt.Sprint("-", i)
				}
				put(t, a, fmt.Sprint("a", i), p, "taken\n")
			}
			put(t, b, "b1", x+"/in.md", "b in\n")
			syncOK(t, b)
			res, err := a.Sync(context.Background(), "origin", SyncOptions{})
			if err != nil {
				t.Fatalf("sync: %v", err)
			}
			syncOK(t, b)
			keepsAll(t, a, b, "a file", "b in")
			want := x + "~origin/in.md"
			if taken > 0 {
				want = x + fmt.Sprintf("~origin-%d/in.md", taken+1)
			} else {
				want = strings.Repeat("n", 252-len("~origin")+len(".md")) + "~origin/in.md"
			}
			if len(res.Conflicts) != 1 || res.Conflicts[0] != (MergeConflict{"file/folder", want}) {
				t.Errorf("conflicts %v, want file/folder %s", res.Conflicts, want)
			}
		})
	}
}

// A clash deep in a path near the length limit finds a valid name (the
// limit counts /memories/), cutting the clashing name or else the file's
// own; where nothing fits, the remote's file is left out and named, and
// the sync goes on. The files of one clashing folder go to one beside
// folder. (An attacker's pass: the first stopped every sync, the second
// scattered a folder over notes~origin, ~origin-2, ~origin-3.)
func TestMergeBesideNearTheLimits(t *testing.T) {
	t.Parallel()
	seg := func(c string, n int) string { return strings.Repeat(c, n) }
	for _, c := range []struct {
		p    string // the remote's file; its first component is a file here
		kept bool
	}{
		{"d/" + seg("s", 200) + "/" + seg("s", 200) + "/" + seg("s", 200) + "/" + seg("s", 200) + "/" + seg("f", 208), true}, // 1014 bytes, the most: the file's name is cut
		{seg("L", 250) + "/" + seg("m", 250) + "/" + seg("n", 250) + "/" + seg("o", 250), true},                              // the clashing name is cut
		{"d/" + seg("s", 200) + "/" + seg("s", 200) + "/" + seg("s", 200) + "/" + seg("s", 200) + "/" + seg("s", 200) + "/" + seg("s", 5) + "/f", false},
	} {
		if n := len(policy.Display(c.p)); n > policy.MaxPathBytes {
			t.Fatalf("the case is %d bytes long, over the limit", n)
		}
		_, a, b := twoAgents(t)
		put(t, a, "a1", c.p[:strings.IndexByte(c.p, '/')], "a file\n")
		put(t, b, "b1", c.p, "b deep\n")
		syncOK(t, b)
		res, err := a.Sync(context.Background(), "origin", SyncOptions{})
		if err != nil {
			t.Fatalf("a clash at %d bytes: %v", len(c.p), err)
		}
		syncOK(t, b)
		if c.kept {
			keepsAll(t, a, b, "a file", "b deep")
		} else if len(res.Ignored) != 1 || !strings.HasSuffix(res.Ignored[0].Reason, "no name beside it fits") {
			t.Errorf("a clash at %d bytes with no room: ignored %v", len(c.p), res.Ignored)
		}
	}

	_, a, b := twoAgents(t)
	put(t, a, "a1", "notes", "a file\n")
	put(t, b, "b1", "notes/x.md", "x\n")
	put(t, b, "b2", "notes/y.md", "y\n")
	put(t, b, "b3", "notes/sub/z.md", "z\n")
	syncOK(t, b)
	syncOK(t, a)
	syncOK(t, b)
	var got []string
	for p := range files(t, a) {
		got = append(got, p)
	}
	slices.Sort(got)
	if want := []string{"notes", "notes~origin/sub/z.md", "notes~origin/x.md", "notes~origin/y.md"}; !slices.Equal(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
}

// The operator tools on a merged history: log lists both sides, blame
// names the agent that wrote a line, revert undoes a commit that came
// through a merge, expire sees the last change on either side, restore
// --to a time finds what HEAD was here, and a fresh process reads the
// same index from disk.
func TestOperatorToolsOnMergedHistory(t *testing.T) {
	t.Parallel()
	remote := bareRemote(t)
	a := agent(t, remote, "a")
	put(t, a, "call-a0", "shared.md", "line 1\nline 2\nline 3\nline 4\n")
	put(t, a, "a-old", "old.md", "old\n")
	syncOK(t, a)
	b := agent(t, remote, "b")
	agentClock.Add(10 * 86400) // ten days later
	put(t, b, "call-b1", "shared.md", "line 1\nline 2\nline 3\nline 4 by b\n")
	put(t, b, "call-b2", "bfile.md", "b wrote this\n")
	syncOK(t, b)
	put(t, a, "call-a1", "shared.md", "line 1 by a\nline 2\nline 3\nline 4\n")
	beforeMerge := a.opt.Now()
	agentClock.Add(10 * 86400) // the merge comes ten days after b's edits
	res := syncOK(t, a)
	if res.Merge == "" {
		t.Fatalf("expected a merge: %+v", res)
	}

	// log: every commit of both sides, each with its tool_use id.
	var ids []string
	err := a.Log(context.Background(), LogOptions{}, nil, func(c Commit) error {
		ids = append(ids, c.Trailer(TrailerToolUseID))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"call-a0", "a-old", "call-a1", "call-b1", "call-b2"} {
		if !slices.Contains(ids, id) {
			t.Errorf("log lacks %s: %v", id, ids)
		}
	}
	if n := strings.Count(gittest.Git(t, a.Dir(), "log", "--format=%H"), "\n"); n != len(ids) {
		t.Errorf("log lists %d commits, git log %d", len(ids), n)
	}

	// blame: b's line is b's, a's line is a's.
	lines, err := a.Blame(context.Background(), "shared.md")
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, l := range lines {
		got = append(got, l.Text+"="+l.Commit.Trailer(TrailerToolUseID))
	}
	if want := "[line 1 by a=call-a1 line 2=call-a0 line 3=call-a0 line 4 by b=call-b1]"; fmt.Sprint(got) != want {
		t.Errorf("blame %v, want %s", got, want)
	}
	gitBlame := gittest.Git(t, a.Dir(), "blame", "--line-porcelain", "memories/shared.md")
	if strings.Count(gitBlame, "author b\n") != 1 || strings.Count(gitBlame, "author a\n") != 3 {
		t.Errorf("git blame disagrees:\n%s", gitBlame)
	}

	// revert a commit that arrived through the merge.
	if _, _, err := a.Revert(context.Background(), []string{"call-b1"}, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := files(t, a)["shared.md"]; got != "line 1 by a\nline 2\nline 3\nline 4\n" {
		t.Errorf("after reverting b1: %q", got)
	}

	// expire: bfile.md was last changed by b ten days before the merge
	// brought it; old.md earlier still; shared.md just now.
	stale, err := a.StaleFiles(context.Background(), beforeMerge.Add(5*24*time.Hour), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range stale {
		names = append(names, s.Path)
	}
	if fmt.Sprint(names) != "[bfile.md old.md]" {
		t.Errorf("stale before the merge: %v", names)
	}

	// restore --to a time: what HEAD was here, not b's commits.
	c, err := a.At(context.Background(), beforeMerge)
	if err != nil {
		t.Fatal(err)
	}
	if c.Trailer(TrailerToolUseID) != "call-a1" {
		t.Errorf("HEAD before the merge was %s (%s), want call-a1", c.Hash[:7], c.Trailer(TrailerToolUseID))
	}
	if _, _, err := a.Restore(context.Background(), c, RestoreOptions{Paths: []string{"bfile.md"}, Delete: true}); err != nil {
		t.Fatal(err)
	}
	if _, ok := files(t, a)["bfile.md"]; ok {
		t.Error("restore --to before the merge kept bfile.md")
	}

	// A fresh process reads the index file (merges and all) and agrees.
	a.Flush(context.Background())
	a2, err := Open(context.Background(), a.Dir(), Options{ReadOnly: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	var ids2 []string
	a2.Log(context.Background(), LogOptions{}, nil, func(c Commit) error { ids2 = append(ids2, c.Trailer(TrailerToolUseID)); return nil })
	a.Log(context.Background(), LogOptions{}, nil, func(c Commit) error { ids = append(ids[:0], c.Trailer(TrailerToolUseID)); return nil })
	recs, _ := a.histIndex.readFile()
	if len(recs) != len(ids2) {
		t.Errorf("the index file holds %d records, log %d", len(recs), len(ids2))
	}
	gittest.Fsck(t, a.Dir())
}

// A clean clone brings its worktree to the remote's commit without a word
// of crash recovery: the journal it leaves for Open is a checkout, not an
// unfinished change.
func TestCloneLogsNoRecovery(t *testing.T) {
	t.Parallel()
	remote := bareRemote(t)
	a := agent(t, remote, "a")
	put(t, a, "t1", "notes.md", "hello\n")
	put(t, a, "t2", "sub/more.md", "more\n")
	if _, err := a.Sync(context.Background(), "origin", SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	var logged []string
	opt := agentOptions(t, "b")
	opt.Logf = func(f string, args ...any) { logged = append(logged, fmt.Sprintf(f, args...)) }
	dir := filepath.Join(gittest.TempDir(t), "b")
	b, _, err := Clone(context.Background(), remote, dir, opt, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, l := range logged {
		if strings.Contains(l, "unfinished change") || strings.Contains(l, "back to HEAD") {
			t.Errorf("a clean clone logged %q", l)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "memories", "sub", "more.md")); err != nil || string(data) != "more\n" {
		t.Fatalf("the clone's worktree: %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "gitmem", "pending")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the clone left its journal: %v", err)
	}
}

// A clone of a memory that holds no file has the memories/ folder all the
// same, as a new memory has: an operator looks for it there.
func TestCloneOfAnEmptyMemoryHasTheFolder(t *testing.T) {
	t.Parallel()
	remote := bareRemote(t)
	a := agent(t, remote, "a")
	if _, err := a.Sync(context.Background(), "origin", SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(gittest.TempDir(t), "b")
	b, _, err := Clone(context.Background(), remote, dir, agentOptions(t, "b"), SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if fi, err := os.Stat(filepath.Join(dir, "memories")); err != nil || !fi.IsDir() {
		t.Fatalf("the clone has no memories/ folder: %v", err)
	}
}

// A remote whose history shares no commit with the memory is not merged
// unless asked (issue 21, item 11), as git refuses it; a memory that
// holds nothing but its own first commit joins one as a clone would.
func TestUnrelatedHistoryIsRefused(t *testing.T) {
	t.Parallel()
	a := agent(t, bareRemote(t), "a")
	put(t, a, "a1", "mine.md", "mine\n")
	other := bareRemote(t)
	x := agent(t, other, "x")
	put(t, x, "x1", "theirs.md", "theirs\n")
	syncOK(t, x)
	if err := a.AddRemote("other", other); err != nil {
		t.Fatal(err)
	}
	before, _ := a.Commit(context.Background(), "HEAD")
	for _, op := range []func(context.Context, string, SyncOptions) (SyncResult, error){a.Pull, a.Sync} {
		_, err := op(context.Background(), "other", SyncOptions{})
		var ue *UnrelatedHistoriesError
		if !errors.As(err, &ue) || ue.Remote != "other/main" {
			t.Fatalf("a remote with an unrelated history: %v", err)
		}
		if !strings.Contains(err.Error(), "other/main ("+ue.Commit[:7]+") shares no commit with this memory") {
			t.Errorf("message: %v", err)
		}
		if after, _ := a.Commit(context.Background(), "HEAD"); after.Hash != before.Hash {
			t.Fatal("a refused merge moved the branch")
		}
		if _, ok := onDisk(t, a)["theirs.md"]; ok {
			t.Fatal("a refused merge wrote the remote's file")
		}
	}
	if n := strings.Count(gittest.Git(t, other, "log", "--format=%H", "main"), "\n"); n != 2 {
		t.Errorf("the refused sync pushed: the remote has %d commits", n)
	}
	res, err := a.Pull(context.Background(), "other", SyncOptions{AllowUnrelatedHistories: true})
	if err != nil || res.Merge == "" {
		t.Fatalf("with AllowUnrelatedHistories: %+v %v", res, err)
	}
	if fs := files(t, a); fs["mine.md"] != "mine\n" || fs["theirs.md"] != "theirs\n" {
		t.Errorf("merged: %v", fs)
	}

	// Agents that cloned the remote while it was empty merge each other's
	// first histories; once they have synced, another history there is
	// refused again.
	empty := bareRemote(t)
	c, d := agent(t, empty, "c"), agent(t, empty, "d")
	put(t, c, "c1", "c.md", "c\n")
	put(t, d, "d1", "d.md", "d\n")
	syncOK(t, c)
	syncOK(t, d)
	syncOK(t, c)
	if fs := files(t, c); fs["c.md"] != "c\n" || fs["d.md"] != "d\n" {
		t.Fatalf("two clones of an empty remote: %v", fs)
	}
	gittest.Git(t, other, "push", "-q", "--force", empty, "main:main")
	if _, err := c.Pull(context.Background(), "origin", SyncOptions{}); !errors.As(err, new(*UnrelatedHistoriesError)) {
		t.Fatalf("another history pushed over the shared one: %v", err)
	}

	// A memory made and never written to takes a shared one.
	fresh, _, err := Init(context.Background(), filepath.Join(gittest.TempDir(t), "fresh"), agentOptions(t, "fresh"))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	fresh.AddRemote("origin", other)
	if _, err := fresh.Pull(context.Background(), "origin", SyncOptions{}); err != nil {
		t.Fatalf("a new, empty memory pulls a shared one: %v", err)
	}
	if fs := files(t, fresh); fs["theirs.md"] != "theirs\n" {
		t.Errorf("the new memory holds %v", fs)
	}
	gittest.Fsck(t, a.Dir())
	gittest.Fsck(t, fresh.Dir())
}

// mergePause is a merge hook (testHooks.merge) that pauses the first
// merge computed after pausedPull, in the middle of its computation. It
// counts the merges computed (runs).
type mergePause struct {
	armed          atomic.Bool
	paused, resume chan struct{}
	runs           atomic.Int32
}

func newMergePause() *mergePause {
	return &mergePause{paused: make(chan struct{}), resume: make(chan struct{})}
}

func (p *mergePause) hook() {
	p.runs.Add(1)
	if p.armed.CompareAndSwap(true, false) {
		close(p.paused)
		<-p.resume
	}
}

// pausedPull starts a pull of origin into r, made with p as its merge
// hook, whose merge pauses in the middle of its computation until resume
// is closed; pulled waits for the pull.
func pausedPull(t *testing.T, r *Repo, p *mergePause) (resume chan struct{}, pulled func() (SyncResult, error)) {
	p.armed.Store(true)
	var res SyncResult
	done := make(chan error, 1)
	go func() {
		var err error
		res, err = r.Pull(context.Background(), "origin", SyncOptions{})
		done <- err
	}()
	<-p.paused
	return p.resume, func() (SyncResult, error) { err := <-done; return res, err }
}

// mergeOverCalls pulls into a memory a remote's change of shared.md
// (its last line) and a new file, d/b.md, where the memory changed the
// first line of shared.md; calls (tool_use id, path, content) are made
// while the merge is paused in the middle of its computation. The memory
// must then hold want (nil: not checked), in HEAD and in the worktree.
// It returns the memory, the pull's result and how often the merge was
// computed.
func mergeOverCalls(t *testing.T, want map[string]string, calls ...[3]string) (*Repo, SyncResult, int) {
	t.Helper()
	remote := bareRemote(t)
	pause := newMergePause()
	a := agentWith(t, remote, "a", &testHooks{merge: pause.hook})
	put(t, a, "a0", "shared.md", "one\ntwo\nthree\nfour\nfive\n")
	put(t, a, "a0b", "mine.md", "mine\n")
	syncOK(t, a)
	b := agent(t, remote, "b")
	put(t, b, "b1", "shared.md", "one\ntwo\nthree\nfour\nfive by b\n")
	put(t, b, "b2", "d/b.md", "from b\n")
	syncOK(t, b)
	put(t, a, "a1", "shared.md", "one by a\ntwo\nthree\nfour\nfive\n") // both sides changed it: a merge

	resume, pulled := pausedPull(t, a, pause)
	called := make(chan error, 1)
	go func() {
		for _, c := range calls {
			if _, err := a.Update(context.Background(), Meta{Subject: "memory: create /memories/" + c[1], Trailers: []Trailer{{TrailerToolUseID, c[0]}, {TrailerCommand, "create"}, {TrailerPath, "/memories/" + c[1]}}},
				func(tx *Tx) error { return tx.WriteFile(c[1], []byte(c[2])) }); err != nil {
				called <- err
				return
			}
		}
		called <- nil
	}()
	select {
	case err := <-called:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // not a measurement: a call that waits for the paused merge never comes back
		close(resume)
		t.Fatal("a tool call waited for the merge")
	}
	close(resume)
	res, err := pulled()
	if err != nil || res.Merge == "" {
		t.Fatalf("the pull: %+v %v", res, err)
	}
	merge, _ := a.Commit(context.Background(), res.Merge)
	last := calls[len(calls)-1][0]
	if first, _ := a.Commit(context.Background(), merge.Parents[0]); first.Trailer(TrailerToolUseID) != last {
		t.Errorf("the merge's first parent is %s (%s), not the last call", first.Hash[:7], first.Subject)
	}
	a.Flush(context.Background())
	if got := files(t, a); want != nil && fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after the merge: %q", got)
	}
	if got := onDisk(t, a); want != nil && fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the worktree: %q", got)
	}
	gittest.Fsck(t, a.Dir())
	return a, res, int(pause.runs.Load())
}

// A merge is computed without the writer lock (issue 21, item 12): tool
// calls made while a pull's merge is paused in the middle of its
// computation complete, and the merge, made on top of them, keeps them.
// Before, the merge held the lock throughout and the calls waited for it.
// It is computed once: a call's file the remote changed too is merged
// again on its own (before, the whole merge was made again under the
// writer lock).
func TestToolCallsDoNotWaitForMerges(t *testing.T) {
	t.Parallel()
	want := map[string]string{"shared.md": "one by a\ntwo\nthree, during the merge\nfour\nfive by b\n", "mine.md": "mine\ny, during the merge\n", "d/b.md": "from b\n"}
	_, _, runs := mergeOverCalls(t, want, [3]string{"during1", "mine.md", "mine\ny, during the merge\n"},
		[3]string{"during2", "shared.md", "one by a\ntwo\nthree, during the merge\nfour\nfive\n"})
	if runs != 1 {
		t.Errorf("the merge was computed %d times, want once", runs)
	}
}

// A tool call made while a merge is computed, on a file the merge does
// not touch, is put onto the merge's result: the merge is computed once
// (before, a second time under the writer lock, on top of the call), and
// the merge commit's tree holds the call's change, on top of the call's
// own commit, trailers and all.
func TestMergeCarriesACallOnAnotherFile(t *testing.T) {
	t.Parallel()
	want := map[string]string{"shared.md": "one by a\ntwo\nthree\nfour\nfive by b\n", "mine.md": "mine, during the merge\n", "d/b.md": "from b\n"}
	a, res, runs := mergeOverCalls(t, want, [3]string{"during", "mine.md", "mine, during the merge\n"})
	if runs != 1 {
		t.Errorf("the merge was computed %d times, want once", runs)
	}
	if got := gittest.Git(t, a.Dir(), "show", res.Merge+":memories/mine.md"); got != want["mine.md"] {
		t.Errorf("the merge commit's tree holds mine.md = %q", got)
	}
	// The call's own commit, as git reads it, and what the merge changes
	// against it: what the remote brought.
	if got := gittest.Git(t, a.Dir(), "log", "-1", "--format=%(trailers:key=Tool-Use-Id,valueonly)%(trailers:key=Memory-Path,valueonly)", res.Merge+"^1"); got != "during\n/memories/mine.md\n\n" {
		t.Errorf("git log of the merge's first parent: %q", got)
	}
	if got := gittest.Git(t, a.Dir(), "diff", "--name-only", res.Merge+"^1", res.Merge); got != "memories/d/b.md\nmemories/shared.md\n" {
		t.Errorf("the merge changes %q", got)
	}
}

// A merge's files are looked at for hand edits once, before it takes the
// writer turn (adoptFiles), not a second time under it, where each look
// (an fstatat and the stat cache's compare, 3–4 ms for 1,000 files)
// held up every tool call: an edit made after that look is one made
// after the merge's commit, which the worktree's follow keeps
// (keepHandEdits) and the next adopt takes. Before, the check under the
// turn looked at every one of them again.
func TestMergeLooksForHandEditsOnceOutsideTheTurn(t *testing.T) {
	t.Parallel()
	remote := bareRemote(t)
	var a *Repo
	var from atomic.Int64
	from.Store(-1)
	a = agentWith(t, remote, "a", &testHooks{merge: func() { from.CompareAndSwap(-1, a.mirror.wt.looks.Load()) }})
	const n = 20
	put(t, a, "a0", "shared.md", "one\ntwo\n")
	for i := range n {
		put(t, a, fmt.Sprint("a0_", i), fmt.Sprintf("d/f%02d.md", i), "from a\n")
	}
	syncOK(t, a)
	b := agent(t, remote, "b")
	for i := range n {
		put(t, b, fmt.Sprint("b", i), fmt.Sprintf("d/f%02d.md", i), "from b\n")
	}
	syncOK(t, b)
	put(t, a, "a1", "shared.md", "one by a\ntwo\n") // a merge, not a fast-forward
	// Its files in the worktree: none is gitmem's unfinished work, which
	// the look skips.
	a.Flush(context.Background())
	res, err := a.Pull(context.Background(), "origin", SyncOptions{})
	if err != nil || res.Merge == "" {
		t.Fatalf("the pull: %+v %v", res, err)
	}
	if looks := a.mirror.wt.looks.Load() - from.Load(); from.Load() < 0 || looks != n {
		t.Errorf("the merge looked at %d files for hand edits, want %d (its files, once, before the writer turn)", looks, n)
	}
	a.Flush(context.Background())
	if got := onDisk(t, a); len(got) != n+1 {
		t.Errorf("the worktree: %q", got)
	}
}

// A hand edit made after the merge looked for them, before its commit,
// of a file the merge changes, is not lost: the worktree keeps it, and
// the next adopt merges it with the merge's version.
func TestHandEditAfterTheMergeLookedIsKept(t *testing.T) {
	t.Parallel()
	remote := bareRemote(t)
	var a *Repo
	a = agentWith(t, remote, "a", &testHooks{mergeLooked: func() {
		if err := os.WriteFile(filepath.Join(a.Dir(), memDir, "notes.md"), []byte("one\ntwo\nthree by hand\n"), 0o600); err != nil {
			t.Error(err)
		}
	}})
	put(t, a, "a0", "notes.md", "one\ntwo\nthree\n")
	put(t, a, "a0b", "shared.md", "one\ntwo\n")
	syncOK(t, a)
	b := agent(t, remote, "b")
	put(t, b, "b1", "notes.md", "one by b\ntwo\nthree\n")
	syncOK(t, b)
	put(t, a, "a1", "shared.md", "one by a\ntwo\n") // a merge, not a fast-forward
	a.Flush(context.Background())
	if res, err := a.Pull(context.Background(), "origin", SyncOptions{}); err != nil || res.Merge == "" {
		t.Fatalf("the pull: %+v %v", res, err)
	}
	a.Flush(context.Background())
	if _, err := a.Adopt(context.Background()); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	a.Flush(context.Background())
	want := "one by b\ntwo\nthree by hand\n"
	if got := files(t, a)["notes.md"]; got != want {
		t.Errorf("HEAD holds notes.md = %q, want %q", got, want)
	}
	if got := onDisk(t, a)["notes.md"]; got != want {
		t.Errorf("the worktree holds notes.md = %q, want %q", got, want)
	}
}

// A tool call made while a merge is computed, on a line of a file the
// remote changed too, conflicts: the merge is computed again on top of
// it (under the writer lock), and its conflict names the call's commit.
func TestMergeOnACallThatConflictsIsMadeAgain(t *testing.T) {
	t.Parallel()
	a, res, runs := mergeOverCalls(t, nil, [3]string{"during", "shared.md", "one by a\ntwo\nthree\nfour\nfive, during the merge\n"})
	if runs != 2 {
		t.Errorf("the merge was computed %d times, want twice (again on the call)", runs)
	}
	if fmt.Sprint(res.Conflicts) != "[{content shared.md}]" {
		t.Errorf("conflicts: %v", res.Conflicts)
	}
	merge, _ := a.Commit(context.Background(), res.Merge)
	want := "one by a\ntwo\nthree\nfour\n<<<<<<< local " + merge.Parents[0][:7] + "\nfive, during the merge\n=======\nfive by b\n>>>>>>> origin/main "
	if got := files(t, a)["shared.md"]; !strings.HasPrefix(got, want) {
		t.Errorf("shared.md = %q, want it to start %q", got, want)
	}
}

// A merge whose tip moved otherwise than by tool calls while it was
// computed (here: another process on the repository merged the same
// remote) starts over on the new tip rather than keeping what it found:
// the remote is in the memory already, and no second merge is made.
func TestMergeStartsOverWhenTheTipMovesOtherwise(t *testing.T) {
	t.Parallel()
	remote := bareRemote(t)
	pause := newMergePause()
	a := agentWith(t, remote, "a", &testHooks{merge: pause.hook})
	put(t, a, "a0", "shared.md", "one\ntwo\n")
	syncOK(t, a)
	b := agent(t, remote, "b")
	put(t, b, "b1", "b.md", "from b\n")
	syncOK(t, b)
	put(t, a, "a1", "a.md", "from a\n")
	a2, err := Open(context.Background(), a.Dir(), agentOptions(t, "a2"))
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()

	resume, pulled := pausedPull(t, a, pause)
	res2, err := a2.Pull(context.Background(), "origin", SyncOptions{}) // the other process merges first
	close(resume)
	if err != nil || res2.Merge == "" {
		t.Fatalf("the other process's pull: %+v %v", res2, err)
	}
	if res, err := pulled(); err != nil || !res.UpToDate || res.Merge != "" {
		t.Fatalf("the paused pull, after the other merged: %+v %v", res, err)
	}
	if n := strings.Count(gittest.Git(t, a.Dir(), "log", "--merges", "--format=%H"), "\n"); n != 1 {
		t.Errorf("%d merge commits, want 1", n)
	}
	if got := files(t, a); got["a.md"] != "from a\n" || got["b.md"] != "from b\n" {
		t.Errorf("after both pulls: %q", got)
	}
	a.Flush(context.Background())
	gittest.Fsck(t, a.Dir())
}

// A merge carried over tool calls made while it was computed (mergeFacts
// extended to the new tip) is the merge computed afresh on that tip: the
// same tree, conflicts, left-out entries and message. Random histories:
// the remote changes, adds, deletes and renames files; then, between the
// two computations, the memory does too, on the same files and others.
func TestMergeCarriedOverCallsIsTheSame(t *testing.T) {
	t.Parallel()
	var carriedOnto, merges atomic.Int32
	// Seeds 0-15 rename files too, 16-31 have longer files: the quick
	// part draws the last four of each kind (12-15, 28-31: four of their
	// eight merges are carried onto the calls, six of the 32 in all).
	perKind := uint64(gittest.Size(t, 4, 16))
	for seed := range uint64(32) {
		if seed%16 < 16-perKind {
			continue
		}
		merges.Add(1)
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 12))
			remote := bareRemote(t)
			a := agent(t, remote, "a")
			names := []string{"a.md", "b.md", "c.md", "d/e.md", "d/f.md", "g.md"}
			text := "1\n2\n3\n4\n5\n6\n"
			if seed >= 16 { // and have longer files: fewer conflicts
				text = strings.Repeat(text, 5)
			}
			for i, p := range names[:5] {
				put(t, a, fmt.Sprint("seed", i), p, text)
			}
			syncOK(t, a)
			b := agent(t, remote, "b")
			n := 0
			change := func(r *Repo, side string) {
				n++
				id := fmt.Sprintf("%s%d", side, n)
				fs := files(t, r)
				p := names[rng.IntN(len(names))]
				content, ok := fs[p]
				switch k := rng.IntN(6); {
				case !ok:
					put(t, r, id, p, fmt.Sprintf("new %s\n", id))
				case k == 0:
					del(t, r, id, p)
				case k == 1 && seed < 16: // the later seeds rename nothing, so that more merges are carried onto the calls
					if to := names[rng.IntN(len(names))]; fs[to] == "" && !strings.HasPrefix(to, p+"/") {
						mv(t, r, id, p, to)
					}
				default:
					lines := strings.Split(content, "\n")
					lines[rng.IntN(len(lines))] = id
					put(t, r, id, p, strings.Join(lines, "\n"))
				}
			}
			for range 6 {
				change(b, "b")
			}
			syncOK(t, b)
			for range 3 {
				change(a, "a")
			}
			url, err := remoteURL(a.gitDir, "origin")
			if err != nil {
				t.Fatal(err)
			}
			s := newLink(a, a.dir, a.gitDir, a.branch, "origin", url, SyncOptions{})
			defer s.close()
			tip, err := s.fetch(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			mk := func() *merger {
				return &merger{store: a, hooks: a.opt.hooks, logf: a.opt.Logf, g: s.g, st: s.st, label: "origin/main", theirs: tip, limits: s.opt.Limits}
			}
			carried, quick := mk(), mk()
			pre := a.newTx()
			if err := carried.run(a.newTx()); err != nil {
				t.Fatal(err)
			}
			if err := quick.run(pre); err != nil {
				t.Fatal(err)
			}
			for range 1 + rng.IntN(4) { // the calls made meanwhile
				change(a, "a")
			}
			found := carried.facts
			tx1, tx2 := a.newTx(), a.newTx()
			afresh := mk()
			err1, err2 := carried.run(tx1), afresh.run(tx2)
			if found.upToDate || carried.facts.base != found.base || fmt.Sprintf("%p", carried.facts.dT) != fmt.Sprintf("%p", found.dT) {
				t.Fatal("the merge's facts were found again, not carried over")
			}
			if fmt.Sprint(err1) != fmt.Sprint(err2) {
				t.Fatalf("carried over: %v, afresh: %v", err1, err2)
			}
			var diffs []string
			diffNodes(tx1.root, tx2.root, "", func(p string, _ plumbing.Hash) { diffs = append(diffs, p) })
			if len(diffs) > 0 {
				t.Errorf("the trees differ at %v", diffs)
			}
			if a, b := fmt.Sprint(carried.conflicts, carried.ignored, tx1.subject, tx1.extra, tx1.merged, len(tx1.mergedIDs)),
				fmt.Sprint(afresh.conflicts, afresh.ignored, tx2.subject, tx2.extra, tx2.merged, len(tx2.mergedIDs)); a != b {
				t.Errorf("carried over:\n%s\nafresh:\n%s", a, b)
			}
			// The calls put onto the result computed before them (carry),
			// when it can be: the same merge again.
			tx3 := a.newTx()
			c := quick.carry(pre, tx3)
			if c == nil {
				return
			}
			carriedOnto.Add(1)
			t.Log("carried onto the calls")
			if err2 != nil {
				t.Fatalf("carried onto the calls, where afresh: %v", err2)
			}
			diffs = nil
			diffNodes(c.root, tx2.root, "", func(p string, _ plumbing.Hash) { diffs = append(diffs, p) })
			if len(diffs) > 0 || c.head != tx2.head || c.base != tx2.base {
				t.Errorf("the calls put onto the merge: the trees differ at %v", diffs)
			}
			if a, b := fmt.Sprint(quick.conflicts, quick.ignored, c.subject, c.extra, c.merged, len(c.mergedIDs)),
				fmt.Sprint(afresh.conflicts, afresh.ignored, tx2.subject, tx2.extra, tx2.merged, len(tx2.mergedIDs)); a != b {
				t.Errorf("the calls put onto the merge:\n%s\nafresh:\n%s", a, b)
			}
		})
	}
	t.Logf("%d of %d merges carried onto the calls", carriedOnto.Load(), merges.Load())
	if carriedOnto.Load() == 0 {
		t.Error("no merge was carried onto the calls")
	}
}

// Two agents that each made a call with the same tool_use id hold two
// commits of that id once a sync merged their histories. An operator's
// command that names the id is refused as naming two commits, as an id
// that is also a revision is: it asks for the hash rather than take the
// newest. A retry of the call is still answered from a commit and makes
// none.
func TestAnIDOfTwoMergedCommitsIsAmbiguous(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, a, b := twoAgents(t)
	write(t, a, "toolu_dup", "a.md", "from a\n")
	write(t, b, "toolu_dup", "b.md", "from b\n")
	syncOK(t, a)
	syncOK(t, b)
	settle(t, b)
	hashes := strings.Fields(gittest.Git(t, b.Dir(), "log", "--format=%H", "--grep=^Tool-Use-Id: toolu_dup$"))
	if len(hashes) != 2 {
		t.Fatalf("commits of toolu_dup after the sync: %v", hashes)
	}
	head := strings.TrimSpace(gittest.Git(t, b.Dir(), "rev-parse", "HEAD"))
	check := func(what string, err error) {
		t.Helper()
		var ae *AmbiguousError
		if !errors.As(err, &ae) || ae.ByID == ae.AsRev || !slices.Contains(hashes, ae.ByID) || !slices.Contains(hashes, ae.AsRev) {
			t.Errorf("%s: %v; want it refused as naming %.7s and %.7s", what, err, hashes[0], hashes[1])
			return
		}
		if want := fmt.Sprintf(`"toolu_dup" names two commits: the tool_use id of %s and the tool_use id of %s; name the one meant by its hash`,
			ae.ByID[:12], ae.AsRev[:12]); err.Error() != want {
			t.Errorf("%s: %q, want %q", what, err, want)
		}
	}
	_, err := b.Resolve(ctx, "toolu_dup")
	check("Resolve", err)
	_, err = b.ResolveCommit(ctx, "toolu_dup")
	check("ResolveCommit", err)
	_, _, err = b.Revert(ctx, []string{"toolu_dup"}, RevertOptions{})
	check("Revert", err)
	ro, err := Open(ctx, b.Dir(), Options{ReadOnly: true}) // a fresh process reads the index file from its end
	if err != nil {
		t.Fatal(err)
	}
	_, err = ro.Resolve(ctx, "toolu_dup")
	check("Resolve in a fresh process", err)
	ro.Close()
	for _, h := range hashes {
		if c, err := b.Resolve(ctx, h[:12]); err != nil || c.Hash != h {
			t.Errorf("Resolve(%.12s) = %s %v", h, c.Hash, err)
		}
	}
	// The call retried: answered from a commit, nothing written.
	_, err = b.Update(ctx, Meta{Subject: "w b.md", Trailers: []Trailer{{TrailerToolUseID, "toolu_dup"}}}, func(tx *Tx) error {
		return tx.WriteFile("b.md", []byte("from b\n"))
	})
	var applied *AppliedError
	if !errors.As(err, &applied) || !slices.Contains(hashes, applied.Commit.Hash) {
		t.Errorf("the retry: %v", err)
	}
	settle(t, b)
	if got := strings.TrimSpace(gittest.Git(t, b.Dir(), "rev-parse", "HEAD")); got != head {
		t.Errorf("HEAD moved from %.7s to %.7s", head, got)
	}
}

// A remote URL with a control character (a newline, a tab, another C0
// character, DEL) is refused by remote add and by clone, as a remote
// helper's is, and nothing is written: no remote, no clone folder, and
// .git/config is as it was. Before, it was stored (quoted in the config)
// and `gitmem remote` and `git remote -v` printed lines it forged.
func TestRemoteURLWithAControlCharacterIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, dir := newRepo(t)
	srv := bareRemote(t)
	config, err := os.ReadFile(filepath.Join(dir, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"\n", "\r", "\t", "\x00", "\x01", "\x1b", "\x7f"} {
		url := srv + c + "[core]\n\tfsmonitor = touch pwned; false"
		var bad *BadRemoteError
		if err := r.AddRemote("r1", url); !errors.As(err, &bad) || !strings.Contains(err.Error(), "control character") {
			t.Errorf("remote add of a URL with %q: %v", c, err)
		}
		clone := filepath.Join(gittest.TempDir(t), "clone")
		if _, _, err := Clone(ctx, url, clone, testOptions(t), SyncOptions{}); !errors.As(err, &bad) || !strings.Contains(err.Error(), "control character") {
			t.Errorf("clone of a URL with %q: %v", c, err)
		}
		if _, err := os.Stat(clone); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("clone of a URL with %q left %s: %v", c, clone, err)
		}
	}
	if rs, err := r.Remotes(); err != nil || len(rs) != 0 {
		t.Errorf("remotes: %v, %v", rs, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, ".git", "config")); string(got) != string(config) {
		t.Errorf(".git/config changed:\n%s", got)
	}
}
