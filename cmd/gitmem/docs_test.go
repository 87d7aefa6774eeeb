package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// The gitmem status example in docs/operations.md is what status prints:
// the same lines, hashes, URL and times aside.
func TestOperationsDocShowsStatusAsPrinted(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	// The example: the command line, then its output as # comment lines.
	m := regexp.MustCompile(`(?m)^    gitmem status +#.*\n((?:    #.*\n)+)`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/operations.md shows no output under gitmem status")
	}
	var documented []string
	for _, l := range strings.Split(strings.TrimRight(string(m[1]), "\n"), "\n") {
		documented = append(documented, strings.TrimPrefix(strings.TrimPrefix(l, "    #"), " "))
	}

	// The same situation: a clone that fetched two commits it has not merged.
	env := testEnv(t)
	dir := gittest.TempDir(t)
	gitmem := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("gitmem", args...)
		cmd.Env, cmd.Dir = env, dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("gitmem %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	git := func(args ...string) {
		t.Helper()
		gittest.Git(t, dir, args...)
	}
	behindClone(t, dir, 2)
	git("-C", "b", "fetch", "-q", "origin")
	printed := strings.Split(strings.TrimRight(gitmem("--repo", "b", "status"), "\n"), "\n")

	hash := regexp.MustCompile(`\b[0-9a-f]{7}\b`)
	when := regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}`)
	url := regexp.MustCompile(`^remote (\S+) \(.*\)$`)
	head := regexp.MustCompile(`^HEAD H .*$`)
	shape := func(lines []string) []string {
		out := make([]string, len(lines))
		for i, l := range lines {
			l = when.ReplaceAllString(hash.ReplaceAllString(l, "H"), "TIME")
			l = url.ReplaceAllString(l, "remote $1 (URL)")
			out[i] = head.ReplaceAllString(l, "HEAD H SUBJECT")
		}
		return out
	}
	if got, want := strings.Join(shape(documented), "\n"), strings.Join(shape(printed), "\n"); got != want {
		t.Errorf("docs/operations.md shows gitmem status as\n%s\nit prints\n%s\n(as printed:\n%s)", got, want, strings.Join(printed, "\n"))
	}
}
