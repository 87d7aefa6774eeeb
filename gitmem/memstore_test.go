package gitmem

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// Log gives, beside each changed path, the blob the commit left there
// ("" where it deleted the file), as git has it.
func TestLogGivesTheBlobOfEachChangedPath(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "one\n")
	write(t, r, "t2", "b/c.md", "two\n")
	if _, err := r.Update(context.Background(), Meta{Subject: "mv"}, func(tx *Tx) error { return tx.Rename("a.md", "b/a.md") }); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	n := 0
	err := r.Log(context.Background(), LogOptions{}, nil, func(c Commit) error {
		if len(c.Blobs) != len(c.Paths) {
			t.Fatalf("%s: %d paths, %d blobs", c.Subject, len(c.Paths), len(c.Blobs))
		}
		for i, p := range c.Paths {
			want := ""
			if out, err := gittest.Command(t, dir, "rev-parse", "--verify", "-q", c.Hash+":memories/"+p).Output(); err == nil {
				want = strings.TrimSpace(string(out))
			}
			if c.Blobs[i] != want {
				t.Errorf("%s: %s holds %q, Log says %q", c.Subject, p, want, c.Blobs[i])
			}
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 { // a.md, b/c.md, and the rename's two
		t.Errorf("%d changed paths", n)
	}
}

// A transaction reads the commit it builds on, also one not yet in git's
// files: its trailers and hash.
func TestTransactionReadsItsHeadCommit(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	first := write(t, r, "t1", "a.md", "one\n")
	var got Commit
	_, err := r.Update(context.Background(), Meta{Subject: "second"}, func(tx *Tx) error {
		var err error
		got, err = tx.HeadCommit()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != first.Hash || got.Trailer(TrailerToolUseID) != "t1" || got.Subject != "w a.md" || !got.Time.Equal(first.Time) {
		t.Fatalf("head commit %+v, want %+v", got, first)
	}
}

// A blob redacted with a placeholder leaves every commit's changed paths
// as they were (the placeholder stands where the blob stood), is in no
// object afterwards, and the current content cannot be redacted so:
// only the past goes.
func TestRedactBlobWithPlaceholder(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "first\n")
	secret := write(t, r, "t2", "a.md", "the secret 42\n")
	write(t, r, "t3", "b.md", "the secret 42\n") // the same content elsewhere
	write(t, r, "t4", "b.md", "other\n")
	write(t, r, "t5", "a.md", "third\n")
	settle(t, r)
	blob := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", secret.Hash+":memories/a.md"))
	paths := func() (out []string) {
		r.Log(context.Background(), LogOptions{}, nil, func(c Commit) error {
			out = append(out, c.Subject+":"+strings.Join(c.Paths, ","))
			return nil
		})
		return out
	}
	before := paths()

	// The current content is refused, and nothing changes.
	cur := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD:memories/a.md"))
	head := gittest.Git(t, dir, "rev-parse", "HEAD")
	_, err := r.Redact(context.Background(), Redaction{Blob: cur, Placeholder: []byte("[gone]\n")}, false, nil)
	var inUse *InUseError
	if !errors.As(err, &inUse) || !slices.Equal(inUse.Paths, []string{"a.md"}) {
		t.Fatalf("redacting the current content: %v", err)
	}
	if gittest.Git(t, dir, "rev-parse", "HEAD") != head {
		t.Fatal("a refused redaction moved HEAD")
	}

	rep, err := r.Redact(context.Background(), Redaction{Blob: blob, Placeholder: []byte("[gone]\n")}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Removed, []string{blob}) {
		t.Errorf("removed %v", rep.Removed)
	}
	if after := paths(); !slices.Equal(after, before) {
		t.Errorf("changed paths before:\n%v\nafter:\n%v", before, after)
	}
	if out := gittest.Git(t, dir, "cat-file", "--batch-all-objects", "--batch"); strings.Contains(out, "secret 42") {
		t.Fatal("an object still holds the redacted content")
	}
	if got := gittest.Git(t, dir, "show", "HEAD~2:memories/a.md"); got != "[gone]\n" {
		t.Errorf("the redacted version holds %q", got)
	}
	if got := gittest.Git(t, dir, "show", "HEAD~2:memories/b.md"); got != "[gone]\n" {
		t.Errorf("the same content in b.md holds %q", got)
	}
	if got := read(t, r, "a.md"); got != "third\n" {
		t.Errorf("a.md is %q", got)
	}
	gittest.Fsck(t, dir)
}
