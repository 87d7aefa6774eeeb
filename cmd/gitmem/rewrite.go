package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/operator"
	"github.com/gitmem-dev/gitmem/policy"
)

func redactCommand() *cli.Command {
	cmd := &cli.Command{
		Name:      "redact",
		Usage:     "rewrite the history so that a file, a blob or matching text is in no commit (dry run without --yes)",
		ArgsUsage: "PATH | --blob SHA | --match REGEX",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "blob", Usage: "remove every file holding this blob `SHA`"},
			&cli.StringFlag{Name: "match", Usage: "replace text matching `REGEX` (RE2 syntax) with [REDACTED] in every version of every file"},
			&cli.BoolFlag{Name: "yes", Usage: "rewrite for real; without it, only show what would change"},
			&cli.BoolFlag{Name: "json", Usage: "the report as one JSON object: dry_run, rewritten (old, new, subject), refs, renamed"},
			&cli.StringFlag{Name: "push", Usage: "the memory is shared through `REMOTE`: pull first, then replace the remote's history (with a lease) and record the redaction, which every other clone applies at its next sync"},
		},
		Action: func(c *cli.Context) (err error) {
			var path *string
			if c.NArg() > 0 {
				if c.NArg() > 1 {
					return failf(exitUsage, "redact takes one path")
				}
				p, err := memPathBy(policy.ParseHeldPath, c.Args().First()) // a name git refuses too: its removal
				if err != nil {
					return err
				}
				path = &p
			}
			// An empty --match or --blob given on the command line is a
			// pattern or hash that names nothing, not a missing one.
			switch {
			case c.IsSet("match") && c.String("match") == "":
				return failf(exitUsage, "--match \"\" matches empty text; give a pattern for the secret itself")
			case c.IsSet("blob") && c.String("blob") == "":
				return failf(exitUsage, "--blob takes a full 40-character blob hash (git ls-tree -r HEAD shows them); it was empty")
			}
			red, err := operator.ParseRedaction(path, c.String("blob"), c.String("match"))
			var re *operator.RedactionError
			switch {
			case errors.As(err, &re) && re.Field == "":
				return failf(exitUsage, "redact takes exactly one of PATH, --blob or --match")
			case errors.As(err, &re) && re.Field == "path":
				return failf(exitUsage, "%s", re.Msg)
			case errors.As(err, &re):
				return failf(exitUsage, "--%s %s", re.Field, re.Msg)
			}
			dry := !c.Bool("yes")
			remote := c.String("push")
			r, err := openRepo(c, dry)
			if err != nil {
				return err
			}
			defer closeRepo(r, &err)
			ctx, stop := signalContext()
			defer stop()
			var rep gitmem.RedactReport
			var res gitmem.SyncResult
			// A dry run changes nothing and reaches no remote: it counts the
			// remote's history as last fetched, and says so.
			var there gitmem.SyncStatus
			if remote != "" && dry {
				if there, err = r.Status(c.Context, remote); err != nil {
					return shareErr(err, "pull", remote, c.String("repo"))
				}
			}
			if remote != "" && !dry {
				rep, res, err = r.RedactShared(ctx, remote, red, syncOptions(c), progress(c, "rewriting history"))
			} else {
				rep, err = r.Redact(ctx, red, dry, progress(c, "rewriting history"))
			}
			switch {
			case errors.Is(err, context.Canceled):
				return failf(exitFailure, "interrupted: nothing was changed")
			case errors.Is(err, gitmem.ErrPatternHoldsSecret):
				return failf(exitUsage, "%s", strings.TrimPrefix(err.Error(), "gitmem: "))
			case err != nil && remote != "":
				return shareErr(err, "pull", remote, c.String("repo"))
			case err != nil:
				return storeErr(err, c.String("repo"))
			}
			w := c.App.Writer
			if c.Bool("json") {
				j := redactJSON{DryRun: dry, Rewritten: []rewriteJSON{}, Refs: rep.Refs, Renamed: displayPaths(rep.Renamed)}
				for _, rw := range rep.Rewritten {
					j.Rewritten = append(j.Rewritten, rewriteJSON{rw.Old, rw.New, rw.Subject})
				}
				return jsonLines(w)(j)
			}
			for _, rw := range rep.Rewritten {
				fmt.Fprintf(w, "%s -> %s %s\n", short(rw.Old), short(rw.New), rw.Subject)
			}
			for _, p := range rep.Renamed {
				fmt.Fprintf(w, "renamed: /memories/%s\n", p)
			}
			e := c.App.ErrWriter
			if remote != "" && dry {
				if !there.RedactedHere.IsZero() {
					fmt.Fprintf(e, "%s still holds history redacted here at %s; --yes rewrites it there too\n", remote, there.RedactedHere.Format(time.RFC3339))
				}
				as := "never fetched"
				if !there.LastSync.IsZero() {
					as = "as of the last sync, " + there.LastSync.Format(timeLayout)
				}
				fmt.Fprintf(e, "%s's history is counted %s; --yes fetches first and redacts what it holds now\n", remote, as)
			}
			switch {
			case len(rep.Rewritten) == 0:
				fmt.Fprintln(e, "nothing to redact: no commit holds it")
			case dry:
				fmt.Fprintf(e, "dry run: %d commit(s) would be rewritten; run again with --yes to rewrite\n", len(rep.Rewritten))
			case remote != "":
				fmt.Fprintf(e, "rewrote %d commit(s); moved %v; old objects deleted\n", len(rep.Rewritten), rep.Refs)
				fmt.Fprintf(e, "replaced %s's history (%d commit(s) sent", remote, res.Pushed)
				if res.Retries > 0 {
					fmt.Fprintf(e, "; it moved meanwhile, redacted and merged again %d time(s)", res.Retries)
				}
				fmt.Fprintf(e, ") and recorded the redaction: every other clone applies it at its next sync\n")
			default:
				fmt.Fprintf(e, "rewrote %d commit(s); moved %v; old objects deleted\n", len(rep.Rewritten), rep.Refs)
				if rs, _ := r.Remotes(); len(rs) > 0 {
					fmt.Fprintf(e, "warning: %s and its clones still hold the old history, so syncs with it are refused: redact with --push %s too, so that they lose it\n", rs[0].Name, rs[0].Name)
				}
			}
			return nil
		},
	}
	cmd.Flags = append(cmd.Flags, remoteAuthFlags()...)
	return cmd
}

