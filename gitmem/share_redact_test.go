package gitmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// objectsHold reports whether any object of the repository at dir (loose
// or packed, reachable or not) holds s, as git itself reads them.
func objectsHold(t *testing.T, dir, s string) bool {
	t.Helper()
	return strings.Contains(gittest.Git(t, dir, "cat-file", "--batch-all-objects", "--batch", "--unordered"), s)
}

// A secret reached the remote and three clones; one clone redacts it with
// --push. The remote and every clone lose it — the other clones' own
// unpushed commits included — their work is kept, and it never comes back.
// Meanwhile a clone pushes onto the old history: the lease catches it,
// and its commit is redacted and merged, not lost.
func TestRedactionPropagates(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-ABCDEFGHIJKLMNOPQRSTUV"
	remote := bareRemote(t)
	var c *Repo
	var once sync.Once
	// c pushes onto the old history while a redacts.
	a := agentWith(t, remote, "a", &testHooks{redactShared: func() { once.Do(func() { syncOK(t, c) }) }})
	put(t, a, "a1", "notes.md", "user likes tea\nkey: "+secret+"\n")
	put(t, a, "a2", "plans.md", "ship it\n")
	syncOK(t, a)
	b := agent(t, remote, "b")
	c = agent(t, remote, "c")
	for _, r := range []*Repo{a, b, c} {
		if !objectsHold(t, r.Dir(), secret) {
			t.Fatal("the secret should be everywhere before the redaction")
		}
	}
	// Work not pushed yet: b edits the file that holds the secret, c
	// changes something else.
	put(t, b, "b1", "notes.md", "user likes tea\nkey: "+secret+"\nuser likes cake\n")
	put(t, b, "b2", "b.md", "from b\n")
	put(t, c, "c1", "c.md", "from c\n")

	red := Redaction{Match: regexp.MustCompile(`sk-live-[A-Za-z0-9]{20,}`)}
	rep, res, err := a.RedactShared(context.Background(), "origin", red, SyncOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rewritten) == 0 || len(rep.Removed) == 0 || res.Retries != 1 {
		t.Fatalf("redaction: %d rewritten, %d removed, %d retries", len(rep.Rewritten), len(rep.Removed), res.Retries)
	}
	if objectsHold(t, remote, secret) {
		t.Error("the remote still holds the secret")
	}
	if objectsHold(t, a.Dir(), secret) {
		t.Error("the redacting clone still holds the secret")
	}
	if got := gittest.Git(t, remote, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)", "main"); !strings.Contains(got, "c1") {
		t.Errorf("c's commit, pushed during the redaction, is gone:\n%s", got)
	}

	res, err = b.Sync(context.Background(), "origin", SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Redactions != 1 {
		t.Errorf("b applied %d redactions", res.Redactions)
	}
	syncOK(t, c)
	syncOK(t, a)
	syncOK(t, b)
	heads := map[string]bool{}
	for _, r := range []*Repo{a, b, c} {
		h, _ := r.Commit(context.Background(), "HEAD")
		heads[h.Hash] = true
		r.Flush(context.Background())
		if objectsHold(t, r.Dir(), secret) {
			t.Errorf("%s still holds the secret", r.Dir())
		}
		gittest.Fsck(t, r.Dir())
	}
	if len(heads) != 1 {
		t.Errorf("the clones did not converge: %v", heads)
	}
	if objectsHold(t, remote, secret) {
		t.Error("a clone brought the secret back to the remote")
	}
	gittest.Fsck(t, remote)
	got := files(t, c)
	if got["notes.md"] != "user likes tea\nkey: [REDACTED]\nuser likes cake\n" || got["b.md"] != "from b\n" || got["c.md"] != "from c\n" || got["plans.md"] != "ship it\n" {
		t.Errorf("after the redaction everyone holds %v", got)
	}

	// Content a redaction removed is never pushed again.
	put(t, b, "b3", "notes.md", "user likes tea\nkey: "+secret+"\n")
	_, err = b.Push(context.Background(), "origin", SyncOptions{})
	if err == nil || !strings.Contains(err.Error(), "was removed by the redaction") {
		t.Fatalf("pushing removed content again: %v", err)
	}
	if objectsHold(t, remote, secret) {
		t.Error("the refused push reached the remote")
	}

	// A pattern that holds the secret itself would publish it.
	_, _, err = a.RedactShared(context.Background(), "origin", Redaction{Match: regexp.MustCompile(secret)}, SyncOptions{}, nil)
	if !errors.Is(err, ErrPatternHoldsSecret) {
		t.Errorf("a literal secret as the pattern: %v", err)
	}
}

// A clone with commits it has not pushed yet redacts a secret another
// clone pushed: the merge of the remote's history descends from those
// commits, and the push sends them too. It took them for the remote's
// once (the parents of the rewritten commits that were not rewritten),
// and left the remote's branch on a commit whose parent it lacked.
func TestRedactSharedSendsUnpushedCommits(t *testing.T) {
	t.Parallel()
	const secret = "xoxb-0123456789-abcdefghijKLMN"
	remote := bareRemote(t)
	a := agent(t, remote, "a")
	put(t, a, "a0", "base.md", "base\n")
	syncOK(t, a)
	b := agent(t, remote, "b")
	put(t, b, "b1", "slack.md", "token "+secret+"\n")
	syncOK(t, b)
	put(t, a, "a1", "mine.md", "not pushed yet\n") // a's own, no secret
	put(t, a, "a2", "mine2.md", "neither\n")
	red := Redaction{Match: regexp.MustCompile(`xoxb-[0-9A-Za-z-]{20,}`)}
	if _, _, err := a.RedactShared(context.Background(), "origin", red, SyncOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	gittest.Fsck(t, remote)
	got := gittest.Git(t, remote, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)", "main")
	for _, id := range []string{"a1", "a2", "b1"} {
		if !strings.Contains(got, id) {
			t.Errorf("the remote's history lacks %s:\n%s", id, got)
		}
	}
	if objectsHold(t, remote, secret) || objectsHold(t, a.Dir(), secret) {
		t.Error("the secret is still held")
	}
	syncOK(t, b)
	if fb := files(t, b); fb["mine.md"] != "not pushed yet\n" || !strings.Contains(fb["slack.md"], "[REDACTED]") {
		t.Errorf("b after its sync: %v", fb)
	}
}

// A redaction record the remote's history does not show (made up, or the
// history rewritten some other way) is refused: a redaction would erase
// the content from every clone's history for good.
func TestMadeUpRedactionRecordIsRefused(t *testing.T) {
	t.Parallel()
	remote := bareRemote(t)
	a := agent(t, remote, "a")
	put(t, a, "a1", "notes.md", "keep this\n")
	syncOK(t, a)
	b := agent(t, remote, "b")
	put(t, a, "a2", "more.md", "more\n")
	syncOK(t, a)

	pushRecord(t, remote, `{"id":"000000000000dead","time":"2026-01-01T00:00:00Z","path":"notes.md"}`+"\n")

	_, err := b.Sync(context.Background(), "origin", SyncOptions{})
	if err == nil || !strings.Contains(err.Error(), "redaction record 000000000000dead would remove content from the commit") {
		t.Fatalf("a made-up record: %v", err)
	}
	if got := files(t, b); got["notes.md"] != "keep this\n" {
		t.Errorf("b's memory after refusing: %v", got)
	}
	if out := gittest.Git(t, b.Dir(), "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)"); !strings.Contains(out, "a1") {
		t.Errorf("b's history lost a1:\n%s", out)
	}
}

// pushRecord makes the remote's refs/gitmem/redactions a record commit
// whose redactions file is data, as a hostile remote could.
func pushRecord(t *testing.T, remote, data string) {
	t.Helper()
	blob := hashObject(t, remote, "blob", []byte(data))
	tree := hashObject(t, remote, "tree", []byte("100644 redactions\x00"+string(blob[:])))
	commit := hashObject(t, remote, "commit", []byte("tree "+tree.String()+"\nauthor m <m@x> 1767225600 +0000\ncommitter m <m@x> 1767225600 +0000\n\nmemory: redaction record (1 redaction(s))\n\nMemory-Command: redaction-record\n"))
	gittest.Git(t, remote, "update-ref", "refs/gitmem/redactions", commit.String())
}

// Every field of a redaction record read from a remote is checked before
// it is used: a malformed record (a hash that is not 40 lowercase hex, a
// field gitmem does not know, a path a model could not write, an id that
// is not 16 hex, two rules or none, an id twice) is refused with a clear
// error, in a sync and in a clone, and changes nothing: not the memory,
// not the clone's own record. Each rule here would otherwise apply (it
// names nothing the history holds, so it rewrites nothing).
func TestMalformedRedactionRecordIsRefused(t *testing.T) {
	t.Parallel()
	const (
		id   = `"id":"0123456789abcdef","time":"2026-01-01T00:00:00Z"`
		hash = "1111111111111111111111111111111111111111"
	)
	// One setup for every case (each a remote, two agents and two syncs
	// before): b is behind the remote by a2, and a refused sync leaves it
	// so, which each case checks; a case whose record b took fails there.
	remote := bareRemote(t)
	a := agent(t, remote, "a")
	put(t, a, "a1", "notes.md", "keep this\n")
	syncOK(t, a)
	b := agent(t, remote, "b")
	put(t, a, "a2", "more.md", "more\n")
	syncOK(t, a)
	head, _ := b.Commit(context.Background(), "HEAD")
	for _, tc := range []struct {
		name, line, want string
	}{
		{"removed not a hash", `{` + id + `,"path":"gone.md","removed":["zz"]}`, `"removed" holds "zz", not an object hash (40 lowercase hex digits)`},
		{"removed upper case", `{` + id + `,"path":"gone.md","removed":["` + strings.ToUpper("abcdef"+hash[6:]) + `"]}`, `not an object hash`},
		{"removed short", `{` + id + `,"path":"gone.md","removed":["` + hash[:39] + `"]}`, `not an object hash`},
		{"rewritten old", `{` + id + `,"path":"gone.md","rewritten":[["HEAD","` + hash + `"]]}`, `"rewritten" holds "HEAD", not an object hash`},
		{"rewritten new", `{` + id + `,"path":"gone.md","rewritten":[["` + hash + `","` + hash + `x"]]}`, `not an object hash`},
		{"rewritten three", `{` + id + `,"path":"gone.md","rewritten":[["` + hash + `","` + hash + `","` + hash + `"]]}`, `"rewritten" holds a list of 3 hashes, not a pair`},
		{"blob", `{` + id + `,"blob":"not-a-blob"}`, `"blob" holds "not-a-blob", not an object hash`},
		{"unknown field", `{` + id + `,"path":"gone.md","paths":["notes.md"]}`, `is not JSON of the record's form (json: unknown field "paths")`},
		{"path outside", `{` + id + `,"path":"../.git/config"}`, `"path" holds "../.git/config", not a valid memory path`},
		{"path absolute", `{` + id + `,"path":"/memories/gone.md"}`, `not a valid memory path`},
		{"path in .git", `{` + id + `,"path":".git/config"}`, `not a valid memory path`},
		{"bad id", `{"id":"x\u001b[31mred","time":"2026-01-01T00:00:00Z","path":"gone.md"}`, `"id" holds "x\x1b[31mred", not 16 lowercase hex digits`},
		{"two rules", `{` + id + `,"path":"gone.md","blob":"` + hash + `"}`, `holds 2 rules (path, blob, match), not one`},
		{"no rule", `{` + id + `}`, `holds 0 rules (path, blob, match), not one`},
		{"bad pattern", `{` + id + `,"match":"("}`, `"match" is not a pattern`},
		{"same id twice", `{` + id + `,"path":"gone.md"}` + "\n" + `{` + id + `,"path":"gone2.md"}`, `the id 0123456789abcdef is there twice`},
		{"not json", `{` + id + `,"path":`, `is not JSON of the record's form`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pushRecord(t, remote, tc.line+"\n")

			_, err := b.Sync(context.Background(), "origin", SyncOptions{})
			if err == nil || !strings.Contains(err.Error(), "the redaction record") || !strings.Contains(err.Error(), "is damaged") ||
				!strings.Contains(err.Error(), tc.want) {
				t.Fatalf("sync: %v\nwant the record refused with %s", err, tc.want)
			}
			if now, _ := b.Commit(context.Background(), "HEAD"); now.Hash != head.Hash {
				t.Errorf("b's HEAD moved to %s", now.Subject)
			}
			if got := files(t, b); len(got) != 1 || got["notes.md"] != "keep this\n" {
				t.Errorf("b's memory after refusing: %v", got)
			}
			if out := gittest.Git(t, b.Dir(), "for-each-ref", "refs/gitmem/redactions"); out != "" {
				t.Errorf("b took the record as its own: %s", out)
			}

			dir := filepath.Join(gittest.TempDir(t), "c")
			if c, _, err := Clone(context.Background(), remote, dir, agentOptions(t, "c"), SyncOptions{}); err == nil {
				c.Close()
				t.Errorf("a clone took the record")
			} else if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("clone: %v", err)
			}
		})
	}
}

