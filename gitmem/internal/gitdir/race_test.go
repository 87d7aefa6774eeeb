//go:build race

package gitdir

// poolSlack is what -race adds to an allocation count: sync.Pool drops a
// quarter of what is put back at random under the race detector, so a
// read that takes its buffers from a pool allocates some of them anew.
const poolSlack = 2
