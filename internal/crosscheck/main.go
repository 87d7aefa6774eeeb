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
// It prints each error with the system it is for, and exits 1 after any.
package main

import (
	"fmt"
	"os"
	"strings"

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
		cfg := &packages.Config{
			// Every package's syntax and types, its imports' too: from
			// source, none compiled.
			Mode: packages.LoadAllSyntax,
			Env:  append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0"),
		}
		pkgs, err := packages.Load(cfg, "./...")
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", target, err)
			os.Exit(1)
		}
		packages.Visit(pkgs, nil, func(p *packages.Package) {
			for _, e := range p.Errors {
				fmt.Fprintf(os.Stderr, "%s: %s\n", target, e)
				failed = true
			}
		})
	}
	if failed {
		os.Exit(1)
	}
}