// A redaction made without --push leaves the remote with the old history:
// the next sync must not bring the secret back, whether the remote's
// branch is still where it was or another agent pushed on top of it; the
// refusal names the way out, and redact --push then clears the remote.
func TestLocalRedactionIsNotUndoneBySync(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-ABCDEFGHIJKLMNOPQRSTUV"
	for _, moved := range []bool{false, true} {
		t.Run(map[bool]string{false: "remote as it was", true: "remote moved on"}[moved], func(t *testing.T) {
			remote := bareRemote(t)
			a := agent(t, remote, "a")
			put(t, a, "a1", "creds.md", "key: "+secret+"\n")
			put(t, a, "a2", "plans.md", "ship it\n")
			syncOK(t, a)
			b := agent(t, remote, "b")
			red := Redaction{Path: "creds.md"}
			if _, err := a.Redact(context.Background(), red, false, nil); err != nil {
				t.Fatal(err)
			}
			if objectsHold(t, a.Dir(), secret) {
				t.Fatal("the redaction left the secret")
			}
			if moved {
				put(t, b, "b1", "b.md", "from b\n")
				syncOK(t, b)
			}
			head := gittest.Git(t, a.Dir(), "rev-parse", "HEAD")
			for _, op := range []func() (SyncResult, error){
				func() (SyncResult, error) { return a.Sync(context.Background(), "origin", SyncOptions{}) },
				func() (SyncResult, error) { return a.Pull(context.Background(), "origin", SyncOptions{}) },
			} {
				_, err := op()
				var re *RedactedRemoteError
				if !errors.As(err, &re) || re.Remote != "origin" {
					t.Fatalf("sync after a local redaction: %v", err)
				}
			}
			if got := gittest.Git(t, a.Dir(), "rev-parse", "HEAD"); got != head {
				t.Fatal("the refused sync moved HEAD")
			}
			if strings.Contains(gittest.Git(t, a.Dir(), "log", "--all", "-p"), secret) {
				t.Fatal("the secret is back in a history the memory's refs reach")
			}
			if !moved && objectsHold(t, a.Dir(), secret) {
				t.Fatal("the refused fetch brought the secret's objects")
			}
			// The way out: redact the remote too.
			if _, _, err := a.RedactShared(context.Background(), "origin", red, SyncOptions{}, nil); err != nil {
				t.Fatal(err)
			}
			if objectsHold(t, remote, secret) || objectsHold(t, a.Dir(), secret) {
				t.Fatal("redact --push left the secret")
			}
			syncOK(t, a)
			if moved {
				if got := read(t, a, "b.md"); got != "from b\n" {
					t.Fatalf("b's commit on the old history was lost: %q", got)
				}
			}
			if _, err := b.Sync(context.Background(), "origin", SyncOptions{}); err != nil {
				t.Fatal(err)
			}
			if objectsHold(t, b.Dir(), secret) || read(t, a, "plans.md") != "ship it\n" {
				t.Fatal("b kept the secret, or a lost plans.md")
			}
			gittest.Fsck(t, a.Dir())
			gittest.Fsck(t, remote)
		})
	}
}

