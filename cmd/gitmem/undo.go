package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/operator"
	"github.com/gitmem-dev/gitmem/policy"
)

func revertCommand() *cli.Command {
	return &cli.Command{
		Name:      "revert",
		Usage:     "undo changes (by commit or tool_use id) as one new commit, keeping later edits that do not overlap",
		ArgsUsage: "REV|TOOL_USE_ID...",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "strategy", Usage: "`theirs` forces the undo where later edits overlap"},
			&cli.BoolFlag{Name: "dry-run", Usage: "show the diff the revert would make; change nothing"},
			jsonReportFlag,
		},
		Action: func(c *cli.Context) (err error) {
			if c.NArg() == 0 {
				return failf(exitUsage, "revert takes one or more revisions or tool_use ids")
			}
			switch c.String("strategy") {
			case "", "theirs":
			default:
				return failf(exitUsage, "--strategy can only be theirs")
			}
			dry := c.Bool("dry-run")
			r, err := openTouching(c, dry)
			if err != nil {
				return err
			}
			defer closeRepo(r, &err)
			cm, changes, err := r.Revert(c.Context, c.Args().Slice(), gitmem.RevertOptions{Theirs: c.String("strategy") == "theirs", DryRun: dry})
			var ce *gitmem.ConflictError
			switch {
			case errors.As(err, &ce):
				w := c.App.ErrWriter
				for _, f := range ce.Files {
					fmt.Fprintf(w, "/memories/%s: %s\n", f.Path, f.Reason)
					for _, k := range f.Conflicts {
						fmt.Fprintf(w, "  lines %d-%d of the reverted version:\n", k.BaseStart+1, k.BaseEnd)
						side(w, "now:  ", k.Ours, "(the lines are gone)")
						side(w, "undo: ", k.Theirs, "(the undo removes them)")
					}
				}
				return failf(exitFailure, "cannot revert %d file(s); nothing was changed (--strategy=theirs forces the undo where later edits overlap)", ce.NumFiles())
			case errors.As(err, new(*gitmem.AmbiguousError)):
				return failf(exitUsage, "%v", err)
			case errors.Is(err, gitmem.ErrUnknownRev): // worded as show's and diff's
				return failf(exitFailure, "%v", strings.TrimPrefix(err.Error(), gitmem.ErrUnknownRev.Error()+": "))
			case errors.Is(err, gitmem.ErrNoChange):
				return failf(exitFailure, "nothing to revert: the memory is already as the undo would make it; no commit was made")
			case err != nil:
				return storeErr(err, c.String("repo"))
			}
			return reportChange(c, cm, changes, dry)
		},
	}
}

// side prints one side of a revert conflict, or what it means when empty.
func side(w io.Writer, label string, lines []string, none string) {
	if len(lines) == 0 {
		fmt.Fprintf(w, "    %s%s\n", label, none)
	}
	for _, l := range lines {
		fmt.Fprintf(w, "    %s%s\n", label, strings.TrimSuffix(l, "\n"))
	}
}

// jsonReportFlag is revert's and restore's --json.
var jsonReportFlag = &cli.BoolFlag{Name: "json", Usage: "the new commit as a JSON object (with --dry-run: one JSON object per changed file)"}

// reportChange prints what revert or restore did, or with dry, the diff it
// would make.
func reportChange(c *cli.Context, cm gitmem.Commit, changes []gitmem.FileChange, dry bool) error {
	if !dry && c.Bool("json") {
		return jsonLines(c.App.Writer)(operator.ToCommitJSON(cm))
	}
	if !dry {
		fmt.Fprintf(c.App.Writer, "[%s] %s\n", short(cm.Hash), cm.Subject)
		return nil
	}
	if err := writeChanges(c, changes); err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "dry run: %d file(s) would change; nothing was changed\n", len(changes))
	return nil
}

func restoreCommand() *cli.Command {
	return &cli.Command{
		Name:      "restore",
		Usage:     "make the memory (or some paths) what it was at a revision or time, as one new commit",
		ArgsUsage: "--to REV|TIME [-- PATH...]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "to", Usage: "a revision, tool_use id, or time (2h, yesterday, 2026-11-20)"},
			&cli.BoolFlag{Name: "delete", Usage: "delete files that did not exist then (without it, a restore that would delete one is refused)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "show the diff the restore would make; change nothing"},
			jsonReportFlag,
		},
		Action: func(c *cli.Context) (err error) {
			if c.String("to") == "" {
				return failf(exitUsage, "restore needs --to REV|TIME (see: gitmem restore --help)")
			}
			revs, args := splitArgs(c)
			if len(revs) > 0 {
				return failf(exitUsage, "restore takes memory paths after --, not %s (paths look like /memories/notes.md)", policy.QuoteName(revs[0]))
			}
			paths, err := memPaths(args)
			if err != nil {
				return err
			}
			dry := c.Bool("dry-run")
			r, err := openTouching(c, dry)
			if err != nil {
				return err
			}
			defer closeRepo(r, &err)
			target, err := operator.Revision(c.Context, r, c.String("to"), localNow(), true)
			if err != nil {
				return revErr(err)
			}
			cm, changes, err := r.Restore(c.Context, target, gitmem.RestoreOptions{Paths: paths, Delete: c.Bool("delete"), DryRun: dry})
			var ae *gitmem.AbsentError
			switch {
			case errors.As(err, &ae):
				list, them := absentList(displayPaths(ae.Paths))
				at := ae.Rev
				if t, terr := policy.ParseTime(c.String("to"), localNow()); terr == nil && len(target.Parents) == 0 && target.Time.After(t) {
					// A time before the memory began names its first commit,
					// which holds nothing.
					at = fmt.Sprintf("%s, before the memory began (its first commit, %s, holds no file)", t.Format(timeLayout), ae.Rev)
				}
				return failf(exitFailure, "%s did not exist at %s: restoring would delete %s; nothing was changed (--delete deletes %[3]s)",
					list, at, them)
			case errors.Is(err, gitmem.ErrNoChange):
				return failf(exitFailure, "nothing to restore: already as it was at %s; no commit was made", short(target.Hash))
			case err != nil:
				return storeErr(err, c.String("repo"))
			}
			return reportChange(c, cm, changes, dry)
		},
	}
}

