package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/operator"
	"github.com/gitmem-dev/gitmem/policy"
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
	line := fmt.Sprintf("%s %s %-11s %s %s", short(c.Hash), c.Time.Format("2006-01-02 15:04:05"), cmd, path, id)
	author := ""
	if c.Trailer(gitmem.TrailerAgent) == "" && c.Trailer(gitmem.TrailerToolUseID) == "" {
		author = c.Author.Name // an operator's commit: who made it
	}
	for _, kv := range [][2]string{{"author", author}, {"agent", c.Trailer(gitmem.TrailerAgent)}, {"session", c.Trailer(gitmem.TrailerSession)}} {
		if kv[1] != "" {
			line += " " + kv[0] + "=" + quoteSpaced(kv[1])
		}
	}
	return line
}

// quoteSpaced quotes a value that holds a space, so a log line stays
// readable field by field.
func quoteSpaced(s string) string {
	if strings.ContainsAny(s, " \t\"") {
		return strconv.Quote(s)
	}
	return s
}

// orDash is s, or "-" when s is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func logCommand() *cli.Command {
	return &cli.Command{
		Name:      "log",
		Usage:     "list the changes to the memory, newest first",
		ArgsUsage: "[-- PATH...]",
		Description: "Every change (commit), newest first: its short hash, time, command, path and tool_use id,\n" +
			"then author= for a change no tool call made, agent= and session=. PATHs keep the changes to\n" +
			"those files (or folders); a path's history stops at the rename that gave it its name unless\n" +
			"--follow (one file) goes on under its older names, as git log --follow and as blame does.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "tool-use-id", Usage: "only the change this tool_use id made"},
			&cli.StringFlag{Name: "session", Usage: "only changes of this session"},
			&cli.StringFlag{Name: "agent", Usage: "only changes of this agent"},
			&cli.StringFlag{Name: "command", Usage: "only this command (create, str_replace, insert, delete, rename, revert, ...)"},
			&cli.StringFlag{Name: "since", Usage: "only changes at or after `TIME` (2h, 7d, yesterday, 2026-11-20)"},
			&cli.StringFlag{Name: "until", Usage: "only changes at or before `TIME`"},
			&cli.IntFlag{Name: "n", Usage: "at most `N` changes (0: none, as git log -n 0; negative: all)", DefaultText: "all"},
			&cli.BoolFlag{Name: "p", Usage: "show each change's patch"},
			&cli.BoolFlag{Name: "conflicts", Usage: "only merges that kept both sides of a conflict, with the conflicts"},
			&cli.BoolFlag{Name: "follow", Usage: "go on listing a file's changes beyond its renames (one PATH), as git log --follow"},
			&cli.BoolFlag{Name: "json", Usage: "one JSON object per line"},
		},
		Action: func(c *cli.Context) error {
			revs, args := splitArgs(c)
			if len(revs) > 0 {
				return failf(exitUsage, "log takes memory paths, not %s (paths look like /memories/notes.md)", policy.QuoteName(revs[0]))
			}
			paths, err := memPaths(args)
			if err != nil {
				return err
			}
			if c.Bool("follow") && len(paths) != 1 {
				return failf(exitUsage, "log --follow takes exactly one memory path (as git log --follow)")
			}
			opt := gitmem.LogOptions{Paths: paths, ToolUseID: c.String("tool-use-id"), Session: c.String("session"),
				Agent: c.String("agent"), Command: c.String("command"), Limit: c.Int("n"), Conflicts: c.Bool("conflicts"),
				Follow: c.Bool("follow")}
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
			if c.IsSet("n") && opt.Limit == 0 {
				return nil // git log -n 0 lists nothing
			}
			ctx, stop := signalContext()
			defer stop()
			out := newOutput(c)
			defer out.Close()
			emit := jsonLines(out)
			listed := 0
			err = r.Log(ctx, opt, progress(c, "indexing history"), func(cm gitmem.Commit) error {
				listed++
				var patch string
				if c.Bool("p") {
					if patch, err = operator.Patch(r, cm, opt.Paths); err != nil { // with --follow, the file's name in cm
						return err
					}
				}
				if c.Bool("json") {
					j := operator.ToCommitJSON(cm)
					j.Diff = patch
					return emit(j)
				}
				line := oneLine(cm)
				if _, err := fmt.Fprintln(out, paint(out.color, yellow, line[:7])+line[7:]); err != nil {
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
				_, err := io.WriteString(out, colorDiff(patch, out.color))
				return err
			})
			if errors.Is(err, context.Canceled) {
				return nil
			}
			if err != nil {
				return storeErr(err, c.String("repo"))
			}
			if listed == 0 && opt.Conflicts && !c.Bool("json") { // on stderr: stdout stays empty, as git log's
				fmt.Fprintln(c.App.ErrWriter, "no merge kept both sides of a conflict")
			}
			return out.Close()
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
			// The files the commit changed (its record in the history
			// index, which a full hash is looked for from the index's end:
			// most of it for an old commit) are only shown as JSON's
			// paths: the diff is read from git.
			resolve := commitArg
			if c.Bool("json") {
				resolve = revArg
			}
			cm, err := resolve(c.Context, r, c.Args().First())
			if err != nil {
				return err
			}
			patch, err := operator.Patch(r, cm, nil)
			if err != nil {
				return storeErr(err, c.String("repo"))
			}
			if c.Bool("json") {
				j := operator.ToCommitJSON(cm)
				j.Diff = patch
				return jsonLines(c.App.Writer)(j)
			}
			w := newOutput(c)
			defer w.Close()
			color := w.color
			fmt.Fprintf(w, "%s\n", paint(color, yellow, "commit "+cm.Hash))
			fmt.Fprintf(w, "Author: %s <%s>\nDate:   %s\n\n    %s\n", cm.Author.Name, cm.Author.Email, cm.Time.Format(timeLayout), cm.Subject)
			if len(cm.Trailers) > 0 {
				fmt.Fprintln(w)
				for _, t := range cm.Trailers {
					fmt.Fprintf(w, "    %s: %s\n", t.Key, t.Value)
				}
			}
			fmt.Fprintln(w)
			io.WriteString(w, colorDiff(patch, color))
			return w.Close()
		},
	}
}