type rewriteJSON struct {
	Old     string `json:"old"`
	New     string `json:"new"`
	Subject string `json:"subject"`
}

type redactJSON struct {
	DryRun    bool          `json:"dry_run"`
	Rewritten []rewriteJSON `json:"rewritten"`
	Refs      []string      `json:"refs,omitempty"`
	Renamed   []string      `json:"renamed,omitempty"`
}

func gcCommand() *cli.Command {
	return &cli.Command{
		Name:  "gc",
		Usage: "pack loose objects (--full: repack everything and drop unreachable objects)",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "full", Usage: "one pack of everything reachable; delete the rest"},
			&cli.BoolFlag{Name: "json", Usage: "the result as a JSON object: packed, removed"}},
		Action: func(c *cli.Context) (err error) {
			r, err := openRepo(c, false)
			if err != nil {
				return err
			}
			defer closeRepo(r, &err)
			st, err := r.GC(c.Context, c.Bool("full"))
			if err != nil {
				return storeErr(err, c.String("repo"))
			}
			if c.Bool("json") {
				return jsonLines(c.App.Writer)(map[string]int{"packed": st.Packed, "removed": st.Removed})
			}
			fmt.Fprintf(c.App.Writer, "packed %d objects, removed %d loose objects or packs\n", st.Packed, st.Removed)
			return nil
		},
	}
}
