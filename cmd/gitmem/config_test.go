package main

import (
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// docs/operations.md's settings table lists every global and serve flag,
// with its environment variable and config key, and nothing else.
func TestSettingsTableListsEveryFlag(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile(`(?s)\n## Settings\n(.*?)\n## `).FindSubmatch(doc)
	if section == nil {
		t.Fatal("docs/operations.md has no Settings section")
	}
	row := regexp.MustCompile("(?m)^\\| `(serve )?--([a-z0-9-]+)[^`]*` \\| `(\\w+)` \\| ?(`([^`]*)`)? ?\\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(section[1]), -1) {
		key := m[2]
		if m[1] != "" {
			key = "serve " + key
		}
		want := strings.TrimPrefix(key, "serve ")
		if m[1] != "" {
			want = "[serve] " + want
		}
		if m[5] != want && !(key == "config" && m[5] == "") {
			t.Errorf("%s: config key %q, want %q", key, m[5], want)
		}
		documented[key] = m[3]
	}
	app := newApp(nil, io.Discard, io.Discard)
	check := func(prefix string, flags []cli.Flag) {
		for _, f := range flags {
			name := prefix + f.Names()[0]
			if name == "help" || name == "version" || name == "serve help" {
				continue
			}
			env := f.(interface{ GetEnvVars() []string }).GetEnvVars()
			switch {
			case documented[name] == "":
				t.Errorf("--%s is not in the settings table", name)
			case len(env) == 0 || env[0] != documented[name]:
				t.Errorf("--%s: the table says %s, the flag reads %v", name, documented[name], env)
			}
			delete(documented, name)
		}
	}
	check("", app.Flags)
	check("serve ", app.Command("serve").Flags)
	for name := range documented {
		t.Errorf("the settings table lists --%s, which is no flag", name)
	}
}

// flagName and the wrappers' Names, which the start uses instead of
// urfave/cli's Names (a regular expression per name per call), give what
// urfave/cli's Names gives for every flag of every command and its own
// --help and --version: no name or alias of ours has the comma or space
// that Names strips.
func TestFlagNameIsNames(t *testing.T) {
	t.Parallel()
	app := newApp(nil, io.Discard, io.Discard)
	check := func(where string, flags []cli.Flag) {
		for _, f := range flags {
			want := unwrapped(f).Names()
			name, aliases := flagName(f)
			if got := append([]string{name}, aliases...); !slices.Equal(got, want) {
				t.Errorf("%s: flagName gives %q, urfave/cli's Names %q", where, got, want)
			}
			if got := f.Names(); !slices.Equal(got, want) {
				t.Errorf("%s: Names gives %q, urfave/cli's %q", where, got, want)
			}
		}
	}
	check("gitmem", app.Flags)
	check("urfave/cli", []cli.Flag{cli.HelpFlag, cli.VersionFlag})
	forEachCommand(app.Commands, func(c *cli.Command) { check(c.FullName(), c.Flags) })
}

// unwrapped is the urfave/cli flag a wrapper holds.
func unwrapped(f cli.Flag) cli.Flag {
	switch f := f.(type) {
	case *stringFlag:
		return f.StringFlag
	case *boolFlag:
		return f.BoolFlag
	case *intFlag:
		return f.IntFlag
	case *int64Flag:
		return f.Int64Flag
	case *durationFlag:
		return f.DurationFlag
	case *stringSliceFlag:
		return f.StringSliceFlag
	}
	return f
}

// A flag whose field urfave/cli reads by the flag's own type stays
// unwrapped (a wrapper would hide it: a hidden boolean suggested, a
// file-taking string completed as another in fish); others are wrapped.
func TestNamedLeavesFlagsUrfaveReadsByType(t *testing.T) {
	t.Parallel()
	for _, f := range []cli.Flag{
		&cli.BoolFlag{Name: "b", Hidden: true},
		&cli.BoolFlag{Name: "b", DisableDefaultText: true},
		&cli.StringFlag{Name: "s", TakesFile: true},
		&cli.StringSliceFlag{Name: "s", TakesFile: true},
	} {
		if got := named(f); got != f {
			t.Errorf("named(%T %v) is a %T, want the flag itself", f, f.Names(), got)
		}
	}
	for _, f := range []cli.Flag{&cli.BoolFlag{Name: "b"}, &cli.StringFlag{Name: "s"}} {
		if got := named(f); got == f {
			t.Errorf("named(%T %v) is the flag itself, want its wrapper", f, f.Names())
		}
	}
}
