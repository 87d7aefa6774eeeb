package gitmem

import (
	"sync"
	"testing"
	"time"
)

// The index timer has a lock of its own (design F1): scheduling it needs
// no writer turn, so that a change, an adopt and a checkout of git's may
// each schedule it at once (under -race, two of them racing on when it is
// due, or making two timers, would show here).
func TestIndexTimerNeedsNoWriterTurn(t *testing.T) {
	t.Parallel()
	x := newGitIndex(t.TempDir(), nil)
	fired := make(chan struct{}, 1)
	flush := func() {
		select {
		case fired <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				x.schedule(time.Millisecond, flush)
			}
		}()
	}
	wg.Wait()
	select {
	case <-fired:
	case <-time.After(time.Minute): // never, unless the timer was lost
		t.Fatal("the index was never flushed")
	}
	x.stopTimer()
	x.timerMu.Lock()
	defer x.timerMu.Unlock()
	if x.timer == nil || x.due.IsZero() {
		t.Fatal("no timer kept")
	}
}
