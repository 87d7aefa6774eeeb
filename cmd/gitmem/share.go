package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
)

// Sharing a memory through git remotes: remote, clone, push, pull, sync,
// status. Credentials come from flags or the environment, never from
// what is stored in the repository.

// remoteAuthFlags are the credential flags of every command that talks to
// a remote.
func remoteAuthFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "remote-user", EnvVars: []string{"GITMEM_REMOTE_USER"}, Usage: "HTTP user (with a token default x-access-token), or ssh user when the URL has none"},
		&cli.StringFlag{Name: "remote-password", EnvVars: []string{"GITMEM_REMOTE_PASSWORD"}, Usage: "HTTP password"},
		&cli.StringFlag{Name: "remote-token", EnvVars: []string{"GITMEM_REMOTE_TOKEN"}, Usage: "HTTP token (GitHub, GitLab with --remote-user oauth2, Gitea)"},
		&cli.StringFlag{Name: "ssh-key", EnvVars: []string{"GITMEM_SSH_KEY"}, Usage: "ssh private key `FILE` (default: the ssh agent)"},
		&cli.StringFlag{Name: "ssh-key-passphrase", EnvVars: []string{"GITMEM_SSH_KEY_PASSPHRASE"}, Usage: "passphrase of --ssh-key"},
	}
}

// limitsOf reads the limit flags a command has (serve's), else the
// defaults: what a file from a remote may be.
func syncOptions(c *cli.Context) gitmem.SyncOptions {
	l := policy.DefaultLimits
	if c.IsSet("max-file-bytes") || c.Command.Name == "serve" {
		l = limitFlags(c)
	}
	return gitmem.SyncOptions{
		Auth: gitmem.RemoteAuth{User: c.String("remote-user"), Password: c.String("remote-password"), Token: c.String("remote-token"),
			SSHKey: c.String("ssh-key"), SSHKeyPassphrase: c.String("ssh-key-passphrase")},
		Limits:                  l,
		AllowUnrelatedHistories: c.Bool("allow-unrelated-histories"),
	}
}

func limitFlagsOnly() []cli.Flag {
	d := policy.DefaultLimits
	return []cli.Flag{
		bytesLimit("max-file-bytes", d.MaxFileBytes, "largest file taken from the remote"),
		bytesLimit("max-total-bytes", d.MaxTotalBytes, "largest total size of the merged memory"),
		countLimit("max-files", d.MaxFiles, "most files in the merged memory"),
		&cli.IntFlag{Name: "max-view-bytes", Value: d.MaxViewBytes, Hidden: true},
	}
}

// remoteArg is the remote a command names, or the default: origin, or the
// only remote there is.
func remoteArg(c *cli.Context, r *gitmem.Repo) (string, error) {
	switch c.NArg() {
	case 0:
	case 1:
		return c.Args().First(), nil
	default:
		return "", failf(exitUsage, "%s takes one remote", c.Command.Name)
	}
	rs, err := r.Remotes()
	if err != nil {
		return "", storeErr(err, c.String("repo"))
	}
	for _, x := range rs {
		if x.Name == "origin" {
			return "origin", nil
		}
	}
	if len(rs) == 1 {
		return rs[0].Name, nil
	}
	if len(rs) == 0 {
		return "", failf(exitUsage, "this memory has no remote: gitmem remote add origin URL")
	}
	return "", failf(exitUsage, "this memory has several remotes: name one (gitmem remote list)")
}

// shareErr words an error of push, pull or sync (cmd: the command that
// failed, for the command line that would do what it could not).
func shareErr(err error, cmd, remote, dir string) error {
	var re *gitmem.RemoteError
	var le *gitmem.LimitError
	var be *gitmem.BadRemoteError
	var rr *gitmem.RedactedRemoteError
	var ue *gitmem.UnrelatedHistoriesError
	var me *gitmem.RemoteMovedError
	switch {
	case errors.As(err, &be):
		return failf(exitUsage, "%s", strings.TrimPrefix(be.Error(), "gitmem: "))
	case errors.Is(err, gitmem.ErrNoRemote):
		return failf(exitUsage, "no remote named %s (gitmem remote list; gitmem remote add %s URL)", policy.QuoteName(remote), policy.ClipName(remote))
	case errors.As(err, &ue):
		if cmd != "sync" {
			cmd = "pull"
		}
		return failf(exitFailure, "%s (%s) shares no commit with this memory: it is another memory's history (is the URL right? gitmem remote list), so nothing was merged; to merge the two histories anyway: gitmem %s --allow-unrelated-histories %s",
			ue.Remote, ue.Commit[:7], cmd, remote)
	case errors.As(err, &me):
		return failf(exitFailure, "%s moved again before each of %d pushes: other agents pushed first every time; what was merged stays in this memory and nothing was pushed: run gitmem sync again (it goes through once they pause)", me.Remote, me.Attempts)
	case errors.Is(err, gitmem.ErrNonFastForward):
		return failf(exitFailure, "%s has changes this memory does not have yet; nothing was pushed (gitmem sync pulls, merges and pushes)", remote)
	case errors.As(err, &rr):
		return failf(exitFailure, "%s still holds the history redacted here at %s (commit %s): taking it would bring back what the redaction removed, so nothing was taken; redact %s too (the same redact with --push %s), or stop sharing with it (gitmem remote remove %s)",
			rr.Remote, rr.Time.Format(time.RFC3339), rr.Commit[:7], rr.Remote, rr.Remote, rr.Remote)
	case errors.As(err, &re) && re.Op == "push to":
		return failf(exitFailure, "%s %s: %v; nothing was pushed (what was merged stays in this memory)", re.Op, re.Remote, re.Err)
	case errors.As(err, &re):
		return failf(exitFailure, "%s %s: %v", re.Op, re.Remote, re.Err)
	case errors.As(err, &le):
		return failf(exitFailure, "%s", strings.TrimPrefix(le.Error(), "gitmem: "))
	case errors.Is(err, context.DeadlineExceeded):
		return failf(exitFailure, "%s did not answer in time; nothing was changed here", remote)
	}
	return storeErr(err, dir)
}