type staleJSON struct {
	Path        string `json:"path"`
	LastTouched string `json:"last_touched"`
	Commit      string `json:"commit"`
}

func expireCommand() *cli.Command {
	return &cli.Command{
		Name:  "expire",
		Usage: "delete files nobody changed for a while, as one commit (revert it to bring them back)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "older-than", Usage: "expire files last changed more than `DURATION` ago (30d, 2w)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "list what would be deleted; change nothing"},
			&cli.StringSliceFlag{Name: "keep", Usage: "never expire paths matching `GLOB` (memories/**/*.md, /memories/core/*)"},
			&cli.BoolFlag{Name: "json", Usage: "one JSON object per file"},
		},
		Action: func(c *cli.Context) (err error) {
			if c.String("older-than") == "" {
				return failf(exitUsage, "expire needs --older-than DURATION (see: gitmem expire --help)")
			}
			age, err := policy.ParseDuration(c.String("older-than"))
			if err != nil {
				return failf(exitUsage, "--older-than: %v", err)
			}
			keep, err := keepGlobs(c, "keep")
			if err != nil {
				return err
			}
			cutoff := now().Add(-age)
			r, err := openRepo(c, c.Bool("dry-run"))
			if err != nil {
				return err
			}
			defer closeRepo(r, &err)
			var stale []gitmem.Stale
			var cm gitmem.Commit
			if c.Bool("dry-run") {
				stale, err = r.StaleFiles(c.Context, cutoff, keep, progress(c, "reading history"))
			} else {
				stale, cm, err = r.Expire(c.Context, cutoff, gitmem.ExpireOptions{Keep: keep, Progress: progress(c, "reading history")})
			}
			if err != nil {
				return storeErr(err, c.String("repo"))
			}
			emit := jsonLines(c.App.Writer)
			for _, s := range stale {
				if c.Bool("json") {
					emit(staleJSON{"/memories/" + s.Path, s.LastTouched.Format("2006-01-02T15:04:05Z07:00"), s.Commit})
				} else {
					fmt.Fprintf(c.App.Writer, "/memories/%s\tlast changed %s (%s)\n", s.Path, s.LastTouched.Format("2006-01-02 15:04:05"), short(s.Commit))
				}
			}
			switch {
			case c.Bool("json"):
			case len(stale) == 0:
				which := "no file"
				if len(keep) > 0 {
					which = "no file outside --keep"
				}
				fmt.Fprintf(c.App.ErrWriter, "%s has gone unchanged since %s: nothing to expire\n", which, cutoff.Format(timeLayout))
			case c.Bool("dry-run"):
				fmt.Fprintf(c.App.ErrWriter, "%d file(s) would expire (dry run: nothing was changed)\n", len(stale))
			default:
				fmt.Fprintf(c.App.ErrWriter, "[%s] %s\nundo with: gitmem revert %s\n", short(cm.Hash), cm.Subject, short(cm.Hash))
			}
			return nil
		},
	}
}

// keepGlobs reads the flag name's globs over memory paths, written from
// /memories or from the repository, and makes them relative to memories/.
func keepGlobs(c *cli.Context, name string) ([]string, error) {
	var out []string
	for _, g := range c.StringSlice(name) {
		g = strings.TrimPrefix(strings.TrimPrefix(g, "/"), "memories/")
		if g == "memories" || g == "" {
			return nil, failf(exitUsage, "--%s %q would keep everything", name, g)
		}
		if err := policy.CheckGlob(g); err != nil {
			return nil, failf(exitUsage, "--%s: %v", name, err)
		}
		out = append(out, g)
	}
	return out, nil
}

// absentList names the paths a restore would delete, ten at most, and
// the pronoun for them.
func absentList(paths []string) (list, them string) {
	them = "them"
	if len(paths) == 1 {
		them = "it"
	}
	if len(paths) > 10 {
		return fmt.Sprintf("%s and %d more", strings.Join(paths[:10], ", "), len(paths)-10), them
	}
	return strings.Join(paths, ", "), them
}

func displayPaths(rels []string) []string {
	out := make([]string, len(rels))
	for i, p := range rels {
		out[i] = "/memories/" + p
	}
	return out
}
