package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/operator"
	"github.com/gitmem-dev/gitmem/policy"
)

type leakJSON struct {
	Rule      string `json:"rule"`
	Path      string `json:"path"`
	Line      int    `json:"line"`
	Blob      string `json:"blob"`
	Commit    string `json:"commit"`
	Time      string `json:"time"`
	ToolUseID string `json:"tool_use_id,omitempty"`
}

func scanCommand() *cli.Command {
	return &cli.Command{
		Name:  "scan",
		Usage: "list the secrets in every version of every memory file in the history (to feed redact); exit 1 when there are any",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "one JSON object per secret"}},
		Action: func(c *cli.Context) error {
			r, err := openRepo(c, true)
			if err != nil {
				return err
			}
			defer r.Close()
			ctx, stop := signalContext()
			defer stop()
			leaks, err := operator.ScanHistory(ctx, r, policy.DefaultSecretRules(), progress(c, "reading history"))
			if errors.Is(err, context.Canceled) {
				return failf(exitFailure, "interrupted")
			}
			if err != nil {
				return storeErr(err, c.String("repo"))
			}
			emit := jsonLines(c.App.Writer)
			blobs := map[string]bool{}
			for _, l := range leaks {
				blobs[l.Blob] = true
				if c.Bool("json") {
					emit(leakJSON{Rule: l.Rule, Path: policy.Display(l.Path), Line: l.Line, Blob: l.Blob, Commit: l.Commit.Hash,
						Time: operator.JSONTime(l.Commit.Time), ToolUseID: l.Commit.Trailer(gitmem.TrailerToolUseID)})
					continue
				}
				fmt.Fprintf(c.App.Writer, "%s %s:%d %s blob %s\n", short(l.Commit.Hash), policy.Display(l.Path), l.Line, l.Rule, l.Blob)
			}
			if len(leaks) == 0 {
				fmt.Fprintln(c.App.ErrWriter, "no secrets found in the history")
				return nil
			}
			return failf(exitFailure, "%d possible secret(s) in %d file version(s); to remove one from all history: "+
				"gitmem redact --blob BLOB --yes (that whole version), or gitmem redact --match 'REGEX' --yes (just the text)", len(leaks), len(blobs))
		},
	}
}
