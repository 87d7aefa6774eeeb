package gitmem

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Every log line of the store that prints an error prints it through
// scrubPaths: an error from the disk names host paths (a temporary file,
// .git/gitmem/kept from the root of the disk), which no message an
// operator or the model sees shows. The source is looked at: a call of
// logf or Logf given an error variable (err, werr, ...) as it is fails.
func TestLoggedErrorsAreScrubbedOfHostPaths(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	calls := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var fn string
			switch e := c.Fun.(type) {
			case *ast.SelectorExpr:
				fn = e.Sel.Name
			case *ast.Ident:
				fn = e.Name
			}
			if fn != "logf" && fn != "Logf" {
				return true
			}
			calls++
			for _, a := range c.Args {
				if id, ok := a.(*ast.Ident); ok && strings.HasSuffix(strings.ToLower(id.Name), "err") {
					t.Errorf("%s: %s is logged without scrubPaths", fset.Position(a.Pos()), id.Name)
				}
			}
			return true
		})
	}
	if calls < 10 {
		t.Fatalf("only %d log calls found: the test looks at the wrong files", calls)
	}
}
