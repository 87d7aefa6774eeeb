// Command crosscheck type-checks every package of the module, and every
// package each imports, for other systems than this one, from source:
//
//	go run ./internal/crosscheck darwin/arm64 windows/amd64
//
// It stands for `GOOS=... go build ./...` in ./test.sh: what breaks a
// build for another system is code that names what that system lacks (a
// system call, a constant of package syscall, a file left out by its
// build constraints), which a type-check finds; a build for each system
// would compile every package once more, which on a fresh machine here
// took about 5 minutes of CPU per system, against seconds for this.
//
// The module's own packages are checked whole; the packages they import
// (the standard library's and other modules') are checked but for their
// function bodies, as go/packages checks the imports of what it loads
// when it does not load their dependencies: what the module's code can
// name of them is in their declarations, which are checked. Their bodies
// were about two thirds of this check's CPU (25 s of CPU, and 1.1 GB of
// memory, on every run of ./test.sh; 9 s and 0.2 GB without them), for
// code that other projects build for these systems. An error inside such
// a body (a dependency that does not build there) is not found here.
//
// It prints each error with the system it is for, and exits 1 after any.
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/tools/go/packages"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crosscheck GOOS/GOARCH...")
		os.Exit(2)
	}
	failed := false
	for _, target := range os.Args[1:] {
		goos, goarch, ok := strings.Cut(target, "/")
		if !ok || goos == "" || goarch == "" {
			fmt.Fprintf(os.Stderr, "crosscheck: %q is not GOOS/GOARCH\n", target)
			os.Exit(2)
		}
		errs, err := check(goos, goarch)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", target, err)
			os.Exit(1)
		}
		for _, e := range errs {
			fmt.Fprintf(os.Stderr, "%s: %s\n", target, e)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// check lists the module's packages and all they import for goos/goarch
// (go list: which files each has there) and type-checks them from
// source, each once its imports are, as many at a time as there are
// cores. It returns every error found: go list's, the parser's and the
// type-checker's.
func check(goos, goarch string) ([]string, error) {
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles |
			packages.NeedImports | packages.NeedDeps | packages.NeedModule,
		Env: append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0"),
	}
	roots, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, err
	}
	main := ""
	if len(roots) > 0 && roots[0].Module != nil {
		main = roots[0].Module.Path
	}
	sizes := types.SizesFor("gc", goarch)
	fset := token.NewFileSet()
	var (
		mu   sync.Mutex
		errs []string
		done = map[*packages.Package]chan struct{}{}
	)
	report := func(e string) {
		mu.Lock()
		errs = append(errs, e)
		mu.Unlock()
	}
	var all []*packages.Package
	packages.Visit(roots, nil, func(p *packages.Package) {
		done[p] = make(chan struct{})
		all = append(all, p)
	})
	// Every package waits for its imports' types; a semaphore bounds
	// the ones at work to the cores.
	sem := make(chan struct{}, runtime.NumCPU())
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done[p])
			for _, imp := range p.Imports {
				<-done[imp]
			}
			sem <- struct{}{}
			defer func() { <-sem }()
			for _, e := range p.Errors {
				report(e.Error())
			}
			if p.PkgPath == "unsafe" {
				p.Types = types.Unsafe
				return
			}
			own := p.Module != nil && p.Module.Path == main
			var files []*ast.File
			for _, name := range p.CompiledGoFiles {
				f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
				if err != nil {
					report(err.Error())
				}
				if f != nil {
					files = append(files, f)
				}
			}
			tc := &types.Config{
				Importer: importerFunc(func(path string) (*types.Package, error) {
					if imp := p.Imports[path]; imp != nil && imp.Types != nil {
						return imp.Types, nil
					}
					return nil, fmt.Errorf("%s: no types for import %q", p.PkgPath, path)
				}),
				IgnoreFuncBodies: !own,
				Error:            func(err error) { report(err.Error()) },
				Sizes:            sizes,
			}
			if p.Module != nil && p.Module.GoVersion != "" {
				tc.GoVersion = "go" + p.Module.GoVersion
			}
			pkg, _ := tc.Check(p.PkgPath, fset, files, nil)
			p.Types = pkg
		}()
	}
	wg.Wait()
	return errs, nil
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }
