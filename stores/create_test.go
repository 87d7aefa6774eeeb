package stores_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/stores"
)

// storesFolder lists the stores folder: what a create left there.
func storesFolder(t *testing.T, root string) string {
	t.Helper()
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// F13: two processes (two Dirs on one folder) creating one name at once:
// exactly one creates it, with its metadata; the other is told the store
// already exists, and nothing of its create is left.
func TestCreateRacingAnotherProcessOneWins(t *testing.T) {
	t.Parallel()
	root := gittest.TempDir(t)
	cli, server := newDir(t, root, stores.Options{}), newDir(t, root, stores.Options{})
	var other error
	cli.OnStep(func(step string) {
		if step == "create: initialised" { // built, not yet in place: the server is quicker
			_, other = server.Create("cr", stores.Meta{Description: "server"}, gitmem.Signature{})
		}
	})
	_, err := cli.Create("cr", stores.Meta{Description: "cli"}, gitmem.Signature{})
	if other != nil {
		t.Fatalf("the server's create: %v", other)
	}
	if !errors.Is(err, stores.ErrExists) {
		t.Fatalf("the CLI's create: %v, want ErrExists", err)
	}
	for _, d := range []*stores.Dir{cli, server} {
		if info, err := d.Get("cr"); err != nil || info.Description != "server" {
			t.Errorf("get: %+v, %v", info, err)
		}
	}
	if got := gittest.Git(t, filepath.Join(root, "cr"), "log", "--format=%s"); strings.Count(got, "store create") != 1 {
		t.Errorf("history %q", got)
	}
	if got := storesFolder(t, root); got != "cr" {
		t.Errorf("stores folder: %q", got)
	}
}

// F10: what is at a store's name before its create. An empty folder is
// no store (not listed, not found) and is replaced; a file is in the
// way; a stores folder that is gone is the server's failure, a
// *gitmem.StorageError (not a refused value).
func TestCreateOverWhatIsThere(t *testing.T) {
	t.Parallel()
	root := gittest.TempDir(t)
	d := newDir(t, root, stores.Options{})
	if err := os.Mkdir(filepath.Join(root, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := d.List(stores.ListOptions{Limit: 10}); err != nil || len(p.Items) != 0 {
		t.Errorf("list: %+v, %v", p, err)
	}
	if _, err := d.Create("empty", stores.Meta{}, gitmem.Signature{}); err != nil {
		t.Errorf("create over an empty folder: %v", err)
	}
	if _, err := d.Get("empty"); err != nil {
		t.Errorf("get: %v", err)
	}
	if _, err := d.Create("file", stores.Meta{}, gitmem.Signature{}); !errors.Is(err, stores.ErrInTheWay) {
		t.Errorf("create over a file: %v", err)
	}
	gone := filepath.Join(gittest.TempDir(t), "st")
	g := newDir(t, gone, stores.Options{})
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	var se *gitmem.StorageError
	if _, err := g.Create("x1", stores.Meta{}, gitmem.Signature{}); !errors.As(err, &se) || !errors.Is(err, syscall.ENOENT) {
		t.Errorf("create in a stores folder that is gone: %v", err)
	}
}
