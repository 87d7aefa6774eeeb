package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
)

// storesFlag names the folder of stores, for serve and the store commands.
func storesFlag(usage string) *cli.StringFlag {
	return &cli.StringFlag{Name: "stores", EnvVars: []string{"GITMEM_STORES"}, Usage: usage}
}

func storeCommand() *cli.Command {
	dirFlag := storesFlag("the folder of stores (each store NAME is the repository `DIR`/NAME); default ./stores")
	metaFlags := []cli.Flag{
		&cli.StringFlag{Name: "display-name", Usage: "the store's name for people, free text (the Memory Stores API's name; default: NAME)"},
		&cli.StringFlag{Name: "description", Usage: "what the store holds, written for the model (up to 1,024 characters)"},
		&cli.StringSliceFlag{Name: "metadata", Usage: "a `KEY=VALUE` pair for your own use, such as the end user (repeatable)"},
		&cli.StringFlag{Name: "secret-screening", Usage: "off, refuse or mask for this store (default: the server's)"},
	}
	// displayName is --display-name, checked as the Memory Stores API
	// checks a store's name; "" when not given.
	displayName := func(c *cli.Context) (string, error) {
		v := c.String("display-name")
		if !c.IsSet("display-name") {
			return "", nil
		}
		if err := policy.CheckStoreDisplayName(v); err != nil {
			return "", failf(exitUsage, "--display-name: %v", err)
		}
		return v, nil
	}
	nameArg := func(c *cli.Context) (string, error) {
		if c.NArg() != 1 {
			return "", failf(exitUsage, "%s takes one store name", c.Command.Name)
		}
		return c.Args().First(), nil
	}
	return &cli.Command{
		Name:  "store",
		Usage: "create, list, show, update, import, export, archive and delete the stores of a multi-store server (serve --stores)",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "create a store: an empty memory with its description and metadata",
				ArgsUsage: "NAME",
				Flags:     append([]cli.Flag{dirFlag}, metaFlags...),
				Action: func(c *cli.Context) error {
					name, err := nameArg(c)
					if err != nil {
						return err
					}
					m := stores.Meta{Description: c.String("description")}
					if m.DisplayName, err = displayName(c); err != nil {
						return err
					}
					if m.Metadata, err = metadataFlag(c, false); err != nil {
						return err
					}
					if m.Screening, err = screeningFlag(c); err != nil {
						return err
					}
					return withStores(c, true, func(d *stores.Dir) error {
						info, err := d.Create(name, m, gitmem.Signature{})
						if err != nil {
							return storesErr(err, name)
						}
						fmt.Fprintf(c.App.Writer, "Created store %s in %s\n", info.Name, d.Root())
						return nil
					})
				},
			},
			{
				Name:  "list",
				Usage: "list the stores: name, created, state, display name and description",
				Flags: []cli.Flag{dirFlag,
					&cli.BoolFlag{Name: "archived", Usage: "include archived stores"},
					&cli.BoolFlag{Name: "json", Usage: "one JSON object per line"}},
				Action: func(c *cli.Context) error {
					return withStores(c, false, func(d *stores.Dir) error {
						emit := jsonLines(c.App.Writer)
						bad := 0
						for after := ""; ; {
							page, err := d.List(stores.ListOptions{After: after, Limit: 500, IncludeArchived: c.Bool("archived")})
							if err != nil {
								return storesErr(err, "")
							}
							for _, info := range page.Items {
								if info.Err != nil {
									// Listed with the others, and named on stderr with what to do.
									bad++
									fmt.Fprintf(c.App.ErrWriter, "gitmem: store %s cannot be read: %s\n", info.Name, unreadableWhy(info, d.Root()))
								}
								if c.Bool("json") {
									emit(info.ListJSON())
									continue
								}
								if info.Err != nil {
									fmt.Fprintf(c.App.Writer, "%s\t-\tunreadable\t\n", info.Name)
									continue
								}
								state := "active"
								if info.IsArchived() {
									state = "archived"
								}
								fmt.Fprintf(c.App.Writer, "%s\t%s\t%s\t%s\n", info.Name, info.Created.Format("2006-01-02"), state, listedAs(info))
							}
							if after = page.Next; after != "" {
								continue
							}
							if bad > 0 {
								return failf(exitFailure, "%d store(s) cannot be read", bad)
							}
							return nil
						}
					})
				},
			},
			{
				Name:      "show",
				Usage:     "show a store's description and metadata",
				ArgsUsage: "NAME",
				Flags:     []cli.Flag{dirFlag, &cli.BoolFlag{Name: "json", Usage: "as a JSON object"}},
				Action: func(c *cli.Context) error {
					name, err := nameArg(c)
					if err != nil {
						return err
					}
					return withStores(c, false, func(d *stores.Dir) error {
						info, err := d.Get(name)
						if err != nil {
							return storesErr(err, name)
						}
						printStore(c, info)
						return nil
					})
				},
			},
			{
				Name:      "update",
				Usage:     "change a store's display name, description, metadata or secret screening",
				ArgsUsage: "NAME",
				Flags: append([]cli.Flag{dirFlag,
					&cli.StringSliceFlag{Name: "unset-metadata", Usage: "remove the pair with this `KEY` (repeatable)"}}, metaFlags...),
				Action: func(c *cli.Context) error {
					name, err := nameArg(c)
					if err != nil {
						return err
					}
					var ch stores.Change
					if c.IsSet("display-name") {
						v, err := displayName(c)
						if err != nil {
							return err
						}
						ch.DisplayName = &v
					}
					if c.IsSet("description") {
						ch.Description = ptr(c.String("description"))
					}
					set, err := metadataFlag(c, true)
					if err != nil {
						return err
					}
					ch.Metadata = map[string]*string{}
					for k, v := range set {
						ch.Metadata[k] = ptr(v)
					}
					for _, k := range c.StringSlice("unset-metadata") {
						ch.Metadata[k] = nil
					}
					if c.IsSet("secret-screening") {
						mode, err := screeningFlag(c)
						if err != nil {
							return err
						}
						ch.Screening = &mode
					}
					return withStores(c, false, func(d *stores.Dir) error {
						info, err := d.Update(name, ch, gitmem.Signature{})
						if err != nil {
							return storesErr(err, name)
						}
						printStore(c, info)
						return nil
					})
				},
			},
			importCommand(dirFlag),
			exportCommand(dirFlag),
			archiveCommand("archive", "make a store read-only: the model can view it but not change it", true, dirFlag, nameArg),
			archiveCommand("unarchive", "make an archived store writable again", false, dirFlag, nameArg),
			{
				Name:      "delete",
				Usage:     "delete a store and its whole history for good",
				ArgsUsage: "NAME",
				Flags:     []cli.Flag{dirFlag, &cli.BoolFlag{Name: "yes", Usage: "really delete"}},
				Action: func(c *cli.Context) error {
					name, err := nameArg(c)
					if err != nil {
						return err
					}
					if !c.Bool("yes") {
						return failf(exitUsage, "delete removes store %s and all its history for good; run again with --yes (or archive it instead)", name)
					}
					return withStores(c, false, func(d *stores.Dir) error {
						if err := d.Delete(name); err != nil {
							return storesErr(err, name)
						}
						fmt.Fprintf(c.App.Writer, "Deleted store %s\n", name)
						return nil
					})
				},
			},
		},
	}
}

