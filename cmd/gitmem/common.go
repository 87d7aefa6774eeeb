package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/operator"
	"github.com/gitmem-dev/gitmem/policy"
)

// now is the clock of every command: GITMEM_NOW (RFC 3339) when set, for
// reproducible scripts and tests, else the system clock.
func now() time.Time {
	if s := os.Getenv("GITMEM_NOW"); s != "" {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t
		}
	}
	return time.Now()
}

// localNow is now in the local zone (TZ): a time written without a zone
// is read in it, as git does.
func localNow() time.Time { return now().In(time.Local) }

func clock() func() time.Time {
	if os.Getenv("GITMEM_NOW") != "" {
		return now
	}
	return time.Now
}

// openRepo opens --repo for an operator command. Read-only commands take
// no lock and change nothing: they ask a serve that holds the lock to
// write what it holds back first (Repo.CatchUp), and after a crash warn of
// acknowledged changes they cannot show yet (warnUnrecovered).
func openRepo(c *cli.Context, readOnly bool) (*gitmem.Repo, error) {
	return openRepoWith(c, readOnly, false)
}

// openTouching is openRepo for revert and restore, whose one change looks
// for hand edits at the files it reads or changes: their start looks at
// no other worktree file (gitmem.Options.TouchedOnly).
func openTouching(c *cli.Context, readOnly bool) (*gitmem.Repo, error) {
	return openRepoWith(c, readOnly, true)
}

func openRepoWith(c *cli.Context, readOnly, touchedOnly bool) (*gitmem.Repo, error) {
	checked := takeCheckedRepo(c.App)
	if readOnly && checked != nil {
		return caughtUp(c, checked)
	}
	if checked != nil {
		checked.Close() // read-only: nothing to write back
	}
	dir := c.String("repo")
	opt := readOptions(c)
	opt.ReadOnly, opt.TouchedOnly = readOnly, touchedOnly
	r, err := openRepository(c.Context, dir, opt)
	if err != nil {
		return nil, storeErr(err, dir)
	}
	if readOnly {
		return caughtUp(c, r)
	}
	return r, nil
}

// caughtUp is r, a repository opened read-only, once a serve holding its
// writer lock wrote what it holds back (Repo.CatchUp), with a warning of
// the acknowledged changes it cannot show.
func caughtUp(c *cli.Context, r *gitmem.Repo) (*gitmem.Repo, error) {
	if err := r.CatchUp(c.Context); err != nil {
		r.Close()
		return nil, storeErr(err, c.String("repo"))
	}
	warnUnrecovered(c, r)
	return r, nil
}

// readOptions are an operator command's options to open --repo read-only.
func readOptions(c *cli.Context) gitmem.Options {
	return withLockWait(c, gitmem.Options{ReadOnly: true, OneCommand: true, Now: clock(), Logf: logTo(c), Errorf: errorLog(c), OwnerOnly: ownerOnly(c)})
}

// ownerOnly says whether an operator command refuses to write a
// repository whose .git is another user's (gitmem.ErrOtherOwner).
func ownerOnly(c *cli.Context) bool { return !c.Bool("allow-owner-mismatch") }

// warnUnrecovered prints one line on stderr when a gitmem was killed (or
// its disk was full at exit) before writing acknowledged changes to git's
// files: they are safe in the write-ahead log, but a read-only command,
// which writes nothing, shows the history without them.
func warnUnrecovered(c *cli.Context, r *gitmem.Repo) {
	u, err := r.Unrecovered()
	var damaged *gitmem.DamagedError
	switch {
	case errors.As(err, &damaged): // what a writer's open refuses
		fmt.Fprintf(c.App.ErrWriter, "gitmem: warning: %s; %s\n", damaged.Problem, damaged.Repair)
	case err != nil:
		fmt.Fprintf(c.App.ErrWriter, "gitmem: warning: the write-ahead log could not be checked (%s); run gitmem fsck\n", strings.TrimPrefix(err.Error(), "gitmem: "))
	case u.HeldBack > 0:
		fmt.Fprintf(c.App.ErrWriter, "gitmem: warning: acknowledged changes may not be shown: the writer lock of this memory: %s, and it did not let it go within %v of being asked to write what it holds back (a serve does at once; a gc, redaction or fsck --repair keeps it until done, holding nothing back)\n", heldBy(u.Holder), u.HeldBack)
	case u.Holder.Pid != 0:
		fmt.Fprintf(c.App.ErrWriter, "gitmem: warning: acknowledged changes may not be shown: the writer lock of this memory: %s; they are safe in its write-ahead log; %s\n", heldBy(u.Holder), heldRepair(u.Holder))
	case u.Changes > 0:
		fmt.Fprintf(c.App.ErrWriter, "gitmem: warning: %d acknowledged change(s) are not shown: they are in the write-ahead log, not yet in git's files (gitmem stopped before writing them); gitmem fsck --repair, serve or any writing command recovers them\n", u.Changes)
	}
}

