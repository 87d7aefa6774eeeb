package gitmem

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A library caller that passes hostile identities or messages cannot make
// an object git rejects: encoding neutralises what would corrupt a commit
// (angle brackets and newlines in an identity, NUL anywhere).
func TestHostileMetadataKeepsFsckClean(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
	r, dir := newRepo(t)
	meta := Meta{
		Subject:  "sub\x00ject\nsecond line",
		Author:   Signature{Name: "evil> <x", Email: "a@b> <forged@corp\n"},
		Trailers: []Trailer{{TrailerToolUseID, "toolu_1"}, {TrailerSession, "s\x00\r\nForged: yes"}},
	}
	c, err := r.Update(context.Background(), meta, func(tx *Tx) error { return tx.WriteFile("a.md", []byte("x")) })
	if err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	gittest.Fsck(t, dir)
	got := gittest.Git(t, dir, "log", "-1", "--format=%an|%ae|%B")
	want := "evil x|a@b forged@corp|sub ject second line\n\nTool-Use-Id: toolu_1\nSession: s Forged: yes\n\n"
	if got != want {
		t.Errorf("commit:\n got %q\nwant %q", got, want)
	}
	if c.Author != (Signature{"evil x", "a@b forged@corp"}) {
		t.Errorf("returned author %+v differs from the object's", c.Author)
	}
	if trailers := gittest.Git(t, dir, "log", "-1", "--format=%(trailers:key=Forged)"); strings.TrimSpace(trailers) != "" {
		t.Errorf("a value forged a trailer: %q", trailers)
	}
}
