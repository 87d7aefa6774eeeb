package gitmem

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A .git/config that does not parse (neither gitmem nor git can read it)
// makes the repository damaged: Open refuses it, for reading and for
// writing, with a *DamagedError that names the file and says how to
// repair it, and writes nothing (the file is left as it was: before,
// Open appended gitmem's mark to it each time); fsck reports it with
// that repair, and fsck --repair neither claims it nor opens the
// repository. Before, Open went on (a server wrote commits into it),
// `gitmem show HEAD` failed with "open the repository failed: 1:2:
// expected section name", and fsck found nothing.
func TestAConfigThatDoesNotParseIsDamage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "one\n")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, ".git", "config")
	const garbage = "[[[garbage\n"
	if err := os.WriteFile(config, []byte(garbage), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Damaged(t, dir, "its .git/config does not parse")
	for _, readOnly := range []bool{true, false} {
		opt := testOptions(t)
		opt.ReadOnly = readOnly
		r, err := Open(ctx, dir, opt)
		var de *DamagedError
		if !errors.As(err, &de) {
			if err == nil {
				r.Close()
			}
			t.Fatalf("Open (read-only %v): %v, want a *DamagedError", readOnly, err)
		}
		if !strings.Contains(de.Problem, ".git/config") || !strings.Contains(de.Repair, "[gitmem]") || strings.Contains(de.Error(), dir) {
			t.Errorf("Open (read-only %v): %q", readOnly, de.Error())
		}
	}
	for _, repair := range []bool{false, true} {
		opt := testOptions(t)
		opt.ReadOnly = !repair
		rep, err := Fsck(ctx, dir, opt, repair)
		if err != nil {
			t.Fatalf("fsck (repair %v): %v", repair, err)
		}
		found := false
		for _, p := range rep.Problems {
			if strings.Contains(p.What, ".git/config") {
				found = true
				if p.Repaired || !strings.Contains(p.Repair, "[gitmem]") {
					t.Errorf("fsck (repair %v): %+v", repair, p)
				}
			}
		}
		if !found {
			t.Errorf("fsck (repair %v) does not report .git/config: %+v", repair, rep.Problems)
		}
	}
	if data, err := os.ReadFile(config); err != nil || string(data) != garbage {
		t.Errorf(".git/config is now %q (%v)", data, err)
	}
}
