package gitmem

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

var hunkContext = regexp.MustCompile(`(?m)^(@@ [^@]* @@).*$`)

// The unified diff gitmem prints is the one git prints, hunk for hunk.
func TestUnifiedMatchesGitDiff(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 6))
	// Case n is the files a/n and b/n: one git diff of the two folders
	// for all the cases, not a git process each.
	const cases = 200
	var as, bs []string
	os.MkdirAll(filepath.Join(dir, "a"), 0o700)
	os.MkdirAll(filepath.Join(dir, "b"), 0o700)
	for n := range cases {
		var base []string
		for i := range rng.IntN(40) {
			base = append(base, fmt.Sprintf("line %d\n", i))
		}
		a := strings.Join(base, "")
		b := strings.Join(edit(rng, base, "x"), "")
		if n%7 == 0 && b != "" {
			b = strings.TrimSuffix(b, "\n") // no newline at the end
		}
		os.WriteFile(filepath.Join(dir, "a", fmt.Sprint(n)), []byte(a), 0o600)
		os.WriteFile(filepath.Join(dir, "b", fmt.Sprint(n)), []byte(b), 0o600)
		as, bs = append(as, a), append(bs, b)
	}
	out, _ := gittest.Command(t, dir, "diff", "--no-index", "--no-renames", "--no-color", "-U3", "a", "b").Output() // exit 1 means "differs"
	wants := make([]string, cases)                                                                                  // a case git finds no change in is not in its output
	file := regexp.MustCompile(`(?m)^diff --git a/a/(\d+) b/b/(\d+)\n`)
	heads := file.FindAllStringSubmatchIndex(string(out), -1)
	for k, h := range heads {
		na, nb := string(out[h[2]:h[3]]), string(out[h[4]:h[5]])
		n, err := strconv.Atoi(na)
		if err != nil || na != nb || n >= cases {
			t.Fatalf("git diff paired a/%s with b/%s", na, nb)
		}
		end := len(out)
		if k+1 < len(heads) {
			end = heads[k+1][0]
		}
		want := string(out[h[1]:end])
		if i := strings.Index(want, "@@"); i >= 0 {
			want = want[i:]
		} else {
			want = ""
		}
		// git names the enclosing "function" after a hunk header; memory
		// files have none, and gitmem prints none.
		wants[n] = hunkContext.ReplaceAllString(want, "$1")
	}
	differ := 0
	for n := range cases {
		if got := hunks(as[n], bs[n]); got != wants[n] {
			t.Fatalf("case %d:\n--- gitmem\n%s--- git\n%s", n, got, wants[n])
		}
		if wants[n] != "" {
			differ++
		}
	}
	if differ < cases/2 {
		t.Fatalf("git diff found changes in only %d of %d cases", differ, cases)
	}
}

