package gitdir

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// A pack gitmem writes is one git reads: `git verify-pack` accepts it and
// every object comes back, through git and through go-git, byte for byte.
func TestWriteObjectsPack(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	gitDir := filepath.Join(dir, ".git")
	var objs []Object
	for i := range 300 {
		data := bytes.Repeat([]byte(fmt.Sprintf("object %d\n", i)), 1+i*7)
		objs = append(objs, Object{Type: plumbing.BlobObject, Hash: plumbing.ComputeHash(plumbing.BlobObject, data), Data: data})
	}
	objs = append(objs, objs[3]) // a duplicate is written once
	s := Open(gitDir)
	defer s.Close()
	h, err := s.WriteObjectsPack(objs, true)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(gitDir, "objects", "pack", "pack-"+h.String())
	if out, err := exec.Command("git", "-C", dir, "verify-pack", "-v", base+".idx").CombinedOutput(); err != nil || !strings.Contains(string(out), "non delta: 300 objects") {
		t.Fatalf("git verify-pack: %v\n%s", err, out)
	}
	for _, o := range objs[:300] {
		got, err := exec.Command("git", "-C", dir, "cat-file", "blob", o.Hash.String()).Output()
		if err != nil || !bytes.Equal(got, o.Data) {
			t.Fatalf("git cat-file %s: %v", o.Hash, err)
		}
		data, err := s.Blob(o.Hash)
		if err != nil || !bytes.Equal(data, o.Data) {
			t.Fatalf("go-git %s: %v", o.Hash, err)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "tmp_*")); len(m) != 0 {
		t.Fatalf("temporary files left: %v", m)
	}
	if _, err := os.Stat(base + ".pack"); err != nil {
		t.Fatal(err)
	}
}
