package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/gitmem"
)

// A failed sync says what failed and what to do (issue 21, item 13): not
// "gitmem sync pulls, merges and pushes" to whoever just ran gitmem sync.
func TestSyncFailureSaysWhatToDo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err       error
		cmd, want string
	}{
		{&gitmem.RemoteMovedError{Remote: "origin", Attempts: 6}, "sync",
			"origin moved again before each of 6 pushes: other agents pushed first every time; what was merged stays in this memory and nothing was pushed: run gitmem sync again (it goes through once they pause)"},
		{&gitmem.RemoteError{Remote: "origin", Op: "push to", Err: errors.New("the remote refused to update refs/heads/main: pre-receive hook declined")}, "sync",
			"push to origin: the remote refused to update refs/heads/main: pre-receive hook declined; nothing was pushed (what was merged stays in this memory)"},
		{gitmem.ErrNonFastForward, "push",
			"origin has changes this memory does not have yet; nothing was pushed (gitmem sync pulls, merges and pushes)"},
	} {
		got := shareErr(tc.err, tc.cmd, "origin", t.TempDir()).Error()
		if got != tc.want {
			t.Errorf("%s: %v\n got %s\nwant %s", tc.cmd, tc.err, got, tc.want)
		}
		if tc.cmd == "sync" && strings.Contains(got, "gitmem sync pulls, merges and pushes") {
			t.Errorf("a failed sync says %q", got)
		}
	}
}