func diffCommand() *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "show what changed: REV..HEAD, REV..REV, or hand edits not yet committed",
		ArgsUsage: "[REV [REV] | REV..REV] [-- PATH...]   (REV may be a time: @{2h ago}, @{yesterday})",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "at", Usage: "compare the memory as it was at `TIME` with now (like REV @{TIME})"},
			&cli.BoolFlag{Name: "stat", Usage: "a diffstat: each changed file with its count of changed lines, as git diff --stat"},
			&cli.BoolFlag{Name: "name-status", Usage: "each changed file with A (added), M (modified) or D (deleted)"},
			&cli.BoolFlag{Name: "json", Usage: "one JSON object per changed file: path, status, insertions, deletions, diff"},
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
			if len(revs) == 1 {
				if revs, err = rangeRevs(c.Context, r, revs[0]); err != nil {
					return err
				}
			}
			var changes []gitmem.FileChange
			switch len(revs) {
			case 0:
				changes, err = r.DiffWorktree(paths...)
			default:
				from, err1 := commitArg(c.Context, r, revs[0])
				if err1 != nil {
					return err1
				}
				to := gitmem.Commit{Hash: "HEAD"}
				if len(revs) == 2 {
					if to, err1 = commitArg(c.Context, r, revs[1]); err1 != nil {
						return err1
					}
				}
				changes, err = r.Diff(from.Hash, to.Hash, paths...)
			}
			if err != nil {
				return storeErr(err, c.String("repo"))
			}
			return writeChanges(c, changes)
		},
	}
}

