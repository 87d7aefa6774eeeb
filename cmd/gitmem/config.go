package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/urfave/cli/v2"
)

// Settings come, strongest first, from the command line, the environment
// (every global and serve flag has a GITMEM_ variable), the config file
// (--config FILE, TOML), and the defaults. The file holds the global
// flags at its top and a command's flags in a table named after the
// command:
//
//	repo = "/srv/agent-memory"
//	log-format = "json"
//
//	[serve]
//	http = "0.0.0.0:7077"
//	gc-loose = 5000
//	expire-keep = ["core/**"]
//
// docs/operations.md lists every setting in one table.

// unsetEmptyEnv makes an empty GITMEM_ variable count as unset, so that
// GITMEM_REPO= leaves --repo to the config file or the default.
func unsetEmptyEnv() {
	for _, kv := range os.Environ() {
		if name, value, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "GITMEM_") && value == "" {
			os.Unsetenv(name)
		}
	}
}

// envName is a flag's environment variable: GITMEM_ and the name in
// capitals, dashes as underscores (--max-file-bytes: GITMEM_MAX_FILE_BYTES).
func envName(flag string) string {
	return "GITMEM_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// withEnv gives every flag that has no environment variable its
// envName. Flags of a type it does not know are a programming error.
func withEnv(flags []cli.Flag) {
	for _, f := range flags {
		name, _ := flagName(f)
		env := []string{envName(name)}
		switch f := f.(type) {
		case *cli.StringFlag:
			f.EnvVars = or(f.EnvVars, env)
		case *cli.BoolFlag:
			f.EnvVars = or(f.EnvVars, env)
		case *cli.IntFlag:
			f.EnvVars = or(f.EnvVars, env)
		case *cli.Int64Flag:
			f.EnvVars = or(f.EnvVars, env)
		case *cli.DurationFlag:
			f.EnvVars = or(f.EnvVars, env)
		case *cli.StringSliceFlag:
			f.EnvVars = or(f.EnvVars, env)
		default:
			panic(fmt.Sprintf("withEnv: flag --%s is a %T", name, f))
		}
	}
}

func or(a, b []string) []string {
	if len(a) > 0 {
		return a
	}
	return b
}

// config is the parsed --config file: the top level and one table per
// command.
type config map[string]any

// loadConfig reads --config (nil when there is none).
func loadConfig(c *cli.Context) (config, error) {
	path := c.String("config")
	if path == "" {
		return nil, nil
	}
	var cfg config
	if _, err := toml.DecodeFile(path, &cfg); err != nil {
		if os.IsNotExist(err) {
			return nil, failf(exitUsage, "--config %s: no such file", path)
		}
		return nil, failf(exitUsage, "--config %s: %v", path, err)
	}
	return cfg, nil
}

// applyConfig sets the flags of the context's command (the app's, at the
// top level) that neither the command line nor the environment set, from
// the file's table for that command. A key the command does not have is
// an error: a typo must not be silently ignored.
func applyConfig(c *cli.Context) error {
	cfg, err := loadConfig(c)
	if cfg == nil {
		return err
	}
	table, flags, where := map[string]any(cfg), c.App.Flags, "the top level"
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		t, _ := cfg[c.Command.Name].(map[string]any)
		table, flags, where = t, c.Command.Flags, "["+c.Command.Name+"]"
	}
	for _, key := range sortedKeys(table) {
		value := table[key]
		if t, isTable := value.(map[string]any); isTable && where == "the top level" {
			// A command's table (a subcommand's by its own name: [list]),
			// set when that command runs; checked by every command, so
			// that a typo shows at once.
			var flags []cli.Flag
			found := false
			forEachCommand(c.App.Commands, func(cmd *cli.Command) {
				if cmd.Name == key {
					flags, found = append(flags, cmd.Flags...), true
				}
			})
			if !found {
				return failf(exitUsage, "--config %s: [%s] is not a gitmem command", c.String("config"), key)
			}
			for _, k := range sortedKeys(t) {
				if findFlag(flags, k) == nil {
					return failf(exitUsage, "--config %s: [%s] has no setting %q", c.String("config"), key, k)
				}
			}
			continue
		}
		f := findFlag(flags, key)
		if f == nil || key == "config" {
			return failf(exitUsage, "--config %s: %s has no setting %q", c.String("config"), where, key)
		}
		if c.IsSet(key) {
			continue
		}
		values := []any{value}
		if list, ok := value.([]any); ok {
			values = list
		}
		for _, v := range values {
			if err := c.Set(key, fmt.Sprint(v)); err != nil {
				return failf(exitUsage, "--config %s: %s: %v", c.String("config"), key, err)
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
