package gitmem_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
)

// Every Update is one commit; Log reads them back, newest first.
func Example() {
	dir, _ := os.MkdirTemp("", "gitmem-example-")
	defer os.RemoveAll(dir)
	clock := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	repo, _, err := gitmem.Init(context.Background(), dir, gitmem.Options{Now: clock, Logf: func(string, ...any) {}})
	if err != nil {
		log.Fatal(err)
	}
	defer repo.Close()

	meta := gitmem.Meta{Subject: "memory: create /memories/prefs.md", Trailers: []gitmem.Trailer{
		{Key: gitmem.TrailerToolUseID, Value: "toolu_01"},
		{Key: gitmem.TrailerCommand, Value: "create"},
		{Key: gitmem.TrailerPath, Value: "/memories/prefs.md"},
	}}
	if _, err := repo.Update(context.Background(), meta, func(tx *gitmem.Tx) error {
		return tx.WriteFile("prefs.md", []byte("color: blue\n"))
	}); err != nil {
		log.Fatal(err)
	}
	// The same tool_use id again is not applied twice.
	_, err = repo.Update(context.Background(), meta, func(tx *gitmem.Tx) error { return tx.WriteFile("prefs.md", []byte("twice")) })
	fmt.Println("retry:", err != nil)

	repo.Log(context.Background(), gitmem.LogOptions{}, nil, func(c gitmem.Commit) error {
		fmt.Println(c.Subject, c.Trailer(gitmem.TrailerToolUseID), c.Paths)
		return nil
	})
	view, _ := repo.Snapshot(context.Background())
	data, _ := view.ReadFile("prefs.md")
	fmt.Printf("%q\n", data)
	// Output:
	// retry: true
	// memory: create /memories/prefs.md toolu_01 [prefs.md]
	// memory: init  []
	// "color: blue\n"
}
