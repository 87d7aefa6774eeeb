package gitmem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// After a redaction the secret is in no object git can find, every other
// commit keeps its message, trailers, author and date, and fsck is clean.
func TestRedactLeavesNoTrace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		red  func(secretBlob string) Redaction
		want string // prefs.md at HEAD afterwards
	}{
		{"match", func(string) Redaction { return Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)} }, "key: [REDACTED]\ncolor: green\n"},
		{"path", func(string) Redaction { return Redaction{Path: "secret.txt"} }, "key: sk-live42secret\ncolor: green\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := gittest.TempDir(t)
			r, _, err := Init(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			write(t, r, "t1", "prefs.md", "color: blue\n")
			write(t, r, "t2", "secret.txt", "password sk-live42secret\n")
			write(t, r, "t3", "prefs.md", "key: sk-live42secret\ncolor: blue\n")
			write(t, r, "t4", "prefs.md", "key: sk-live42secret\ncolor: green\n")
			r.GC(context.Background(), false) // some of the secret is packed, some loose
			write(t, r, "t5", "other.md", "unrelated\n")
			settle(t, r)
			before := gittest.Git(t, dir, "log", "--format=%s|%an|%ad|%(trailers:key=Tool-Use-Id,valueonly)")

			dryRep, err := r.Redact(context.Background(), tc.red(""), true, nil)
			if err != nil || len(dryRep.Rewritten) == 0 {
				t.Fatalf("dry run: %+v %v", dryRep, err)
			}
			if h := gittest.Git(t, dir, "rev-parse", "HEAD"); !strings.HasPrefix(h, dryRep.Rewritten[len(dryRep.Rewritten)-1].Old) {
				t.Fatal("a dry run moved HEAD")
			}
			rep, err := r.Redact(context.Background(), tc.red(""), false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Rewritten) != len(dryRep.Rewritten) || rep.Rewritten[0] != dryRep.Rewritten[0] {
				t.Fatalf("dry run said %v, the redaction did %v", dryRep.Rewritten, rep.Rewritten)
			}
			if after := gittest.Git(t, dir, "log", "--format=%s|%an|%ad|%(trailers:key=Tool-Use-Id,valueonly)"); after != before {
				t.Fatalf("messages, authors or dates changed:\n%s\nvs\n%s", before, after)
			}
			gittest.Fsck(t, dir)
			objs := strings.Fields(gittest.Git(t, dir, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"))
			for _, o := range objs {
				if out := gittest.Git(t, dir, "cat-file", "-p", o); tc.name == "match" && strings.Contains(out, "sk-live42") {
					t.Fatalf("object %s still holds the secret", o)
				} else if tc.name == "path" && strings.Contains(out, "password sk-live") {
					t.Fatalf("object %s still holds secret.txt", o)
				}
			}
			if got := gittest.Git(t, dir, "show", "HEAD:memories/prefs.md"); got != tc.want {
				t.Fatalf("prefs.md = %q", got)
			}
			if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
				t.Fatalf("status after redact:\n%s", st)
			}
			// The store goes on working on the new history.
			write(t, r, "t6", "after.md", "x")
			if _, err := r.Resolve(context.Background(), "t3"); err != nil {
				t.Fatalf("tool_use id lookup after redact: %v", err)
			}
		})
	}
}

// A server (one Repo) keeps working after an operator (another Repo on
// the same folder) rewrote the history and deleted the old objects.
func TestServerFollowsARedactionByAnotherProcess(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	server, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	write(t, server, "s1", "notes.md", "token sk-abc123\n")
	write(t, server, "s2", "other.md", "x\n")
	server.GC(context.Background(), false)
	op, err := Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)}, false, nil); err != nil {
		t.Fatal(err)
	}
	op.Close()
	if got := read(t, server, "notes.md"); got != "token [REDACTED]\n" {
		t.Fatalf("the server reads %q", got)
	}
	write(t, server, "s3", "notes.md", "later\n")
	if _, err := server.Update(context.Background(), Meta{Trailers: []Trailer{{TrailerToolUseID, "s2"}}}, func(*Tx) error { return nil }); err == nil {
		t.Fatal("a tool_use id from before the rewrite was applied again")
	}
	gittest.Fsck(t, dir)
	if n := strings.TrimSpace(gittest.Git(t, dir, "rev-list", "--count", "HEAD")); n != "4" {
		t.Fatalf("%s commits", n)
	}
}

