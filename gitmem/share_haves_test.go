package gitmem

import (
	"context"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A pull from a second remote that holds what the first one brought (the
// other agent pushes its whole history there) fetches only what is new:
// the commits the memory fetched from the first remote are among the
// fetch's haves, as git's negotiation finds them. Before, the haves were
// only HEAD (a merge of the memory's own, which no remote holds) and the
// second remote's own tracking ref (none yet): the other agent's whole
// history came again, and a merge's fetch of 1,000 commits grew by as
// many objects at every round (gitmem bench's merges row: 5,046 objects
// at the first pull, 30,046 at the sixth).
func TestPullFromASecondRemoteFetchesOnlyWhatIsNew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, a, b := twoAgents(t)
	for i, p := range []string{"one.md", "two.md", "three.md", "four.md"} {
		put(t, b, "toolu_b"+string(rune('1'+i)), p, p+"\n")
	}
	syncOK(t, b)
	syncOK(t, a)
	put(t, a, "toolu_a1", "mine.md", "a's own\n") // a's HEAD: on no remote
	second := bareRemote(t)
	for _, r := range []*Repo{a, b} {
		if err := r.AddRemote("second", second); err != nil {
			t.Fatal(err)
		}
	}
	put(t, b, "toolu_b5", "five.md", "five\n")
	if _, err := b.Push(ctx, "second", SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := a.Pull(ctx, "second", SyncOptions{})
	if err != nil || res.Merge == "" {
		t.Fatalf("pull: %+v %v", res, err)
	}
	// What git would need: the objects of second's branch that origin's
	// does not reach (a commit, its trees, one blob).
	want := len(strings.Fields(gittest.Git(t, a.Dir(), "rev-list", "--objects", "refs/remotes/second/main", "--not", "refs/remotes/origin/main")))
	if res.Fetched > want {
		t.Errorf("the pull fetched %d objects, want at most %d (what origin's branch does not reach)", res.Fetched, want)
	}
	if got := files(t, a); got["five.md"] != "five\n" || got["one.md"] != "one.md\n" || got["mine.md"] != "a's own\n" {
		t.Errorf("after the pull a holds %v", got)
	}
	gittest.Fsck(t, a.Dir())
}
