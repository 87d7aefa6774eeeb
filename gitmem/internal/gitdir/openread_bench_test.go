package gitdir

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// BenchmarkLooseRead reads small loose objects (a commit git made, an
// object an older gitmem wrote), one open of a file each: what OpenRead's
// look at the file's type (an fstat, and an fcntl making the descriptor
// blocking again) costs where it is most often paid.
func BenchmarkLooseRead(b *testing.B) {
	dir := b.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "objects"), 0o755); err != nil {
		b.Fatal(err)
	}
	s := Open(dir)
	defer s.Close()
	w := NewObjectWriter(nil, dir)
	var hs []plumbing.Hash
	for i := range 64 {
		h, err := w.Write(plumbing.BlobObject, []byte(fmt.Sprintf("memory %d\nsome notes\n", i)))
		if err != nil {
			b.Fatal(err)
		}
		hs = append(hs, h)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Blob(hs[i%len(hs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkOpenRead is OpenRead of a small regular file and its close,
// alone.
func BenchmarkOpenRead(b *testing.B) {
	path := filepath.Join(b.TempDir(), "f")
	if err := os.WriteFile(path, []byte("x\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		f, err := OpenRead(path)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
