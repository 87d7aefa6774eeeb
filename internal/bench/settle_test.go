package bench

import (
	"os/exec"
	"runtime"
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

// settle tells a pause from work: a process that sleeps, then spins,
// reports the wall time to the end of its spin and, apart, the CPU it
// used, which the sleep is not part of.
func TestSettleTellsThePauseFromTheWork(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a process's CPU time is read from /proc")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	cmd := exec.Command(sh, "-c", `sleep 0.1; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; exec sleep 60`)
	c, err := startChild(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	wall, cpu := c.settle(time.Minute)
	if wall < 100*time.Millisecond {
		t.Errorf("wall %v: the spin starts after a 100 ms sleep", wall)
	}
	if cpu < 2*clockTick {
		t.Errorf("cpu %v: the spin used none", cpu)
	}
	if cpu > wall+100*time.Millisecond {
		t.Errorf("cpu %v beyond the wall time %v: one thread spun", cpu, wall)
	}
	if wall-cpu < 70*time.Millisecond {
		t.Errorf("wall %v, cpu %v: the 100 ms sleep counted as work", wall, cpu)
	}
}
