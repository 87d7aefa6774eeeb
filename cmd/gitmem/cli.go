package main

import (
	_ "embed"
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gitmem-dev/gitmem/policy"
	"github.com/xrash/smetrics"

	"github.com/urfave/cli/v2"
)

// globalFlags are the flags of every command. They may be written before
// or after the command's name (gitmem --repo R log, gitmem log --repo R).
func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "repo", Value: "./memory", EnvVars: []string{"GITMEM_REPO"},
			Usage: "the gitmem repository; /memories is its memories/ folder"},
		&cli.StringFlag{Name: "config", EnvVars: []string{"GITMEM_CONFIG"},
			Usage: "read settings from this TOML `FILE` (flags and environment variables win)"},
		&cli.StringFlag{Name: "color", Value: "auto", EnvVars: []string{"GITMEM_COLOR"},
			Usage: "color output: `auto` (on a terminal, unless NO_COLOR is set), always or never"},
		&cli.BoolFlag{Name: "no-pager", EnvVars: []string{"GITMEM_NO_PAGER"},
			Usage: "never page output (else, on a terminal: $GITMEM_PAGER, $PAGER or less)"},
		&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: []string{"GITMEM_LOG_LEVEL"},
			Usage: "least important log messages written to stderr: debug, info, warn or error"},
		&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: []string{"GITMEM_LOG_FORMAT"},
			Usage: "log lines as text (key=value) or json"},
		&cli.DurationFlag{Name: "lock-wait", Value: 30 * time.Second, EnvVars: []string{"GITMEM_LOCK_WAIT"},
			Usage: "how long a command that writes waits for the memory's writer lock while another process holds it, before it gives up (exit code 5; 0: as long as it takes)"},
		&cli.BoolFlag{Name: "allow-owner-mismatch", EnvVars: []string{"GITMEM_ALLOW_OWNER_MISMATCH"},
			Usage: "let a command that writes (revert, restore, expire, fsck --repair, ...) write a repository whose .git is another user's (the files it writes are yours)"},
	}
}

// completionFlag is the hidden flag urfave/cli's completion scripts add.
const completionFlag = "--generate-bash-completion"

// normalize rewrites a command line into the order urfave/cli parses: the
// global flags first, then the command, its flags, and its arguments
// (urfave/cli stops reading flags at the first argument that is not one,
// so "gitmem redact PATH --yes" and "gitmem log --repo R" need this);
// "-n1" becomes "-n 1". Arguments after "--" stay in place. It also
// returns the command's name ("log "), for hints, and refuses an unknown
// command.
func normalize(app *cli.App, args []string) (out []string, cmdName string, err error) {
	if len(args) > 0 && args[len(args)-1] == completionFlag {
		return args, "", nil // a completion request: urfave/cli reads it as it is
	}
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") { // global flags
		if args[i] == "--" {
			return args, "", nil
		}
		if !strings.Contains(args[i], "=") && takesValue(app.Flags, args[i]) {
			i++
		}
		i++
	}
	if i >= len(args) {
		return args, "", nil
	}
	start := i
	cmd := app.Command(args[i])
	unknown := func(name string) error {
		var names []string
		for _, c := range app.Commands {
			names = append(names, c.Names()...)
		}
		return failf(exitUsage, "%s is not a gitmem command%s (see: gitmem help)", policy.QuoteName(name), didYouMean(name, names))
	}
	if args[i] == "help" || args[i] == "h" { // urfave/cli's own help command: gitmem help serve
		if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && app.Command(args[i+1]) == nil {
			return nil, "", unknown(args[i+1])
		}
		return args, "", nil
	}
	if cmd == nil {
		return nil, "", unknown(args[i])
	}
	if i+1 < len(args) && cmd.Command(args[i+1]) != nil { // a subcommand: gitmem store create
		i++
		cmd = cmd.Command(args[i])
	}
	path := args[start : i+1]
	cmdName = strings.Join(path, " ") + " "
	globals := append([]string(nil), args[1:start]...)
	var flags, rest []string
	for j := i + 1; j < len(args); j++ {
		a := args[j]
		switch {
		case a == "--":
			rest = append(rest, args[j:]...)
			j = len(args)
		case strings.HasPrefix(a, "-") && a != "-":
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			dst, set := &flags, cmd.Flags
			if findFlag(cmd.Flags, name) == nil && findFlag(app.Flags, name) != nil {
				dst, set = &globals, app.Flags
			}
			if len(name) > 1 && !hasValue && a[1] != '-' && findFlag(set, name) == nil && takesValue(set, "-"+name[:1]) { // -n1
				*dst = append(*dst, "-"+name[:1], name[1:])
				continue
			}
			*dst = append(*dst, a)
			if !hasValue && takesValue(set, a) {
				if j+1 == len(args) {
					return nil, "", failf(exitUsage, "%sflag %s needs a value (see: gitmem %s--help)", strings.Join(path, " ")+": ", a, cmdName)
				}
				j++
				*dst = append(*dst, args[j])
			}
		default:
			rest = append(rest, a)
		}
	}
	out = append([]string{args[0]}, globals...)
	out = append(append(append(out, path...), flags...), rest...)
	return out, cmdName, nil
}