// Two plain redactions, then the first pushed: the push rewrites the
// remote's history by both (and records both for the other clones), so
// neither secret comes back, here, there or in a clone.
func TestTwoLocalRedactionsThenPush(t *testing.T) {
	t.Parallel()
	const s1, s2 = "sk-live-FIRSTFIRSTFIRSTFIRST1", "sk-live-SECONDSECONDSECOND22"
	remote := bareRemote(t)
	a := agent(t, remote, "a")
	put(t, a, "a1", "a.md", "one: "+s1+"\n")
	put(t, a, "a2", "b.md", "two: "+s2+"\n")
	put(t, a, "a3", "c.md", "plain\n")
	syncOK(t, a)
	b := agent(t, remote, "b")
	r1 := Redaction{Match: regexp.MustCompile(`sk-live-FIRST[A-Z0-9]+`)}
	r2 := Redaction{Path: "b.md"}
	for _, red := range []Redaction{r1, r2} {
		if _, err := a.Redact(context.Background(), red, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Sync(context.Background(), "origin", SyncOptions{}); !errors.As(err, new(*RedactedRemoteError)) {
		t.Fatalf("sync: %v", err)
	}
	// The first one pushed: the second rewrote what the first made of
	// that history, so it must be applied there too.
	if _, _, err := a.RedactShared(context.Background(), "origin", r1, SyncOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{a.Dir(), remote} {
		for _, sec := range []string{s1, s2} {
			if objectsHold(t, dir, sec) {
				t.Errorf("%s holds %s after the push", dir, sec)
			}
		}
	}
	syncOK(t, a)
	if _, err := b.Sync(context.Background(), "origin", SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, sec := range []string{s1, s2} {
		if objectsHold(t, b.Dir(), sec) {
			t.Errorf("the other clone holds %s after its sync", sec)
		}
	}
	if read(t, b, "c.md") != "plain\n" || read(t, a, "a.md") != "one: [REDACTED]\n" {
		t.Fatal("a file was lost")
	}
	gittest.Fsck(t, a.Dir())
	gittest.Fsck(t, remote)
}

// A plain redaction interrupted after its first ref moved (the next open
// finishes it) has noted its commits all the same: the sync is refused.
// One that failed before any ref moved noted commits that are still the
// memory's own, and refuses nothing.
func TestInterruptedLocalRedactionIsNoted(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-ABCDEFGHIJKLMNOPQRSTUV"
	remote := bareRemote(t)
	// The redaction stops after its record, before the refs move.
	a := agentWith(t, remote, "a", &testHooks{redactFault: func() error { return errors.New("killed") }})
	put(t, a, "a1", "creds.md", "key: "+secret+"\n")
	put(t, a, "a2", "plans.md", "ship it\n")
	syncOK(t, a)
	_, err := a.Redact(context.Background(), Redaction{Path: "creds.md"}, false, nil)
	if err == nil {
		t.Fatal("the fault did not stop the redaction")
	}
	dir := a.Dir()
	a.Close()
	a, err = Open(context.Background(), dir, agentOptions(t, "a")) // finishes the redaction
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if strings.Contains(gittest.Git(t, dir, "log", "--all", "-p"), secret) {
		t.Fatal("the interrupted redaction was not finished")
	}
	if _, err := a.Sync(context.Background(), "origin", SyncOptions{}); !errors.As(err, new(*RedactedRemoteError)) {
		t.Fatalf("sync after an interrupted redaction: %v", err)
	}
}

// A clone that was away while another redacted with --push applies the
// redaction at its next sync, and merges what came since: the worktree is
// then what the rewritten history says, and nothing is taken for a hand
// edit (issue 21, item 10: its next command committed "memory: adopt
// changes made outside gitmem" for the redacted file, conflict markers
// and duplicated lines in it, and pushed that to every clone).
func TestAppliedRedactionIsNoHandEdit(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-ABCDEFGHIJKLMNOPQRSTUV"
	remote := bareRemote(t)
	a := agent(t, remote, "a")
	put(t, a, "a1", "notes.md", "user likes tea\nkey: "+secret+"\nend\n")
	syncOK(t, a)
	b := agent(t, remote, "b")
	// b works on, not pushing: the file with the secret too.
	put(t, b, "b1", "notes.md", "user likes tea\nkey: "+secret+"\nend\nb was here\n")
	put(t, b, "b2", "b.md", "from b\n")
	// a redacts the shared memory, then changes the file again.
	red := Redaction{Match: regexp.MustCompile(`sk-live-[A-Za-z0-9]{20,}`)}
	if _, _, err := a.RedactShared(context.Background(), "origin", red, SyncOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	put(t, a, "a2", "notes.md", "user likes green tea\nkey: [REDACTED]\nend\n")
	syncOK(t, a)
	// An operator's edit b has not committed yet: kept, and redacted too.
	if err := os.WriteFile(filepath.Join(b.Dir(), "memories", "hand.md"), []byte("by hand: "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	res := syncOK(t, b)
	if res.Redactions != 1 || res.Merge == "" {
		t.Fatalf("b's sync: %+v", res)
	}
	if err := b.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := "user likes green tea\nkey: [REDACTED]\nend\nb was here\n"
	if got := files(t, b); got["notes.md"] != want {
		t.Fatalf("HEAD holds %q, want %q", got["notes.md"], want)
	}
	if got, head := onDisk(t, b), files(t, b); fmt.Sprint(got) != fmt.Sprint(head) {
		t.Errorf("the worktree is not HEAD after the redaction:\n%v\n%v", got, head)
	}
	// The next commands: a tool call, the periodic adopt, a sync.
	put(t, b, "b3", "b.md", "from b, again\n")
	if c, err := b.Adopt(context.Background()); !errors.Is(err, ErrNoChange) {
		t.Errorf("the redaction's worktree was adopted as a hand edit: %s %v (%v)", c.Subject, c.Paths, err)
	}
	syncOK(t, b)
	b.Flush(context.Background())
	if adopts := gittest.Git(t, b.Dir(), "log", "--format=%s", "--name-only", "--grep=adopt"); adopts != "memory: adopt changes made outside gitmem\n\nmemories/hand.md\n" {
		t.Errorf("the adopt commits (the hand edit's alone):\n%s", adopts)
	}
	if got := files(t, b); got["notes.md"] != want || got["hand.md"] != "by hand: [REDACTED]\n" {
		t.Errorf("after the sync: %q", got)
	}
	if objectsHold(t, b.Dir(), secret) {
		t.Error("b still holds the secret")
	}
	if st := gittest.Git(t, b.Dir(), "status", "--porcelain"); st != "" {
		t.Errorf("git status after the sync:\n%s", st)
	}
	gittest.Fsck(t, b.Dir())
}

// hashObject writes a raw object into a repository with the git CLI,
// malformed or not (--literally).
func hashObject(t *testing.T, dir, kind string, data []byte) plumbing.Hash {
	t.Helper()
	return plumbing.NewHash(strings.TrimSpace(gittest.GitIn(t, dir, string(data), "hash-object", "-w", "--literally", "-t", kind, "--stdin")))
}

// A redaction pushed by a gitmem of other rules (an older version, which
// redacted trailer keys too) is taken as the record says for the commits
// the remote held: the clone applying it does not rewrite them with its
// own rules into other commits and merge both copies. Its own unpushed
// commits are rewritten on top of the remote's. It once ended with every
// shared commit twice. With a redaction made here before (chain), the
// record holds two, the first's new commits rewritten by the second: the
// clone follows the record's maps to the remote's.
func TestRedactionOfOtherRulesIsNotDuplicated(t *testing.T) {
	t.Parallel()
	for _, chain := range []bool{false, true} {
		t.Run(fmt.Sprint("chain=", chain), func(t *testing.T) {
			t.Parallel()
			const secret = "sk-live-ABCDEFGHIJKLMNOPQRSTUV"
			remote := bareRemote(t)
			// a redacts as gitmem did before 8cf1446: the whole message.
			older := func(m *regexp.Regexp, msg string) string { return m.ReplaceAllLiteralString(msg, redacted) }
			a := agentWith(t, remote, "a", &testHooks{redactMessage: older})
			put(t, a, "a1", "notes.md", "key: "+secret+"\n")
			put(t, a, "a2", "plans.md", "ship it\n")
			syncOK(t, a)
			b := agent(t, remote, "b")
			put(t, b, "b1", "b.md", "from b\n") // not pushed yet

			// A pattern that matches a trailer's key: the rules differ there.
			red := Redaction{Match: regexp.MustCompile(`sk-live-[A-Za-z0-9]{20,}|Memory-Pat[h]`)}
			redactions := 1
			if chain {
				if _, err := a.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`Memory-Pat[h]`)}, false, nil); err != nil {
					t.Fatal(err)
				}
				red = Redaction{Match: regexp.MustCompile(`sk-live-[A-Za-z0-9]{20,}`)}
				redactions = 2
			}
			if _, _, err := a.RedactShared(context.Background(), "origin", red, SyncOptions{}, nil); err != nil {
				t.Fatal(err)
			}
			res := syncOK(t, b)
			if res.Redactions != redactions {
				t.Errorf("b applied %d redactions, want %d", res.Redactions, redactions)
			}
			syncOK(t, a)
			for _, dir := range []string{remote, a.Dir(), b.Dir()} {
				// git reads no trailers in the older form ("[REDACTED]: ..."
				// is no key): the messages' lines are read instead.
				var ids []string
				for line := range strings.Lines(gittest.Git(t, dir, "log", "--format=%B", "main")) {
					if id, ok := strings.CutPrefix(strings.TrimSpace(line), TrailerToolUseID+": "); ok {
						ids = append(ids, id)
					}
				}
				n := map[string]int{}
				for _, id := range ids {
					n[id]++
				}
				if n["a1"] != 1 || n["a2"] != 1 || n["b1"] != 1 || len(n) != 3 {
					t.Errorf("%s holds the commits %v:\n%s", filepath.Base(dir), ids, gittest.Git(t, dir, "log", "--oneline", "main"))
				}
				if objectsHold(t, dir, secret) {
					t.Errorf("%s still holds the secret", filepath.Base(dir))
				}
				gittest.Fsck(t, dir)
			}
			if got := files(t, b); got["notes.md"] != "key: [REDACTED]\n" || got["b.md"] != "from b\n" {
				t.Errorf("b holds %v", got)
			}
		})
	}
}