func archiveCommand(name, usage string, archived bool, dirFlag cli.Flag, nameArg func(*cli.Context) (string, error)) *cli.Command {
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		ArgsUsage: "NAME",
		Flags:     []cli.Flag{dirFlag},
		Action: func(c *cli.Context) error {
			store, err := nameArg(c)
			if err != nil {
				return err
			}
			return withStores(c, false, func(d *stores.Dir) error {
				info, err := d.Archive(store, archived, gitmem.Signature{})
				if err != nil {
					return storesErr(err, store)
				}
				state := "active"
				if info.IsArchived() {
					state = "archived since " + info.Archived.Format(timeLayout)
				}
				fmt.Fprintf(c.App.Writer, "Store %s is %s\n", store, state)
				return nil
			})
		},
	}
}

func ptr[T any](v T) *T { return &v }

// withStores opens the folder of stores for one command; only a command
// that creates a store (create) makes the folder when it is missing, so
// that a mistyped --stores is named, not made.
func withStores(c *cli.Context, create bool, fn func(d *stores.Dir) error) (err error) {
	root := c.String("stores")
	if root == "" {
		root = "./stores"
	}
	if fi, err := os.Stat(root); !create && (err != nil || !fi.IsDir()) {
		return failf(exitFailure, "%s is not a folder of stores (gitmem store create NAME --stores %[1]s makes one)", root)
	}
	d, err := stores.Open(root, stores.Options{Repo: withLockWait(c, gitmem.Options{Now: clock(), Logf: logTo(c), Errorf: errorLog(c)}), IdleClose: -1})
	if err != nil {
		return failf(exitFailure, "%v", err)
	}
	defer func() {
		if cerr := d.Close(); cerr != nil {
			atExit(&err, storesClosed(cerr))
		}
	}()
	return fn(d)
}

// storesClosed words the failure of a folder of stores' Close: a store
// whose last checkpoint failed keeps its acknowledged changes in its
// write-ahead log (store NAME: the last checkpoint failed ...), exit 1.
func storesClosed(err error) error {
	return failf(exitFailure, "%s", strings.ReplaceAll(strings.ReplaceAll(err.Error(), "gitmem: ", ""), "\n", "; "))
}

