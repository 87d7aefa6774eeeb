//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// holderRecord is what the process holding the writer lock of the process holding the writer
// of the repository at gitDir recorded in .git/gitmem/holder as its
// checkpoint failed: its pid, process and the cause.
func holderRecord(t *testing.T, gitDir string) (pid int, process, cause string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(gitDir, "gitmem", "holder"))
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	var rec struct {
		Pid     int    `json:"pid"`
		Process string `json:"process"`
		Failing string `json:"failing"`
	}
	if len(line) < 9 || json.Unmarshal(line[9:], &rec) != nil {
		t.Fatalf(".git/gitmem/holder holds no record: %q", data)
	}
	return rec.Pid, rec.Process, rec.Failing
}

// heldBy is how the CLI names the writer lock a gitmem serve of pid
// keeps while its checkpoint fails with cause.
func heldByServe(pid int, cause string) string {
	return fmt.Sprintf("the writer lock of this memory: another gitmem process holds it (pid %d, gitmem serve): its checkpoint has failed since 2026-03-01 09:00:00 +0000 (%s), and it keeps the lock until git's files take its acknowledged changes", pid, cause)
}

// freeSpace is what the CLI says ends such a hold on a full disk.
const freeSpace = "free space on the disk, and that process writes them to git's files itself and lets the lock go"

// heldLines is what a command says on stderr when it gives up waiting
// for a writer lock pid keeps while its checkpoint fails with cause.
func heldLines(pid int, cause, wait string) string {
	held := heldByServe(pid, cause)
	return "gitmem: waiting for " + held + "; gives up after " + wait + " (--lock-wait)\n" +
		"gitmem: gave up after " + wait + " waiting for " + held + "; nothing was changed. Those changes are safe in its write-ahead log: " + freeSpace + "; then run this command again\n"
}

// waitForFailingCheckpoint waits until serve's log says its checkpoint
// fails.
func waitForFailingCheckpoint(t *testing.T, log *lockedBuffer) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(log.String(), "cannot be written to git's files yet"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server's checkpoint did not fail:\n%s", log.String())
		}
	}
}

