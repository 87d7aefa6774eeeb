package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
)

// serve --sync REMOTE: the memory is shared in the background. New
// commits are pushed once a burst of changes has been quiet for a moment
// (one push for a burst, not one per change), and the remote is pulled on
// an interval. A sync runs beside the tool calls, never in their way: it
// takes the writer lock only to commit a merge, and a remote that fails
// or hangs is retried with a growing pause, reported in the log and in
// /healthz. A remote whose history is refused (gitmem.Refused: objects
// git fsck refuses, unrelated histories, a history redacted here) is no
// failure that passes: it is logged at ERROR once, and tried again at
// growing intervals from a minute to an hour.

const (
	syncQuiet   = time.Second      // push a burst once it has been quiet this long ...
	syncMaxWait = 10 * time.Second // ... or once its first change has waited this long
	syncPoll    = 250 * time.Millisecond
	syncTimeout = 2 * time.Minute // one sync, fetch to push
	// A refused remote is tried again after syncRefusedMin (or the
	// interval, when longer), twice that after the next refusal, and so
	// on up to syncRefusedMax (or the interval).
	syncRefusedMin = time.Minute
	syncRefusedMax = time.Hour
)

type syncer struct {
	repo    *gitmem.Repo
	remote  string
	every   time.Duration
	timeout time.Duration // one sync (syncTimeout)
	opt     gitmem.SyncOptions
	dir     string // the repository, for the wording of errors (shareErr)
	logf    func(string, ...any)
	errorf  func(string, ...any) // what the operator must see (a refusal); logf if nil
	now     func() time.Time

	mu        sync.Mutex
	lastOK    time.Time
	lastErr   string
	lastErrAt time.Time
	failures  int
	refused   bool   // the last failure was a refusal (gitmem.Refused)
	told      string // the refusal last logged at ERROR
	retries   int    // push retries since start (the remote moved)
}

// run syncs until ctx ends, then once more (bounded), so that what was
// committed last reaches the remote before the server exits.
func (s *syncer) run(ctx context.Context) {
	tick := time.NewTicker(syncPoll)
	defer tick.Stop()
	var seen, pushed string
	var firstChange, lastChange, nextTry time.Time
	nextPull := s.now() // at start
	for {
		select {
		case <-ctx.Done():
			if head := s.head(); head != pushed && head != "" && !s.isRefused() {
				fctx, cancel := context.WithTimeout(context.Background(), min(s.timeout, 10*time.Second))
				if !s.once(fctx) {
					s.logf("gitmem: the last sync with %s before stopping failed: %s; the commits stay here and go out at the next sync", s.remote, s.lastError())
				}
				cancel()
			}
			return
		case <-tick.C:
		}
		now := s.now()
		head := s.head()
		if head != seen {
			seen, lastChange = head, now
			if firstChange.IsZero() {
				firstChange = now
			}
		}
		burst := head != pushed && (now.Sub(lastChange) >= syncQuiet || now.Sub(firstChange) >= syncMaxWait)
		if !(burst || !now.Before(nextPull)) || now.Before(nextTry) {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, s.timeout)
		ok := s.once(sctx)
		cancel()
		if ctx.Err() != nil {
			continue // stopping: the last sync comes above
		}
		if ok {
			pushed, firstChange, nextTry = s.head(), time.Time{}, time.Time{}
			nextPull = now.Add(s.every)
			continue
		}
		nextTry = now.Add(s.failed())
	}
}

// failed logs the failure of the last sync and returns how long to wait
// before the next try: 1 s, 2 s, 4 s ... up to the interval; after a
// refusal, syncRefusedMin, twice that ... up to syncRefusedMax (or the
// interval, when longer), logged at ERROR once (and again when the reason
// changes). At random within a quarter more, so that many servers do not
// retry in step.
func (s *syncer) failed() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, refused := s.failures, s.refused
	var wait time.Duration
	if refused {
		wait = min(max(s.every, syncRefusedMin)<<min(n-1, 10), max(s.every, syncRefusedMax))
	} else {
		wait = min(time.Second<<min(n-1, 16), max(s.every, time.Second))
	}
	wait += time.Duration(rand.Int64N(int64(wait)/4 + 1))
	switch {
	case !refused:
		s.told = ""
		s.logf("gitmem: sync with %s failed (%d in a row; next try in %s): %s", s.remote, n, wait.Round(time.Second), s.lastErr)
	case s.told != s.lastErr:
		s.told = s.lastErr
		errorf := s.errorf
		if errorf == nil {
			errorf = s.logf
		}
		errorf("gitmem: sync with %s refused: %s; trying again changes nothing until the remote does: the next try is in %s, and they come further apart, up to %s (gitmem status shows the refusal)",
			s.remote, s.lastErr, wait.Round(time.Minute), max(s.every, syncRefusedMax))
	default:
		s.logf("gitmem: sync with %s still refused (%d in a row; next try in %s)", s.remote, n, wait.Round(time.Minute))
	}
	return wait
}

