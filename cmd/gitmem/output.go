package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
)

// colorOn says whether a command colors what it writes to stdout:
// --color=always or never, or with auto (the default) when stdout is a
// terminal, NO_COLOR is not set (https://no-color.org) and TERM is not
// dumb.
func colorOn(c *cli.Context) bool {
	switch c.String("color") {
	case "always":
		return true
	case "never":
		return false
	}
	return isTerminal(c.App.Writer) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}

// checkGlobals refuses a --color that is not auto, always or never, and
// a --log-level or --log-format gitmem does not know, whatever the command.
func checkGlobals(c *cli.Context) error {
	switch c.String("color") {
	case "auto", "always", "never":
	default:
		return failf(exitUsage, "--color must be auto, always or never, not %q", c.String("color"))
	}
	if d := c.Duration("lock-wait"); d < 0 {
		return failf(exitUsage, "--lock-wait cannot be negative (0: as long as it takes), not %v", d)
	}
	_, err := logger(c)
	return err
}

// output is where a reporting command (log, show, diff, blame) writes:
// stdout, buffered, or when stdout is a terminal, a pager as git does —
// $GITMEM_PAGER, else $PAGER, else less (with LESS=FRX unless LESS is
// set: it quits when the text fits the screen and keeps colors). A pager
// of "" or "cat", or --no-pager, writes straight to stdout. Close flushes
// and waits for the pager.
type output struct {
	*bufio.Writer
	color bool
	pipe  io.WriteCloser
	pager *exec.Cmd
}

func newOutput(c *cli.Context) *output {
	o := &output{color: colorOn(c)}
	w := c.App.Writer
	cmd, err := pagerCommand(c)
	var pipe io.WriteCloser
	if cmd != nil {
		if pipe, err = cmd.StdinPipe(); err == nil {
			err = cmd.Start()
		}
	}
	switch {
	case err != nil: // a pager that cannot start: the output is not lost
		fmt.Fprintf(c.App.ErrWriter, "gitmem: warning: %v; writing to standard output\n", err)
	case cmd != nil:
		o.pipe, o.pager, w = pipe, cmd, pipe
	}
	o.Writer = bufio.NewWriterSize(w, 64<<10)
	return o
}

// pagerCommand is the pager to start, if any. A pager whose program is
// not found is an error here, before anything is written to it: run
// through sh, it would only exit 127, and the output written to it be
// lost.
func pagerCommand(c *cli.Context) (*exec.Cmd, error) {
	f, ok := c.App.Writer.(*os.File)
	if !ok || !isTerminal(f) || c.Bool("no-pager") || runtime.GOOS == "windows" {
		return nil, nil
	}
	pager, set := os.LookupEnv("GITMEM_PAGER")
	if !set {
		pager, set = os.LookupEnv("PAGER")
	}
	if !set {
		pager = "less"
	}
	if strings.TrimSpace(pager) == "" || strings.TrimSpace(pager) == "cat" {
		return nil, nil
	}
	// The program, when the command starts with a plain name (not a
	// variable, a redirection or other shell syntax), must exist.
	if prog := strings.Fields(pager)[0]; strings.Trim(prog, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./+") == "" {
		if _, err := exec.LookPath(prog); err != nil {
			return nil, fmt.Errorf("cannot run the pager %s (%v)", prog, errors.Unwrap(err))
		}
	}
	cmd := exec.Command("sh", "-c", pager)
	cmd.Stdout, cmd.Stderr = f, c.App.ErrWriter
	cmd.Env = os.Environ()
	if _, ok := os.LookupEnv("LESS"); !ok {
		cmd.Env = append(cmd.Env, "LESS=FRX")
	}
	return cmd, nil
}

// Close flushes what is buffered and, with a pager, waits until the
// reader quits it. A pager quit early (a closed pipe) is not an error.
func (o *output) Close() error {
	err := o.Flush()
	if o.pager == nil {
		return err
	}
	o.pipe.Close()
	o.pager.Wait()
	o.pager = nil
	return nil
}

// changeJSON is the --json form of a changed file.
type changeJSON struct {
	Path       string `json:"path"`
	Status     string `json:"status"` // A, M or D, as git diff --name-status
	Insertions int    `json:"insertions"`
	Deletions  int    `json:"deletions"`
	Binary     bool   `json:"binary,omitempty"`
	Diff       string `json:"diff"`
}

func toChangeJSON(fc gitmem.FileChange) changeJSON {
	j := changeJSON{Path: "/memories/" + fc.Path, Status: statusLetter(fc), Diff: fc.Unified()}
	for _, l := range strings.Split(j.Diff, "\n") {
		switch {
		case strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "--- "):
		case strings.HasPrefix(l, "Binary files "):
			j.Binary = true
		case strings.HasPrefix(l, "+"):
			j.Insertions++
		case strings.HasPrefix(l, "-"):
			j.Deletions++
		}
	}
	return j
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

// diffstat renders changes as git diff --stat does: one line per file
// with its count of changed lines and a bar of + and -, then a summary.
func diffstat(changes []gitmem.FileChange, color bool) string {
	if len(changes) == 0 {
		return ""
	}
	var rows []changeJSON
	nameW, maxChanged, totalIns, totalDel := 0, 0, 0, 0
	for _, fc := range changes {
		r := toChangeJSON(fc)
		nameW = max(nameW, len(r.Path))
		maxChanged = max(maxChanged, r.Insertions+r.Deletions)
		totalIns += r.Insertions
		totalDel += r.Deletions
		rows = append(rows, r)
	}
	countW := len(fmt.Sprint(maxChanged))
	barW := max(10, 80-nameW-countW-6)
	var b strings.Builder
	for i, r := range rows {
		if r.Binary {
			fmt.Fprintf(&b, " %-*s | Bin %d -> %d bytes\n", nameW, r.Path, len(changes[i].Old), len(changes[i].New))
			continue
		}
		ins, del := r.Insertions, r.Deletions
		if maxChanged > barW { // scale the bars to fit
			ins, del = scale(ins, maxChanged, barW), scale(del, maxChanged, barW)
		}
		fmt.Fprintf(&b, " %-*s | %*d %s%s\n", nameW, r.Path, countW, r.Insertions+r.Deletions,
			paint(color, green, strings.Repeat("+", ins)), paint(color, red, strings.Repeat("-", del)))
	}
	fmt.Fprintf(&b, " %d %s changed", len(rows), plural(len(rows), "file", "files"))
	if totalIns > 0 || totalDel == 0 {
		fmt.Fprintf(&b, ", %d %s(+)", totalIns, plural(totalIns, "insertion", "insertions"))
	}
	if totalDel > 0 || totalIns == 0 {
		fmt.Fprintf(&b, ", %d %s(-)", totalDel, plural(totalDel, "deletion", "deletions"))
	}
	return b.String() + "\n"
}

// scale is git's scale_linear: a non-zero count keeps at least one mark.
func scale(n, of, width int) int {
	if n == 0 {
		return 0
	}
	return 1 + n*(width-1)/of
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