func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if n, aliases := flagName(f); n == name || slices.Contains(aliases, name) {
			return f
		}
	}
	return nil
}

// flagName is a flag's name and aliases as its fields hold them: what
// its Names() returns, without the regular expression urfave/cli runs on
// every name at every call. Our flags' names have no comma or space,
// which is all that expression strips (TestFlagNameIsNames).
func flagName(f cli.Flag) (string, []string) {
	switch f := f.(type) {
	case namedFlag:
		return f.flag()
	case *cli.StringFlag:
		return f.Name, f.Aliases
	case *cli.BoolFlag:
		return f.Name, f.Aliases
	case *cli.IntFlag:
		return f.Name, f.Aliases
	case *cli.Int64Flag:
		return f.Name, f.Aliases
	case *cli.DurationFlag:
		return f.Name, f.Aliases
	case *cli.StringSliceFlag:
		return f.Name, f.Aliases
	}
	names := f.Names()
	return names[0], names[1:]
}

// Our flags as the app holds them: each of urfave/cli's flags, its names
// made once. urfave/cli looks every flag up by name at every start
// (runFlagActions: for each flag, IsSet scans the flags calling Names,
// which runs a regular expression on every name): quadratic in the
// number of flags, and under -race, as the tests start gitmem, each run
// of that expression allocates (a start of `gitmem log` ran it 300
// times). The wrapper has all of the flag's methods but Names, and
// holds no state of its own: parsing, help and completion read the flag
// it wraps.
type (
	namedFlag interface{ flag() (string, []string) }
	names     []string

	stringFlag struct {
		*cli.StringFlag
		names
	}
	boolFlag struct {
		*cli.BoolFlag
		names
	}
	intFlag struct {
		*cli.IntFlag
		names
	}
	int64Flag struct {
		*cli.Int64Flag
		names
	}
	durationFlag struct {
		*cli.DurationFlag
		names
	}
	stringSliceFlag struct {
		*cli.StringSliceFlag
		names
	}
)

// all is what the wrapped flag's Names returns (a slice a caller may
// append to without touching the held one).
func (n names) all() []string             { return slices.Clip(n) }
func (n names) flag() (string, []string)  { return n[0], slices.Clip(n[1:]) }
func (f stringFlag) Names() []string      { return f.all() }
func (f boolFlag) Names() []string        { return f.all() }
func (f intFlag) Names() []string         { return f.all() }
func (f int64Flag) Names() []string       { return f.all() }
func (f durationFlag) Names() []string    { return f.all() }
func (f stringSliceFlag) Names() []string { return f.all() }

// withNames wraps every flag of the list (in place) in its type's
// wrapper: after withEnv and requiredFlags, which set the flags' fields.
func withNames(flags []cli.Flag) {
	for i, f := range flags {
		flags[i] = named(f)
	}
}

// named is the flag in its type's wrapper (a pointer: urfave/cli
// compares flags with ==). A flag is left as it is where urfave/cli reads
// a field of it by its own type, which a wrapper would hide: a boolean's
// Hidden (flag suggestions) and DisableDefaultText (help), a string's
// TakesFile (fish completion).
func named(f cli.Flag) cli.Flag {
	name, aliases := flagName(f)
	n := names(append([]string{name}, aliases...))
	switch f := f.(type) {
	case *cli.StringFlag:
		if f.TakesFile {
			return f
		}
		return &stringFlag{f, n}
	case *cli.BoolFlag:
		if f.Hidden || f.DisableDefaultText {
			return f
		}
		return &boolFlag{f, n}
	case *cli.IntFlag:
		return &intFlag{f, n}
	case *cli.Int64Flag:
		return &int64Flag{f, n}
	case *cli.DurationFlag:
		return &durationFlag{f, n}
	case *cli.StringSliceFlag:
		if f.TakesFile {
			return f
		}
		return &stringSliceFlag{f, n}
	}
	return f
}

