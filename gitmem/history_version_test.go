package gitmem

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A history index an older gitmem wrote (version 4, or any header this
// version does not know) is rebuilt from git at the next start as if it
// were missing: nothing fails, the tool_use ids of the old history are
// known again, log reads every commit, and the file is written anew.
func TestOlderHistoryIndexIsRebuilt(t *testing.T) {
	t.Parallel()
	for _, header := range []string{"gitmem-history 4", "gitmem-history 3", "gitmem-history 99", "something else"} {
		t.Run(header, func(t *testing.T) {
			dir := gittest.TempDir(t)
			r, _, err := Init(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			write(t, r, "toolu_1", "a.md", "one\n")
			write(t, r, "toolu_2", "b.md", "two\n")
			r.Close()
			// Rewrite the file as an older version would have it: same
			// records under the old header (version 4 wrote a zero hash
			// for a root commit's parent).
			p := filepath.Join(dir, ".git", "gitmem", "history")
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			_, rest, _ := bytes.Cut(data, []byte("\n"))
			lines := strings.SplitAfter(string(rest), "\n")
			lines[0] = strings.Replace(lines[0], "\t\t", "\t"+strings.Repeat("0", 40)+"\t", 1)
			if err := os.WriteFile(p, []byte(header+"\n"+strings.Join(lines, "")), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err = Open(context.Background(), dir, Options{ReadOnly: true, Logf: t.Logf})
			if err != nil {
				t.Fatalf("open read-only: %v", err)
			}
			if tip := r.histIndex.fileTip(); !tip.IsZero() {
				t.Fatalf("the old file's tip %s is taken for the index's", tip)
			}
			r.Close()
			for round := range 2 { // a fresh process: by the index tail, then after a change
				r, err = Open(context.Background(), dir, testOptions(t))
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				n := 0
				if err := r.Log(context.Background(), LogOptions{}, nil, func(Commit) error { n++; return nil }); err != nil || n < 3+round {
					t.Fatalf("log: %d commits, %v", n, err)
				}
				_, err = r.Update(context.Background(), Meta{Subject: "again", Trailers: []Trailer{{TrailerToolUseID, "toolu_1"}}}, func(tx *Tx) error {
					return tx.WriteFile("c.md", []byte("x"))
				})
				var applied *AppliedError
				if !errors.As(err, &applied) {
					t.Fatalf("round %d: toolu_1 again: %v", round, err)
				}
				if round == 0 {
					write(t, r, "toolu_3", "c.md", "three\n")
				}
				r.Close()
			}
			data, _ = os.ReadFile(p)
			if !bytes.HasPrefix(data, []byte(historyHeader+"\n")) {
				t.Fatalf("the index was not written anew:\n%s", data)
			}
			gittest.Fsck(t, dir)
		})
	}
}
