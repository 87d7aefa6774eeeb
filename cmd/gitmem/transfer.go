package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
	"github.com/gitmem-dev/gitmem/transfer"
)

// hostedAPI is where the SDK goes without a base URL.
const hostedAPI = "https://api.anthropic.com"

// remoteFlags say which Memory Stores API a store moves from or to, as the
// Anthropic SDKs take it.
func remoteFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "base-url", EnvVars: []string{"ANTHROPIC_BASE_URL"}, Value: hostedAPI,
			Usage: "the Memory Stores API at `URL`: Anthropic's, or a gitmem server's (http://memory:7077)"},
		&cli.StringFlag{Name: "api-key", EnvVars: []string{"ANTHROPIC_API_KEY"}, Required: true,
			Usage: "its API `KEY` (for a gitmem server: a token's secret; an operator token's to create stores)"},
		&cli.IntFlag{Name: "max-retries", Value: 2, Usage: "`N` retries of a request that failed for a reason worth retrying (408, 409, 429, 5xx, no connection), as the SDK retries"},
	}
}

func remoteOf(c *cli.Context) (transfer.Remote, error) {
	if c.Int("max-retries") < 0 {
		return transfer.Remote{}, failf(exitUsage, "--max-retries cannot be negative")
	}
	if c.String("api-key") == "" { // ANTHROPIC_API_KEY= set, but empty
		return transfer.Remote{}, failf(exitUsage, "the API key is empty: give it with --api-key or ANTHROPIC_API_KEY")
	}
	return transfer.Remote{BaseURL: c.String("base-url"), APIKey: c.String("api-key"), MaxRetries: c.Int("max-retries")}, nil
}

func importCommand(dirFlag cli.Flag) *cli.Command {
	return &cli.Command{
		Name: "import",
		Usage: "copy a store of a Memory Stores API (Anthropic's, or another gitmem server) into a store: " +
			"every version a commit, with its ids, time and actor; again, only what is new there",
		ArgsUsage: "STORE_ID",
		Description: "Reads the store, every version and every memory there before it writes anything, builds the copy\n" +
			"aside, checks it against what the API listed, and only then puts it in place: a failed import leaves nothing.\n" +
			"Run again into the same store, it adds only the versions, redactions and metadata changes made there since\n" +
			"(up to date: no commit); a store of that name made otherwise or changed here since is refused.\n" +
			"Exits 4 when the API cannot be reached, or refuses or fails a request. See docs/memory-stores.md.",
		Flags: append([]cli.Flag{dirFlag,
			&cli.StringFlag{Name: "as", Usage: "the store's `NAME` here (default: STORE_ID)"}}, remoteFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return failf(exitUsage, "store import takes one store id (memstore_...)")
			}
			id, name := c.Args().First(), c.String("as")
			if name == "" {
				name = id
				if err := policy.CheckStoreName(name); err != nil {
					return failf(exitUsage, "the store id %s is not a gitmem store name (%v): give the new store one with --as NAME", id, err)
				}
			} else if err := policy.CheckStoreName(name); err != nil {
				return failf(exitUsage, "--as: %v", err)
			}
			remote, err := remoteOf(c)
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			return withStores(c, true, func(d *stores.Dir) error {
				res, err := transfer.Import(ctx, remote, d.Root(), id, transfer.ImportOptions{Name: name,
					Repo: withLockWait(c, gitmem.Options{Logf: logTo(c), Errorf: errorLog(c)}), Progress: progress(c, "importing")})
				if err != nil {
					return importErr(err, c, id, name, d.Root())
				}
				w := c.App.Writer
				switch {
				case res.Again && res.Versions+res.Redactions == 0 && !res.Changed:
					fmt.Fprintf(w, "Store %s is up to date with memory store %s at %s (%d versions, %d memories): nothing imported\n",
						name, id, c.String("base-url"), res.Already, res.Memories)
					return nil
				case res.Again:
					fmt.Fprintf(w, "Imported what is new in memory store %s (%q) at %s into store %s: %d versions (%d redacted), each a commit, after the %d it had; %d memories",
						id, res.Store.DisplayName, c.String("base-url"), name, res.Versions, res.Redacted, res.Already, res.Memories)
				default:
					fmt.Fprintf(w, "Imported memory store %s (%q) from %s as store %s in %s: %d memories, %d versions (%d redacted), each a commit",
						id, res.Store.DisplayName, c.String("base-url"), name, d.Root(), res.Memories, res.Versions, res.Redacted)
				}
				if res.Redactions > 0 {
					fmt.Fprintf(w, "; %d redaction record(s)", res.Redactions)
				}
				fmt.Fprintln(w)
				if res.Truncated > 0 {
					fmt.Fprintf(w, "%d memories' first versions are no longer kept there: each begins here with its oldest kept version, as its creation\n", res.Truncated)
				}
				if res.Unversioned > 0 {
					fmt.Fprintf(w, "%d memories have no version kept there: each is one version here (created at its updated_at, actor unrecorded)\n", res.Unversioned)
				}
				if res.Skipped > 0 {
					fmt.Fprintf(w, "%d deletions of memories with no version kept before them are left out\n", res.Skipped)
				}
				return nil
			})
		},
	}
}

