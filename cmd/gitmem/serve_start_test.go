package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// The child of TestServeStoppedDuringStart: it opens the repository,
// commits from 8 goroutines for 300 ms, printing each acknowledged id,
// and exits without closing it: the write-ahead log keeps what git's
// files may lack, as after a crash, for the next start to replay.
func init() {
	dir := os.Getenv("GITMEM_TEST_WAL_CHILD")
	if dir == "" {
		return
	}
	r, err := gitmem.Open(context.Background(), dir, gitmem.Options{Logf: func(string, ...any) {}})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	end := time.Now().Add(300 * time.Millisecond)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				_, err := r.Update(context.Background(), gitmem.Meta{Subject: "child " + id, Trailers: []gitmem.Trailer{{Key: gitmem.TrailerToolUseID, Value: id}}}, func(tx *gitmem.Tx) error {
					return tx.WriteFile(fmt.Sprintf("w%d/n%d.md", w, i%40), []byte(strings.Repeat(id+"\n", 1+i%7)))
				})
				mu.Lock()
				if err != nil {
					fmt.Println("update:", err)
					os.Exit(1)
				}
				fmt.Println("ack", id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	os.Exit(0) // no Close: no checkpoint
}

// SIGTERM while serve starts — opening the repository, replaying the
// write-ahead log a crash left, bringing the worktree to HEAD — ends it as
// the docs promise at any other time: the start finishes (recovery is
// never cut short), then the clean shutdown, exit 0, every acknowledged
// change in the history, the worktree and .git/index at HEAD (git status
// and gitmem diff empty). Each run sends it at another instant after serve
// listens (serve --http listens before it opens the repository): each
// run on a copy of the one repository the child left (cp -a), so the
// runs differ only in that instant. (Issue 21, item 16: the signal
// killed serve.)
func TestServeStoppedDuringStart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	env := testEnv(t)
	crashed := filepath.Join(gittest.TempDir(t), "memory")
	gitmemOut(t, env, "--repo", crashed, "init")
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(env, "GITMEM_TEST_WAL_CHILD="+crashed)
	out, err := child.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var acked []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		id, ok := strings.CutPrefix(l, "ack ")
		if !ok {
			t.Fatalf("child: %s", l)
		}
		acked = append(acked, id)
	}
	for _, delay := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond} {
		repo := filepath.Join(gittest.TempDir(t), "memory")
		if out, err := exec.Command("cp", "-a", crashed, repo).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v\n%s", err, out)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		cmd := exec.Command("gitmem", "--repo", repo, "serve", "--http", addr)
		cmd.Env = env
		var stderr lockedBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Microsecond) {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("serve did not listen:\n%s", stderr.String())
			}
		}
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("SIGTERM %v after listening: serve did not exit\n%s", delay, stderr.String())
		}
		if err != nil {
			t.Errorf("SIGTERM %v after listening: serve: %v\n%s", delay, err, stderr.String())
		}
		have := map[string]bool{}
		for _, id := range strings.Fields(gittest.Git(t, repo, "log", "--format=%(trailers:key=Tool-Use-Id,valueonly)")) {
			have[id] = true
		}
		lost := 0
		for _, id := range acked {
			if !have[id] {
				lost++
			}
		}
		if lost > 0 {
			t.Errorf("SIGTERM %v after listening: %d of %d acknowledged changes are not in the history", delay, lost, len(acked))
		}
		if st := gittest.Git(t, repo, "status", "--porcelain", "--untracked-files=all"); st != "" {
			t.Errorf("SIGTERM %v after listening: git status:\n%.2000s", delay, st)
		}
		if d := gitmemOut(t, env, "--repo", repo, "diff"); d != "" {
			t.Errorf("SIGTERM %v after listening: gitmem diff shows hand edits:\n%.2000s", delay, d)
		}
		if adopts := gittest.Git(t, repo, "log", "--format=%h %s", "--grep=^memory: adopt"); adopts != "" {
			t.Errorf("SIGTERM %v after listening: gitmem's own writes were adopted:\n%s", delay, adopts)
		}
		gittest.Fsck(t, repo)
		t.Logf("SIGTERM %v after listening: %d acknowledged by the child; serve said:\n%s", delay, len(acked), tail(stderr.String(), 600))
	}
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