// isRefused reports whether the last sync was refused.
func (s *syncer) isRefused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failures > 0 && s.refused
}

func (s *syncer) head() string {
	v, err := s.repo.Snapshot(context.Background())
	if err != nil {
		return ""
	}
	return v.Head()
}

// once syncs and records the outcome; it reports whether it worked.
func (s *syncer) once(ctx context.Context) bool {
	res, err := s.repo.Sync(ctx, s.remote, s.opt)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retries += res.Retries
	if err != nil {
		s.failures++
		s.refused = gitmem.Refused(err)
		s.lastErr, s.lastErrAt = shareErr(err, "sync", s.remote, s.dir).Error(), s.now()
		return false
	}
	if s.failures > 0 {
		s.logf("gitmem: sync with %s works again", s.remote)
	}
	s.failures, s.refused, s.told, s.lastOK = 0, false, "", s.now()
	var did []string
	switch {
	case res.FastForward != "":
		did = append(did, fmt.Sprintf("took %d commit(s)", res.Merged))
	case res.Merge != "":
		did = append(did, mergedWhat(res))
	}
	if len(res.Conflicts) > 0 {
		var cs []string
		for _, k := range res.Conflicts {
			cs = append(cs, k.Kind+" /memories/"+k.Path)
		}
		did = append(did, "conflicts kept both sides: "+strings.Join(cs, ", "))
	}
	if res.Redactions > 0 {
		did = append(did, fmt.Sprintf("applied %d redaction(s)", res.Redactions))
	}
	if res.Pushed > 0 {
		did = append(did, fmt.Sprintf("pushed %d commit(s)", res.Pushed))
	}
	if res.Retries > 0 {
		did = append(did, fmt.Sprintf("%d retry(ies): the remote moved", res.Retries))
	}
	if len(did) > 0 {
		s.logf("gitmem: sync with %s: %s", s.remote, strings.Join(did, "; "))
	}
	return true
}

func (s *syncer) lastError() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// health is what /healthz adds: the last successful sync, the commits not
// yet pushed, the last error (if the last sync failed).
func (s *syncer) health(ctx context.Context) []string {
	s.mu.Lock()
	lastOK, lastErr, lastErrAt, failures, retries := s.lastOK, s.lastErr, s.lastErrAt, s.failures, s.retries
	s.mu.Unlock()
	last := "never"
	if !lastOK.IsZero() {
		last = lastOK.UTC().Format(time.RFC3339)
	}
	unpushed := "unknown"
	if st, err := s.repo.Status(ctx, s.remote); err == nil {
		unpushed = fmt.Sprint(st.Ahead)
	}
	out := []string{"sync-remote: " + s.remote, "sync-last-success: " + last, "sync-unpushed: " + unpushed,
		fmt.Sprintf("sync-push-retries: %d", retries)}
	if failures > 0 {
		out = append(out, fmt.Sprintf("sync-failures: %d", failures), "sync-last-error: "+lastErrAt.UTC().Format(time.RFC3339)+" "+lastErr)
		if s.isRefused() {
			out = append(out, "sync-refused: the remote's history is refused; trying again changes nothing until the remote does")
		}
	}
	return out
}

// startSync starts serve's background sync with remote; stop ends it
// after a last sync (bounded), health reports it.
func startSync(c *cli.Context, repo *gitmem.Repo, remote string, logf func(string, ...any)) (stop func(), health func(context.Context) []string, err error) {
	if _, err := repo.Status(c.Context, remote); err != nil {
		return nil, nil, shareErr(err, "sync", remote, c.String("repo"))
	}
	s := &syncer{repo: repo, remote: remote, every: c.Duration("sync-every"), timeout: syncTimeout, opt: syncOptions(c), dir: c.String("repo"),
		logf: logf, errorf: logAt(c, slog.LevelError), now: time.Now}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(ctx)
	}()
	logf("gitmem: sharing the memory through %s (pull every %s, push after each burst of changes)", remote, s.every)
	return func() { cancel(); <-done }, s.health, nil
}
