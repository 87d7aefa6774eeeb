package gitmem

import (
	"context"
	"fmt"
	"os"
	"testing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

var benchRepos = map[[2]int]*Repo{}

// benchRepo builds (once per size and process) a repository of `files`
// files spread 100 to a folder, with `commits` commits of history, through
// the store's own commit path. Seeding skips fsync to save time; the
// measured operations do not.
func benchRepo(b *testing.B, files, commits int) *Repo {
	b.Helper()
	if r := benchRepos[[2]int{files, commits}]; r != nil {
		return r
	}
	dir, err := os.MkdirTemp("", "gitmem-bench-")
	if err != nil {
		b.Fatal(err)
	}
	gd.Fsync = func(*os.File) error { return nil }
	defer func() { gd.Fsync = (*os.File).Sync }()
	r, _, err := Init(context.Background(), dir, Options{Logf: func(string, ...any) {}, Operator: Signature{"op", "op@x"}})
	if err != nil {
		b.Fatal(err)
	}
	name := func(i int) string { return fmt.Sprintf("d%03d/f%05d.md", i/100, i) }
	// Files in batches (one commit each), then single-file commits until
	// the history is long enough.
	const batch = 500
	made := 0
	for i := 0; i < files; i += batch {
		if _, err := r.Update(context.Background(), Meta{Subject: "seed"}, func(tx *Tx) error {
			for j := i; j < min(files, i+batch); j++ {
				if err := tx.WriteFile(name(j), []byte(fmt.Sprintf("memory %d\nline two\n", j))); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		made++
	}
	for ; made < commits; made++ {
		if _, err := r.Update(context.Background(), Meta{Subject: "history"}, func(tx *Tx) error {
			return tx.WriteFile(name(made%files), []byte(fmt.Sprintf("memory %d\nrevision %d\n", made%files, made)))
		}); err != nil {
			b.Fatal(err)
		}
	}
	benchRepos[[2]int{files, commits}] = r
	return r
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, r := range benchRepos {
		r.Close()
		os.RemoveAll(r.Dir())
	}
	if genDir != "" && os.Getenv("GITMEM_BENCH_KEEP") == "" {
		os.RemoveAll(genDir)
	} else if genDir != "" {
		fmt.Println("kept the generated repository:", genDir)
	}
	os.Exit(code)
}

func BenchmarkStore(b *testing.B) {
	commits := 10000
	if testing.Short() {
		commits = 200
	}
	for _, files := range []int{10, 1000, 10000} {
		r := benchRepo(b, files, commits)
		b.Run(fmt.Sprintf("create/files=%d", files), func(b *testing.B) {
			for i := range b.N {
				if _, err := r.Update(context.Background(), Meta{Subject: "create"}, func(tx *Tx) error {
					return tx.WriteFile(fmt.Sprintf("new/%d-%d-%d.md", files, b.N, i), []byte(fmt.Sprintf("a new memory %d\n", i)))
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("str_replace/files=%d", files), func(b *testing.B) {
			p := fmt.Sprintf("d%03d/f%05d.md", 0, 5)
			for i := range b.N {
				if _, err := r.Update(context.Background(), Meta{Subject: "edit"}, func(tx *Tx) error {
					data, err := tx.ReadFile(p)
					if err != nil {
						return err
					}
					return tx.WriteFile(p, append(data[:len(data):len(data)], fmt.Sprintf("edit %d\n", i)...))
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("view/files=%d", files), func(b *testing.B) {
			for range b.N {
				v, err := r.Snapshot(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if _, err := v.ReadFile("d000/f00005.md"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
