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
	for _, name := range []string{"history", "redact", "sync", "redacted"} {
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
