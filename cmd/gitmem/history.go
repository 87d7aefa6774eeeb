package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/stores"
)

// oneLine is the log line of a commit: short hash, time, command, path,
// tool_use id.
func oneLine(c gitmem.Commit) string {
	cmd, path := c.Trailer(gitmem.TrailerCommand), c.Trailer(gitmem.TrailerPath)
	if np := c.Trailer(gitmem.TrailerNewPath); np != "" {
		path += " -> " + np
	}
	switch {
	case cmd == "":
		cmd, path = "-", c.Subject
	case cmd == "merge":
		path = strings.TrimPrefix(c.Subject, "memory: merge ")
	case path == "":
		path = "/memories"
	case len(c.Paths) > 1 && c.Trailer(gitmem.TrailerNewPath) == "":
		path += fmt.Sprintf(" (+%d more)", len(c.Paths)-1)
	}
	id := c.Trailer(gitmem.TrailerToolUseID)
	if id == "" {
		id = "-"
	}
	return fmt.Sprintf("%s %s %-11s %s %s", short(c.Hash), c.Time.Format("2006-01-02 15:04:05"), cmd, path, id)
}

func logCommand() *cli.Command {
	return &cli.Command{
		Name:      "log",
		Usage:     "list the changes to the memory, newest first",
		ArgsUsage: "[-- PATH...]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "tool-use-id", Usage: "only the change this tool_use id made"},
			&cli.StringFlag{Name: "session", Usage: "only changes of this session"},
			&cli.StringFlag{Name: "agent", Usage: "only changes of this agent"},
			&cli.StringFlag{Name: "command", Usage: "only this command (create, str_replace, insert, delete, rename, revert, ...)"},
			&cli.StringFlag{Name: "since", Usage: "only changes at or after `TIME` (2h, 7d, yesterday, 2026-11-20)"},
			&cli.StringFlag{Name: "until", Usage: "only changes at or before `TIME`"},
			&cli.IntFlag{Name: "n", Usage: "at most `N` changes"},
			&cli.BoolFlag{Name: "p", Usage: "show each change's patch"},
			&cli.BoolFlag{Name: "conflicts", Usage: "only merges that kept both sides of a conflict, with the conflicts"},
			&cli.BoolFlag{Name: "json", Usage: "one JSON object per line"},
		},
		Action: func(c *cli.Context) error {
			revs, args := splitArgs(c)
			if len(revs) > 0 {
				return failf(exitUsage, "log takes memory paths, not %q (paths look like /memories/notes.md)", revs[0])
			}
			paths, err := memPaths(args)
			if err != nil {
				return err
			}
			opt := gitmem.LogOptions{Paths: paths, ToolUseID: c.String("tool-use-id"), Session: c.String("session"),
				Agent: c.String("agent"), Command: c.String("command"), Limit: c.Int("n"), Conflicts: c.Bool("conflicts")}
			if opt.Since, err = timeFlag(c, "since"); err != nil {
				return err
			}
			if opt.Until, err = timeFlag(c, "until"); err != nil {
				return err
			}
			r, err := openRepo(c, true)
			if err != nil {
				return err
			}
			defer r.Close()
			ctx, stop := signalContext()
			defer stop()
			out := newPager(c.App.Writer)
			emit := jsonLines(out)
			err = r.Log(ctx, opt, progress(c, "indexing history"), func(cm gitmem.Commit) error {
				var patch string
				if c.Bool("p") {
					if patch, err = stores.Patch(r, cm, paths); err != nil {
						return err
					}
				}
				if c.Bool("json") {
					j := stores.ToCommitJSON(cm)
					j.Diff = patch
					return emit(j)
				}
				if _, err := fmt.Fprintln(out, oneLine(cm)); err != nil {
					return err
				}
				if opt.Conflicts {
					for _, t := range cm.Trailers {
						if t.Key == gitmem.TrailerConflict {
							kind, path, _ := strings.Cut(t.Value, " ")
							fmt.Fprintf(out, "    %-13s %s\n", kind, path)
						}
					}
				}
				_, err := io.WriteString(out, colorDiff(patch, isTerminal(c.App.Writer)))
				return err
			})
			if errors.Is(err, context.Canceled) {
				return nil
			}
			if err != nil {
				return storeErr(err, c.String("repo"))
			}
			return out.Flush()
		},
	}
}

func showCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show one change: its commit, trailers and diff",
		ArgsUsage: "REV|TOOL_USE_ID",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "as a JSON object"}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return failf(exitUsage, "show takes one revision or tool_use id")
			}
			r, err := openRepo(c, true)
			if err != nil {
				return err
			}
			defer r.Close()
			cm, err := revArg(r, c.Args().First())
			if err != nil {
				return err
			}
			patch, err := stores.Patch(r, cm, nil)
			if err != nil {
				return storeErr(err, c.String("repo"))
			}
			if c.Bool("json") {
				j := stores.ToCommitJSON(cm)
				j.Diff = patch
				return jsonLines(c.App.Writer)(j)
			}
			w := c.App.Writer
			color := isTerminal(w)
			fmt.Fprintf(w, "%s\n", paint(color, yellow, "commit "+cm.Hash))
			fmt.Fprintf(w, "Author: %s <%s>\nDate:   %s\n\n    %s\n", cm.Author.Name, cm.Author.Email, cm.Time.Format(timeLayout), cm.Subject)
			if len(cm.Trailers) > 0 {
				fmt.Fprintln(w)
				for _, t := range cm.Trailers {
					fmt.Fprintf(w, "    %s: %s\n", t.Key, t.Value)
				}
			}
			fmt.Fprintln(w)
			_, err = io.WriteString(w, colorDiff(patch, color))
			return err
		},
	}
}