// The record of an interrupted redaction (.git/gitmem/redact) is checked
// before any ref moves: a record gitmem could not have written — an
// unknown field, a hash not 40 lowercase hex, a ref outside refs/ or in
// refs/gitmem/, a new commit that is not in the repository or not a
// commit — stops the start with a clear error and moves nothing.
func TestDamagedInterruptedRedactionRecord(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "prefs.md", "color: blue\n")
	settle(t, r)
	r.Close()
	head := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "main"))
	parent := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "main~1"))
	blob := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "main:memories/prefs.md"))
	const absent = "1234567890123456789012345678901234567890"
	rec := func(ref, old, new string) string {
		return `{"refs":{"` + ref + `":["` + old + `","` + new + `"]}}`
	}
	for _, tc := range []struct{ name, record, want string }{
		{"new commit absent", rec("refs/heads/main", head, absent), `refs/heads/main would move to ` + absent + `, which is not a commit of this repository`},
		{"new is a blob", rec("refs/heads/main", head, blob), `which is not a commit of this repository`},
		{"upper case", rec("refs/heads/main", strings.ToUpper(head), parent), `not an object hash (40 lowercase hex digits)`},
		{"short", rec("refs/heads/main", head, parent[:12]), `not an object hash (40 lowercase hex digits)`},
		{"HEAD", rec("HEAD", head, parent), `"HEAD" is not a ref a redaction moves`},
		{"config", rec("config", head, parent), `"config" is not a ref a redaction moves`},
		{"gitmem ref", rec("refs/gitmem/redactions", head, parent), `is not a ref a redaction moves`},
		{"three hashes", `{"refs":{"refs/heads/main":["` + head + `","` + parent + `","` + parent + `"]}}`, `is not JSON of the record's form`},
		{"unknown field", `{"refs":{},"gc":true,"moved":1}`, `is not JSON of the record's form: json: unknown field "moved"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := dir + "/.git/gitmem/redact"
			if err := os.WriteFile(path, []byte(tc.record), 0o600); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(path)
			r, err := Open(context.Background(), dir, testOptions(t))
			if err == nil {
				r.Close()
			}
			var de *DamagedError
			if !errors.As(err, &de) || !strings.Contains(de.Problem, "the record of an interrupted redaction (.git/gitmem/redact) is damaged") ||
				!strings.Contains(de.Problem, tc.want) || strings.Contains(err.Error(), dir) {
				t.Fatalf("open: %v\nwant %s", err, tc.want)
			}
			if now := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "main")); now != head {
				t.Errorf("the branch moved to %s", now)
			}
		})
	}
	// A record gitmem wrote still finishes (here: its one ref is at the
	// new commit already), and the repository opens.
	os.WriteFile(dir+"/.git/gitmem/redact", []byte(rec("refs/heads/main", parent, head)), 0o600)
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := os.Stat(dir + "/.git/gitmem/redact"); err == nil {
		t.Error("the finished record is still there")
	}
}

// TestRedactAfterThePacksWereReplaced: another process (gitmem gc, a
// fold of serve's) replaces the packs after this one's go-git storage
// listed them, as the redaction begins. The redaction reads the refs'
// commits with gitmem's own reader, which lists the packs again when one
// is gone; go-git's failed, "read refs/heads/main failed: packfile not
// found" (TestLoadWithOperators met it).
func TestRedactAfterThePacksWereReplaced(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	writeSecrets(t, r)
	replace := func() { // what a gc in another process does: every object into one new pack, the old ones deleted
		packs, _ := gd.ListPacks(r.gitDir)
		var all, old []plumbing.Hash
		for _, p := range packs {
			hs, err := gd.PackHashes(gd.PackIndexPath(r.gitDir, p.Hash))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, hs...)
			old = append(old, p.Hash)
		}
		other := gd.Open(r.gitDir)
		defer other.Close()
		if _, err := other.PackObjects(all, gd.Own); err != nil {
			t.Fatal(err)
		}
		gd.RemovePacks(r.gitDir, old)
	}
	blob := plumbing.ComputeHash(plumbing.BlobObject, []byte("note 0: sk-live0secret\n"))
	replaced := false
	r.objects.st.Env.SetFault(func(step, _ string) error {
		if step == gd.StepPack && !replaced { // the redaction's pack is begun: the refs are read next
			replaced = true
			if _, err := r.objects.st.Storage().EncodedObject(plumbing.AnyObject, blob); err != nil { // go-git lists the packs
				t.Error(err)
			}
			replace()
		}
		return nil
	})
	t.Cleanup(func() { r.objects.st.Env.SetFault(nil) })
	if _, err := r.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)}, false, nil); err != nil {
		t.Fatal(err)
	}
	r.objects.st.Env.SetFault(nil)
	if !replaced {
		t.Fatal("the packs were not replaced during the redaction")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, dir, "sk-live1secret")
	gittest.Fsck(t, dir)
}

// The worktree keeps the files a write took aside, to reuse them (spares,
// in .git/gitmem/tmp); a redaction deletes every temporary file there.
// The writes after it put their files in place (none reuses a spare that
// is gone), and a second redaction brings the worktree along.
func TestWritesAfterARedaction(t *testing.T) {
	t.Parallel()
	r, dir, followed := newFollowedRepo(t)
	ctx := context.Background()
	write(t, r, "t1", "a.md", "first secret\n")
	write(t, r, "t2", "a.md", "second\n") // the first file is taken aside: a spare
	settle(t, r)
	if _, err := r.Redact(ctx, Redaction{Match: regexp.MustCompile(`first secret`)}, false, nil); err != nil {
		t.Fatal(err)
	}
	write(t, r, "t3", "b.md", "b\n")
	write(t, r, "t4", "b.md", "bb\n")
	settle(t, r)
	if _, err := r.Redact(ctx, Redaction{Match: regexp.MustCompile(`(?m)^b$`)}, false, nil); err != nil {
		t.Fatal("a second redaction: ", err)
	}
	write(t, r, "t5", "c.md", "c\n")
	settle(t, r)
	followed(map[string]string{"a.md": "second\n", "b.md": "bb\n", "c.md": "c\n"})
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("status:\n%s", st)
	}
}

// A git command holds the lock file of a ref a redaction must move (git
// gc holds refs/heads/<b>.lock, empty, while it expires the branch's
// reflog), past the time gitmem waits for it. The redaction fails naming
// the lock and changes nothing: the lock is git's still, no ref moved, no
// record is left. Once git is done, the redaction completes and the
// secret is nowhere. gitmem took any lock older than 2 s for abandoned and
// removed it: git's live lock went, and (beside the index timer's Flush
// during the wait) the redaction returned no error with the secret in a
// pack and in memories/f1.md.
func TestRedactBesideAHeldRefLock(t *testing.T) {
	t.Parallel() // its 5 s (gitdir.LockWait) are an idle wait: beside the other tests, not before them
	r, dir := newRepo(t)
	writeSecrets(t, r)
	if err := r.AddRemote("origin", t.TempDir()); err != nil { // its commits are noted for pulls
		t.Fatal(err)
	}
	noted := filepath.Join(dir, ".git", "gitmem", "redacted")
	gittest.Git(t, dir, "branch", "other")
	refs := gittest.Git(t, dir, "for-each-ref")
	lock := filepath.Join(dir, ".git", "refs", "heads", "other.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	red := Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)}
	_, err := r.Redact(context.Background(), red, false, nil)
	if err == nil || !strings.Contains(err.Error(), ".git/refs/heads/other.lock") || strings.Contains(err.Error(), dir) {
		t.Fatalf("redact while git holds other.lock: %v, want an error naming .git/refs/heads/other.lock (no host path)", err)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("git's lock file was removed: %v", err)
	}
	if now := gittest.Git(t, dir, "for-each-ref"); now != refs {
		t.Fatalf("a failed redaction moved refs:\n%s\nwas\n%s", now, refs)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "gitmem", "redact")); err == nil {
		t.Fatal("a redaction that changed nothing left its record")
	}
	if b, _ := os.ReadFile(noted); len(b) != 0 {
		t.Fatalf("a redaction that changed nothing noted its commits for pulls (a pull refuses a remote's history that holds one): %s", b)
	}
	if got := readDisk(t, dir, "f1.md"); got != "note 1: sk-live1secret\n" {
		t.Fatalf("f1.md = %q after a redaction that changed nothing", got)
	}
	os.Remove(lock) // git is done
	rep, err := r.Redact(context.Background(), red, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Refs, "refs/heads/other") || !slices.Contains(rep.Refs, "refs/heads/main") {
		t.Fatalf("moved %v", rep.Refs)
	}
	if got := readDisk(t, dir, "f1.md"); got != "note 1: [REDACTED]\n" {
		t.Fatalf("f1.md = %q", got)
	}
	if b, _ := os.ReadFile(noted); bytes.Count(b, []byte("\n")) != 1 {
		t.Fatalf("the redaction's note for pulls: %q, want one line", b)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if d := gittest.Git(t, dir, "for-each-ref", "refs/gitmem/displaced"); d != "" {
		t.Fatalf("the redaction's move was taken for git's: %s", d)
	}
	assertNoSecret(t, dir, "sk-live1secret")
	gittest.Fsck(t, dir)
}

// Flush (the index timer's, an operator's status) checks for a branch
// moved by git. Run while a redaction moves the branch, it took that move
// for git's, put the branch back on the old history and kept the rewritten
// commit to merge back: the redaction returned no error, and the secret
// stayed (in git's objects and the worktree). finishRedaction wrote the
// materialiser's diskHead without its lock (a data race under -race).
func TestRedactBesideFlush(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	writeSecrets(t, r)
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			r.Flush(context.Background())
			n++
		}
	}()
	_, err := r.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)}, false, nil)
	close(stop)
	t.Logf("%d flushes beside the redaction", <-done)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if d := gittest.Git(t, dir, "for-each-ref", "refs/gitmem/displaced"); d != "" {
		t.Errorf("the redaction's move was taken for git's: %s", d)
	}
	assertNoSecret(t, dir, "sk-live1secret")
	gittest.Fsck(t, dir)
}

// A redaction killed with the refs' locks taken: the next start knows
// them for its own (each holds the new hash its record names), removes
// them and finishes. A lock of git's beside them stays.
func TestKilledRedactionsLocksAreItsOwn(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	opt.hooks.redactFault = func() error { return errors.New("killed") } // this repository's one redaction
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "t1", "f.md", "note: sk-live1secret\n")
	settle(t, r)
	gitLock := filepath.Join(dir, ".git", "refs", "heads", "new.lock") // git branch new, under way
	if err := os.WriteFile(gitLock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := r.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)}, false, nil)
	if err == nil {
		t.Fatal("the fault did not stop the redaction")
	}
	lock := filepath.Join(dir, ".git", "refs", "heads", "main.lock")
	if b, err := os.ReadFile(lock); err != nil || string(b) != rep.Rewritten[len(rep.Rewritten)-1].New+"\n" {
		t.Fatalf("main.lock after the kill: %q %v", b, err)
	}
	r.Close()
	if r, err = Open(context.Background(), dir, testOptions(t)); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := os.Stat(lock); err == nil {
		t.Fatal("the killed redaction's lock is still there")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".git", "refs", "heads", "*.gitmem-*.lock")); len(m) != 0 {
		t.Fatalf("the second names of the killed redaction's locks are still there: %v", m)
	}
	if _, err := os.Stat(gitLock); err != nil {
		t.Fatalf("git's lock was removed: %v", err)
	}
	if got := readDisk(t, dir, "f.md"); got != "note: [REDACTED]\n" {
		t.Fatalf("f.md = %q", got)
	}
	os.Remove(gitLock)
	r.Close()
	assertNoSecret(t, dir, "sk-live1secret")
	gittest.Fsck(t, dir)
}

// writeSecrets writes f0.md, f1.md and f2.md, each holding a secret
// (sk-live<i>secret), and settles.
func writeSecrets(t *testing.T, r *Repo) {
	t.Helper()
	for i := range 3 {
		write(t, r, fmt.Sprint("t", i), fmt.Sprintf("f%d.md", i), fmt.Sprintf("note %d: sk-live%dsecret\n", i, i))
	}
	settle(t, r)
}

// A git command makes a branch on the old history while a redaction runs
// (here between the rewrite and the refs' move: git branch keep main). The
// redaction cannot move a ref it never listed: it says so, naming the
// ref, rather than report success while the branch reaches the secret.
// It reported success, and refs/heads/keep kept the secret in git's
// objects. Run again, it rewrites keep too.
func TestRedactBesideABranchGitMakes(t *testing.T) {
	t.Parallel()
	first := true // the hook runs in the first redaction only
	var dir string
	r, dir := newRepoWith(t, &testHooks{redactFault: func() error {
		if first {
			first = false
			gittest.Git(t, dir, "branch", "keep", "main") // main's lock is the redaction's: git reads the old tip
		}
		return nil
	}})
	writeSecrets(t, r)
	red := Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)}
	_, err := r.Redact(context.Background(), red, false, nil)
	if err == nil || !strings.Contains(err.Error(), "refs/heads/keep") || strings.Contains(err.Error(), dir) {
		t.Fatalf("redact while git made a branch: %v, want an error naming refs/heads/keep (no host path)", err)
	}
	if got := readDisk(t, dir, "f1.md"); got != "note 1: [REDACTED]\n" {
		t.Fatalf("f1.md = %q", got)
	}
	rep, err := r.Redact(context.Background(), red, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Refs, "refs/heads/keep") {
		t.Fatalf("the second redaction moved %v", rep.Refs)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, dir, "sk-live1secret")
	gittest.Fsck(t, dir)
}

// A redaction's preview holds up no read (design F4): it reads the
// history through a view of the objects of its own, not the store the
// tool calls read, so a file read while it runs is answered before it
// ends. (It used to hold the object store's lock for the whole rewrite,
// a dry run too.)
func TestRedactionPreviewHoldsUpNoRead(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "secret sk-1\n")
	write(t, r, "t2", "b.md", "b\n")
	read := make(chan error, 1)
	answered := false // the read was answered while the preview ran
	_, err := r.Redact(context.Background(), Redaction{Path: "a.md"}, true, func(done, total int) {
		if done != 1 {
			return
		}
		go func() {
			v, err := r.Snapshot(context.Background())
			if err == nil {
				_, err = v.ReadFile("b.md")
			}
			read <- err
		}()
		select {
		case err := <-read:
			answered = true
			if err != nil {
				t.Error(err)
			}
		case <-time.After(20 * time.Second): // without the fix: the read waits for the preview
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !answered {
		<-read
		t.Fatal("a read waited for the redaction's preview to end")
	}
	gittest.Fsck(t, dir)
}

// A pattern as broad as "every long token" (or ".") rewrote the keys of
// a commit's trailers with their values: Tool-Use-Id, Memory-Command and
// Memory-Path became "[REDACTED]: ...", so every commit the pattern
// touched was no longer a gitmem commit (no command, path or id; a
// store's metadata commit no longer a store's), and the old objects were
// gone. Keys are kept now, and the values gitmem writes as a word, a
// number, a time or a hash; every other value, the subject and the body
// are redacted as before.
func TestRedactKeepsTrailerKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ pattern, want string }{
		{`[A-Za-z0-9_-]{11,}`, "memory: create /memories/notes.md\n\n" +
			"Tool-Use-Id: [REDACTED]\nMemory-Command: create\nMemory-Path: /memories/notes.md\nStore-Created: 2026-11-29T10:00:00Z\nAgent: [REDACTED]\n"},
		{`.+`, "[REDACTED]\n\n" +
			"Tool-Use-Id: [REDACTED]\nMemory-Command: create\nMemory-Path: [REDACTED]\nStore-Created: 2026-11-29T10:00:00Z\nAgent: [REDACTED]\n"},
		{`(?s).+`, "[REDACTED]\n\n" +
			"Tool-Use-Id: [REDACTED]\nMemory-Command: create\nMemory-Path: [REDACTED]\nStore-Created: 2026-11-29T10:00:00Z\nAgent: [REDACTED]\n"},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			t.Parallel()
			r, dir := newRepo(t)
			_, err := r.Update(context.Background(), Meta{Subject: "memory: create /memories/notes.md", Trailers: []Trailer{
				{TrailerToolUseID, "toolu_01D5E6F7G8H9I0J1K2L3M4N5"}, {TrailerCommand, "create"}, {TrailerPath, "/memories/notes.md"},
				{"Store-Created", "2026-11-29T10:00:00Z"}, {"Agent", "support-bot-with-a-long-name"},
			}}, func(tx *Tx) error { return tx.WriteFile("notes.md", []byte("key: abcdefghijklmnopqrstuvwxyz0123\n")) })
			if err != nil {
				t.Fatal(err)
			}
			settle(t, r)
			if _, err := r.Redact(context.Background(), Redaction{Match: regexp.MustCompile(tc.pattern)}, false, nil); err != nil {
				t.Fatal(err)
			}
			settle(t, r)
			if got := gittest.Git(t, dir, "log", "-1", "--format=%B"); got != tc.want+"\n" {
				t.Fatalf("the message after the redaction:\n%s\nwant:\n%s", got, tc.want)
			}
			keys := gittest.Git(t, dir, "log", "-1", "--format=%(trailers:only,key_value_separator=|,valueonly=false)")
			for _, k := range []string{TrailerToolUseID, TrailerCommand, TrailerPath, "Store-Created", "Agent"} {
				if !strings.Contains(keys, k+"|") {
					t.Fatalf("git reads no %s trailer after the redaction: %q", k, keys)
				}
			}
			r.Close()
			assertNoSecret(t, dir, "abcdefghijklmnopqrstuvwxyz0123")
		})
	}
}

// A value under a kept key that is not of gitmem's own form (a commit made
// by hand or by another program) is redacted as any other: it was kept
// by its key alone, so a secret there survived a redaction that reported
// success (N7 G1).
func TestRedactKeepsOnlyGitmemsOwnValues(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	_, err := r.Update(context.Background(), Meta{Subject: "by hand", Trailers: []Trailer{
		{TrailerCommand, "sk-live1secret"}, {TrailerLine, "sk-live1secret"}, {"Merge-Head", "sk-live1secret"},
		{"Store-Created", "sk-live1secret"}, {"Store-Action", "update"},
	}}, func(tx *Tx) error { return tx.WriteFile("f.md", []byte("note\n")) })
	if err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	if _, err := r.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)}, false, nil); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	want := "by hand\n\nMemory-Command: [REDACTED]\nMemory-Line: [REDACTED]\nMerge-Head: [REDACTED]\nStore-Created: [REDACTED]\nStore-Action: update\n"
	if got := gittest.Git(t, dir, "log", "-1", "--format=%B"); got != want+"\n" {
		t.Fatalf("the message after the redaction:\n%s\nwant:\n%s", got, want)
	}
	r.Close()
	assertNoSecret(t, dir, "sk-live1secret")
}

// A server's small packs, kept in memory to be folded, are forgotten as
// it lets the writer lock go: the next holder may redact or repack them
// away, and the server, finding them gone at its next checkpoint, took
// that for a deletion of acknowledged objects and wrote them again from
// memory — the secret a CLI redact had just removed (the newcomer's pass:
// gitmem redact beside serve --stores, the blob back in a kept pack).
func TestLettingTheLockGoForgetsHeldPacks(t *testing.T) {
	t.Parallel()
	server, dir := initWritingLate(t) // as a store of serve --stores, writing late
	defer server.Close()
	write(t, server, "s1", "notes.md", "token sk-abc123\n")
	if err := server.checkpoint(); err != nil { // its small pack held, to be folded
		t.Fatal(err)
	}
	op, err := Open(context.Background(), dir, testOptions(t)) // the server lets the lock go
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	dt := server.disk.hold()
	n := len(dt.d.held)
	dt.release()
	if n != 0 {
		t.Fatalf("the server let the writer lock go holding %d group(s) of objects to write again if their packs go", n)
	}
	if _, err := op.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)}, false, nil); err != nil {
		t.Fatal(err)
	}
	op.Close()
	write(t, server, "s3", "other.md", "later\n")
	if err := server.Close(); err != nil {
		t.Fatal(err)
	}
	for _, o := range strings.Fields(gittest.Git(t, dir, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")) {
		if out := gittest.Git(t, dir, "cat-file", "-p", o); strings.Contains(out, "sk-abc123") {
			t.Fatalf("after the server's next change, object %s holds the redacted secret again:\n%s", o, out)
		}
	}
}
