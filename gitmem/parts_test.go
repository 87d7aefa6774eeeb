package gitmem

import (
	"bufio"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"testing"
)

// parts names each part of the store (docs/design.md) by the struct that
// holds its state, and the files whose code may read or write that
// struct's unexported fields. Everything else reaches a part through its
// methods, so a part's lock sits beside the only code that touches what
// it guards.
var parts = map[string][]string{
	// the history index, in memory and in .git/gitmem/history
	"historyIndex": {"history.go", "histfile.go"},
	"catchingUp":   {"history.go"},
	// the tool_use ids known to have made a commit, or to be making one
	"toolUseIDs": {"toolids.go"},
	// .git/index: what gitmem last wrote there, its marks, its timer
	"gitIndex":  {"index.go"},
	"indexHeld": {"index.go"},
	// commits plain git moved the branch to, merged back
	"outsideGit": {"plaingit.go"},
	// the mirror: memories/ following the branch, hand edits found
	"mirror":       {"mirror.go", "worktree.go", "worktree_linux.go", "worktree_other.go", "drift.go", "handedit.go", "journal.go"},
	"worktree":     {"worktree.go", "worktree_linux.go", "worktree_other.go", "drift.go", "handedit.go"},
	"journal":      {"journal.go"},
	"statCache":    {"statcache.go"},
	"repairs":      {"repairs.go"},
	"flight":       {"repairs.go"},
	"pastVersions": {"repairs.go"},
	// the share engine: sessions with remotes, one at a time
	"sharer":         {"share.go"},
	"redactionCache": {"share_redact.go"},
	// one collection or redaction at a time
	"collector": {"gc.go"},
	// the committer: the write-ahead log's files
	"logFiles": {"logfiles.go"},
	"backlog":  {"backlog.go"},
	// readers' HEAD and the writer's tip
	"published": {"published.go"},
	// the committer: the group being filled, the group commit
	"committer": {"committer.go"},
	// the background loop of the writer lock's holder
	"maintainer": {"maintain.go"},
	// git's files and the worktree as written: the materialiser, the checkpoint
	"disk":         {"materialise.go", "checkpoint.go"},
	"diskTurn":     {"materialise.go", "checkpoint.go"},
	"materialiser": {"materialise.go", "checkpoint.go"},
}

// TestPartsOwnTheirState fails when code outside a part's files names one
// of the part's unexported fields. It type-checks the package's non-test
// files (with the export data `go list -export` gives for its imports)
// and looks at every field selection.
func TestPartsOwnTheirState(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(".", name); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	exports := exportData(t)
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, os.ErrNotExist
		}
		return os.Open(file)
	})}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
	pkg, err := conf.Check("github.com/gitmem-dev/gitmem/gitmem", fset, files, info)
	if err != nil {
		t.Fatal(err)
	}

	// Which part declares each field (embedded fields included).
	owner := map[*types.Var]string{}
	for part := range parts {
		obj := pkg.Scope().Lookup(part)
		if obj == nil {
			t.Fatalf("part %s: no such type", part)
		}
		st, ok := obj.Type().Underlying().(*types.Struct)
		if !ok {
			t.Fatalf("part %s is not a struct", part)
		}
		for f := range st.Fields() {
			owner[f] = part
		}
	}
	var bad []string
	for sel, s := range info.Selections {
		if s.Kind() != types.FieldVal {
			continue
		}
		f := s.Obj().(*types.Var)
		part, ok := owner[f]
		if !ok || f.Exported() {
			continue
		}
		pos := fset.Position(sel.Sel.Pos())
		if !slices.Contains(parts[part], filepath.Base(pos.Filename)) {
			bad = append(bad, pos.String()+": "+part+"."+f.Name())
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s: a field of another part (reach it through the part's methods, or move the code to the part's files)", b)
	}
}

// exportData maps each import path the package depends on to its export
// data file. It asks go list with the flags this test binary was built
// with (-race, -trimpath: ./test.sh's), so that the packages compiled for
// it come from the build cache: with other flags go list compiled every
// package it imports once more, the module's own ones at each new clone
// (the test's 54 s in a fresh clone's run of the suite).
func exportData(t *testing.T) map[string]string {
	t.Helper()
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}} {{.Export}}"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "-race", "-trimpath":
				if s.Value == "true" {
					args = append(args, s.Key)
				}
			case "-tags":
				args = append(args, "-tags="+s.Value)
			}
		}
	}
	out, err := exec.Command("go", append(args, ".")...).Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		path, file, ok := strings.Cut(sc.Text(), " ")
		if ok && file != "" {
			m[path] = file
		}
	}
	return m
}
