package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/mail"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
)

// run is the whole program: it parses args, runs the command and maps any
// error to an exit code and one line on stderr.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	unsetEmptyEnv()
	app := newApp(stdin, stdout, stderr)
	args, cmd, err := normalize(app, defaultHTTPAddr(args))
	if err == nil {
		if cmd != "serve " && cmd != "bench " {
			lazyGC()
		}
		err = app.Run(args)
		if r := takeCheckedRepo(app); r != nil { // the command stopped before openRepo
			r.Close()
		}
	}
	if err == nil {
		return exitOK
	}
	// The last line goes where the command's other lines went: serve's
	// log writer waits a bounded time for a stderr that takes nothing.
	stderr = app.ErrWriter
	var ee *exitError
	if errors.As(err, &ee) {
		fmt.Fprintln(stderr, "gitmem: "+ee.msg)
		return ee.code
	}
	// urfave/cli's own errors are about the command line.
	fmt.Fprintf(stderr, "gitmem: %s (see: gitmem %s--help)\n", err, cmd)
	return exitUsage
}

// lazyGC has a command that runs once (log, show, revert: a fraction of
// a second, tens of MB) collect no garbage until its heap reaches 64 MiB,
// from where the collector runs as Go's defaults have it: a revert at
// 10,000 files collected 5 times between 4 MB and 14 MB, 10% of its CPU,
// to give back memory the process gives back at its exit anyway. A
// server (serve) and the bench keep the defaults, and so does a process
// whose GOGC or GOMEMLIMIT is set.
func lazyGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(64 << 20)
	// The first collection (the limit reached) runs this: from there on,
	// the defaults. (An object of 16 bytes or more: a smaller one may
	// share its memory with others, and never be collected alone.)
	runtime.AddCleanup(new([64]byte), func(struct{}) {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
	}, struct{}{})
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:      "gitmem",
		Usage:     "Claude's memory tool, backed by git: every change is a commit",
		Reader:    stdin,
		Writer:    stdout,
		ErrWriter: stderr,
		Version:   versionLine(),
		Flags:     globalFlags(),
		Commands: []*cli.Command{initCommand(), serveCommand(), storeCommand(), logCommand(), showCommand(), diffCommand(),
			blameCommand(), revertCommand(), restoreCommand(), expireCommand(), redactCommand(), gcCommand(), fsckCommand(),
			tokenCommand(), scanCommand(), benchCommand(), remoteCommand(), cloneCommand(), pushCommand(), pullCommand(),
			syncCommand(), statusCommand(), versionCommand(), completionCommand(), manCommand()},
		ExitErrHandler:       func(*cli.Context, error) {}, // run maps errors to exit codes
		OnUsageError:         usageError,
		Before:               func(c *cli.Context) error { return errors.Join(applyConfig(c), checkGlobals(c)) },
		EnableBashCompletion: true,
	}
	opensRepo := map[*cli.Command]bool{}
	for _, name := range repoCommands {
		cmd := app.Command(strings.Fields(name)[0])
		for _, sub := range strings.Fields(name)[1:] {
			cmd = cmd.Command(sub)
		}
		opensRepo[cmd] = true
	}
	required := requiredFlags(app.Commands)
	leafHelp, parentHelp := helpTemplates()
	forEachCommand(app.Commands, func(c *cli.Command) {
		c.OnUsageError = usageError
		c.CustomHelpTemplate = leafHelp
		// A command without subcommands gets no "help" (alias "h")
		// subcommand: its arguments are its own (gitmem remote remove h
		// removes the remote h); --help still shows its help.
		c.HideHelpCommand = true
		if len(c.Subcommands) > 0 {
			c.CustomHelpTemplate = parentHelp
			c.HideHelpCommand = false
		}
		before := c.Before
		opens := opensRepo[c]
		c.Before = func(ctx *cli.Context) error {
			if err := applyConfig(ctx); err != nil {
				return err
			}
			if err := checkRequired(ctx, required[c]); err != nil {
				return err
			}
			if opens {
				if err := checkRepoFirst(ctx); err != nil {
					return err
				}
			}
			if before == nil {
				return nil
			}
			return before(ctx)
		}
	})
	withEnv(app.Flags)
	withEnv(app.Command("serve").Flags)
	withNames(app.Flags)
	forEachCommand(app.Commands, func(c *cli.Command) { withNames(c.Flags) })
	return app
}