// urfave/cli's own --help and --version, which it puts after every
// command's flags and looks up at every start, are wrapped too.
func init() {
	cli.HelpFlag, cli.VersionFlag = named(cli.HelpFlag), named(cli.VersionFlag)
}

// takesValue reports whether a flag (as written, "--repo") reads the next
// argument as its value: a known flag that is not a boolean.
func takesValue(flags []cli.Flag, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	switch name {
	case "help", "h", "version", "v", strings.TrimLeft(completionFlag, "-"):
		return false
	}
	f := findFlag(flags, name)
	if f == nil {
		return false
	}
	_, isBool := f.(*cli.BoolFlag)
	_, isWrappedBool := f.(*boolFlag)
	return !isBool && !isWrappedBool
}

func forEachCommand(cmds []*cli.Command, fn func(*cli.Command)) {
	for _, c := range cmds {
		fn(c)
		forEachCommand(c.Subcommands, fn)
	}
}

var (
	undefinedFlag = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^flag provided but not defined: -+(.*)$`) })
	invalidValue  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(invalid value .* for flag )-([^:]+)(:.*)$`) })
)

// usageError words a command line that does not parse as one line with a
// hint, instead of urfave/cli's whole help text.
func usageError(c *cli.Context, err error, _ bool) error {
	var names []string
	for _, ctx := range c.Lineage() {
		if ctx.Command != nil && ctx.Command.Name != "" && ctx.Command.Name != c.App.Name {
			names = append([]string{ctx.Command.Name}, names...)
		}
	}
	name, prefix := "", ""
	if len(names) > 0 {
		name = strings.Join(names, " ") + " "
		prefix = strings.Join(names, " ") + ": "
	}
	msg := err.Error()
	if m := invalidValue().FindStringSubmatch(msg); m != nil {
		// Go's flag package names every flag with one dash.
		msg = m[1] + dashes(m[2]) + m[3]
	}
	if m := undefinedFlag().FindStringSubmatch(msg); m != nil {
		// Not the version flag (it stands before any command), nor the
		// very flag refused: "remote -v" is no slip for -v.
		var names []string
		for _, f := range append(c.Command.Flags, c.App.Flags...) {
			if f == cli.VersionFlag {
				continue
			}
			for _, n := range f.Names() {
				if n != m[1] {
					names = append(names, dashes(n))
				}
			}
		}
		msg = "unknown flag " + dashes(m[1]) + didYouMean(dashes(m[1]), names)
	}
	return failf(exitUsage, "%s%s (see: gitmem %s--help)", prefix, msg, name)
}

// didYouMean names the one of names closest to a mistyped one, when one
// is close (Jaro-Winkler similarity of at least 0.85, as git's "did you
// mean" is for a near miss, not a guess), or else the only one a single
// slip away (a swapped pair of letters, or one letter wrong, missing or
// extra: Jaro-Winkler misses these in short words, "lgo" for "log").
func didYouMean(typed string, names []string) string {
	best, score := "", 0.85
	for _, n := range names {
		if s := smetrics.JaroWinkler(typed, n, 0.7, 4); s >= score {
			best, score = n, s
		}
	}
	if best == "" && len(typed) >= 3 {
		for _, n := range names {
			if oneSlip(typed, n) {
				if best != "" {
					return "" // two as near: no guess
				}
				best = n
			}
		}
	}
	if best == "" {
		return ""
	}
	return "; did you mean " + best + "?"
}

// oneSlip reports whether a and b differ by one swap of adjacent letters
// or one edit (Damerau-Levenshtein distance 1).
func oneSlip(a, b string) bool {
	if a == b {
		return false
	}
	if len(a) == len(b) {
		var diff []int
		for i := range len(a) {
			if a[i] != b[i] {
				diff = append(diff, i)
			}
		}
		return len(diff) == 1 ||
			(len(diff) == 2 && diff[1] == diff[0]+1 && a[diff[0]] == b[diff[1]] && a[diff[1]] == b[diff[0]])
	}
	return smetrics.WagnerFischer(a, b, 1, 1, 1) == 1
}

// bytesLimit and countLimit are a limit's flag: 0 is no limit, and a
// negative value is refused rather than taken as none.
func bytesLimit(name string, value int64, usage string) *cli.Int64Flag {
	return &cli.Int64Flag{Name: name, Value: value, Usage: usage,
		Action: func(c *cli.Context, v int64) error { return zeroOrMore(c, name, v, "no limit") }}
}

