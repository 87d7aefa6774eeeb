package gitmem

import (
	"context"
	"errors"
	"testing"
	"time"
)

// An operator's Check sees the changes a revert, a restore or an expire
// is about to commit, and the commit they build on, under the writer lock; an error it returns refuses
// them: nothing is committed and the operation returns it. (The console
// confirms only the changes it previewed: a change made meanwhile by
// another operator or an agent is never overwritten unseen.)
func TestOperatorCheckRefusesBeforeCommitting(t *testing.T) {
	t.Parallel()
	r, _ := newRepo(t)
	first := write(t, r, "t1", "a.md", "one\n")
	write(t, r, "t2", "a.md", "two\n")
	head := func() string { c, _ := r.Commit(context.Background(), "HEAD"); return c.Hash }
	refuse := errors.New("not what was previewed")
	var seen []FileChange
	h := head()
	check := func(err error) Check {
		return func(tip string, ch []FileChange) error {
			if tip != h {
				t.Errorf("a check on %s, not on HEAD %s", tip, h)
			}
			seen = ch
			return err
		}
	}
	if _, _, err := r.Revert(context.Background(), []string{"t2"}, RevertOptions{Check: check(refuse)}); !errors.Is(err, refuse) || head() != h {
		t.Fatalf("revert refused by its check: %v (head moved: %v)", err, head() != h)
	}
	if len(seen) != 1 || seen[0].Path != "a.md" || string(seen[0].Old) != "two\n" || string(seen[0].New) != "one\n" {
		t.Fatalf("the revert's check saw %+v", seen)
	}
	if _, _, err := r.Restore(context.Background(), first, RestoreOptions{Check: check(refuse)}); !errors.Is(err, refuse) || head() != h {
		t.Fatalf("restore refused by its check: %v", err)
	}
	if len(seen) != 1 || string(seen[0].New) != "one\n" {
		t.Fatalf("the restore's check saw %+v", seen)
	}
	later := r.opt.Now().Add(time.Hour)
	if _, _, err := r.Expire(context.Background(), later, ExpireOptions{Check: check(refuse)}); !errors.Is(err, refuse) || head() != h {
		t.Fatalf("expire refused by its check: %v", err)
	}
	if len(seen) != 1 || seen[0].Path != "a.md" || seen[0].NewFile || string(seen[0].Old) != "two\n" {
		t.Fatalf("the expire's check saw %+v", seen)
	}
	// A check that accepts: the commit is made.
	if _, _, err := r.Revert(context.Background(), []string{"t2"}, RevertOptions{Check: check(nil)}); err != nil || head() == h {
		t.Fatalf("revert accepted by its check: %v", err)
	}
	h = head()
	if stale, c, err := r.Expire(context.Background(), later, ExpireOptions{Check: check(nil)}); err != nil || len(stale) != 1 || c.Hash != head() {
		t.Fatalf("expire accepted by its check: %v %v", stale, err)
	}
}