// rangeRevs reads git's A..B as diff's two revisions (A.. is A..HEAD,
// ..B is HEAD..B); anything else is the one revision it was. A tool_use
// id may hold "..": one that names a commit is that commit, unless the
// range's sides name commits too — then it names two things, and neither
// is taken (as show refuses an id that reads as a revision).
func rangeRevs(ctx context.Context, r *gitmem.Repo, rev string) ([]string, error) {
	from, to, ok := strings.Cut(rev, "..")
	if !ok || strings.HasPrefix(to, ".") || strings.Contains(to, "..") {
		return []string{rev}, nil
	}
	if from == "" {
		from = "HEAD"
	}
	revs := []string{from}
	if to != "" {
		revs = append(revs, to)
	}
	whole, err := operator.RevisionCommit(ctx, r, rev, localNow(), false)
	if err != nil {
		return revs, nil
	}
	for _, side := range revs {
		if _, err := operator.RevisionCommit(ctx, r, side, localNow(), false); err != nil {
			return []string{rev}, nil
		}
	}
	return nil, failf(exitUsage, "%s names two things: the tool_use id of %s and a range of revisions; name the one meant: the commit by its hash, or the range as two revisions (gitmem diff %s)",
		policy.QuoteName(rev), whole.Hash[:12], strings.Join(revs, " "))
}

// writeChanges prints changed files as diff's flags ask: a unified diff
// (the default), --stat, --name-status or --json.
func writeChanges(c *cli.Context, changes []gitmem.FileChange) error {
	w := newOutput(c)
	emit := jsonLines(w)
	switch {
	case c.Bool("json"):
		for _, fc := range changes {
			emit(toChangeJSON(fc))
		}
	case c.Bool("stat"):
		io.WriteString(w, diffstat(changes, w.color))
	case c.Bool("name-status"):
		for _, fc := range changes {
			fmt.Fprintf(w, "%s\t/memories/%s\n", statusLetter(fc), fc.Path)
		}
	default:
		for _, fc := range changes {
			io.WriteString(w, colorDiff(fc.Unified(), w.color))
		}
	}
	return w.Close()
}

type blameJSON struct {
	Line      int    `json:"line"`
	Hash      string `json:"hash"`
	Time      string `json:"time"`
	ToolUseID string `json:"tool_use_id,omitempty"`
	Command   string `json:"command,omitempty"`
	Agent     string `json:"agent,omitempty"`
	Session   string `json:"session,omitempty"`
	Text      string `json:"text"`
}

func blameCommand() *cli.Command {
	return &cli.Command{
		Name:      "blame",
		Usage:     "show which change (and tool_use id) last wrote each line of a file",
		ArgsUsage: "PATH",
		Description: "Each line of the file, after the change that last wrote it: the commit's short hash, its\n" +
			"date, the tool_use id, the agent and the session (- where the change has none), then the\n" +
			"line's number and text. --json gives the same as one object per line.",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "one JSON object per line"}},
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
				if fs, _ := r.Files("HEAD", p); len(fs) > 0 {
					return failf(exitUsage, "/memories/%s is a folder: blame takes a file", p)
				}
				return failf(exitFailure, "/memories/%s has no history", p)
			}
			if err != nil {
				return storeErr(err, c.String("repo"))
			}
			w := newOutput(c)
			defer w.Close()
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
			idW, agentW, sessionW := 0, 0, 0
			for _, l := range lines {
				idW = max(idW, len(who(l.Commit)))
				agentW = max(agentW, len(orDash(l.Commit.Trailer(gitmem.TrailerAgent))))
				sessionW = max(sessionW, len(orDash(l.Commit.Trailer(gitmem.TrailerSession))))
			}
			for _, l := range lines {
				cm := l.Commit
				if c.Bool("json") {
					emit(blameJSON{Line: l.Line, Hash: cm.Hash, Time: cm.Time.Format("2006-01-02T15:04:05Z07:00"),
						ToolUseID: cm.Trailer(gitmem.TrailerToolUseID), Command: cm.Trailer(gitmem.TrailerCommand),
						Agent: cm.Trailer(gitmem.TrailerAgent), Session: cm.Trailer(gitmem.TrailerSession), Text: l.Text})
					continue
				}
				fmt.Fprintf(w, "%s %s %-*s %-*s %-*s %*d) %s\n", short(cm.Hash), cm.Time.Format("2006-01-02 15:04:05"),
					idW, who(cm), agentW, orDash(cm.Trailer(gitmem.TrailerAgent)), sessionW, orDash(cm.Trailer(gitmem.TrailerSession)),
					width, l.Line, l.Text)
			}
			return w.Close()
		},
	}
}
