package gitmem

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// The child half of TestKillNineLosesNothing: commit forever, printing each
// id once its Update has returned (acknowledged).
func init() {
	if dir := os.Getenv("GITMEM_REDACT_CHILD"); dir != "" {
		r, err := Open(context.Background(), dir, Options{Logf: func(string, ...any) {}, Operator: Signature{"op", "op@x"}})
		if err == nil {
			_, err = r.Redact(context.Background(), Redaction{Match: regexp.MustCompile(`sk-[a-z0-9]+`)}, false, nil)
		}
		if err != nil {
			fmt.Println("redact:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	dir := os.Getenv("GITMEM_CRASH_CHILD")
	if dir == "" {
		return
	}
	r, err := Open(context.Background(), dir, Options{Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }, Operator: Signature{"op", "op@x"}})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		id := fmt.Sprintf("%s-%d", os.Getenv("GITMEM_CRASH_RUN"), i)
		_, err := r.Update(context.Background(), Meta{Subject: "crash " + id, Trailers: []Trailer{{TrailerToolUseID, id}}}, func(tx *Tx) error {
			switch i % 4 {
			case 0, 1:
				return tx.WriteFile(fmt.Sprintf("f%d/n%d.md", i%5, i%7), []byte(strings.Repeat(id+"\n", 1+i%50)))
			case 2:
				if _, err := tx.Stat(fmt.Sprintf("f%d", i%5)); err == nil {
					return tx.Remove(fmt.Sprintf("f%d", i%5))
				}
				return tx.WriteFile("top.md", []byte(id))
			default:
				if _, err := tx.Stat("f1"); err == nil {
					if _, err := tx.Stat("moved/f1"); err != nil {
						return tx.Rename("f1", "moved/f1")
					}
				}
				return tx.WriteFile("top.md", []byte(id))
			}
		})
		if err != nil {
			fmt.Println("update:", err, errors.Unwrap(err))
			os.Exit(1)
		}
		fmt.Println("ack", id)
	}
}

// kill -9 at random instants while commits are in flight: every
// acknowledged change is in the history, git fsck is clean, and after the
// next start the worktree matches HEAD exactly (git status is empty).
func TestKillNineLosesNothing(t *testing.T) {
	gittest.Serial(t, "a crash test: child processes write as fast as they go and are killed")
	if testing.Short() {
		t.Skip("spawns processes")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	var acked []string
	for run := range 12 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "GITMEM_CRASH_CHILD="+dir, fmt.Sprintf("GITMEM_CRASH_RUN=r%d", run))
		out, _ := cmd.StdoutPipe()
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
		// Kill at a random instant after a few acknowledgements, so every
		// run makes progress however slow the machine is.
		need := 1 + rng.IntN(8)
		var deadline <-chan time.Time
		got := 0
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break read
				}
				id, ok := strings.CutPrefix(l, "ack ")
				if !ok {
					t.Fatalf("child: %s", l)
				}
				acked = append(acked, id)
				if got++; got == need {
					deadline = time.After(time.Duration(rng.IntN(15000)) * time.Microsecond)
				}
			case <-deadline:
				cmd.Process.Signal(syscall.SIGKILL)
				for l := range lines { // acknowledgements already written
					if id, ok := strings.CutPrefix(l, "ack "); ok {
						acked = append(acked, id)
					}
				}
				break read
			}
		}
		cmd.Wait()
		gittest.Fsck(t, dir)
	}
	if len(acked) < 12 {
		t.Fatalf("only %d acknowledged commits: a child died early", len(acked))
	}
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	log := gittest.Git(t, dir, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)")
	have := map[string]bool{}
	for _, id := range strings.Fields(log) {
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
	if count := gittest.Git(t, dir, "count-objects", "-v"); !noGarbage(count) {
		packs, _ := os.ReadDir(filepath.Join(dir, ".git", "objects", "pack"))
		var names []string
		for _, p := range packs {
			names = append(names, p.Name())
		}
		t.Errorf("temporary files left after restart:\n%s%v", count, names)
	}
	t.Logf("%d acknowledged commits over 12 kills", len(acked))
}

// kill -9 during a redaction, at random instants: whenever the branch has
// moved, the next start finishes the redaction (the secret is in no file,
// no object); when it has not, the repository is as before. Never is the
// old worktree adopted back into history.
func TestKillNineDuringRedact(t *testing.T) {
	gittest.Serial(t, "a crash test: child processes redact and are killed, each waited for with a deadline")
	if testing.Short() {
		t.Skip("spawns processes")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
	const secret = "sk-live42secret"
	rng := rand.New(rand.NewPCG(3, 4))
	finishedAtStart := 0
	for round := range 8 {
		dir := gittest.TempDir(t)
		r, _, err := Init(context.Background(), dir, testOptions(t))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			write(t, r, fmt.Sprint("t", i), fmt.Sprintf("d%d/f%d.md", i%3, i%11), fmt.Sprintf("v%d %s\n", i, secret))
		}
		r.Close()
		before := gittest.Git(t, dir, "rev-parse", "HEAD")
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "GITMEM_REDACT_CHILD="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if round%2 == 0 { // a random instant
			time.Sleep(time.Duration(rng.IntN(400000)) * time.Microsecond)
		} else { // soon after the record is written, when the refs move
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Microsecond) {
				if _, err := os.Stat(filepath.Join(dir, ".git", "gitmem", "redact")); err == nil {
					break
				}
			}
			time.Sleep(time.Duration(rng.IntN(30000)) * time.Microsecond)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		_, recErr := os.Stat(filepath.Join(dir, ".git", "gitmem", "redact"))
		r, err = Open(context.Background(), dir, testOptions(t))
		if err != nil {
			t.Fatalf("round %d: start after the kill: %v (%v)", round, err, errors.Unwrap(err))
		}
		r.Close()
		if adopts := gittest.Git(t, dir, "log", "--format=%s", "--grep=adopt"); adopts != "" {
			t.Fatalf("round %d: the old worktree was adopted:\n%s", round, adopts)
		}
		if st := gittest.Git(t, dir, "status", "--porcelain", "--untracked-files=all"); st != "" {
			t.Fatalf("round %d: worktree differs from HEAD:\n%s\n%s\nlog:%s", round, st, gittest.Git(t, dir, "diff"), gittest.Git(t, dir, "log", "--format=%h %s", "-5"))
		}
		if gittest.Git(t, dir, "rev-parse", "HEAD") == before {
			continue // killed before the branch moved: nothing changed
		}
		if recErr == nil {
			finishedAtStart++
		}
		assertNoSecret(t, dir, secret)
		gittest.Fsck(t, dir)
	}
	t.Logf("%d of 8 kills landed between the branch moving and the end of the redaction", finishedAtStart)
	if finishedAtStart == 0 {
		t.Error("no kill landed after the redaction record was written: the test did not test the recovery")
	}
}