func countLimit(name string, value int, usage string) *cli.IntFlag {
	return &cli.IntFlag{Name: name, Value: value, Usage: usage,
		Action: func(c *cli.Context, v int) error { return zeroOrMore(c, name, v, "no limit") }}
}

// zeroOrMore refuses a negative value of the flag name, whose 0 means
// zero.
func zeroOrMore[T ~int | ~int64](c *cli.Context, name string, v T, zero string) error {
	if v >= 0 {
		return nil
	}
	cmd := strings.TrimSpace(strings.TrimPrefix(c.Command.HelpName, c.App.Name))
	return failf(exitUsage, "%s: %s is 0 (%s) or more, not %v (see: gitmem %s --help)", cmd, dashes(name), zero, v, cmd)
}

func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// buildInfo describes this binary: its module version, the commit it was
// built from, and how.
type buildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	Date      string `json:"date,omitempty"` // the commit's date
	BuildDate string `json:"build_date,omitempty"`
	Go        string `json:"go"`
	Platform  string `json:"platform"`
}

// buildDate is set by release builds: -ldflags "-X main.buildDate=...".
var buildDate string

func readBuildInfo() buildInfo {
	b := buildInfo{Version: "(devel)", BuildDate: buildDate, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.Date = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// versionLine is what --version prints after "gitmem version ".
func versionLine() string {
	b := readBuildInfo()
	var extra []string
	if b.Commit != "" {
		c := short(b.Commit)
		if b.Modified {
			c += ", modified"
		}
		extra = append(extra, "commit "+c)
	}
	if b.BuildDate != "" {
		extra = append(extra, "built "+b.BuildDate)
	}
	if len(extra) == 0 {
		return b.Version
	}
	return b.Version + " (" + strings.Join(extra, ", ") + ")"
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version, commit and build of this gitmem",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "as a JSON object"}},
		Action: func(c *cli.Context) error {
			b := readBuildInfo()
			if c.Bool("json") {
				return jsonLines(c.App.Writer)(b)
			}
			w := c.App.Writer
			fmt.Fprintf(w, "gitmem %s\n", b.Version)
			if b.Commit != "" {
				mod := ""
				if b.Modified {
					mod = " (modified)"
				}
				fmt.Fprintf(w, "commit     %s%s\n", b.Commit, mod)
			}
			if b.Date != "" {
				fmt.Fprintf(w, "committed  %s\n", b.Date)
			}
			if b.BuildDate != "" {
				fmt.Fprintf(w, "built      %s\n", b.BuildDate)
			}
			fmt.Fprintf(w, "go         %s %s\n", b.Go, b.Platform)
			return nil
		},
	}
}

// The completion scripts for bash and zsh are urfave/cli's
// (autocomplete/bash_autocomplete and zsh_autocomplete); they ask gitmem
// itself for candidates with --generate-bash-completion. fish's is
// generated from the commands.
var (
	//go:embed completion/gitmem.bash
	bashCompletion string
	//go:embed completion/gitmem.zsh
	zshCompletion string
)

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script for bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: "bash:  source <(gitmem completion bash)     (or save it in /etc/bash_completion.d/gitmem)\n" +
			"zsh:   gitmem completion zsh > \"${fpath[1]}/_gitmem\"\n" +
			"fish:  gitmem completion fish > ~/.config/fish/completions/gitmem.fish",
		Action: func(c *cli.Context) error {
			var script string
			switch c.Args().First() {
			case "bash":
				script = bashCompletion
			case "zsh":
				script = zshCompletion
			case "fish":
				s, err := c.App.ToFishCompletion()
				if err != nil {
					return failf(exitFailure, "fish completion: %v", err)
				}
				script = s
			default:
				return failf(exitUsage, "completion takes one shell: bash, zsh or fish")
			}
			_, err := fmt.Fprint(c.App.Writer, script)
			return err
		},
	}
}

func manCommand() *cli.Command {
	return &cli.Command{
		Name:  "man",
		Usage: "print the manual page (roff): gitmem man > /usr/local/share/man/man1/gitmem.1",
		Action: func(c *cli.Context) error {
			page, err := c.App.ToManWithSection(1)
			if err != nil {
				return failf(exitFailure, "man page: %v", err)
			}
			_, err = fmt.Fprint(c.App.Writer, page)
			return err
		},
	}
}
