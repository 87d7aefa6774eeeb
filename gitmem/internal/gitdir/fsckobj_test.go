package gitdir

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// TestChecksAgreeWithGitFsckStrict crafts objects git fsck --strict
// fails (and a few it passes), each alone in a repository, and compares
// what CheckTree, CheckCommit, CheckTag and CheckBlob say with what git
// says: the same message ids, none where git passes, and some problem
// where git fails with no message id (an object it cannot parse).
func TestChecksAgreeWithGitFsckStrict(t *testing.T) {
	t.Parallel()
	needGit(t)
	blob := plumbing.ComputeHash(plumbing.BlobObject, []byte("hi\n"))
	entry := func(mode, name string, h plumbing.Hash) string { return mode + " " + name + "\x00" + string(h[:]) }
	tree := func(es ...string) string { return strings.Join(es, "") }
	const T = "4b825dc642cb6eb9a060e54bf8d69288fbee4904" // the empty tree
	commit := func(head string) string { return "tree " + T + "\n" + head + "\nm\n" }
	ok := "author A <a@b> 1 +0000\ncommitter C <c@d> 1 +0000\n"
	ident := func(a string) string { return commit("author " + a + "\ncommitter C <c@d> 1 +0000\n") }
	tag := func(s string) string { return "object " + T + "\n" + s + "\nmsg\n" }
	special := func(name, content string) []string {
		h := plumbing.ComputeHash(plumbing.BlobObject, []byte(content))
		return []string{"blob", content, "tree", tree(entry("100644", name, h))}
	}
	cases := map[string][]string{ // type, content (, type, content: the first is named by the second)
		"tree ok":               {"tree", tree(entry("100644", "a", blob), entry("40000", "b", plumbing.NewHash(T)))},
		"tree .git":             {"tree", tree(entry("100644", ".git", blob))},
		"tree .GIT":             {"tree", tree(entry("40000", ".GIT", plumbing.NewHash(T)))},
		"tree git~1":            {"tree", tree(entry("100644", "git~1", blob))},
		"tree .git.":            {"tree", tree(entry("100644", ".git. ", blob))},
		"tree .git hfs":         {"tree", tree(entry("100644", ".g\u200cit", blob))},
		"tree .gitx":            {"tree", tree(entry("100644", ".gitx", blob))},
		"tree .":                {"tree", tree(entry("100644", ".", blob))},
		"tree ..":               {"tree", tree(entry("100644", "..", blob))},
		"tree slash":            {"tree", tree(entry("100644", "a/b", blob))},
		"tree zero-padded":      {"tree", tree(entry("0100644", "a", blob))},
		"tree 100664":           {"tree", tree(entry("100664", "a", blob))},
		"tree null sha1":        {"tree", tree(entry("100644", "a", plumbing.ZeroHash))},
		"tree duplicate":        {"tree", tree(entry("100644", "a", blob), entry("100644", "a", blob))},
		"tree duplicate far":    {"tree", tree(entry("100644", "a", blob), entry("100644", "a.c", blob), entry("40000", "a", plumbing.NewHash(T)))},
		"tree unsorted":         {"tree", tree(entry("100644", "b", blob), entry("100644", "a", blob))},
		"tree dir order":        {"tree", tree(entry("100644", "a.c", blob), entry("40000", "a", plumbing.NewHash(T)))},
		"tree dir misordered":   {"tree", tree(entry("40000", "a", plumbing.NewHash(T)), entry("100644", "a.c", blob))},
		"tree gitmodules link":  {"tree", tree(entry("120000", ".gitmodules", blob))},
		"tree gitattrs link":    {"tree", tree(entry("120000", ".gitattributes", blob))},
		"tree empty name":       {"tree", tree(entry("100644", "", blob))},
		"tree cut short":        {"tree", tree(entry("100644", "a", blob))[:20]},
		"tree bad mode":         {"tree", tree(entry("10064x", "a", blob))},
		"commit ok":             {"commit", commit(ok)},
		"commit no tree":        {"commit", ok + "\nm\n"},
		"commit bad parent":     {"commit", commit("parent xyz\n" + ok)},
		"commit no author":      {"commit", commit("committer C <c@d> 1 +0000\n")},
		"commit no committer":   {"commit", commit("author A <a@b> 1 +0000\n")},
		"commit two authors":    {"commit", commit("author A <a@b> 1 +0000\n" + ok)},
		"ident no name":         {"commit", ident("<a@b> 1 +0000")},
		"ident bad name":        {"commit", ident("A> <a@b> 1 +0000")},
		"ident no email":        {"commit", ident("A 1 +0000")},
		"ident no space":        {"commit", ident("A<a@b> 1 +0000")},
		"ident bad email":       {"commit", ident("A <a@b 1 +0000")},
		"ident bad email 2":     {"commit", ident("A <a<b> 1 +0000")},
		"ident no date space":   {"commit", ident("A <a@b>1 +0000")},
		"ident zero-padded":     {"commit", ident("A <a@b> 01 +0000")},
		"ident bad date":        {"commit", ident("A <a@b> x +0000")},
		"ident bad date 2":      {"commit", ident("A <a@b> 1x +0000")},
		"ident overflow":        {"commit", ident("A <a@b> 99999999999999999999 +0000")},
		"ident negative":        {"commit", ident("A <a@b> -1 +0000")},
		"ident bad zone":        {"commit", ident("A <a@b> 1 0000")},
		"ident short zone":      {"commit", ident("A <a@b> 1 +000")},
		"ident empty email":     {"commit", ident("A <> 1 +0000")},
		"commit NUL in header":  {"commit", commit("author A <a@b> 1 +0000\ncommitter C <c@d> 1 +0000\x00")},
		"commit unterminated":   {"commit", "tree " + T + "\n" + strings.TrimSuffix(ok, "\n")},
		"commit NUL in message": {"commit", "tree " + T + "\n" + ok + "\nm\x00x\n"},
		"commit no message":     {"commit", "tree " + T + "\n" + ok},
		"tag ok":                {"tag", tag("type tree\ntag v1\ntagger T <t@u> 1 +0000\n")},
		"tag bad type":          {"tag", tag("type trees\ntag v1\ntagger T <t@u> 1 +0000\n")},
		"tag no tag":            {"tag", tag("type tree\ntagger T <t@u> 1 +0000\n")},
		"tag no tagger":         {"tag", tag("type tree\ntag v1\n")},
		"tag bad tagger":        {"tag", tag("type tree\ntag v1\ntagger T <t@u> x +0000\n")},
		"gitmodules ok":         special(".gitmodules", "[submodule \"x\"]\n\tpath = x\n\turl = https://example.com/x\n"),
		"gitmodules url":        special(".gitmodules", "[submodule \"x\"]\n\tpath = x\n\turl = -evil\n"),
		"gitmodules no host":    special(".gitmodules", "[submodule \"x\"]\n\tpath = x\n\turl = https:///x\n"),
		"gitmodules path":       special(".gitmodules", "[submodule \"x\"]\n\tpath = -x\n\turl = https://example.com/x\n"),
		"gitmodules name":       special(".gitmodules", "[submodule \"../x\"]\n\tpath = x\n\turl = https://example.com/x\n"),
		"gitmodules update":     special(".gitmodules", "[submodule \"x\"]\n\tpath = x\n\tupdate = !rm -rf /\n"),
		"gitattributes long":    special(".gitattributes", strings.Repeat("a", 3000)+" text\n"),
		"gitattributes ok":      special(".gitattributes", "*.md text\n"),
	}
	idLine := regexp.MustCompile(`(?m)^error in (?:tree|commit|tag|blob) [0-9a-f]{40}: (\w+):`)
	// Each case's repository is a copy of one made here, holding the blob
	// and the empty tree the cases name: a git init and two git
	// hash-object for each of the 64 cases were half the test's CPU.
	template := t.TempDir()
	gittest.Git(t, template, "init", "-q")
	gittest.GitIn(t, template, "hi\n", "hash-object", "-w", "--stdin")
	gittest.Git(t, template, "hash-object", "-w", "-t", "tree", "--stdin")
	for name, objs := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir() // not checked at the end: it holds the case's bad objects
			if err := os.CopyFS(dir, os.DirFS(template)); err != nil {
				t.Fatal(err)
			}
			var got []string
			var specials []string // content of blobs a tree names as special files
			files := map[plumbing.Hash]string{}
			for i := 0; i < len(objs); i += 2 {
				typ, data := objs[i], objs[i+1]
				gittest.GitIn(t, dir, data, "hash-object", "-w", "--literally", "-t", typ, "--stdin")
				var ps []ObjectProblem
				switch typ {
				case "tree":
					ps = CheckTree([]byte(data), func(h plumbing.Hash, file string) { files[h] = file })
				case "commit":
					ps = CheckCommit([]byte(data))
				case "tag":
					ps = CheckTag([]byte(data))
				case "blob":
					specials = append(specials, data)
				}
				for _, p := range ps {
					got = append(got, p.ID)
				}
			}
			for _, data := range specials {
				if file, ok := files[plumbing.ComputeHash(plumbing.BlobObject, []byte(data))]; ok {
					for _, p := range CheckBlob([]byte(data), file) {
						got = append(got, p.ID)
					}
				}
			}
			// No commit-graph nor multi-pack-index here: git fsck need not
			// start git commit-graph verify and git multi-pack-index verify.
			out, err := gittest.Command(t, dir, "-c", "core.commitGraph=false", "-c", "core.multiPackIndex=false", "fsck", "--strict", "--no-dangling").CombinedOutput()
			var want []string
			for _, m := range idLine.FindAllStringSubmatch(string(out), -1) {
				want = append(want, m[1])
			}
			slices.Sort(got)
			slices.Sort(want)
			got, want = slices.Compact(got), slices.Compact(want)
			t.Logf("git: %v (exit %v), checks: %v", want, err, got)
			switch {
			case err == nil && len(got) > 0:
				t.Errorf("git fsck --strict passes, the checks say %v", got)
			case len(want) > 0 && !slices.Equal(got, want):
				t.Errorf("git fsck --strict says %v, the checks %v\n%s", want, got, out)
			case err != nil && len(want) == 0 && len(got) == 0:
				t.Errorf("git fsck --strict fails, the checks say nothing\n%s", out)
			}
		})
	}
}
