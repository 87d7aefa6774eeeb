package gittest

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// WaitFor polls cond until it holds (a hang guard of a minute, not a
// timing assertion).
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// WaitForStack waits until a goroutine's stack names every one of
// funcs: a goroutine blocked at a known place.
func WaitForStack(t testing.TB, funcs ...string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	WaitFor(t, "a goroutine in "+strings.Join(funcs, ", "), func() bool {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if !slices.ContainsFunc(funcs, func(f string) bool { return !strings.Contains(g, f) }) {
				return true
			}
		}
		return false
	})
}