func remoteCommand() *cli.Command {
	return &cli.Command{
		Name:   "remote",
		Usage:  "the git remotes the memory is shared through (alone: list them)",
		Flags:  []cli.Flag{remoteJSONFlag},
		Action: listRemotes,
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "add a remote: a path, file://, git://, http(s):// or ssh URL (credentials go in flags or the environment, never in the URL)",
				ArgsUsage: "NAME URL",
				Action: remoteChange(2, "a NAME and a URL", func(r *gitmem.Repo, args []string) error {
					err := r.AddRemote(args[0], args[1])
					if errors.Is(err, gitmem.ErrRemoteExists) {
						return failf(exitFailure, "a remote named %q exists (gitmem remote remove %s)", args[0], args[0])
					}
					return err
				}),
			},
			{
				Name:   "list",
				Usage:  "list the remotes: name and URL (what gitmem remote alone does, as git remote)",
				Flags:  []cli.Flag{remoteJSONFlag},
				Action: listRemotes,
			},
			{
				Name:      "remove",
				Usage:     "remove a remote and what was fetched from it",
				ArgsUsage: "NAME",
				Action:    remoteChange(1, "a NAME", func(r *gitmem.Repo, args []string) error { return r.RemoveRemote(args[0]) }),
			},
		},
	}
}

// listRemotes is remote list, and remote alone.
func listRemotes(c *cli.Context) error {
	r, err := openRepo(c, true)
	if err != nil {
		return err
	}
	defer r.Close()
	rs, err := r.Remotes()
	if err != nil {
		return storeErr(err, c.String("repo"))
	}
	emit := jsonLines(c.App.Writer)
	for _, x := range rs {
		if c.Bool("json") {
			emit(map[string]string{"name": x.Name, "url": x.URL})
		} else {
			fmt.Fprintf(c.App.Writer, "%s\t%s\n", policy.Printable(x.Name), policy.Printable(x.URL))
		}
	}
	return nil
}

var remoteJSONFlag = &cli.BoolFlag{Name: "json", Usage: "one JSON object per line"}

// remoteChange is the action of remote add and remove: n arguments, the
// repository opened for writing.
func remoteChange(n int, what string, fn func(*gitmem.Repo, []string) error) cli.ActionFunc {
	return func(c *cli.Context) (err error) {
		if c.NArg() != n {
			return failf(exitUsage, "remote %s takes %s", c.Command.Name, what)
		}
		r, err := openRepo(c, false)
		if err != nil {
			return err
		}
		defer closeRepo(r, &err)
		if err := fn(r, c.Args().Slice()); err != nil {
			var ee *exitError
			if errors.As(err, &ee) {
				return err
			}
			if c.Command.Name == "remove" && errors.Is(err, gitmem.ErrNoRemote) {
				return failf(exitUsage, "no remote named %s (gitmem remote list)", policy.QuoteName(c.Args().First()))
			}
			return shareErr(err, "remote", c.Args().First(), c.String("repo"))
		}
		return nil
	}
}

