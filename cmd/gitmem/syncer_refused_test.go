package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A remote whose history is refused (here another memory's: unrelated
// histories; objects git fsck refuses and a history redacted here are
// refused alike) is not retried at the failure pace: trying again changes
// nothing until the remote changes. serve --sync logs the refusal at
// ERROR once and tries again only after at least a minute (growing), and
// gitmem status says the last attempt was refused. (Finding N7 of the
// attacker pass: logged at INFO and retried every 30 s forever.)
func TestServeSyncRefusalIsAnErrorOnceAndBacksOff(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	dir := gittest.TempDir(t)
	other, mem, bare := filepath.Join(dir, "other"), filepath.Join(dir, "mem"), filepath.Join(dir, "remote.git")
	// Two memories with a change each, made in this process (5 gitmem
	// processes were a second and a half of CPU).
	for _, repo := range []string{other, mem} {
		now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
		if repo == other { // another first commit: another history
			now = now.AddDate(0, -1, 0)
		}
		r, _, err := gitmem.Init(context.Background(), repo, gitmem.Options{Now: func() time.Time { return now },
			Operator: gitmem.Signature{Name: "Olive Operator", Email: "olive@example.com"}, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Update(context.Background(), gitmem.Meta{Subject: "create", Trailers: []gitmem.Trailer{{Key: gitmem.TrailerToolUseID, Value: "toolu_1"}}},
			func(tx *gitmem.Tx) error { return tx.WriteFile(filepath.Base(repo)+".md", []byte("x\n")) })
		if err == nil && repo == mem {
			err = r.AddRemote("origin", bare)
		}
		if err := errors.Join(err, r.Close()); err != nil {
			t.Fatal(err)
		}
	}
	gittest.Git(t, "", "clone", "-q", "--bare", other, bare)

	var log lockedBuffer
	base, _, stop := startHTTPProcessTo(t, &log, env, mem, "--http", "--sync", "origin", "--sync-every", "1s")
	// The first refusal (a minute: a bound for a hang, on a loaded
	// machine), then 2.5 seconds more: with the failure pace (1 s, at
	// most 1.25 s, at --sync-every 1s) one try more or two.
	for hang := time.Now().Add(time.Minute); !strings.Contains(log.String(), "shares no commit"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(hang) {
			t.Fatalf("no refusal logged in a minute:\n%s", log.String())
		}
	}
	time.Sleep(2500 * time.Millisecond)
	res, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	health, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(health), "sync-refused: ") {
		t.Errorf("/healthz does not report the refusal:\n%s", health)
	}
	stop()
	var errors, tries []string
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "shares no commit") || strings.Contains(line, "sync with origin") && !strings.Contains(line, "sharing") {
			tries = append(tries, line)
			if strings.Contains(line, "level=ERROR") {
				errors = append(errors, line)
			}
		}
	}
	if len(errors) != 1 || len(tries) != 1 {
		t.Errorf("the refusal logged %d time(s), %d at ERROR; want once, at ERROR:\n%s", len(tries), len(errors), strings.Join(tries, "\n"))
	}
	if len(errors) == 1 && !strings.Contains(errors[0], "next try is in 1m") {
		t.Errorf("the refusal does not say the next try comes in a minute or more: %s", errors[0])
	}
	status := gitmemOut(t, env, "--repo", mem, "status", "origin")
	if !strings.Contains(status, "was refused: ") || !strings.Contains(status, "shares no commit") || !strings.Contains(status, "trying again changes nothing until the remote does") {
		t.Errorf("gitmem status does not say the sync is refused:\n%s", status)
	}
	if json := gitmemOut(t, env, "--repo", mem, "status", "--json", "origin"); !strings.Contains(json, `"refused":true`) {
		t.Errorf("gitmem status --json: %s", json)
	}
}
