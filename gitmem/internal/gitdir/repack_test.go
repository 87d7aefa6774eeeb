package gitdir

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
}

// A pack with OFS_DELTA entries written by packWriter is one git reads:
// `git verify-pack` checks every object and its chain, and `git cat-file`
// and go-git give back every version.
func TestPackWithDeltasIsReadByGit(t *testing.T) {
	t.Parallel()
	needGit(t)
	dir := gittest.TempDir(t)
	gittest.Git(t, dir, "init", "-q")
	gitDir := filepath.Join(dir, ".git")
	var lines []string
	for i := range 300 {
		lines = append(lines, fmt.Sprintf("line %d of a memory file\n", i))
	}
	pw, err := newPackWriter(nil, gitDir, -1, 6)
	if err != nil {
		t.Fatal(err)
	}
	var objs []Object
	var prev Object
	for v := range 60 {
		lines[(v*37)%len(lines)] = fmt.Sprintf("edit %d\n", v)
		data := []byte(strings.Join(lines, ""))
		o := Object{Type: plumbing.BlobObject, Hash: plumbing.ComputeHash(plumbing.BlobObject, data), Data: data}
		if err := pw.add(o.Type, o.Hash, o.Data, prev.Hash, prev.Data); err != nil {
			t.Fatal(err)
		}
		objs, prev = append(objs, o), o
	}
	h, err := pw.finish(true)
	if err != nil {
		t.Fatal(err)
	}
	if pw.deltas != 58 {
		t.Fatalf("%d deltas, want 58 (two chains of 50 and 8)", pw.deltas)
	}
	out := gittest.Git(t, dir, "verify-pack", "-v", filepath.Join(gitDir, "objects", "pack", "pack-"+h.String()+".idx"))
	if !strings.Contains(out, "chain length = 50: 1 object") || !strings.Contains(out, "non delta: 2 objects") {
		t.Fatalf("git verify-pack:\n%s", out)
	}
	s := Open(gitDir)
	defer s.Close()
	byGit := gittest.CatFiles(t, dir, objectNames(objs)...)
	for i, o := range objs {
		if got := byGit[i]; got.Type != "blob" || !bytes.Equal(got.Data, o.Data) {
			t.Fatalf("git cat-file %s differs", o.Hash)
		}
		if got, err := s.Blob(o.Hash); err != nil || !bytes.Equal(got, o.Data) {
			t.Fatalf("go-git %s: %v", o.Hash, err)
		}
	}
}

// history makes a repository with the git CLI: a flat folder of files
// edited one per commit, a subfolder, deletions, a rename, a branch
// merged back, an annotated tag and an unreachable blob.
func history(t *testing.T, commits int) string {
	dir := gittest.TempDir(t)
	gittest.Git(t, dir, "init", "-q", "-b", "main")
	var s strings.Builder
	mark := 0
	commit := func(branch, msg string, body func()) {
		mark++
		fmt.Fprintf(&s, "commit refs/heads/%s\nmark :%d\ncommitter T <t@x> %d +0000\ndata %d\n%s\n", branch, mark, 1700000000+mark*60, len(msg), msg)
		body()
	}
	exists := map[string]bool{}
	file := func(path, content string) {
		exists[path] = true
		fmt.Fprintf(&s, "M 100644 inline %s\ndata %d\n%s\n", path, len(content), content)
	}
	content := func(i, v int) string {
		return fmt.Sprintf("memory %d\n%s\nversion %d\n", i, strings.Repeat("some words of the note\n", i%7), v)
	}
	commit("main", "seed", func() {
		for i := range 150 {
			file(fmt.Sprintf("notes/n%03d.md", i), content(i, 0))
		}
		file("deep/a/b/c.md", "deep\n")
	})
	for c := 1; c < commits; c++ {
		commit("main", fmt.Sprint("edit ", c), func() {
			i := (c * 7) % 150
			name := fmt.Sprintf("notes/n%03d.md", i)
			switch {
			case c%13 == 0 && exists[name]:
				fmt.Fprintf(&s, "D %s\n", name)
				delete(exists, name)
			case c%17 == 0 && exists[name]:
				fmt.Fprintf(&s, "R %s notes/renamed%d.md\n", name, c)
				delete(exists, name)
			case c%5 == 0:
				file("deep/a/b/c.md", fmt.Sprintf("deep %d\n", c))
			default:
				file(name, content(i, c))
			}
		})
	}
	fmt.Fprintf(&s, "reset refs/heads/side\nfrom :%d\n", mark/2)
	commit("side", "on a side branch", func() { file("side.md", "side\n") })
	side := mark
	commit("main", "merge", func() { fmt.Fprintf(&s, "from :%d\nmerge :%d\n", mark-1, side) })
	fmt.Fprintf(&s, "tag v1\nfrom :%d\ntagger T <t@x> 1700000000 +0000\ndata 3\nv1\n", mark)
	gittest.GitIn(t, dir, s.String(), "fast-import", "--quiet")
	gittest.Git(t, dir, "branch", "-D", "side")
	gittest.GitIn(t, dir, "unreachable\n", "hash-object", "-w", "--stdin")
	return dir
}

