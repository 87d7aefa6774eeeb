package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
)

// logger is the structured log of --log-level and --log-format, on
// stderr: one line per tool call and per HTTP request, and what the store
// reports.
func logger(c *cli.Context) (*slog.Logger, error) { return loggerTo(c, c.App.ErrWriter) }

// loggerTo is logger writing to w.
func loggerTo(c *cli.Context, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, failf(exitUsage, "--log-level must be debug, info, warn or error, not %q", c.String("log-level"))
	}
	opt := &slog.HandlerOptions{Level: level}
	switch c.String("log-format") {
	case "text":
		return slog.New(slog.NewTextHandler(w, opt)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opt)), nil
	}
	return nil, failf(exitUsage, "--log-format must be text or json, not %q", c.String("log-format"))
}

// droppedNotice is serve's log line saying that n lines were dropped
// because stderr took nothing while logBufferMax bytes waited (logWriter),
// at ERROR in --log-format. It is called by logWriter's one goroutine.
func droppedNotice(c *cli.Context) func(n int) []byte {
	var b bytes.Buffer
	l, err := loggerTo(c, &b)
	if err != nil {
		l = slog.New(slog.NewTextHandler(&b, nil))
	}
	return func(n int) []byte {
		b.Reset()
		l.Error("log lines dropped", "dropped", n, "cause", "stderr took nothing while 1 MiB of lines waited")
		return bytes.Clone(b.Bytes())
	}
}

// logTo is the store's log (gitmem.Options.Logf) on the command's logger:
// the store's messages are information, its own words.
func logTo(c *cli.Context) func(string, ...any) { return logAt(c, slog.LevelInfo) }

// errorLog is the store's log of what the operator must act on
// (gitmem.Options.Errorf), at slog.LevelError for every command: a file
// made by hand that a command's adopt left out (over the largest file
// size, past the most files) is no INFO line, and at --log-level warn
// was no line at all.
func errorLog(c *cli.Context) func(string, ...any) { return logAt(c, slog.LevelError) }

// logAt is the store's log at a level: serve gives the store's errors
// (gitmem.Options.Errorf) at slog.LevelError.
func logAt(c *cli.Context, level slog.Level) func(string, ...any) {
	l, err := logger(c)
	if err != nil {
		l = slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
	}
	return func(format string, args ...any) {
		l.Log(context.Background(), level, strings.TrimPrefix(fmt.Sprintf(format, args...), "gitmem: "))
	}
}

// metrics are what GET /metrics shows (Prometheus text format): tool
// calls by command and outcome, how long commits take, the repository's
// loose objects, size and history-index lag, gc runs, and Go's and the
// process's own. They are VictoriaMetrics' library's, not Prometheus's
// client's: that one's packages (its default registry with the process
// and Go collectors, procfs's regexps, protobuf reading samples of the
// binary) initialise at every start of every command, 0.7-1.5 ms of a
// 7 ms log or show, which have no /metrics.
type metrics struct {
	set    *vm.Set
	commit *vm.PrometheusHistogram
}

// knownCommands bound the command label: a model's typo is "other".
var knownCommands = map[string]bool{"view": true, "create": true, "str_replace": true, "insert": true, "delete": true, "rename": true}

// newMetrics registers the metrics; repo (nil with --stores) adds the
// repository's gauges.
func newMetrics(repo *gitmem.Repo) *metrics {
	vm.ExposeMetadata(true) // # TYPE lines: counters, gauges and the histogram typed
	// 0.5 ms .. 16 s
	buckets := make([]float64, 16)
	for i, b := 0, 0.0005; i < len(buckets); i, b = i+1, b*2 {
		buckets[i] = b
	}
	m := &metrics{set: vm.NewSet()}
	m.commit = m.set.NewPrometheusHistogramExt("gitmem_commit_duration_seconds", buckets)
	for _, trigger := range []string{"start", "background", "exit"} {
		for _, result := range []string{"ok", "error"} {
			m.gcRuns(trigger, result) // shown as 0 before the first run
		}
	}
	if repo != nil {
		size := cached(30*time.Second, func() float64 { return float64(dirSize(filepath.Join(repo.Dir(), ".git"))) })
		m.set.NewGauge("gitmem_loose_objects", func() float64 { return float64(repo.LooseObjects()) })
		m.set.NewGauge("gitmem_repository_size_bytes", size)
		m.set.NewGauge("gitmem_history_index_lag_commits", func() float64 {
			lag, err := repo.IndexLag(context.Background(), 1000) // a scrape has no context: Close ends the wait
			if err != nil {
				return -1
			}
			return float64(lag)
		})
	}
	return m
}

// call counts a tool call (handler.Options.OnCall).
func (m *metrics) call(c handler.Call) {
	cmd := c.Command
	if !knownCommands[cmd] {
		cmd = "other"
	}
	m.set.GetOrCreateCounter(`gitmem_tool_calls_total{command="` + cmd + `",outcome="` + c.Outcome + `"}`).Inc()
	if c.Commit != "" && !c.Replayed {
		m.commit.Update(c.CommitDuration.Seconds())
	}
}

func (m *metrics) gc(trigger string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.gcRuns(trigger, result).Inc()
}

// gcRuns is the counter of packings by trigger and result.
func (m *metrics) gcRuns(trigger, result string) *vm.Counter {
	return m.set.GetOrCreateCounter(`gitmem_gc_runs_total{result="` + result + `",trigger="` + trigger + `"}`)
}

func (m *metrics) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var b bytes.Buffer
		m.set.WritePrometheus(&b)
		vm.WriteGoMetrics(&b)
		vm.WriteProcMetrics(&b)
		vm.WriteFDMetrics(&b)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(b.Bytes())
	})
}

// cached calls fn at most once per ttl.
func cached(ttl time.Duration, fn func() float64) func() float64 {
	var mu sync.Mutex
	var at time.Time
	var v float64
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(at) > ttl {
			v, at = fn(), time.Now()
		}
		return v
	}
}

// dirSize is the total size of the files under dir.
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// writable is GET /readyz: the folder takes a new file (the repository's
// .git/gitmem, or the folder of stores), and check (when set) passes.
func writable(dir string, check func() error) func() error {
	return func() error {
		if check != nil {
			if err := check(); err != nil {
				return err
			}
		}
		f, err := os.CreateTemp(dir, "readyz-*")
		if err != nil {
			return fmt.Errorf("cannot write in %s", filepath.Base(dir))
		}
		f.Close()
		return os.Remove(f.Name())
	}
}
