package main

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// Every package linked into gitmem runs its package-level initialisers at
// every start of every command: a log or show of 7 ms paid 0.4 ms for
// gitmem's own regexps (one of them, {0,63}, 0.2 ms alone) and CRC-32C
// table. gitmem's packages make those at their first use instead
// (sync.OnceValue): no package-level variable of theirs is initialised by
// compiling a regexp or building a CRC table.
func TestStartUpCompilesNothing(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \",\"}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	costly := map[string]bool{"regexp.MustCompile": true, "regexp.Compile": true, "regexp.MustCompilePOSIX": true,
		"regexp.CompilePOSIX": true, "crc32.MakeTable": true}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 || !strings.HasPrefix(f[0], "github.com/gitmem-dev/gitmem") || f[2] == "" {
			continue
		}
		for _, name := range strings.Split(f[2], ",") {
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, filepath.Join(f[1], name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			checked++
			for _, d := range file.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.VAR {
					continue
				}
				ast.Inspect(gd, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.FuncLit:
						return false // runs when called, not at start-up
					case *ast.CallExpr:
						if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
							if x, ok := sel.X.(*ast.Ident); ok && costly[x.Name+"."+sel.Sel.Name] {
								t.Errorf("%s: a package-level variable is initialised with %s.%s at every start of gitmem: make it at its first use (sync.OnceValue)",
									fset.Position(n.Pos()), x.Name, sel.Sel.Name)
							}
						}
					}
					return true
				})
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d files of gitmem's packages", checked)
	}
}

// The metrics of serve's /metrics are written by a library whose
// packages do nothing at start-up that a command pays for: Prometheus's
// client (its default registry, process and Go collectors, procfs's
// regexps, protobuf, which reads 8 samples of the binary to seed a hash)
// took 0.7-1.5 ms of every 7 ms log and show, which have no /metrics.
func TestStartUpLinksNoPrometheus(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/prometheus/") || strings.HasPrefix(p, "google.golang.org/protobuf/") {
			t.Errorf("gitmem links %s, whose initialisers run at every start of every command", p)
		}
	}
}

// A reading command (log, show, diff, blame) opens the repository once:
// the check that --repo is a gitmem repository (checkRepoFirst) opened it
// read-only and closed it, and the command opened it again (HEAD, the
// config, the branch and both write-ahead logs read twice, 0.1 ms of a
// 7 ms log). A writing command still opens it to write, after the check.
func TestReadingCommandOpensTheRepositoryOnce(t *testing.T) {
	// Not parallel: it counts the opens through a package variable, and
	// runs the commands in this process.
	t.Setenv("GOGC", "100") // run leaves the collector as it is
	repo, c := oneCallRepo(t)
	var opens []bool // ReadOnly of each open
	openRepository = func(ctx context.Context, dir string, opt gitmem.Options) (*gitmem.Repo, error) {
		opens = append(opens, opt.ReadOnly)
		return gitmem.Open(ctx, dir, opt)
	}
	defer func() { openRepository = gitmem.Open }()
	for _, tc := range []struct {
		args  []string
		opens []bool
	}{
		{[]string{"log"}, []bool{true}},
		{[]string{"show", c.Hash}, []bool{true}},
		{[]string{"blame", "/memories/notes.md"}, []bool{true}},
		{[]string{"revert", "--dry-run", c.Hash}, []bool{true}},
		{[]string{"revert", c.Hash}, []bool{true, false}},
	} {
		opens = nil
		var stdout, stderr strings.Builder
		if code := run(append([]string{"gitmem", "--repo", repo}, tc.args...), strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("gitmem %s: exit %d: %s", strings.Join(tc.args, " "), code, stderr.String())
		}
		if !slices.Equal(opens, tc.opens) {
			t.Errorf("gitmem %s opened the repository %d time(s), read-only: %v; want %v", strings.Join(tc.args, " "), len(opens), opens, tc.opens)
		}
	}
}

// show prints a commit's diff, read from git: the files it changed, which
// the history index records, are only printed as --json's paths. So show
// of a hash does not look for the commit's record in the index (from its
// end: most of 32 MB for an old commit of 100,000, 22 ms of CPU against 7
// for a recent one); without an index file it does not build one.
func TestShowReadsNoHistoryIndexButForJSON(t *testing.T) {
	t.Parallel()
	repo, c := oneCallRepo(t)
	index := filepath.Join(repo, ".git", "gitmem", "history")
	show := func(args ...string) string {
		t.Helper()
		if err := os.Remove(index); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		var stdout, stderr strings.Builder
		if code := run(append([]string{"gitmem", "--repo", repo, "show"}, args...), strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("gitmem show %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
		}
		return stdout.String()
	}
	if out := show(c.Hash); !strings.Contains(out, "+a note") || !strings.Contains(out, "Tool-Use-Id: toolu_1") {
		t.Fatalf("gitmem show %s:\n%s", c.Hash, out)
	}
	if _, err := os.Stat(index); err == nil {
		t.Error("gitmem show HASH built the history index: it looked for the commit's record")
	}
	if out := show("--json", c.Hash); !strings.Contains(out, `"paths":["/memories/notes.md"]`) {
		t.Fatalf("gitmem show --json %s:\n%s", c.Hash, out)
	}
}

// oneCallRepo is a closed repository of one call (toolu_1 wrote
// notes.md), and its commit.
func oneCallRepo(t *testing.T) (string, gitmem.Commit) {
	t.Helper()
	repo := filepath.Join(gittest.TempDir(t), "memory")
	r, _, err := gitmem.Init(context.Background(), repo, gitmem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Update(context.Background(), gitmem.Meta{Subject: "edit", Trailers: []gitmem.Trailer{{Key: gitmem.TrailerToolUseID, Value: "toolu_1"}}},
		func(tx *gitmem.Tx) error { return tx.WriteFile("notes.md", []byte("a note\n")) })
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return repo, c
}