// helpTemplates are the help of a command and of a command with
// subcommands: urfave/cli's, with the global flags (which work after the
// command too) at the end, and for the second the subcommand in its usage
// line ("gitmem store COMMAND ...", not "gitmem store [command options]").
// The global flags' lines are put in when a help is shown (globalOptions).
func helpTemplates() (leaf, parent string) {
	parent = strings.Replace(cli.SubcommandHelpTemplate, `{{template "usageTemplate" .}}`,
		`{{.HelpName}} COMMAND [command options] [arguments...]`, 1)
	return cli.CommandHelpTemplate + globalOptions, parent + globalOptions
}

// globalOptions stands in a command's help template for the global flags'
// lines, which the help printer puts in its place: made only when a help
// is shown (each flag's String was 1% of a log's process, help or not).
const globalOptions = "{{/* global options */}}"

func init() {
	print := cli.HelpPrinter
	cli.HelpPrinter = func(w io.Writer, templ string, data any) {
		if strings.Contains(templ, globalOptions) {
			var b strings.Builder
			b.WriteString("\nGLOBAL OPTIONS (before or after the command):\n")
			for _, f := range globalFlags() {
				b.WriteString("   " + f.String() + "\n")
			}
			templ = strings.Replace(templ, globalOptions, b.String(), 1)
		}
		print(w, templ, data)
	}
}

// requiredFlags takes the required flags of every command out of
// urfave/cli's hands, which prints the whole help before its error when
// one is missing: checkRequired says it in one line instead.
func requiredFlags(cmds []*cli.Command) map[*cli.Command][]cli.Flag {
	out := map[*cli.Command][]cli.Flag{}
	forEachCommand(cmds, func(c *cli.Command) {
		for _, f := range c.Flags {
			if rf, ok := f.(cli.RequiredFlag); ok && rf.IsRequired() {
				out[c] = append(out[c], f)
			}
		}
	})
	for _, flags := range out { // after every command was seen: commands share flags
		for _, f := range flags {
			switch f := f.(type) {
			case *cli.StringFlag:
				f.Required = false
			case *cli.StringSliceFlag:
				f.Required = false
			default:
				panic(fmt.Sprintf("a required %T flag: requiredFlags does not know it", f))
			}
		}
	}
	return out
}

// checkRequired refuses a command line that lacks one of the command's
// required flags (set on the command line or by its environment variable).
func checkRequired(c *cli.Context, flags []cli.Flag) error {
	for _, f := range flags {
		if slices.ContainsFunc(f.Names(), c.IsSet) {
			continue
		}
		name := strings.TrimSpace(strings.TrimPrefix(c.Command.HelpName, c.App.Name))
		env := ""
		if ef, ok := f.(interface{ GetEnvVars() []string }); ok && len(ef.GetEnvVars()) > 0 {
			env = " (or set " + strings.Join(ef.GetEnvVars(), " or ") + ")"
		}
		return failf(exitUsage, "%s: %s is required%s (see: gitmem %s --help)", name, dashes(f.Names()[0]), env, name)
	}
	return nil
}

// repoCommands are the commands that open --repo. On a folder that is no
// gitmem repository they exit 3 (exitNoRepo) before any of their arguments
// is checked: the repository check comes first (checkRepoFirst), so that
// "gitmem blame README" in a code project says it is no gitmem repository
// rather than that README is no memory path.
var repoCommands = []string{"log", "show", "diff", "blame", "revert", "restore", "expire", "redact", "gc", "scan",
	"remote add", "remote list", "remote remove", "push", "pull", "sync", "status"}

// checkRepoFirst refuses --repo when it is no gitmem repository (missing,
// or a git repository gitmem did not create). Any other trouble (a
// damaged branch) is left to the command, which words it. The repository
// it opened read-only is the one a reading command's openRepo takes
// (log, show, diff, blame read it once, not twice); a writing command's
// openRepo closes it first.
func checkRepoFirst(c *cli.Context) error {
	dir := c.String("repo")
	r, err := openRepository(context.Background(), dir, readOptions(c))
	switch {
	case err == nil:
		if old := takeCheckedRepo(c.App); old != nil { // a parent command's check
			old.Close()
		}
		c.App.Metadata[checkedRepo] = r
		return nil
	case errors.Is(err, gitmem.ErrNotRepository), errors.Is(err, gitmem.ErrForeign), errors.Is(err, gitmem.ErrInterrupted):
		return storeErr(err, dir)
	}
	return nil
}