// A command that writes to a memory a gitmem serve holds while its
// checkpoint fails (the disk is full: the write-ahead log took the
// change, git's pack cannot be written, and serve keeps the writer lock
// until a checkpoint succeeds) says a second into its wait what it waits
// for, and gives up after --lock-wait with exit code 5, naming the
// server and why it keeps the lock, changing nothing; fsck --repair, the
// repair the runbook names for a full disk, too, without saying gitmem
// was stopped or advising itself. Once there is room every acknowledged
// change is in git's history. (They waited silently, for ever or until
// space was freed.)
func TestCommandsBesideAServerOnAFullDisk(t *testing.T) {
	t.Parallel()
	disk, fill, free := gittest.SmallDisk(t, "8m")
	env := append(testEnv(t), "TZ=UTC")
	repo := filepath.Join(disk, "memory")
	var log lockedBuffer
	base, proc, stop := startHTTPProcessTo(t, &log, env, repo, "--http", "--adopt-every", "0")
	client := &http.Client{}
	create := func(id string) bool {
		t.Helper()
		ok, err := postCall(client, base, id, `{"command":"create","path":"/memories/`+id+`.md","file_text":"`+id+`\n"}`)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !create("toolu_1") {
		t.Fatal("the first call failed")
	}
	waitForInGit(t, repo, "toolu_1")
	head := gittest.Git(t, repo, "rev-parse", "HEAD")
	fill()
	if !create("toolu_2") { // the log has room: it is written ahead
		t.Fatalf("a call on the full disk was not acknowledged:\n%s", log.String())
	}
	waitForFailingCheckpoint(t, &log)
	pid, process, cause := holderRecord(t, filepath.Join(repo, ".git"))
	if pid != proc.Pid || process != "gitmem serve" || !strings.Contains(cause, "no space left on device") || strings.Contains(cause, disk) {
		t.Fatalf("the server recorded pid %d (serve is %d), %q, %q", pid, proc.Pid, process, cause)
	}

	// The three at once: each waits out its --lock-wait.
	var wg sync.WaitGroup
	for _, args := range [][]string{{"gc"}, {"fsck", "--repair"}, {"revert", "toolu_1"}} {
		wg.Go(func() {
			stdout, stderr, code := gitmemRun(t, env, append([]string{"--repo", repo, "--lock-wait", "1500ms"}, args...)...)
			if want := heldLines(pid, cause, "1.5s"); code != exitLocked || stderr != want || stdout != "" {
				t.Errorf("gitmem %s: exit %d\nstdout %q\nstderr %q\nwant   %q", strings.Join(args, " "), code, stdout, stderr, want)
			}
		})
	}
	wg.Wait()
	if got := gittest.Git(t, repo, "rev-parse", "HEAD"); got != head {
		t.Fatalf("HEAD moved from %s to %s", head, got)
	}
	// The reading commands say that git's history lacks what serve
	// acknowledged (they said nothing: fsck found no problem), and
	// neither that gitmem was stopped nor to run fsck --repair.
	stdout, stderr, code := gitmemRun(t, env, "--repo", repo, "fsck")
	if want := "problem: " + heldByServe(pid, cause) + "; git's history lacks them until then (they are safe in its write-ahead log)\n  repair: " + freeSpace + "\n"; code != exitFailure || stdout != want || !strings.HasSuffix(stderr, "\ngitmem: 1 problem(s) found\n") {
		t.Errorf("gitmem fsck: exit %d\nstdout %q\nwant   %q\nstderr %q", code, stdout, want, stderr)
	}
	_, stderr, code = gitmemRun(t, env, "--repo", repo, "log")
	if want := "gitmem: warning: acknowledged changes may not be shown: " + heldByServe(pid, cause) + "; they are safe in its write-ahead log; " + freeSpace + "\n"; code != exitOK || stderr != want {
		t.Errorf("gitmem log: exit %d\nstderr %q\nwant   %q", code, stderr, want)
	}

	free()
	if !create("toolu_3") {
		t.Fatalf("a call once there is room failed:\n%s", log.String())
	}
	stop()
	ids := strings.Fields(gittest.Git(t, repo, "log", "--reverse", "--format=%(trailers:key=Tool-Use-Id,valueonly,separator=)"))
	if got := strings.Join(ids, " "); got != "toolu_1 toolu_2 toolu_3" {
		t.Fatalf("history: %q\nserve's log:\n%s", got, log.String())
	}
	gittest.Fsck(t, repo)
	if st := gittest.Git(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("git status:\n%s", st)
	}
}

// The same beside serve --stores: gitmem store update, archive and
// delete give up, and the store is as it was.
func TestStoreCommandsBesideAServerOnAFullDisk(t *testing.T) {
	t.Parallel()
	disk, fill, free := gittest.SmallDisk(t, "8m")
	env := append(testEnv(t), "TZ=UTC")
	stores := filepath.Join(disk, "stores")
	gitmemOut(t, env, "store", "create", "s1", "--stores", stores, "--description", "one")
	var log lockedBuffer
	base, proc, stop := startHTTPProcessTo(t, &log, env, filepath.Join(disk, "unused"), "--http", "--stores", stores)
	call := func(id string) bool {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/v1/stores/s1/tool_use",
			strings.NewReader(`{"type":"tool_use","id":"`+id+`","name":"memory","input":{"command":"create","path":"/memories/`+id+`.md","file_text":"`+id+`\n"}}`))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out struct {
			IsError bool `json:"is_error"`
		}
		json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode == 200 && !out.IsError
	}
	if !call("toolu_1") {
		t.Fatal("the first call failed")
	}
	repo := filepath.Join(stores, "s1")
	waitForInGit(t, repo, "toolu_1") // a store writes git's files a moment later (MaterialiseEvery)
	fill()
	if !call("toolu_2") {
		t.Fatalf("a call on the full disk was not acknowledged:\n%s", log.String())
	}
	waitForFailingCheckpoint(t, &log)
	pid, _, cause := holderRecord(t, filepath.Join(repo, ".git"))
	if pid != proc.Pid {
		t.Fatalf("the server (%d) recorded pid %d", proc.Pid, pid)
	}
	head := gittest.Git(t, repo, "rev-parse", "HEAD")
	var wg sync.WaitGroup // the three at once: each waits out its --lock-wait
	for _, args := range [][]string{{"update", "s1", "--description", "two"}, {"archive", "s1"}, {"delete", "--yes", "s1"}} {
		wg.Go(func() {
			stdout, stderr, code := gitmemRun(t, env, append([]string{"--lock-wait", "1500ms", "store"}, append(args, "--stores", stores)...)...)
			if want := heldLines(pid, cause, "1.5s"); code != exitLocked || stderr != want || stdout != "" {
				t.Errorf("gitmem store %s: exit %d\nstdout %q\nstderr %q\nwant   %q", strings.Join(args, " "), code, stdout, stderr, want)
			}
		})
	}
	wg.Wait()
	if got := gittest.Git(t, repo, "rev-parse", "HEAD"); got != head {
		t.Fatalf("HEAD moved from %s to %s", head, got)
	}

	free()
	if !call("toolu_3") {
		t.Fatalf("a call once there is room failed:\n%s", log.String())
	}
	stop()
	ids := strings.Fields(gittest.Git(t, repo, "log", "--reverse", "--format=%(trailers:key=Tool-Use-Id,valueonly,separator=)"))
	if got := strings.Join(ids, " "); got != "toolu_1 toolu_2 toolu_3" {
		t.Fatalf("history: %q\nserve's log:\n%s", got, log.String())
	}
	if out := gitmemOut(t, env, "store", "show", "s1", "--stores", stores); !strings.Contains(out, "one") {
		t.Errorf("the store after the commands that gave up:\n%s", out)
	}
	gittest.Fsck(t, repo)
}

