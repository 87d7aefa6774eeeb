package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
