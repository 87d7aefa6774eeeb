package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/mail"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
)

// run is the whole program: it parses args, runs the command and maps any
// error to an exit code and one line on stderr.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := newApp(stdin, stdout, stderr)
	err := app.Run(flagsFirst(app, defaultHTTPAddr(args)))
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		fmt.Fprintln(stderr, "gitmem: "+ee.msg)
		return ee.code
	}
	fmt.Fprintln(stderr, "gitmem: "+err.Error())
	return exitUsage // urfave/cli's own errors are about the command line
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:      "gitmem",
		Usage:     "Claude's memory tool, backed by git: every change is a commit",
		Reader:    stdin,
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "repo", Value: "./memory", EnvVars: []string{"GITMEM_REPO"},
				Usage: "the gitmem repository; /memories is its memories/ folder"},
		},
		Commands: []*cli.Command{initCommand(), serveCommand(), storeCommand(), logCommand(), showCommand(), diffCommand(),
			blameCommand(), revertCommand(), restoreCommand(), expireCommand(), redactCommand(), gcCommand(), fsckCommand(), tokenCommand(), scanCommand(),
			benchCommand(), remoteCommand(), cloneCommand(), pushCommand(), pullCommand(), syncCommand(), statusCommand()},
		ExitErrHandler:  func(*cli.Context, error) {}, // run maps errors to exit codes
		HideHelpCommand: true,
	}
}

func initCommand() *cli.Command {
	return &cli.Command{
		Name:      "init",
		Usage:     "create the repository, or adopt a folder of memory files as its first commit",
		ArgsUsage: "[DIR]   (default: --repo)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "adopt", Usage: "make an existing git repository that gitmem did not create a gitmem repository (gitmem then commits onto its branch)"},
		},
		Action: func(c *cli.Context) error {
			dir := c.String("repo")
			switch c.NArg() {
			case 0:
			case 1:
				dir = c.Args().First()
			default:
				return failf(exitUsage, "init takes one folder")
			}
			r, created, err := gitmem.Init(dir, gitmem.Options{Now: clock(), Logf: logTo(c.App.ErrWriter), Adopt: c.Bool("adopt")})
			if err != nil {
				return storeErr(err, dir)
			}
			defer r.Close()
			head, err := r.Commit("HEAD")
			if err != nil {
				return storeErr(err, dir)
			}
			if created {
				fmt.Fprintf(c.App.Writer, "Initialized gitmem repository in %s (commit %s)\n", dir, head.Hash[:7])
			} else {
				fmt.Fprintf(c.App.Writer, "%s is already a gitmem repository (HEAD %s)\n", dir, head.Hash[:7])
			}
			return nil
		},
	}
}

// storeErr words a store error for the operator.
func storeErr(err error, dir string) error {
	var se *gitmem.StorageError
	var de *gitmem.DamagedError
	switch {
	case errors.Is(err, gitmem.ErrNotRepository):
		return failf(exitNoRepo, "%s is not a gitmem repository (run: gitmem --repo %s init)", dir, dir)
	case errors.Is(err, gitmem.ErrForeign):
		return failf(exitNoRepo, "%s is a git repository that gitmem did not create; gitmem would commit onto its branch (to do so anyway: gitmem init --adopt %s)", dir, dir)
	case errors.As(err, &de):
		return failf(exitFailure, "%s; %s", de.Problem, de.Repair)
	case errors.As(err, &se):
		return failf(exitFailure, "%s: %v", se.Error()[len("gitmem: "):], se.Err)
	}
	return failf(exitFailure, "%v", err)
}

func logTo(w io.Writer) func(string, ...any) {
	l := log.New(w, "", log.LstdFlags)
	return l.Printf
}

// parseAuthor reads "Name <email>".
func parseAuthor(s string) (gitmem.Signature, error) {
	if s == "" {
		return gitmem.Signature{}, nil
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name == "" {
		return gitmem.Signature{}, failf(exitUsage, "--author must look like \"Name <email>\", got %q", s)
	}
	return gitmem.Signature{Name: a.Name, Email: a.Address}, nil
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

// flagsFirst moves a command's flags before its other arguments, so that
// "gitmem redact PATH --yes" works: urfave/cli stops reading flags at the
// first argument that is not one. Arguments after "--" stay in place.
func flagsFirst(app *cli.App, args []string) []string {
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") { // global flags
		if !strings.Contains(args[i], "=") && !isBoolFlag(app.Flags, args[i]) {
			i++
		}
		i++
	}
	if i >= len(args) {
		return args
	}
	cmd := app.Command(args[i])
	if cmd == nil {
		return args
	}
	if i+1 < len(args) && cmd.Command(args[i+1]) != nil { // a subcommand: gitmem store create
		i++
		cmd = cmd.Command(args[i])
	}
	head := append([]string(nil), args[:i+1]...)
	var flags, rest []string
	for j := i + 1; j < len(args); j++ {
		a := args[j]
		switch {
		case a == "--":
			rest = append(rest, args[j:]...)
			j = len(args)
		case strings.HasPrefix(a, "-") && a != "-":
			flags = append(flags, a)
			if !strings.Contains(a, "=") && !isBoolFlag(cmd.Flags, a) && j+1 < len(args) {
				j++
				flags = append(flags, args[j])
			}
		default:
			rest = append(rest, a)
		}
	}
	return append(append(head, flags...), rest...)
}

func isBoolFlag(flags []cli.Flag, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				_, ok := f.(*cli.BoolFlag)
				return ok
			}
		}
	}
	return name == "help" || name == "h"
}
