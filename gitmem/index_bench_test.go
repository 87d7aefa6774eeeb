package gitmem

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// BenchmarkIndexWriteOneChange writes .git/index after one file of a
// folder of n changed, as the index's timer does for a busy store: the
// folder's other entries come from the last index written.
func BenchmarkIndexWriteOneChange(b *testing.B) {
	for _, n := range []int{250, 2000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			gitDir := filepath.Join(b.TempDir(), ".git")
			if err := os.MkdirAll(filepath.Join(gitDir, "gitmem"), 0o700); err != nil {
				b.Fatal(err)
			}
			fi, err := os.Lstat(gitDir)
			if err != nil {
				b.Fatal(err)
			}
			st := gd.StatOf(fi)
			vouch := func(string, *node, time.Time) gd.Stat { return st }
			kids := make([]kid, n)
			for i := range kids {
				kids[i] = kid{fmt.Sprintf("note-%05d.md", i), &node{mode: filemode.Regular, hash: plumbing.ComputeHash(plumbing.BlobObject, []byte(fmt.Sprint(i)))}}
			}
			tree := func() *node {
				return newDir([]kid{{memDir, newDir(append([]kid(nil), kids...))}})
			}
			x := newGitIndex(context.Background(), gitDir, nil)
			held := x.lock()
			defer held.unlock()
			if err := held.write(plumbing.ComputeHash(plumbing.CommitObject, []byte("0")), tree(), nil, vouch); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				k := &kids[i%n]
				k.n = &node{mode: filemode.Regular, hash: plumbing.ComputeHash(plumbing.BlobObject, []byte(fmt.Sprint("v", i)))}
				if err := held.write(plumbing.ComputeHash(plumbing.CommitObject, []byte(fmt.Sprint(i+1))), tree(), nil, vouch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