// The worktree's diff lists hand edits gitmem will adopt, and not a file
// whose name no model could write, which it never adopts.
func TestDiffWorktreeLeavesOutWhatIsNeverAdopted(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for name, text := range map[string]string{"edited.md": "by hand\n", "tab\tname.md": "never a memory\n"} {
		if err := os.WriteFile(filepath.Join(dir, "memories", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	changes, err := r.DiffWorktree()
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Path != "edited.md" {
		t.Fatalf("changes: %+v", changes)
	}
}

// A file whose name no model could write, committed by other means
// (plain git), is left out of the worktree's diff on both sides: it is no
// deletion waiting to be adopted.
func TestDiffWorktreeLeavesOutACommittedOddName(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := os.WriteFile(filepath.Join(dir, "memories", "tab\tname.md"), []byte("y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, dir, "add", "-A")
	gittest.Git(t, dir, "-c", "user.name=T", "-c", "user.email=t@x", "commit", "-q", "-m", "plain git")
	if r, err = Open(context.Background(), dir, testOptions(t)); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if changes, err := r.DiffWorktree(); err != nil || len(changes) != 0 {
		t.Fatalf("changes: %+v, %v", changes, err)
	}
}

// A diff reads the packs mapped, as git does, not with a pread for each
// entry of each delta chain (a diff across 50,000 commits made 95,000).
func TestDiffReadsThePacksMapped(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("packs are not mapped here")
	}
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	var hashes []string
	for v := range 6 { // versions of each file: delta chains once packed
		c, err := r.Update(context.Background(), Meta{Subject: fmt.Sprint("v", v)}, func(tx *Tx) error {
			for i := range 20 {
				body := strings.Repeat(fmt.Sprintf("line %d of file %d\n", v, i), 40)
				if err := tx.WriteFile(fmt.Sprintf("d%d/f%d.md", i%4, i), []byte(body)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, c.Hash)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, dir, "repack", "-adf", "-q")
	ro, err := Open(context.Background(), dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	decoded, preads := ro.objects.st.Decoded(), ro.objects.st.PackFileReads()
	changes, err := ro.Diff(hashes[0], hashes[5])
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 20 || !strings.HasPrefix(string(changes[0].Old), "line 0 of file 0\n") || !strings.HasPrefix(string(changes[0].New), "line 5 of file 0\n") {
		t.Fatalf("Diff gave %d changes, the first %q", len(changes), changes[0].Path)
	}
	if n := ro.objects.st.Decoded() - decoded; n < 40 {
		t.Fatalf("the diff decoded %d objects, fewer than its 40 blobs: not a test of reading packs", n)
	}
	if n := ro.objects.st.PackFileReads() - preads; n != 0 {
		t.Errorf("the diff read %d pack entries with a system call each; want them read mapped", n)
	}
}

// hunks is the body of a unified diff of a and b.
func hunks(a, b string) string {
	var out strings.Builder
	writeHunks(&out, lineOps(a, b), 3)
	return out.String()
}

// A file's unified diff is git's line diff (xdlMatch), not
// diffmatchpatch's, which encoded each line as a rune through maps: 50
// allocations for a two-line change of a 9-line file, against 23; and it
// is written into one buffer, sized first, with no fmt: 36 allocations
// for the whole diff of such a file (its headers and hunks each
// formatted, a builder grown for each, copied into the next), 18 now.
func TestUnifiedAllocatesLittle(t *testing.T) { // not parallel: AllocsPerRun
	base := "# Notes (1135)\n\nrevision: 0\n\n- short answers first.\n- make test before committing.\n- move the cache to Redis?\n- the platform team.\n"
	fc := FileChange{Path: "d000/f00000.md", Old: []byte(base + "history: 38938\n"), New: []byte(base + "history: 97594\n"), OldFile: true, NewFile: true}
	want := "diff --git a/memories/d000/f00000.md b/memories/d000/f00000.md\n--- a/memories/d000/f00000.md\n+++ b/memories/d000/f00000.md\n" +
		"@@ -6,4 +6,4 @@\n - make test before committing.\n - move the cache to Redis?\n - the platform team.\n-history: 38938\n+history: 97594\n"
	var got string
	if allocs := testing.AllocsPerRun(10, func() { got = fc.Unified() }); allocs > 20 {
		t.Errorf("the diff of two 9-line files made %.0f allocations", allocs)
	}
	if got != want {
		t.Fatalf("got\n%s", got)
	}
}

// A diff lists its changes in the order the trees give their paths
// (byte order, each path once), with the blobs looked up by hash: no hex
// string per blob, no map of paths to sort (a tenth of a diff's CPU
// across 50,000 commits, 8,900 files).
func TestDiffAllocatesLittlePerFile(t *testing.T) { // not parallel: AllocsPerRun
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	const files = 300
	names := func(i int) string {
		return []string{"a/%03d.md", "a-b/%03d.md", "a.b/%03d.md", "a0/%03d.md", "a/x/%03d.md"}[i%5]
	}
	var hashes []string
	for v := range 2 {
		c, err := r.Update(context.Background(), Meta{Subject: fmt.Sprint("v", v)}, func(tx *Tx) error {
			for i := range files {
				if err := tx.WriteFile(fmt.Sprintf(names(i), i), []byte(fmt.Sprintf("version %d of %d\n", v, i))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, c.Hash)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(context.Background(), dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var changes []FileChange
	allocs := testing.AllocsPerRun(3, func() {
		if changes, err = ro.Diff(hashes[0], hashes[1]); err != nil {
			t.Fatal(err)
		}
	})
	if len(changes) != files || !slices.IsSortedFunc(changes, func(a, b FileChange) int { return strings.Compare(a.Path, b.Path) }) {
		t.Fatalf("the diff listed %d changes, want %d in path order", len(changes), files)
	}
	for _, c := range changes {
		if !strings.HasPrefix(string(c.Old), "version 0 of ") || !strings.HasPrefix(string(c.New), "version 1 of ") {
			t.Fatalf("%s: %q -> %q", c.Path, c.Old, c.New)
		}
	}
	if perFile := allocs / files; perFile > 15 { // 19.6 with the paths' and blobs' maps of hex strings; 9.5 now, 12.5 seen under -race beside the package's leftover goroutines
		t.Errorf("a diff of %d files made %.1f allocations per file", files, perFile)
	}
}
