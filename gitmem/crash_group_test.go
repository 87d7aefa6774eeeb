//go:build unix

package gitmem

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// The child half of TestKillNineModes: many writers at once (so calls
// share groups), each printing "ack ID" once its Update has returned.
// It can kill itself at a chosen instant, through the fault hook that
// every write step calls first:
//
//	GITMEM_KILL_STEP=STEP:N   at the N-th STEP (wal, sync, object, ref,
//	                          worktree, history, pack, index, or any)
//	                          once the writers run
//	GITMEM_KILL_OPEN=N        at the N-th step of any kind during Open:
//	                          the replay of a log a crash left
func init() {
	dir := os.Getenv("GITMEM_KILL_CHILD")
	if dir == "" {
		return
	}
	selfKill := func() {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	var opening atomic.Bool
	opening.Store(true)
	var steps, openSteps atomic.Int64
	want, atStr, _ := strings.Cut(os.Getenv("GITMEM_KILL_STEP"), ":")
	at, _ := strconv.Atoi(atStr)
	openAt, _ := strconv.Atoi(os.Getenv("GITMEM_KILL_OPEN"))
	env := new(gd.Env)
	env.SetFault(func(step, _ string) error {
		if opening.Load() && openAt > 0 && openSteps.Add(1) == int64(openAt) {
			selfKill()
		}
		if !opening.Load() && at > 0 && (want == "any" || step == want) && steps.Add(1) == int64(at) {
			selfKill()
		}
		return nil
	})
	r, err := Open(context.Background(), dir, Options{Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }, Operator: Signature{"op", "op@x"}, hooks: &testHooks{env: env}})
	opening.Store(false)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	fmt.Println("open")
	writers, _ := strconv.Atoi(os.Getenv("GITMEM_KILL_WRITERS"))
	run := os.Getenv("GITMEM_KILL_RUN")
	var out sync.Mutex
	for w := range writers {
		go func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("%s-w%d-%d", run, w, i)
				_, err := r.Update(context.Background(), Meta{Subject: "kill " + id, Trailers: []Trailer{{TrailerToolUseID, id}}}, func(tx *Tx) error {
					own := fmt.Sprintf("w%d/n%d.md", w, i%5)
					switch i % 5 {
					case 0, 1:
						return tx.WriteFile(own, []byte(strings.Repeat(id+"\n", 1+i%20)))
					case 2:
						data, _ := tx.ReadFile("shared.md")
						return tx.WriteFile("shared.md", append(data[:len(data):len(data)], id+"\n"...))
					case 3:
						if _, err := tx.Stat(fmt.Sprintf("w%d/n0.md", w)); err == nil {
							return tx.Remove(fmt.Sprintf("w%d/n0.md", w))
						}
						return tx.WriteFile(own, []byte(id))
					default:
						from, to := fmt.Sprintf("w%d/n1.md", w), fmt.Sprintf("w%d/moved/n1.md", w)
						if _, err := tx.Stat(from); err == nil {
							if _, err := tx.Stat(to); err != nil {
								return tx.Rename(from, to)
							}
						}
						return tx.WriteFile(own, []byte(id))
					}
				})
				out.Lock()
				if err != nil {
					fmt.Println("update:", err)
					os.Exit(1)
				}
				fmt.Println("ack", id)
				out.Unlock()
			}
		}()
	}
	select {}
}