func cloneCommand() *cli.Command {
	return &cli.Command{
		Name:      "clone",
		Usage:     "make a new memory from a shared one: the remote becomes origin",
		ArgsUsage: "URL [DIR]   (default DIR: --repo)",
		Flags:     append(remoteAuthFlags(), limitFlagsOnly()...),
		Action: func(c *cli.Context) (err error) {
			if c.NArg() < 1 || c.NArg() > 2 {
				return failf(exitUsage, "clone takes a URL and a folder")
			}
			url, dir := c.Args().Get(0), c.String("repo")
			if c.NArg() == 2 {
				dir = c.Args().Get(1)
			}
			ctx, stop := signalContext()
			defer stop()
			var re *gitmem.RemoteError
			r, res, err := gitmem.Clone(ctx, url, dir, gitmem.Options{Now: clock(), Logf: logTo(c), Errorf: errorLog(c)}, syncOptions(c))
			switch {
			case errors.Is(err, gitmem.ErrNotEmpty):
				return failf(exitFailure, "%s exists and is not empty", dir)
			case errors.As(err, &re):
				// Named by the URL typed: origin exists only once the clone does.
				return failf(exitFailure, "%s %s: %v; nothing was made", re.Op, url, re.Err)
			case err != nil:
				return shareErr(err, "clone", "origin", dir)
			}
			defer closeRepo(r, &err)
			head, err := r.Commit(c.Context, "HEAD")
			if err != nil {
				return storeErr(err, dir)
			}
			fmt.Fprintf(c.App.Writer, "Cloned %s into %s (commit %s)\n", url, dir, short(head.Hash))
			reportPull(c.App.Writer, res)
			return nil
		},
	}
}

// shareCommand is push, pull or sync.
func shareCommand(name, usage string, run func(*gitmem.Repo, context.Context, string, gitmem.SyncOptions) (gitmem.SyncResult, error)) *cli.Command {
	flags := append(remoteAuthFlags(), limitFlagsOnly()...)
	flags = append(flags, &cli.DurationFlag{Name: "timeout", Value: 5 * time.Minute, Usage: "give up on a remote that does not answer within `DURATION`"})
	if name != "push" {
		flags = append(flags, &cli.BoolFlag{Name: "allow-unrelated-histories", Usage: "merge the remote's branch also when it shares no commit with this memory (another memory's history: refused without it)"})
	}
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		ArgsUsage: "[REMOTE]   (default: origin)",
		Flags:     flags,
		Action: func(c *cli.Context) (err error) {
			r, err := openRepo(c, false)
			if err != nil {
				return err
			}
			defer closeRepo(r, &err)
			remote, err := remoteArg(c, r)
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, c.Duration("timeout"))
			defer cancel()
			res, err := run(r, ctx, remote, syncOptions(c))
			if err != nil {
				return shareErr(err, name, remote, c.String("repo"))
			}
			reportPull(c.App.Writer, res)
			reportPush(c.App.Writer, remote, name, res)
			return nil
		},
	}
}

func pushCommand() *cli.Command {
	return shareCommand("push", "send the memory's new commits to a remote (refused if the remote has changes this memory lacks: sync)", (*gitmem.Repo).Push)
}

func pullCommand() *cli.Command {
	return shareCommand("pull", "fetch a remote's changes and merge them into the memory", (*gitmem.Repo).Pull)
}

func syncCommand() *cli.Command {
	return shareCommand("sync", "pull, merge and push; when another agent pushed meanwhile, pull and merge again", (*gitmem.Repo).Sync)
}

// reportPull says what a pull brought.
func reportPull(w io.Writer, res gitmem.SyncResult) {
	if res.Redactions > 0 {
		fmt.Fprintf(w, "applied %d redaction(s) made by other clones\n", res.Redactions)
	}
	switch {
	case res.FastForward != "":
		fmt.Fprintf(w, "fast-forwarded to %s (%d commit(s))\n", short(res.FastForward), res.Merged)
	case res.Merge != "":
		io.WriteString(w, mergedWhat(res))
		if len(res.Conflicts) > 0 {
			fmt.Fprintf(w, "; %d conflict(s), both sides kept:", len(res.Conflicts))
		}
		fmt.Fprintln(w)
	}
	for _, k := range res.Conflicts {
		fmt.Fprintf(w, "  %-13s %s\n", k.Kind, policy.Display(k.Path))
	}
	for _, ig := range res.Ignored {
		fmt.Fprintf(w, "  not taken: %s (%s)\n", ig.Path, ig.Reason)
	}
}

// mergedWhat says what the merges of a pull or sync brought: "merged 3
// commit(s) in abc1234", or, when sync merged again because the remote
// moved, "merged 93 commit(s) in 2 merges, the last abc1234".
func mergedWhat(res gitmem.SyncResult) string {
	if res.Merges > 1 {
		return fmt.Sprintf("merged %d commit(s) in %d merges, the last %s", res.Merged, res.Merges, short(res.Merge))
	}
	return fmt.Sprintf("merged %d commit(s) in %s", res.Merged, short(res.Merge))
}