// unreadableWhy says why a listed store could not be read, and what to do:
// for a damaged gitmem repository what repairs that damage (its Repair,
// as gitmem fsck says it: fsck --repair, or a fix by hand first), with
// the repository named in its gitmem commands; else fsck, which says
// what the folder is.
func unreadableWhy(info stores.Info, root string) string {
	repo := filepath.Join(root, info.Name)
	var de *gitmem.DamagedError
	if errors.As(info.Err, &de) {
		repair := de.Repair
		for _, cmd := range []string{"fsck", "remote", "redact"} {
			repair = strings.ReplaceAll(repair, "gitmem "+cmd, "gitmem --repo "+repo+" "+cmd)
		}
		return fmt.Sprintf("%s; to repair it (in %s): %s", de.Problem, repo, repair)
	}
	msg := strings.TrimPrefix(info.Err.Error(), "store "+info.Name+": ")
	return fmt.Sprintf("%s; gitmem --repo %s fsck says more", strings.TrimPrefix(msg, "gitmem: "), repo)
}

// storesErr words a stores error for the operator.
func storesErr(err error, name string) error {
	switch {
	case errors.Is(err, stores.ErrNotFound):
		return failf(exitFailure, "there is no store %s (gitmem store list shows them)", name)
	case errors.Is(err, stores.ErrExists):
		return failf(exitFailure, "store %s already exists", name)
	case errors.Is(err, stores.ErrInTheWay):
		return failf(exitFailure, "store %s cannot be created: a file of that name is in the stores folder; move it away", name)
	case errors.Is(err, stores.ErrArchived):
		return failf(exitFailure, "store %s is archived; unarchive it to change it", name)
	}
	var se *gitmem.StorageError
	var held *gitmem.LockHeldError
	if errors.As(err, &se) || errors.As(err, &held) {
		return storeErr(err, "")
	}
	return failf(exitFailure, "%v", err)
}

func metadataFlag(c *cli.Context, partial bool) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range c.StringSlice("metadata") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, failf(exitUsage, "--metadata takes KEY=VALUE, got %q", kv)
		}
		m[k] = v
	}
	if !partial {
		if err := policy.CheckStoreMetadata(m); err != nil {
			return nil, failf(exitUsage, "--metadata: %v", err)
		}
	}
	return m, nil
}

func screeningFlag(c *cli.Context) (policy.ScreenMode, error) {
	s := c.String("secret-screening")
	if s == "" || s == "default" {
		return "", nil
	}
	m, err := policy.ParseScreenMode(s)
	if err != nil {
		return "", failf(exitUsage, "--secret-screening: %v (or default: the server's)", err)
	}
	return m, nil
}

// listedAs is store list's last column: the display name, if any, and
// the description's first line, as shownText.
func listedAs(info stores.Info) string {
	first, _, _ := strings.Cut(info.Description, "\n")
	col := shownText(first)
	if name := shownText(info.DisplayName); name != "" && col != "" {
		col = name + " — " + col
	} else if name != "" {
		col = name
	}
	return strings.ReplaceAll(col, "\t", " ") // a tab would split the column
}

// shownText is a store's text (a display name, a line of its description,
// a metadata pair) as the CLI prints it: a control or format character
// but a tab (an escape sequence, a right-to-left override, a line
// separator) as its \u escape. The API checks what it is given, but a
// store's metadata is read from commits, which a hand or a pull may have
// made.
func shownText(s string) string {
	if !strings.ContainsFunc(s, hiddenRune) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if hiddenRune(r) {
			fmt.Fprintf(&b, "\\u%04x", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func hiddenRune(r rune) bool {
	return r != '\t' && (unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) || r == utf8.RuneError)
}

func printStore(c *cli.Context, info stores.Info) {
	if c.Bool("json") {
		jsonLines(c.App.Writer)(info.JSON())
		return
	}
	w := c.App.Writer
	fmt.Fprintf(w, "name:        %s\n", info.Name)
	if info.DisplayName != "" {
		fmt.Fprintf(w, "display name: %s\n", shownText(info.DisplayName))
	}
	fmt.Fprintf(w, "created:     %s\n", info.Created.Format(timeLayout))
	fmt.Fprintf(w, "updated:     %s\n", info.Updated.Format(timeLayout))
	if info.IsArchived() {
		fmt.Fprintf(w, "archived:    %s\n", info.Archived.Format(timeLayout))
	}
	screening := string(info.Screening)
	if screening == "" {
		screening = "default (the server's)"
	}
	fmt.Fprintf(w, "screening:   %s\n", screening)
	for _, k := range slices.Sorted(maps.Keys(info.Metadata)) {
		fmt.Fprintf(w, "metadata:    %s=%s\n", shownText(k), shownText(info.Metadata[k]))
	}
	fmt.Fprintf(w, "description:\n")
	for _, l := range strings.Split(info.Description, "\n") {
		fmt.Fprintf(w, "    %s\n", shownText(l))
	}
}