// importErr words a failed import: nothing was imported.
func importErr(err error, c *cli.Context, id, name, root string) error {
	var ie *transfer.ImportError
	switch {
	case errors.Is(err, transfer.ErrNotImport):
		return failf(exitFailure, "store %s in %s is not an import of memory store %s, or was changed here since (%s); nothing was imported: import under another name with --as NAME",
			name, root, id, strings.TrimPrefix(err.Error(), transfer.ErrNotImport.Error()+": "))
	case errors.As(err, &ie):
		return failf(exitFailure, "cannot import memory store %s: %s; nothing was imported", id, ie.Msg)
	}
	return transferErr(err, c, "memory store "+id, "nothing was imported")
}

func exportCommand(dirFlag cli.Flag) *cli.Command {
	return &cli.Command{
		Name: "export",
		Usage: "copy a store's current memories to a Memory Stores API (Anthropic's, or another gitmem server): " +
			"into a new store there, or into --to-store",
		ArgsUsage: "NAME",
		Description: "The API writes only current content: the history, the times and authors of the changes and the memory\n" +
			"ids stay here; the memories there get ids and versions of their own. A memory there at the same path is\n" +
			"updated if it still has the content listed, left alone if it has the same; a second export makes no version.\n" +
			"Exits 4 when the API cannot be reached, or refuses or fails a request. See docs/memory-stores.md.",
		Flags: append([]cli.Flag{dirFlag,
			&cli.StringFlag{Name: "to-store", Usage: "copy into this store `ID` there (memories at the same paths get the content; the others stay)"},
			&cli.IntFlag{Name: "parallel", Value: 8, Usage: "`N` requests in flight"}}, remoteFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return failf(exitUsage, "store export takes one store name")
			}
			name := c.Args().First()
			if c.Int("parallel") < 1 {
				return failf(exitUsage, "--parallel must be at least 1")
			}
			remote, err := remoteOf(c)
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			return withStores(c, false, func(d *stores.Dir) error {
				res, err := transfer.Export(ctx, remote, d, name, transfer.ExportOptions{To: c.String("to-store"), Parallel: c.Int("parallel")})
				if errors.Is(err, stores.ErrNotFound) {
					return storesErr(err, name)
				}
				done := fmt.Sprintf("%d created, %d updated, %d already there, of %d memories", res.Created, res.Updated, res.Unchanged, res.Memories)
				if err != nil {
					after := "nothing was exported"
					if res.StoreID != "" {
						after = fmt.Sprintf("memory store %s there has what was copied (%s); run again with --to-store %s to copy the rest",
							res.StoreID, done, res.StoreID)
					}
					var ee *transfer.ExportError
					if errors.As(err, &ee) {
						return failf(exitFailure, "cannot export store %s: %v; %s", name, ee, after)
					}
					return transferErr(err, c, "store "+name, after)
				}
				made := ""
				if res.New {
					made = " (new)"
				}
				w := c.App.Writer
				fmt.Fprintf(w, "Exported store %s to memory store %s%s at %s: %s", name, res.StoreID, made, c.String("base-url"), done)
				if res.Others > 0 {
					fmt.Fprintf(w, "; %d other memories there left as they are", res.Others)
				}
				fmt.Fprintln(w)
				fmt.Fprintf(w, "Not exported: the history (%d versions here: the API writes only current content), "+
					"the times and authors of the changes, the memory ids; the memories there have ids and versions of their own, made now\n", res.History)
				if res.New {
					fmt.Fprintf(w, "To export again into the same store, give --to-store %s (another export without it makes another store)\n", res.StoreID)
				}
				return nil
			})
		},
	}
}

// transferErr words what stopped an import or an export of what: the far
// side's answer (exitRemote), an interruption, or a local failure; after
// says what was left.
func transferErr(err error, c *cli.Context, what, after string) error {
	base := c.String("base-url")
	var re *transfer.RemoteError
	switch {
	case errors.Is(err, context.Canceled):
		return failf(exitFailure, "interrupted; %s", after)
	case errors.As(err, &re) && re.Status == 0:
		return failf(exitRemote, "cannot reach the Memory Stores API at %s (%v); %s", base, re.Err, after)
	case errors.As(err, &re) && re.Status == 401:
		return failf(exitRemote, "%s refused the API key (%s); %s (give the key with --api-key or ANTHROPIC_API_KEY)", base, re, after)
	case errors.As(err, &re) && re.Status == 404 && re.Type == "":
		return failf(exitRemote, "%s does not answer as a Memory Stores API (%s); %s (check --base-url)", base, re, after)
	case errors.As(err, &re) && re.Status == 404:
		return failf(exitRemote, "%s has no such store (%s); %s", base, re, after)
	case errors.As(err, &re) && re.Status >= 500 || errors.As(err, &re) && re.Status == 429:
		return failf(exitRemote, "the Memory Stores API at %s failed (%s; retried up to %d times where a retry is safe); %s", base, re, c.Int("max-retries"), after)
	case errors.As(err, &re):
		return failf(exitRemote, "the Memory Stores API at %s refused (%s); %s", base, re, after)
	}
	var se *gitmem.StorageError
	if errors.As(err, &se) {
		return storeErr(err, "")
	}
	var oe *stores.OpenError
	if errors.As(err, &oe) {
		err = oe.Err // what names the store
	}
	return failf(exitFailure, "%s: %s; %s", what, strings.TrimPrefix(err.Error(), "gitmem: "), after)
}
