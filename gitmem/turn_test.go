package gitmem

import (
	"context"
	"errors"
	"regexp"
	"testing"
)

// Every writer's call after Close answers ErrClosed: each one waits for
// the writer turn and then finds the Repo closed (redact and the history
// index's rebuild took the turn and went on, to lock files Close had
// closed: "lock the repository: bad file descriptor").
func TestWritesAfterCloseAreClosed(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	write(t, r, "t0", "a.md", "sk-abc\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"redact": func() error {
			_, err := r.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`sk-[a-z]+`)}, false, nil)
			return err
		},
		"rebuild the history index": r.rebuildHistoryIndex,
		"gc": func() error {
			_, err := r.GC(false)
			return err
		},
		"update": func() error {
			_, err := r.Update(Meta{}, func(tx *Tx) error { return tx.WriteFile("b.md", []byte("b\n")) })
			return err
		},
		"snapshot": func() error {
			_, err := r.Snapshot()
			return err
		},
	} {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// holdTurn takes r's writer turn as a writer would, for a test that
// stops the background work where it is.
func holdTurn(r *Repo) *writerTurn {
	r.lease.Turn(context.Background(), nil)
	return &writerTurn{r: r}
}