// kill -9 in three places, at random: anywhere while many writers share
// groups (an outside kill at a random instant), at a chosen write step
// (inside a group's log write, inside a checkpoint's switch and sync, in
// the background materialisation), and in the replay of a log a crash
// left (a child that starts on a repository whose log holds records is
// killed during Open). After every kill: git fsck --strict is clean.
// At the end, after one more start: every acknowledged id is in the
// history, the worktree is HEAD, no crash was taken for a hand edit.
//
// The default run makes a few kills of each kind; GITMEM_CRASH_KILLS=N
// makes N (hundreds for the long mode), in rounds of 50 on new repositories.
func TestKillNineModes(t *testing.T) {
	gittest.Serial(t, "a crash test: child processes write as fast as they go and are killed")
	if testing.Short() {
		t.Skip("spawns processes")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
	kills := 6
	if s := os.Getenv("GITMEM_CRASH_KILLS"); s != "" {
		var err error
		if kills, err = strconv.Atoi(s); err != nil {
			t.Fatalf("GITMEM_CRASH_KILLS=%q", s)
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	// Rounds of at most 50 kills, each on a new repository: the history
	// (and git fsck after every kill) stays small in the long mode.
	const perRound = 50
	total, modes := 0, map[string]int{}
	for first := 0; first < kills; first += perRound {
		n := min(perRound, kills-first)
		acked := killRound(t, rng, first, n, modes)
		total += len(acked)
	}
	t.Logf("%d acknowledged commits over %d kills %v", total, kills, modes)
}

var killSteps = []struct {
	name string
	max  int
}{{"sync", 2}, {"wal", 60}, {"pack", 10}, {"ref", 20}, {"worktree", 50}, {"history", 20}, {"object", 5}, {"any", 300}}

// killRound makes kills n kills numbered from first on a new repository,
// checks it, and returns the acknowledged ids.
func killRound(t *testing.T, rng *rand.Rand, first, n int, modes map[string]int) []string {
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	var acked []string
	for run := first; run < first+n; run++ {
		env := []string{"GITMEM_KILL_CHILD=" + dir, fmt.Sprintf("GITMEM_KILL_RUN=r%d", run), "GITMEM_KILL_WRITERS=16"}
		mode := []string{"group", "step", "replay"}[run%3]
		if mode == "replay" && walRecords(t, dir) == 0 {
			mode = "group" // the last kill left nothing to replay
		}
		switch mode {
		case "step":
			s := killSteps[run/3%len(killSteps)] // each in turn: the default run has a checkpoint and a group write
			mode = "step " + s.name
			env = append(env, fmt.Sprintf("GITMEM_KILL_STEP=%s:%d", s.name, 1+rng.IntN(s.max)))
		case "replay":
			env = append(env, fmt.Sprintf("GITMEM_KILL_OPEN=%d", 1+rng.IntN(12)))
		}
		modes[strings.Fields(mode)[0]]++
		t0 := time.Now()
		got := killChild(t, rng, env, mode)
		acked = append(acked, got...)
		if testing.Verbose() {
			t.Logf("kill %d (%s): %d acknowledged in %v", run, mode, len(got), time.Since(t0).Round(time.Millisecond))
		}
		gittest.Fsck(t, dir)
	}
	if len(acked) < n {
		t.Fatalf("only %d acknowledged commits over %d kills: children died early", len(acked), n)
	}
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	have := map[string]bool{}
	for _, id := range strings.Fields(gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)")) {
		if have[id] {
			t.Errorf("%s is in two commits", id)
		}
		have[id] = true
	}
	for _, id := range acked {
		if !have[id] {
			t.Errorf("acknowledged %s is not in the history", id)
		}
	}
	if adopts := gittest.Git(t, dir, "log", "--format=%h %s", "--grep=^memory: adopt"); adopts != "" {
		t.Errorf("a crash was mistaken for a hand edit:\n%s", adopts)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Errorf("worktree does not match HEAD after restart:\n%s", st)
	}
	gittest.Fsck(t, dir)
	os.RemoveAll(dir) // the long mode makes many
	return acked
}

// killChild runs one child until it is killed: by itself (a step or
// replay kill), or by us at a random instant after a few
// acknowledgements. It returns the ids the child acknowledged.
func killChild(t *testing.T, rng *rand.Rand, env []string, mode string) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	out, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	need := 1 + rng.IntN(40)
	delay := time.Duration(rng.IntN(20000)) * time.Microsecond
	if mode != "group" {
		need = 1 << 30 // it kills itself; we kill only if it never does
	}
	var acked []string
	var deadline <-chan time.Time
	giveUp := time.After(30 * time.Second)
	if mode != "group" {
		giveUp = time.After(2 * time.Second) // the step is rare under this load: kill it anyway
	}
	kill := func() {
		cmd.Process.Signal(syscall.SIGKILL)
		for l := range lines { // acknowledgements already written
			if id, ok := strings.CutPrefix(l, "ack "); ok {
				acked = append(acked, id)
			}
		}
	}
read:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				break read
			}
			switch id, isAck := strings.CutPrefix(l, "ack "); {
			case isAck:
				acked = append(acked, id)
				if len(acked) == need {
					deadline = time.After(delay)
				}
			case l != "open":
				t.Fatalf("child (%s): %s\n%s", mode, l, stderr.String())
			}
		case <-deadline:
			kill()
			break read
		case <-giveUp:
			kill()
			break read
		}
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child (%s) was not killed: %v\n%s", mode, err, stderr.String())
	}
	return acked
}