// closeRepo closes a repository at the end of a command. A last
// checkpoint that fails (a full disk) fails the command, saying that the
// acknowledged changes are kept in the write-ahead log for the next start;
// an error the command already had comes first.
func closeRepo(r *gitmem.Repo, err *error) {
	if cerr := r.Close(); cerr != nil {
		atExit(err, storeErr(cerr, r.Dir()))
	}
}

// atExit puts closing, the failure of a command's last step (a last
// checkpoint), in *err: after the error the command already had, if any.
func atExit(err *error, closing error) {
	var ee, ce *exitError
	switch {
	case *err == nil:
		*err = closing
	case errors.As(*err, &ee) && errors.As(closing, &ce):
		*err = failf(ee.code, "%s; and at exit: %s", ee.msg, ce.msg)
	}
}

// memPath reads a path as the model writes it (/memories/a.md) or relative
// to the repository (memories/a.md) and returns it relative to memories/.
func memPath(s string) (string, error) { return memPathBy(policy.ParsePath, s) }

// memPathBy is memPath with the rule parse (policy.ParseHeldPath for redact).
func memPathBy(parse func(string) (string, error), s string) (string, error) {
	if s == "memories" || strings.HasPrefix(s, "memories/") {
		s = "/" + s
	}
	rel, err := parse(s)
	if err != nil {
		return "", failf(exitUsage, "%v (paths look like /memories/notes.md or memories/notes.md)", err)
	}
	return rel, nil
}

func memPaths(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		p, err := memPath(a)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// splitArgs separates revisions from memory paths: a path starts with
// /memories or memories (a "--" before the paths is accepted, as in git).
func splitArgs(c *cli.Context) (revs, paths []string) {
	for _, a := range c.Args().Slice() {
		if a == "--" {
			continue
		}
		if a == "memories" || a == "/memories" || strings.HasPrefix(a, "memories/") || strings.HasPrefix(a, "/memories/") {
			paths = append(paths, a)
		} else {
			revs = append(revs, a)
		}
	}
	return revs, paths
}

// isTerminal reports whether w (a reader or a writer) is a terminal:
// colors, progress bars, the pager, serve's hint.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress shows a bar on stderr when it is a terminal, else nothing.
func progress(c *cli.Context, what string) gitmem.Progress {
	if !isTerminal(c.App.ErrWriter) {
		return nil
	}
	var bar *progressbar.ProgressBar
	return func(done, total int) {
		if bar == nil {
			bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(c.App.ErrWriter),
				progressbar.OptionSetDescription(what), progressbar.OptionClearOnFinish(),
				progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionShowCount())
		}
		bar.Set(done)
		if done == total {
			bar.Finish()
		}
	}
}

// jsonLines writes one JSON value per line.
func jsonLines(w io.Writer) func(any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode
}

const timeLayout = operator.TimeLayout

func short(hash string) string {
	if len(hash) > 7 {
		return hash[:7]
	}
	return hash
}

// revArg resolves a revision given on the command line: a tool_use id, a
// hash, a git revision, or a time as @{2h ago} / @{yesterday}.
func revArg(ctx context.Context, r *gitmem.Repo, rev string) (gitmem.Commit, error) {
	c, err := operator.Revision(ctx, r, rev, localNow(), false)
	return c, revErr(err)
}

// commitArg is revArg without the files the commit changed, for a
// command that needs only the commit's hash (diff).
func commitArg(ctx context.Context, r *gitmem.Repo, rev string) (gitmem.Commit, error) {
	c, err := operator.RevisionCommit(ctx, r, rev, localNow(), false)
	return c, revErr(err)
}

// revErr words a revision that names nothing.
func revErr(err error) error {
	var re *operator.RevError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &re) && re.Usage:
		return failf(exitUsage, "%s", re.Msg)
	case errors.As(err, &re):
		return failf(exitFailure, "%s", re.Msg)
	}
	return storeErr(err, "")
}

func timeFlag(c *cli.Context, name string) (time.Time, error) {
	s := c.String(name)
	if s == "" {
		return time.Time{}, nil
	}
	t, err := policy.ParseTime(s, localNow())
	if err != nil {
		return t, failf(exitUsage, "--%s: %v", name, err)
	}
	return t, nil
}
