package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rogpeppe/go-internal/lockedfile"
	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/storesapi"
)

func tokenCommand() *cli.Command {
	fileFlag := &cli.StringFlag{Name: "file", EnvVars: []string{"GITMEM_TOKENS"}, Required: true,
		Usage: "the token `FILE` of serve --tokens"}
	return &cli.Command{
		Name:  "token",
		Usage: "add, list and remove the named, scoped tokens of a multi-store server (serve --stores --tokens FILE)",
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "add a token and print its secret (once: the file keeps only its SHA-256)",
				ArgsUsage: "NAME",
				Flags: []cli.Flag{fileFlag,
					&cli.StringSliceFlag{Name: "store", Required: true, Usage: "a store `NAME` or glob the token may use (repeatable; * for all)"},
					&cli.BoolFlag{Name: "read-only", Usage: "the token may read but not change memory"},
					&cli.BoolFlag{Name: "operator", Usage: "the token may use the operator API (else only tool calls)"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return failf(exitUsage, "token add takes one token name")
					}
					secret, err := newSecret()
					if err != nil {
						return failf(exitFailure, "%v", err)
					}
					tok := policy.Token{Name: c.Args().First(), SHA256: storesapi.HashToken(secret), Stores: c.StringSlice("store"),
						Access: policy.ReadWrite, Role: policy.Agent}
					if c.Bool("read-only") {
						tok.Access = policy.ReadOnly
					}
					if c.Bool("operator") {
						tok.Role = policy.Operator
					}
					if err := policy.CheckToken(tok); err != nil { // the command line's, not the file's
						return failf(exitUsage, "token %q: %v", tok.Name, err)
					}
					err = editTokens(c.String("file"), func(f *policy.TokenFile) error {
						for _, t := range f.Tokens {
							if t.Name == tok.Name {
								return failf(exitFailure, "there is a token named %s already (gitmem token list); remove it first to replace it", tok.Name)
							}
						}
						f.Tokens = append(f.Tokens, tok)
						return nil
					})
					if err != nil {
						return err
					}
					// The secret alone on stdout (SECRET=$(gitmem token add ...)),
					// the note on stderr: worded for a terminal and a pipe alike.
					fmt.Fprintln(c.App.Writer, secret)
					fmt.Fprintf(c.App.ErrWriter, "added token %s (%s %s, stores %s); its secret went to standard output, shown only this once (the file keeps its SHA-256). "+
						"A running server loads it at SIGHUP.\n", tok.Name, tok.Access, tok.Role, strings.Join(tok.Stores, " "))
					return nil
				},
			},
			{
				Name:  "list",
				Usage: "list the tokens: name, access, role, stores",
				Flags: []cli.Flag{fileFlag},
				Action: func(c *cli.Context) error {
					if err := needTokenFile(c.String("file")); err != nil {
						return err
					}
					f, err := readTokens(c.String("file"))
					if err != nil {
						return err
					}
					for _, t := range f.Tokens {
						fmt.Fprintf(c.App.Writer, "%s\t%s\t%s\t%s\n", t.Name, t.Access, t.Role, strings.Join(t.Stores, " "))
					}
					return nil
				},
			},
			{
				Name:      "remove",
				Usage:     "remove a token (a running server drops it at SIGHUP)",
				ArgsUsage: "NAME",
				Flags:     []cli.Flag{fileFlag},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return failf(exitUsage, "token remove takes one token name")
					}
					name := c.Args().First()
					if err := needTokenFile(c.String("file")); err != nil {
						return err
					}
					return editTokens(c.String("file"), func(f *policy.TokenFile) error {
						n := len(f.Tokens)
						f.Tokens = slices.DeleteFunc(f.Tokens, func(t policy.Token) bool { return t.Name == name })
						if len(f.Tokens) == n {
							return failf(exitFailure, "there is no token %s", name)
						}
						return nil
					})
				},
			},
		},
	}
}

// needTokenFile refuses a token file that does not exist: only token add
// makes one.
func needTokenFile(path string) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return failf(exitFailure, "there is no token file %s (gitmem token add NAME --file %[1]s makes it)", path)
	}
	return nil
}

// newSecret is a token secret: 32 random bytes, prefixed so that secret
// scanners (and gitmem's own screening) can tell what it is.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "gitmem_" + base64.RawURLEncoding.EncodeToString(b), nil
}

func readTokens(path string) (policy.TokenFile, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return policy.TokenFile{Tokens: []policy.Token{}}, nil
	}
	if err != nil {
		return policy.TokenFile{}, failf(exitFailure, "%v", err)
	}
	f, err := policy.ParseTokenFile(data)
	if err != nil {
		return f, failf(exitFailure, "%s: %v", path, err)
	}
	return f, nil
}

// editTokens changes the token file (the one a link names), checks the
// result, and replaces the file (mode 0600) in one rename. Another token add or remove waits: the
// file's lock (.NAME.lock beside it, flock'd; kept) is held from the read
// to the rename, so that neither's change is lost (a token removed while
// another was added came back).
func editTokens(path string, fn func(f *policy.TokenFile) error) error {
	// A link is followed: the file the server reads is the one changed
	// (the rename would otherwise put a file in the link's place), and
	// every path to it takes the same lock.
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	} else if !errors.Is(err, fs.ErrNotExist) {
		return failf(exitFailure, "%v", err)
	}
	unlock, err := lockedfile.MutexAt(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".lock")).Lock()
	if err != nil {
		return failf(exitFailure, "lock the token file: %v", err)
	}
	defer unlock()
	f, err := readTokens(path)
	if err != nil {
		return err
	}
	if err := fn(&f); err != nil {
		return err
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return failf(exitFailure, "%v", err)
	}
	data = append(data, '\n')
	if _, err := policy.ParseTokenFile(data); err != nil {
		return failf(exitUsage, "%v", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tokens-*")
	if err != nil {
		return failf(exitFailure, "%v", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return failf(exitFailure, "%v", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return failf(exitFailure, "%v", err)
	}
	if err := tmp.Close(); err != nil {
		return failf(exitFailure, "%v", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return failf(exitFailure, "%v", err)
	}
	return nil
}