func refTips(t *testing.T, dir string) []plumbing.Hash {
	var tips []plumbing.Hash
	for _, l := range strings.Fields(gittest.Git(t, dir, "for-each-ref", "--format=%(objectname)")) {
		tips = append(tips, plumbing.NewHash(l))
	}
	return tips
}

// A full repack holds exactly what the refs reach, git reads it alone
// (fsck, the log with patches), and the trees and edited files are
// deltas along short chains.
func TestRepackFull(t *testing.T) {
	t.Parallel()
	needGit(t)
	dir := history(t, 200)
	gitDir := filepath.Join(dir, ".git")
	want := strings.Fields(gittest.Git(t, dir, "rev-list", "--objects", "--all", "--no-object-names"))
	logBefore := gittest.Git(t, dir, "log", "-p", "--all")
	s := Open(gitDir)
	res, err := s.Repack(RepackOptions{Tips: refTips(t, dir)})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != len(want) {
		t.Fatalf("the pack holds %d objects, the refs reach %d", len(res.Objects), len(want))
	}
	for _, h := range want {
		if !res.Holds(plumbing.NewHash(h)) {
			t.Fatalf("%s is reachable and not packed", h)
		}
	}
	idx := filepath.Join(gitDir, "objects", "pack", "pack-"+res.Pack.String()+".idx")
	out := gittest.Git(t, dir, "verify-pack", "-v", idx)
	chains := regexp.MustCompile(`chain length = (\d+): (\d+) object`).FindAllStringSubmatch(out, -1)
	longest := 0
	for _, m := range chains {
		longest, _ = strconv.Atoi(m[1])
	}
	if longest == 0 || longest > 9 || res.Deltas < len(want)/3 {
		t.Fatalf("%d deltas of %d objects, longest chain %d:\n%s", res.Deltas, len(want), longest, out)
	}
	// Only the new pack left: git finds everything in it.
	ents, _ := os.ReadDir(filepath.Join(gitDir, "objects"))
	for _, e := range ents {
		if len(e.Name()) == 2 {
			os.RemoveAll(filepath.Join(gitDir, "objects", e.Name()))
		}
	}
	packs, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "pack-*"))
	for _, p := range packs {
		if !strings.Contains(p, res.Pack.String()) {
			os.Remove(p)
		}
	}
	gittest.Fsck(t, dir)
	if got := gittest.Git(t, dir, "log", "-p", "--all"); got != logBefore {
		t.Fatal("git log -p differs after the repack")
	}
}

// An incremental repack packs exactly the objects it is given: those the
// walk reaches as deltas, the rest whole.
func TestRepackOnly(t *testing.T) {
	t.Parallel()
	needGit(t)
	dir := history(t, 60)
	gitDir := filepath.Join(dir, ".git")
	// The newest 20 commits' objects, and the unreachable blob.
	only := map[plumbing.Hash]bool{}
	for _, h := range strings.Fields(gittest.Git(t, dir, "rev-list", "--objects", "--no-object-names", "main~20..main")) {
		only[plumbing.NewHash(h)] = true
	}
	only[plumbing.NewHash(strings.TrimSpace(gittest.GitIn(t, dir, "unreachable\n", "hash-object", "--stdin")))] = true
	s := Open(gitDir)
	res, err := s.Repack(RepackOptions{Tips: refTips(t, dir), Only: only})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != len(only) {
		t.Fatalf("packed %d objects, given %d", len(res.Objects), len(only))
	}
	for h := range only {
		if !res.Holds(h) {
			t.Fatalf("%s not packed", h)
		}
	}
	if res.Deltas == 0 {
		t.Fatal("no deltas")
	}
	gittest.Git(t, dir, "verify-pack", filepath.Join(gitDir, "objects", "pack", "pack-"+res.Pack.String()+".idx"))
}

// The chains are those of the scheme: version n (back from the newest) is
// a delta against n with its lowest set bit cleared.
func TestVersionBases(t *testing.T) {
	t.Parallel()
	var v versions
	hashes := make([]plumbing.Hash, 40)
	for n := range hashes {
		hashes[n] = plumbing.ComputeHash(plumbing.BlobObject, []byte(strconv.Itoa(n)))
		got := v.next(hashes[n])
		var want plumbing.Hash
		if n > 0 {
			want = hashes[n&(n-1)]
		}
		if got != want {
			t.Fatalf("version %d: base %s, want %s", n, got, want)
		}
	}
	if len(v.stack) > 6 {
		t.Fatalf("%d versions kept", len(v.stack))
	}
}

// A repack asked to stop gives up with ErrStopped and leaves nothing.
func TestRepackStops(t *testing.T) {
	t.Parallel()
	needGit(t)
	dir := history(t, 400) // more objects than the stop is polled after
	gitDir := filepath.Join(dir, ".git")
	before, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*"))
	s := Open(gitDir)
	defer s.Close()
	polled := 0
	_, err := s.Repack(RepackOptions{Tips: refTips(t, dir), Stop: func() bool { polled++; return true }})
	if err != ErrStopped || polled != 1 {
		t.Fatalf("got %v after %d polls", err, polled)
	}
	if after, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*")); len(after) != len(before) {
		t.Fatalf("left %v", after)
	}
}

