package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
)

// headLine says what HEAD is: its branch and the commit it is at, or why
// there is no commit there.
func headLine(rep gitmem.FsckReport) string {
	switch {
	case rep.Head != "":
		return fmt.Sprintf("%s at %s", rep.Branch, short(rep.Head))
	case rep.BranchState == "unborn":
		return rep.Branch + " (no commit yet)"
	case rep.BranchState != "":
		return fmt.Sprintf("%s (%s)", rep.Branch, rep.BranchState)
	}
	return rep.Branch + " (no commit)"
}

func fsckCommand() *cli.Command {
	return &cli.Command{
		Name:  "fsck",
		Usage: "check the repository (branch, interrupted work, every object of the history); --repair fixes what it safely can",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "repair", Usage: "point a lost or damaged branch at the newest commit, finish interrupted work"},
		},
		Action: func(c *cli.Context) error {
			dir := c.String("repo")
			rep, err := gitmem.Fsck(c.Context, dir, withLockWait(c, gitmem.Options{Now: clock(), Logf: logTo(c), Errorf: errorLog(c), ReadOnly: !c.Bool("repair"), OwnerOnly: ownerOnly(c)}), c.Bool("repair"))
			if err != nil {
				return storeErr(err, dir)
			}
			w := c.App.Writer
			left := 0
			if h := rep.Unrecovered.Holder; h.Pid != 0 {
				left++
				fmt.Fprintf(w, "problem: the writer lock of this memory: %s; git's history lacks them until then (they are safe in its write-ahead log)\n  repair: %s\n", heldBy(h), heldRepair(h))
			}
			for _, p := range rep.Problems {
				switch {
				case p.Repaired:
					fmt.Fprintf(w, "repaired: %s\n", p.What)
				case p.Repair != "":
					left++
					fmt.Fprintf(w, "problem: %s\n  repair: %s\n", p.What, p.Repair)
				default:
					left++
					fmt.Fprintf(w, "problem: %s\n", p.What)
				}
			}
			fmt.Fprintf(c.App.ErrWriter, "checked %d commit(s), %d object(s); HEAD %s\n", rep.Commits, rep.Objects, headLine(rep))
			if left > 0 {
				return failf(exitFailure, "%d problem(s) found", left)
			}
			return nil
		},
	}
}