// gitmem store update on a full disk: the change is acknowledged into the
// store's write-ahead log, its last checkpoint fails, and the command
// says so and exits 1, as a writing command whose last checkpoint fails
// does (it exited 0, the failure only in an INFO line of its log). The
// next command, once there is room, writes the change to git's files.
func TestStoreUpdateOnAFullDiskExits1(t *testing.T) {
	t.Parallel()
	disk, fill, free := gittest.SmallDisk(t, "8m")
	env := append(testEnv(t), "TZ=UTC")
	stores := filepath.Join(disk, "stores")
	gitmemOut(t, env, "store", "create", "s2", "--stores", stores, "--description", "one")
	fill()
	stdout, stderr, code := gitmemRun(t, env, "store", "update", "s2", "--description", "two", "--stores", stores)
	last := stderr[strings.LastIndex(strings.TrimSuffix(stderr, "\n"), "\n")+1:]
	if want := "gitmem: store s2: the last checkpoint failed ("; code != exitFailure || !strings.HasPrefix(last, want) ||
		!strings.Contains(last, "no space left on device); 1 acknowledged change(s) are safe in the write-ahead log (.git/gitmem/wal) and are recovered at the next start\n") ||
		strings.Contains(last, disk) || !strings.Contains(stdout, "    two\n") {
		t.Fatalf("gitmem store update on a full disk: exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
	free()
	if out := gitmemOut(t, env, "store", "show", "s2", "--stores", stores); !strings.Contains(out, "    two\n") {
		t.Errorf("the store once there is room:\n%s", out)
	}
	repo := filepath.Join(stores, "s2")
	if got := gittest.Git(t, repo, "log", "--format=%s"); got != "memory: store update\nmemory: store create\nmemory: init\n" {
		t.Errorf("history: %q", got)
	}
	gittest.Fsck(t, repo)
}
