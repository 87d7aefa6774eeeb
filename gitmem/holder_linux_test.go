package gitmem

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A writer that starts on a full disk where .git/gitmem/holder is missing
// (a repository an older gitmem made, an operator who deleted it) or
// empty (what such a start left: the file made, its block not) still
// records why it keeps the writer lock when its checkpoint fails: the
// reserve gives the file its block. A waiting process and fsck name it.
// (No record: readHolder found none, fsck reported nothing, and a waiter
// was told a serve lets the lock go within a second.)
func TestHolderRecordedOnAFullDiskWithoutItsFile(t *testing.T) {
	t.Parallel()
	for _, left := range []string{"missing", "empty"} {
		t.Run(left, func(t *testing.T) {
			t.Parallel()
			mnt, fill, free := gittest.SmallDisk(t, "8m")
			dir := filepath.Join(mnt, "repo")
			opt := testOptions(t)
			opt.Process = "gitmem serve"
			r, _, err := Init(context.Background(), dir, opt)
			if err != nil {
				t.Fatal(err)
			}
			write(t, r, "t1", "a.md", "one\n")
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			holder := holderPath(filepath.Join(dir, ".git"))
			if err := os.Remove(holder); err != nil {
				t.Fatal(err)
			}
			if left == "empty" {
				if err := os.WriteFile(holder, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			fill()
			r, err = Open(context.Background(), dir, opt)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			write(t, r, "t2", "b.md", "two\n") // the log has room: acknowledged
			if err := r.checkpoint(); err == nil {
				t.Fatal("a checkpoint on the full disk succeeded")
			}
			if h := readHolder(r.gitDir); h.Pid != os.Getpid() || h.Process != "gitmem serve" {
				t.Fatalf("the holder recorded %+v", h)
			}
			ro := testOptions(t)
			ro.ReadOnly = true
			rep, err := Fsck(context.Background(), dir, ro, false)
			if err != nil || rep.Unrecovered.Holder.Pid != os.Getpid() {
				t.Fatalf("fsck beside the failing holder: %+v, %v", rep.Unrecovered, err)
			}

			free()
			if err := r.checkpoint(); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if got := gitToolIDs(t, dir); got != "t1 t2" {
				t.Fatalf("history: %q", got)
			}
		})
	}
}
