//go:build !race

package gitdir

// poolSlack: none without -race (race_test.go).
const poolSlack = 0