// A pack file cut short while Repack reads it through its mapping makes
// Repack fail with an error, not end the process with a fault, and leave
// nothing behind.
func TestRepackOfAPackCutShort(t *testing.T) {
	t.Parallel()
	dir := packToCut(t)
	gitDir := filepath.Join(dir, ".git")
	packs, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs: %v", packs)
	}
	before, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*"))
	s := Open(gitDir)
	defer s.Close()
	cut := false
	_, err := s.Repack(RepackOptions{Tips: refTips(t, dir), Stop: func() bool {
		if !cut {
			cut = true
			if err := os.Truncate(packs[0], 4096); err != nil {
				t.Error(err)
			}
			s.cache = objCache{} // what was read must be read again
			s.packs.bases.clear()
		}
		return false
	}})
	if !cut || err == nil || !strings.Contains(err.Error(), "a pack file changed while it was read") {
		t.Fatalf("cut %v, got %v", cut, err)
	}
	if after, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*")); len(after) != len(before) {
		t.Fatalf("left %v", after)
	}
}

// packToCut is a repository of 400 commits, for a test that cuts its
// pack short under a mapping.
func packToCut(t *testing.T) string {
	t.Helper()
	needGit(t)
	if !canMapPacks {
		t.Skip("packs are not mapped here")
	}
	dir := history(t, 400)
	gittest.Damaged(t, dir, "its pack is cut short")
	return dir
}

// A Store that listed a pack before another process repacked and deleted
// it reads its objects from the new pack.
func TestReadAfterRepackElsewhere(t *testing.T) {
	t.Parallel()
	needGit(t)
	dir := history(t, 30)
	gitDir := filepath.Join(dir, ".git")
	tips := refTips(t, dir)
	// Three readers list the packs before the repack.
	var readers [3]*Store
	for i := range readers {
		readers[i] = Open(gitDir)
		defer readers[i].Close()
		if _, _, err := readers[i].ReadObject(tips[0]); err != nil {
			t.Fatal(err)
		}
		readers[i].Release() // the pack files are closed, the list of packs kept
	}
	old, _ := ListPacks(gitDir)
	other := Open(gitDir)
	res, err := other.Repack(RepackOptions{Tips: tips})
	if err != nil {
		t.Fatal(err)
	}
	var gone []plumbing.Hash
	for _, p := range old {
		gone = append(gone, p.Hash)
	}
	// One object gets a loose copy too, as a revert in another process
	// writes one.
	withCopy, without := res.Objects[0], res.Objects[1]
	typ, data, err := other.ReadObject(withCopy)
	other.Close()
	if err != nil {
		t.Fatal(err)
	}
	if RemovePacks(gitDir, gone) != len(old) {
		t.Fatal("packs not removed")
	}
	ow := NewObjectWriter(nil, gitDir)
	if _, err := ow.Write(typ, data); err != nil {
		t.Fatal(err)
	}
	if err := ow.Sync(); err != nil {
		t.Fatal(err)
	}
	if n, err := readers[0].Size(withCopy); err != nil || n != int64(len(data)) {
		t.Fatalf("size of %s, with a loose copy: %d, %v; want %d", withCopy, n, err, len(data))
	}
	if _, err := readers[1].Size(without); err != nil {
		t.Fatalf("size of %s, in the new pack: %v", without, err)
	}
	for _, h := range res.Objects {
		if _, _, err := readers[2].ReadObject(h); err != nil {
			t.Fatalf("%s after the repack: %v", h, err)
		}
	}
}

// A pack file cut short under the mapping a Mapped read uses makes that
// read fail with an error, not end the process with a fault; a read
// outside Mapped reads the file, not the mapping.
func TestMappedReadOfAPackCutShort(t *testing.T) {
	t.Parallel()
	dir := packToCut(t)
	s := Open(filepath.Join(dir, ".git"))
	defer s.Close()
	s.Hold()
	packs := s.packs.list()
	if len(packs) != 1 {
		t.Fatalf("packs: %d", len(packs))
	}
	p := packs[0]
	var near, far plumbing.Hash
	for i := range p.n {
		switch off := p.offset(i); {
		case off < 4096 && near.IsZero():
			copy(near[:], p.names()[20*i:])
		case off > 8192 && far.IsZero():
			copy(far[:], p.names()[20*i:])
		}
	}
	preads := s.PackFileReads()
	if err := s.Mapped(func() error { _, _, err := s.read(near); return err }); err != nil {
		t.Fatal(err)
	}
	if n := s.PackFileReads() - preads; n != 0 {
		t.Fatalf("a mapped read made %d preads", n)
	}
	if err := os.Truncate(p.path, 4096); err != nil {
		t.Fatal(err)
	}
	err := s.Mapped(func() error { _, _, err := s.read(far); return err })
	if err == nil || !strings.Contains(err.Error(), "a pack file changed while it was read") {
		t.Fatalf("got %v", err)
	}
	if s.packs.mapped {
		t.Fatal("reads outside Mapped still read the mapping")
	}
}
