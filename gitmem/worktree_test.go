package gitmem

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// openWorktree is the worktree of the folder dir (its git folder
// dir/.git), closed when the test ends.
func openWorktree(tb testing.TB, dir string) *worktree {
	tb.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		tb.Fatal(err)
	}
	w := newWorktree(root, dir, filepath.Join(dir, ".git"), nil)
	tb.Cleanup(w.close)
	return w
}

// A transaction reads a file from the worktree only when the file there is
// the blob, byte for byte: anything else (another text of the same size, a
// longer one, a folder, a symbolic link out, nothing) is read from git's
// objects. A link inside the folder to the blob's bytes gives those bytes.
func TestWorktreeBlobOnlyWhenItIsTheBlob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside.md")
	const text = "the blob's text\n"
	files := map[string]string{"same.md": text, "other.md": "the blob's TEXT\n", "longer.md": text + "more\n"}
	if err := os.MkdirAll(filepath.Join(dir, memDir, "folder.md"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, memDir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(outside, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, memDir, "link.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("same.md", filepath.Join(dir, memDir, "inside.md")); err != nil {
		t.Fatal(err)
	}
	w := openWorktree(t, dir)
	n := &node{mode: filemode.Regular, hash: plumbing.ComputeHash(plumbing.BlobObject, []byte(text)), size: int64(len(text))}
	for name, want := range map[string]bool{"same.md": true, "other.md": false, "longer.md": false, "folder.md": false,
		"link.md": false, "inside.md": true, "missing.md": false} {
		data, ok := w.readBlob(memDir+"/"+name, n)
		if ok != want || (ok && string(data) != text) {
			t.Errorf("%s: %q, %v; want the worktree's copy: %v", name, data, ok, want)
		}
	}
}

// A memory file is read beneath memories/: a symbolic link there that
// leads into .git (or anywhere else in the repository outside memories/)
// is not read through, so no part of git's own files (.git/config, with
// a remote's credentials in its URL) is taken for a hand edit and shown
// to the model; a link to another memory file still is.
func TestWorktreeReadsNoLinkOutOfTheMemory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, d := range []string{filepath.Join(dir, ".git"), filepath.Join(dir, memDir, "sub")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	const secret = "[remote \"origin\"]\n\turl = https://user:ghp_SECRET@example.invalid/x.git\n"
	for name, content := range map[string]string{".git/config": secret, "README": secret, memDir + "/sub/same.md": secret} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"gl": "../.git", "config": "../.git/config", "up": "..", "readme": "../README", "in": "sub"} {
		if err := os.Symlink(to, filepath.Join(dir, memDir, link)); err != nil {
			t.Fatal(err)
		}
	}
	w := openWorktree(t, dir)
	n := &node{mode: filemode.Regular, hash: plumbing.ComputeHash(plumbing.BlobObject, []byte(secret)), size: int64(len(secret))}
	for _, p := range []string{"gl/config", "config", "up/.git/config", "readme", "up/README"} {
		if data, err := w.readFile(memDir + "/" + p); err == nil {
			t.Errorf("memories/%s read through its link: %q", p, data)
		}
		if _, ok := w.readBlob(memDir+"/"+p, n); ok {
			t.Errorf("memories/%s read through its link as the blob", p)
		}
	}
	if data, err := w.readFile(memDir + "/in/same.md"); err != nil || string(data) != secret {
		t.Errorf("memories/in/same.md (a link to a memory folder) = %q, %v", data, err)
	}
}

// put places the new version and hands back the old one, whichever way
// its hint (a file is there, or not) points: a wrong hint costs a try,
// never a file.
func TestPutWhateverItsHint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		old          string // "" for none
		there, exist bool
	}{
		{"file there, said there", "old\n", true, true},
		{"file there, said free", "old\n", false, true},
		{"free, said there", "", true, false},
		{"free, said free", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{filepath.Join(dir, ".git", "gitmem", "tmp"), filepath.Join(dir, memDir)} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			p := memDir + "/a.md"
			if tc.exist {
				if err := os.WriteFile(filepath.Join(dir, p), []byte(tc.old), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			w := openWorktree(t, dir)
			tmp, _, err := w.writeTemp([]byte("new\n"))
			if err != nil {
				t.Fatal(err)
			}
			aside, asideInfo, placed, err := w.put(tmp, p, tc.there)
			if err != nil || !placed {
				t.Fatalf("put: placed %v, %v", placed, err)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, p)); string(got) != "new\n" {
				t.Errorf("%s holds %q", p, got)
			}
			if !tc.exist {
				if aside != "" {
					t.Errorf("nothing was there, yet %s was handed back", aside)
				}
				return
			}
			if aside == "" {
				t.Fatal("the old file was not handed back")
			}
			data, file, err := w.takeAside(aside, asideInfo)
			if err != nil || !file || string(data) != tc.old {
				t.Errorf("handed back %q (a file: %v), %v", data, file, err)
			}
		})
	}
}

// A put whose new file cannot be placed (it is gone: removed by another
// program) changes nothing: the file at the memory path stays there.
// It moved the file aside, then failed, and left it there: the memory
// file was missing from the worktree.
func TestPutThatFailsLeavesTheFile(t *testing.T) {
	t.Parallel()
	for _, there := range []bool{true, false} {
		dir := t.TempDir()
		for _, d := range []string{filepath.Join(dir, ".git", "gitmem", "tmp"), filepath.Join(dir, memDir)} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		p := memDir + "/a.md"
		if err := os.WriteFile(filepath.Join(dir, p), []byte("old\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		w := openWorktree(t, dir)
		tmp, _, err := w.writeTemp([]byte("new\n"))
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, tmp))
		aside, _, placed, err := w.put(tmp, p, there)
		if err == nil || placed || aside != "" {
			t.Errorf("there %v: put of a file that is gone: aside %q, placed %v, %v; want an error, nothing aside", there, aside, placed, err)
		}
		if got, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(got) != "old\n" {
			t.Errorf("there %v: %s holds %q (%v), want what it held", there, p, got, err)
		}
		if left, _ := os.ReadDir(filepath.Join(dir, ".git", "gitmem", "tmp")); len(left) != 0 {
			t.Errorf("there %v: left in .git/gitmem/tmp: %v", there, left)
		}
	}
}

// A file that says it is huge (a sparse one made by hand) is read as what
// it holds, without first taking the memory its size says.
func TestReadAllDoesNotTrustTheSize(t *testing.T) {
	t.Parallel()
	data, err := readAll(strings.NewReader("five!"), 1<<40)
	if err != nil || string(data) != "five!" {
		t.Fatalf("%q, %v", data, err)
	}
	if cap(data) > readAllFirst+1 {
		t.Fatalf("a first buffer of %d bytes", cap(data))
	}
}