// reportPush says what a push sent.
func reportPush(w io.Writer, remote, cmd string, res gitmem.SyncResult) {
	if res.Retries > 0 {
		fmt.Fprintf(w, "%s moved meanwhile: pulled and merged again %d time(s)\n", remote, res.Retries)
	}
	switch {
	case res.Pushed > 0:
		fmt.Fprintf(w, "pushed %d commit(s) to %s\n", res.Pushed, remote)
	case cmd != "pull":
		fmt.Fprintf(w, "%s and this memory are in step\n", remote)
	case res.FastForward == "" && res.Merge == "":
		fmt.Fprintf(w, "already up to date with %s\n", remote)
	}
}

type statusJSON struct {
	Head        string `json:"head"` // the commit the counts are against
	Remote      string `json:"remote"`
	URL         string `json:"url"`
	Tracking    string `json:"remote_commit,omitempty"`
	Ahead       int    `json:"unpushed"`
	Behind      int    `json:"unmerged"`
	LastSync    string `json:"last_sync,omitempty"`
	LastAttempt string `json:"last_attempt,omitempty"`
	LastError   string `json:"last_error,omitempty"`
	Refused     bool   `json:"refused,omitempty"`
	Redacted    string `json:"redacted_here,omitempty"`
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "where the memory stands against a remote, as last fetched: commits not pushed, not merged, the last sync",
		ArgsUsage: "[REMOTE]   (default: every remote)",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "one JSON object per remote"}},
		Action: func(c *cli.Context) error {
			r, err := openRepo(c, true)
			if err != nil {
				return err
			}
			defer r.Close()
			rs, err := r.Remotes()
			if err != nil {
				return storeErr(err, c.String("repo"))
			}
			var names []string
			for _, x := range rs {
				names = append(names, x.Name)
			}
			if c.NArg() > 0 {
				for _, n := range c.Args().Slice() {
					if !slices.Contains(names, n) {
						return shareErr(gitmem.ErrNoRemote, "status", n, c.String("repo"))
					}
				}
				names = c.Args().Slice()
			}
			head, err := r.Commit(c.Context, "HEAD")
			if err != nil {
				return storeErr(err, c.String("repo"))
			}
			w := c.App.Writer
			emit := jsonLines(w)
			switch {
			case c.Bool("json") && len(names) == 0:
				return emit(struct {
					Head   string  `json:"head"`
					Remote *string `json:"remote"` // null: no remote
				}{Head: head.Hash})
			case !c.Bool("json"):
				fmt.Fprintf(w, "HEAD %s %s\n", short(head.Hash), head.Subject)
				if len(names) == 0 {
					fmt.Fprintln(w, "no remote: the memory is not shared (gitmem remote add origin URL)")
				}
			}
			for _, name := range names {
				st, err := r.Status(c.Context, name)
				if err != nil {
					return shareErr(err, "status", name, c.String("repo"))
				}
				when := func(t time.Time) string {
					if t.IsZero() {
						return ""
					}
					return t.Format(time.RFC3339)
				}
				if c.Bool("json") {
					emit(statusJSON{head.Hash, st.Remote, st.URL, st.Tracking, st.Ahead, st.Behind, when(st.LastSync), when(st.LastAttempt), st.LastError, st.Refused && st.LastError != "", when(st.RedactedHere)})
					continue
				}
				fmt.Fprintf(w, "remote %s (%s)\n", policy.Printable(st.Remote), policy.Printable(st.URL))
				if st.Tracking == "" {
					fmt.Fprintf(w, "  never fetched; %d commit(s) not pushed\n", st.Ahead)
				} else {
					fmt.Fprintf(w, "  %d commit(s) not pushed, %d not merged (as of the last fetch: %s)\n", st.Ahead, st.Behind, short(st.Tracking))
				}
				if !st.RedactedHere.IsZero() {
					fmt.Fprintf(w, "  %s still holds history redacted here at %s: syncs with it are refused until the same redact runs with --push %[1]s\n",
						st.Remote, st.RedactedHere.Format(time.RFC3339))
				}
				switch {
				case st.LastSync.IsZero() && st.LastAttempt.IsZero():
					fmt.Fprintln(w, "  no sync yet")
				case st.LastError == "":
					fmt.Fprintf(w, "  last sync %s\n", st.LastSync.Format(timeLayout))
				default:
					last := "no sync yet"
					if !st.LastSync.IsZero() {
						last = "last sync " + st.LastSync.Format(timeLayout)
					}
					if st.Refused {
						fmt.Fprintf(w, "  %s; the last attempt (%s) was refused: %s; trying again changes nothing until the remote does (serve --sync tries again at growing intervals, up to an hour)\n",
							last, st.LastAttempt.Format(timeLayout), strings.TrimPrefix(st.LastError, "gitmem: "))
						break
					}
					fmt.Fprintf(w, "  %s; the last attempt (%s) failed: %s\n", last, st.LastAttempt.Format(timeLayout), strings.TrimPrefix(st.LastError, "gitmem: "))
				}
			}
			return nil
		},
	}
}
