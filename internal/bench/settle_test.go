package bench

import (
	"testing"
	"time"
)

// The sustained rate counts the server's CPU time after its last answer,
// not the wall time until it last used the CPU: gitmem waits 200 ms idle
// before its checkpoint and lets the writer lock go, a pause that is no
// work (it made the 64 clients' row swing 0.9x-2x).
func TestSustainedCountsTheWorkNotThePause(t *testing.T) {
	c := conc{lat: make([]time.Duration, 3000), wall: time.Second, settle: 800 * time.Millisecond, after: 60 * time.Millisecond}
	if got, want := c.sustained(), 3000/1.06; got < want-0.01 || got > want+0.01 {
		t.Errorf("sustained = %.2f/s, want %.2f/s (3,000 calls over 1 s and 60 ms of work after)", got, want)
	}
	if got := c.rate(); got != 3000 {
		t.Errorf("rate = %.2f/s, want 3000/s", got)
	}
}

// settle tells a pause from work: a process idle for 200 ms (the CPU
// time still), then busy for 100 ms of CPU, reports the wall time to the
// end of that work and, apart, the CPU time it used, which the pause is
// not part of. On a clock of its own: 20 ms a look.
func TestSettleTellsThePauseFromTheWork(t *testing.T) {
	if clockTick == 0 {
		t.Skip("no CPU time where /proc does not tell it")
	}
	seen := []int64{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 12, 17} // the ticks at each look
	looks := 0
	clock := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	wall, cpu := settleTicks(time.Minute, func() (int64, bool) {
		v := seen[min(looks, len(seen)-1)]
		looks++
		return v, true
	}, func() time.Time { return clock }, func(d time.Duration) { clock = clock.Add(d) })
	if cpu != 10*clockTick {
		t.Errorf("cpu %v, want the 10 ticks used after the first look, %v", cpu, 10*clockTick)
	}
	if wall != 12*20*time.Millisecond {
		t.Errorf("wall %v, want 240 ms: the work ended at the 13th look, 12 polls of 20 ms in", wall)
	}
	if want := len(seen) + 300/20; looks != want {
		t.Errorf("%d looks, want %d: settle stops once the CPU time stood still for 300 ms after the work", looks, want)
	}
}
