package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/storesapi"
)

// Two token edits at once: the second waits for the first, and both
// changes are kept. Before, each read the file, changed it and renamed
// its copy over it: the later rename undid the other's change (20 adds
// at once kept 16; a token removed while another was added came back).
// Here the first edit holds its change until the second is done or a
// second has passed: without the lock the second is done at once, from
// the file as it was, and the first then writes over it.
func TestTokenEditsAtOnceKeepBoth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	add := func(name string) func(f *policy.TokenFile) error {
		return func(f *policy.TokenFile) error {
			f.Tokens = append(f.Tokens, policy.Token{Name: name, SHA256: storesapi.HashToken("secret-" + name),
				Stores: []string{"*"}, Access: policy.ReadWrite, Role: policy.Agent})
			return nil
		}
	}
	if err := editTokens(path, add("revoked")); err != nil {
		t.Fatal(err)
	}
	inside, secondDone := make(chan struct{}), make(chan error, 1)
	first := make(chan error, 1)
	go func() {
		first <- editTokens(path, func(f *policy.TokenFile) error {
			close(inside)
			select {
			case <-secondDone:
			case <-time.After(time.Second):
			}
			return add("new")(f)
		})
	}()
	<-inside
	err := editTokens(path, func(f *policy.TokenFile) error {
		f.Tokens = slices.DeleteFunc(f.Tokens, func(t policy.Token) bool { return t.Name == "revoked" })
		return nil
	})
	secondDone <- err
	if err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	f, err := readTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tok := range f.Tokens {
		names = append(names, tok.Name)
	}
	if !slices.Equal(names, []string{"new"}) {
		t.Fatalf("the token file holds %v after removing revoked while adding new, want [new]", names)
	}
}

// A token file reached through a link: the file behind it is changed,
// and the link stays. The rename put a file of its own in the link's
// place: a token removed through /etc/gitmem/tokens.json -> /srv/...
// stayed in the file the server read (N7 G2).
func TestTokenEditThroughALinkChangesItsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	real, link := filepath.Join(dir, "real.json"), filepath.Join(dir, "link.json")
	add := func(f *policy.TokenFile) error {
		f.Tokens = append(f.Tokens, policy.Token{Name: "a", SHA256: storesapi.HashToken("secret-a"), Stores: []string{"*"}, Access: policy.ReadWrite, Role: policy.Agent})
		return nil
	}
	if err := editTokens(real, add); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.json", link); err != nil {
		t.Fatal(err)
	}
	if err := editTokens(link, func(f *policy.TokenFile) error { f.Tokens = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link is no longer a link: %v %v", fi.Mode(), err)
	}
	if f, err := readTokens(real); err != nil || len(f.Tokens) != 0 {
		t.Fatalf("the file behind the link holds %v (%v), want no token", f.Tokens, err)
	}
}