// openRepository is gitmem.Open (a test counts the opens).
var openRepository = gitmem.Open

// checkedRepo is the key of the repository checkRepoFirst opened in the
// app's Metadata, until openRepo or run's end takes it.
const checkedRepo = "checked repository"

// takeCheckedRepo returns and forgets the repository checkRepoFirst
// opened (nil if none).
func takeCheckedRepo(app *cli.App) *gitmem.Repo {
	r, _ := app.Metadata[checkedRepo].(*gitmem.Repo)
	delete(app.Metadata, checkedRepo)
	return r
}

func initCommand() *cli.Command {
	return &cli.Command{
		Name:      "init",
		Usage:     "create the repository, or adopt a folder of memory files as its first commit",
		ArgsUsage: "[DIR]   (default: --repo)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "adopt", Usage: "make an existing git repository that gitmem did not create a gitmem repository (gitmem then commits onto its branch)"},
		},
		Action: func(c *cli.Context) (err error) {
			dir := c.String("repo")
			switch c.NArg() {
			case 0:
			case 1:
				dir = c.Args().First()
			default:
				return failf(exitUsage, "init takes one folder")
			}
			r, created, err := gitmem.Init(c.Context, dir, withLockWait(c, gitmem.Options{Now: clock(), Logf: logTo(c), Errorf: errorLog(c), Adopt: c.Bool("adopt"), OwnerOnly: ownerOnly(c)}))
			if err != nil {
				return storeErr(err, dir)
			}
			defer closeRepo(r, &err)
			head, err := r.Commit(c.Context, "HEAD")
			if err != nil {
				return storeErr(err, dir)
			}
			if branch, adopted := r.Adopted(); adopted {
				fmt.Fprintf(c.App.Writer, "Adopted %s as a gitmem repository: gitmem now commits onto its branch %s (HEAD %s)\n", dir, branch, head.Hash[:7])
			} else if created {
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
	var de *gitmem.DamagedError
	var held *gitmem.LockHeldError
	switch {
	case errors.As(err, &held):
		return lockHeldErr(held)
	case errors.Is(err, gitmem.ErrNotRepository):
		if fi, serr := os.Stat(dir); serr == nil && !fi.IsDir() {
			return failf(exitNoRepo, "%s is a file; a gitmem repository is a folder (give --repo a folder)", dir)
		}
		if here, err := filepath.Abs("."); err == nil && here != absPath(dir) && isGitmemHere() {
			// In a store's folder, say: the default ./memory is not it.
			return failf(exitNoRepo, "%s is not a gitmem repository, but this folder is one: give --repo .", dir)
		}
		return failf(exitNoRepo, "%s is not a gitmem repository (run: gitmem --repo %s init)", dir, dir)
	case errors.Is(err, gitmem.ErrInterrupted):
		return failf(exitNoRepo, "%s/.git is what an interrupted creation of the repository left (by an earlier gitmem: no commit, nothing lost); run: gitmem --repo %s init, which makes it anew", dir, dir)
	case errors.Is(err, gitmem.ErrForeign):
		return failf(exitNoRepo, "%s is a git repository that gitmem did not create; gitmem would commit onto its branch (to do so anyway: gitmem init --adopt %s)", dir, dir)
	case errors.As(err, &de):
		return failf(exitFailure, "%s; %s", de.Problem, de.Repair)
	case errors.Is(err, gitmem.ErrOtherOwner):
		return failf(exitFailure, "refusing to write %s: its .git belongs to another user than the one this command runs as, and the files it wrote would be this user's (the memory's own serve could then no longer write them); run it as the owner of %s/.git (sudo -u OWNER gitmem ...), or pass --allow-owner-mismatch", dir, dir)
	}
	// The store's errors say "gitmem: " first; the CLI's message does.
	return failf(exitFailure, "%s", strings.TrimPrefix(err.Error(), "gitmem: "))
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

// absPath is dir made absolute ("" if it cannot be).
func absPath(dir string) string {
	p, _ := filepath.Abs(dir)
	return p
}

// isGitmemHere reports whether the working folder holds a repository
// gitmem made (its .git/gitmem folder).
func isGitmemHere() bool {
	fi, err := os.Stat(filepath.Join(".git", "gitmem"))
	return err == nil && fi.IsDir()
}
