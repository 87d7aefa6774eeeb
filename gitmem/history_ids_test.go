package gitmem

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A commit that changes thousands of files has a history index record
// longer than the reader's buffer: its tool_use ids are still read, and
// the next change after a restart goes through.
func TestLongHistoryRecordIsRead(t *testing.T) {
	dir := t.TempDir()
	r, _, err := Init(dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Update(Meta{Subject: "seed", Trailers: []Trailer{{TrailerToolUseID, "toolu_seed"}}}, func(tx *Tx) error {
		for i := range 4000 { // ~100 bytes of record each: over 256 KiB
			if err := tx.WriteFile(fmt.Sprintf("notes/%s-%05d.md", strings.Repeat("n", 40), i), []byte("x\n")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "toolu_after", "a.md", "a\n")
	r.Close()
	r, err = Open(dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	write(t, r, "toolu_next", "b.md", "b\n")
	// The seed's id is known: the same call again is not made twice.
	_, err = r.Update(Meta{Subject: "seed", Trailers: []Trailer{{TrailerToolUseID, "toolu_seed"}}}, func(tx *Tx) error {
		return tx.WriteFile("c.md", []byte("c\n"))
	})
	var applied *AppliedError
	if !errors.As(err, &applied) || applied.Commit.Subject != "seed" {
		t.Fatalf("the seed's id again: %v", err)
	}
}
