package remote

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A fetch from a repository on this machine reads the remote's packs
// mapped, as git does: finding what to send walks every tree of the new
// history through its delta chain, and before, each entry of each chain
// was a pread (as was each object's size, against the limit).
func TestLocalFetchReadsPacksMapped(t *testing.T) {
	t.Parallel()
	src := filepath.Join(gittest.TempDir(t), "shared.git")
	gittest.Git(t, "", "init", "-q", "--bare", "--initial-branch=main", src)
	var s strings.Builder
	for c := 1; c <= 60; c++ {
		fmt.Fprintf(&s, "commit refs/heads/main\ncommitter T <t@x> %d +0000\ndata 4\nedit\n", 1700000000+c*60)
		for f := 0; f < 3; f++ {
			body := fmt.Sprintf("note %d\n%s", (c+f)%20, strings.Repeat("a line of the note\n", c))
			fmt.Fprintf(&s, "M 100644 inline memories/d%d/n%02d.md\ndata %d\n%s\n", f, (c*3+f)%40, len(body), body)
		}
	}
	gittest.GitIn(t, src, s.String(), "fast-import", "--quiet")
	gittest.Git(t, src, "repack", "-adq")
	dstDir := gittest.TempDir(t)
	gittest.Git(t, dstDir, "init", "-q")
	dst := gd.Open(filepath.Join(dstDir, ".git"))
	defer dst.Close()
	conn, err := dialLocal(src, false)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tip := conn.Refs()[plumbing.NewBranchReferenceName("main")]
	n, err := conn.Fetch(context.Background(), dst, []plumbing.Hash{tip}, nil, 1<<30)
	if err != nil || n == 0 {
		t.Fatalf("fetched %d: %v", n, err)
	}
	if reads := conn.(*local).store.PackFileReads(); reads != 0 {
		t.Errorf("the fetch of %d objects read %d pack entries with a system call", n, reads)
	}
	gittest.Git(t, dstDir, "update-ref", "refs/heads/main", tip.String())
}
