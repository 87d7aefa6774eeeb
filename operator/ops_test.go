package operator_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/operator"
)

func newRepo(t *testing.T) (*gitmem.Repo, func(id, path, content string) gitmem.Commit) {
	t.Helper()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r, _, err := gitmem.Init(context.Background(), gittest.TempDir(t), gitmem.Options{Now: func() time.Time { return clock }, Logf: t.Logf,
		Operator: gitmem.Signature{Name: "op", Email: "op@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, func(id, path, content string) gitmem.Commit {
		t.Helper()
		clock = clock.Add(time.Hour)
		c, err := r.Update(context.Background(), gitmem.Meta{Subject: "w " + path, Trailers: []gitmem.Trailer{{Key: gitmem.TrailerToolUseID, Value: id}}}, func(tx *gitmem.Tx) error {
			return tx.WriteFile(path, []byte(content))
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// A previewed revert is confirmed only while it would change the same
// files from and to the same contents: a change made in between (by
// another operator or an agent) refuses it, and nothing is committed.
func TestExpectChangesRefusesWhatWasNotPreviewed(t *testing.T) {
	t.Parallel()
	r, write := newRepo(t)
	write("t1", "a.md", "one\ntwo\nthree\n")
	write("t2", "a.md", "one\nTWO\nthree\n")
	_, preview, err := r.Revert(context.Background(), []string{"t2"}, gitmem.RevertOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	sum := operator.ChangesSHA256(preview)
	if again := operator.ChangesSHA256(append([]gitmem.FileChange(nil), preview...)); again != sum || len(sum) != 64 {
		t.Fatalf("the digest is not stable: %s, %s", sum, again)
	}
	write("t3", "a.md", "one\nTWO\nthree\nfour\n") // lands between the preview and the confirmation
	head, _ := r.Commit(context.Background(), "HEAD")
	if _, _, err := r.Revert(context.Background(), []string{"t2"}, gitmem.RevertOptions{Check: operator.ExpectChanges(sum)}); !errors.Is(err, operator.ErrPreviewChanged) {
		t.Fatalf("a revert whose preview is out of date: %v", err)
	}
	if now, _ := r.Commit(context.Background(), "HEAD"); now.Hash != head.Hash {
		t.Fatal("a refused revert committed")
	}
	_, preview, _ = r.Revert(context.Background(), []string{"t2"}, gitmem.RevertOptions{DryRun: true})
	c, _, err := r.Revert(context.Background(), []string{"t2"}, gitmem.RevertOptions{Check: operator.ExpectChanges(operator.ChangesSHA256(preview))})
	if err != nil || c.Hash == head.Hash {
		t.Fatalf("the revert of its new preview: %v", err)
	}

	// An expire's preview is its deletions.
	stale, changes, err := operator.ExpirePreview(context.Background(), r, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), nil)
	if err != nil || len(stale) != 1 || len(changes) != 1 || changes[0].NewFile || string(changes[0].Old) != "one\ntwo\nthree\nfour\n" {
		t.Fatalf("expire preview: %+v %+v %v", stale, changes, err)
	}
	if _, _, err := r.Expire(context.Background(), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), gitmem.ExpireOptions{Check: operator.ExpectChanges(operator.ChangesSHA256(changes))}); err != nil {
		t.Fatalf("the expire of its preview: %v", err)
	}
}

// ListFolder gives a folder's own entries, each with its last change: a
// folder's is the newest change to anything beneath it.
func TestListFolder(t *testing.T) {
	t.Parallel()
	r, write := newRepo(t)
	write("t1", "notes/a.md", "a\n")
	write("t2", "top.md", "top\n")
	write("t3", "notes/deep/b.md", "bb\n")
	entries, err := operator.ListFolder(context.Background(), r, "")
	if err != nil || len(entries) != 2 {
		t.Fatalf("%+v %v", entries, err)
	}
	notes, top := entries[0], entries[1]
	if notes.Path != "notes" || !notes.Dir || notes.Files != 2 || notes.Size != 5 || notes.Last.Trailer(gitmem.TrailerToolUseID) != "t3" {
		t.Errorf("notes: %+v", notes)
	}
	if top.Path != "top.md" || top.Dir || top.Size != 4 || top.Last.Trailer(gitmem.TrailerToolUseID) != "t2" {
		t.Errorf("top.md: %+v", top)
	}
	if _, err := operator.ListFolder(context.Background(), r, "top.md"); !errors.Is(err, gitmem.ErrNotDir) {
		t.Errorf("a file listed as a folder: %v", err)
	}
}

// An id that reads as a time (restore --to takes times) names two
// commits when the time names another: refused as a usage error, not
// taken for the call's commit. Where times are not taken, or the time
// names the call's own commit, the id is the call's. Before, --to 2h
// restored to the call whose id was 2h.
func TestRevisionRefusesAnIdThatIsAnotherCommitsTime(t *testing.T) {
	t.Parallel()
	r, write := newRepo(t)
	write("toolu_a", "a.md", "a\n")                     // 01:00
	byID := write("2h", "b.md", "b\n")                  // 02:00
	third := write("toolu_c", "c.md", "c\n")            // 03:00
	write("toolu_d", "d.md", "d\n")                     // 04:00
	now := time.Date(2026, 1, 1, 5, 30, 0, 0, time.UTC) // 2h ago: 03:30, third's time
	_, err := operator.Revision(context.Background(), r, "2h", now, true)
	var re *operator.RevError
	want := `"2h" names two commits: the tool_use id of ` + byID.Hash[:12] + ` and the time ` + third.Hash[:12] + `; name the one meant by its hash`
	if !errors.As(err, &re) || !re.Usage || re.Msg != want {
		t.Fatalf("Revision(2h) with times: %v; want a usage error %q", err, want)
	}
	if c, err := operator.Revision(context.Background(), r, "2h", now, false); err != nil || c.Hash != byID.Hash {
		t.Fatalf("Revision(2h) without times = %s, %v; want the call's %s", c.Hash, err, byID.Hash)
	}
	if c, err := operator.Revision(context.Background(), r, "2h", now.Add(-time.Hour), true); err != nil || c.Hash != byID.Hash {
		t.Fatalf("Revision(2h) when 2h ago was the call's = %s, %v; want %s", c.Hash, err, byID.Hash)
	}
}

// A name that names nothing is echoed clipped: its first 80 bytes,
// quoted, then "...". Before, `gitmem show <3,000 bytes>` (and the
// operator API's versions/{rev}) echoed all of it.
func TestRevisionOfNothingEchoesTheNameClipped(t *testing.T) {
	t.Parallel()
	r, write := newRepo(t)
	write("toolu_a", "a.md", "a\n")
	long := strings.Repeat("a", 3000)
	_, err := operator.Revision(context.Background(), r, long, time.Now(), false)
	var re *operator.RevError
	if want := `"` + long[:80] + `"... is not a commit, tool_use id or revision of this memory`; !errors.As(err, &re) || re.Msg != want {
		t.Fatalf("Revision(3,000 bytes): %v; want %q", err, want)
	}
	_, err = operator.Revision(context.Background(), r, "toolu_nope", time.Now(), false)
	if want := `"toolu_nope" is not a commit, tool_use id or revision of this memory`; !errors.As(err, &re) || re.Msg != want {
		t.Fatalf("Revision(toolu_nope): %v; want %q", err, want)
	}
	if _, _, err := r.Revert(context.Background(), []string{long}, gitmem.RevertOptions{}); err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), `"...`) {
		t.Fatalf("Revert(3,000 bytes): %v", err)
	}
}
