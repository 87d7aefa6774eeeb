package gitdir

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// Objects in a pack git wrote with deltas (OFS_DELTA, and REF_DELTA in a
// thin-pack style repack) read back byte for byte, with their sizes.
func TestReadDeltifiedPacks(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
	dir := gittest.TempDir(t)
	git := func(args ...string) string {
		t.Helper()
		return gittest.Git(t, dir, args...)
	}
	git("init", "-q")
	var text strings.Builder
	for i := range 60 {
		fmt.Fprintf(&text, "line %d of a file that changes a little at each commit\n", i)
		os.WriteFile(filepath.Join(dir, "f.md"), []byte(text.String()), 0o644)
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("g%d.md", i%7)), []byte(strings.Repeat(fmt.Sprint(i), 300)), 0o644)
		git("add", ".")
		git("commit", "-qm", fmt.Sprint("c", i))
	}
	git("repack", "-adf", "--depth=50", "--window=50")
	s := Open(filepath.Join(dir, ".git"))
	defer s.Close()
	check := func() int {
		n := 0
		list := git("cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype) %(objectsize)")
		sc := bufio.NewScanner(strings.NewReader(list))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			h := plumbing.NewHash(f[0])
			want := []byte(git("cat-file", f[1], f[0]))
			o, err := s.Encoded(plumbing.AnyObject, h)
			if err != nil {
				t.Fatalf("%s: %v", f[0], err)
			}
			r, _ := o.Reader()
			var got bytes.Buffer
			got.ReadFrom(r)
			if o.Type().String() != f[1] || !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("%s %s differs", f[1], f[0])
			}
			if size, err := s.Size(h); err != nil || fmt.Sprint(size) != f[2] {
				t.Fatalf("size of %s: %d %v, want %s", f[0], size, err, f[2])
			}
			n++
		}
		return n
	}
	if v := git("verify-pack", "-v", mustGlob(t, filepath.Join(dir, ".git", "objects", "pack", "*.idx"))); !strings.Contains(v, "chain length") {
		t.Fatalf("git wrote no deltas:\n%s", v)
	}
	if n := check(); n < 100 {
		t.Fatalf("only %d objects", n)
	}
	s.Release()
	// After a repack by another process, the new pack is found.
	git("commit", "-q", "--allow-empty", "-m", "later")
	git("repack", "-adf")
	s.Reindex()
	check()
}

func mustGlob(t *testing.T, pattern string) string {
	m, _ := filepath.Glob(pattern)
	if len(m) != 1 {
		t.Fatalf("%s: %v", pattern, m)
	}
	return m[0]
}