func diffCommand() *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "show what changed: REV..HEAD, REV..REV, or hand edits not yet committed",
		ArgsUsage: "[REV [REV]] [-- PATH...]   (REV may be a time: @{2h ago}, @{yesterday})",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "at", Usage: "compare the memory as it was at `TIME` with now (like REV @{TIME})"},
			&cli.BoolFlag{Name: "stat", Usage: "list the changed files only"},
		},
		Action: func(c *cli.Context) error {
			revs, args := splitArgs(c)
			paths, err := memPaths(args)
			if err != nil {
				return err
			}
			if at := c.String("at"); at != "" {
				revs = append([]string{"@{" + at + "}"}, revs...)
			}
			if len(revs) > 2 {
				return failf(exitUsage, "diff takes at most two revisions")
			}
			r, err := openRepo(c, true)
			if err != nil {
				return err
			}
			defer r.Close()
			var changes []gitmem.FileChange
			switch len(revs) {
			case 0:
				changes, err = r.DiffWorktree(paths...)
			default:
				from, err1 := revArg(r, revs[0])
				if err1 != nil {
					return err1
				}
				to := gitmem.Commit{Hash: "HEAD"}
				if len(revs) == 2 {
					if to, err1 = revArg(r, revs[1]); err1 != nil {
						return err1
					}
				}
				changes, err = r.Diff(from.Hash, to.Hash, paths...)
			}
			if err != nil {
				return storeErr(err, c.String("repo"))
			}
			w := newPager(c.App.Writer)
			color := isTerminal(c.App.Writer)
			for _, fc := range changes {
				if c.Bool("stat") {
					fmt.Fprintf(w, "%s /memories/%s\n", statusLetter(fc), fc.Path)
					continue
				}
				io.WriteString(w, colorDiff(fc.Unified(), color))
			}
			return w.Flush()
		},
	}
}

func statusLetter(fc gitmem.FileChange) string {
	switch {
	case !fc.OldFile:
		return "A"
	case !fc.NewFile:
		return "D"
	}
	return "M"
}

type blameJSON struct {
	Line      int    `json:"line"`
	Hash      string `json:"hash"`
	Time      string `json:"time"`
	ToolUseID string `json:"tool_use_id,omitempty"`
	Command   string `json:"command,omitempty"`
	Text      string `json:"text"`
}

func blameCommand() *cli.Command {
	return &cli.Command{
		Name:      "blame",
		Usage:     "show which change (and tool_use id) last wrote each line of a file",
		ArgsUsage: "PATH",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "one JSON object per line"}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return failf(exitUsage, "blame takes one memory path")
			}
			p, err := memPath(c.Args().First())
			if err != nil {
				return err
			}
			r, err := openRepo(c, true)
			if err != nil {
				return err
			}
			defer r.Close()
			ctx, stop := signalContext()
			defer stop()
			lines, err := r.Blame(ctx, p)
			if errors.Is(err, gitmem.ErrNotExist) {
				return failf(exitFailure, "/memories/%s has no history", p)
			}
			if err != nil {
				return storeErr(err, c.String("repo"))
			}
			w := newPager(c.App.Writer)
			emit := jsonLines(w)
			width := len(fmt.Sprint(len(lines)))
			who := func(c gitmem.Commit) string {
				if id := c.Trailer(gitmem.TrailerToolUseID); id != "" {
					return id
				}
				if cmd := c.Trailer(gitmem.TrailerCommand); cmd != "" {
					return "(" + cmd + ")"
				}
				return "-"
			}
			idWidth := 0
			for _, l := range lines {
				idWidth = max(idWidth, len(who(l.Commit)))
			}
			for _, l := range lines {
				id := l.Commit.Trailer(gitmem.TrailerToolUseID)
				if c.Bool("json") {
					emit(blameJSON{Line: l.Line, Hash: l.Commit.Hash, Time: l.Commit.Time.Format("2006-01-02T15:04:05Z07:00"),
						ToolUseID: id, Command: l.Commit.Trailer(gitmem.TrailerCommand), Text: l.Text})
					continue
				}
				fmt.Fprintf(w, "%s %s %-*s %*d) %s\n", short(l.Commit.Hash), l.Commit.Time.Format("2006-01-02 15:04:05"),
					idWidth, who(l.Commit), width, l.Line, l.Text)
			}
			return w.Flush()
		},
	}
}
