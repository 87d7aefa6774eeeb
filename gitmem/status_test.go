package gitmem

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// IndexLag counts the commits the history index file does not hold yet.
func TestIndexLag(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	for i := range 3 {
		write(t, r, fmt.Sprint("id-", i), "a.md", fmt.Sprint(i))
	}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.Log(context.Background(), LogOptions{Limit: 1}, nil, func(Commit) error { return nil }) // the index is up to date
	if lag, err := r.IndexLag(context.Background(), 100); err != nil || lag != 0 {
		t.Fatalf("lag %d, %v after a log", lag, err)
	}
	if err := os.Remove(filepath.Join(dir, ".git", "gitmem", "history")); err != nil {
		t.Fatal(err)
	}
	if lag, err := r.IndexLag(context.Background(), 100); err != nil || lag != 100 {
		t.Fatalf("lag %d, %v without the index", lag, err)
	}
	if lag, _ := r.IndexLag(context.Background(), 2); lag != 2 {
		t.Fatalf("lag %d with max 2", lag)
	}
}
