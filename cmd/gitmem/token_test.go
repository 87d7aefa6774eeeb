package main

import (
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
