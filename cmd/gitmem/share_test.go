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

// A sync that merged again (the remote moved) says how many merges its
// commits came in, and which was the last: the count is of them all.
// Before, "merged 93 commit(s) in 80176e9" named the last merge only.
func TestMergedWhatCountsTheMerges(t *testing.T) {
	t.Parallel()
	last := "80176e9a0c0ffee0c0ffee0c0ffee0c0ffee0c0f"
	for _, tc := range []struct {
		res  gitmem.SyncResult
		want string
	}{
		{gitmem.SyncResult{Merge: last, Merges: 1, Merged: 33}, "merged 33 commit(s) in 80176e9"},
		{gitmem.SyncResult{Merge: last, Merges: 2, Merged: 93}, "merged 93 commit(s) in 2 merges, the last 80176e9"},
	} {
		if got := mergedWhat(tc.res); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.res, got, tc.want)
		}
	}
}

// "no remote named" echoes the name it was given quoted and clipped, in
// its hint too (a plain name as it is, to copy): before, the hint wrote
// the name raw and whole, so an escape sequence in it reached the
// terminal, and a 300-byte name was repeated whole.
func TestNoRemoteEchoesTheNameQuotedAndClipped(t *testing.T) {
	t.Parallel()
	n80 := strings.Repeat("n", 80)
	for name, want := range map[string]string{
		"nowhere":                `no remote named "nowhere" (gitmem remote list; gitmem remote add nowhere URL)`,
		"o\x1b[31mRED":           `no remote named "o\x1b[31mRED" (gitmem remote list; gitmem remote add "o\x1b[31mRED" URL)`,
		strings.Repeat("n", 300): `no remote named "` + n80 + `"... (gitmem remote list; gitmem remote add "` + n80 + `"... URL)`,
	} {
		if got := shareErr(gitmem.ErrNoRemote, "push", name, t.TempDir()).Error(); got != want {
			t.Errorf("%.20q:\n got %s\nwant %s", name, got, want)
		}
	}
}
