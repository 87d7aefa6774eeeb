package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gitmem-dev/gitmem/console"
	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
	"github.com/gitmem-dev/gitmem/storesapi"
)

const defaultAddr = "127.0.0.1:7077"

// defaultHTTPAddr lets "--http" stand alone: it then means the default
// address (urfave/cli has no optional flag values).
func defaultHTTPAddr(args []string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		if a == "--" {
			break
		}
		if a == "--http" && (i+1 == len(out) || strings.HasPrefix(out[i+1], "-")) {
			out[i] = "--http=" + defaultAddr
		}
	}
	return out
}

func serveCommand() *cli.Command {
	d := policy.DefaultLimits
	cmd := &cli.Command{
		Name:  "serve",
		Usage: "answer memory tool calls: JSON lines on stdin/stdout, HTTP with --http, MCP with --mcp or --mcp-http",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "http", Usage: "serve HTTP on `ADDR` instead of stdio (alone: " + defaultAddr + "), with the web console at /console/", EnvVars: []string{"GITMEM_HTTP"}},
			&cli.BoolFlag{Name: "mcp", Usage: "speak the Model Context Protocol on stdin/stdout (one tool: memory)"},
			&cli.StringFlag{Name: "mcp-http", Usage: "serve MCP's streamable HTTP transport on `ADDR`, at /mcp"},
			&cli.StringFlag{Name: "token", Usage: "require \"Authorization: Bearer `TOKEN`\" on HTTP", EnvVars: []string{"GITMEM_TOKEN"}},
			&cli.StringFlag{Name: "session", Usage: "Session trailer for stdio calls"},
			&cli.StringFlag{Name: "agent", Usage: "Agent trailer (and author, NAME <NAME@gitmem.invalid>) for stdio calls (MCP: default the client's name/version)"},
			&cli.StringFlag{Name: "author", Usage: "commit author of calls that name no agent, \"Name <email>\" (default: Claude <claude@gitmem.invalid>)"},
			bytesLimit("max-file-bytes", d.MaxFileBytes, "largest memory file (the model's; a larger file made by hand is not committed)"),
			bytesLimit("max-total-bytes", d.MaxTotalBytes, "largest total size of the memory (the model's; a file made by hand past it is not committed)"),
			countLimit("max-files", d.MaxFiles, "most files in the memory (the model's; a file made by hand past it is not committed)"),
			countLimit("max-view-bytes", d.MaxViewBytes, "largest view result before it is paginated"),
			&cli.StringFlag{Name: "expire-every", Usage: "run expire every `DURATION` (with --expire-older-than)"},
			&cli.StringFlag{Name: "expire-older-than", Usage: "what the periodic expire deletes: files unchanged for `DURATION`"},
			&cli.StringSliceFlag{Name: "expire-keep", Usage: "never expire paths matching `GLOB`"},
			&cli.DurationFlag{Name: "adopt-every", Value: 2 * time.Second, Usage: "commit hand edits to memories/ every `DURATION` (0: only before the model touches an edited file, and at start)",
				Action: func(c *cli.Context, v time.Duration) error {
					return zeroOrMore(c, "adopt-every", v, "only before the model touches an edited file, and at start")
				}},
			&cli.IntFlag{Name: "gc-loose", Value: 6700, Usage: "pack in the background once about `N` loose objects pile up (0: never)"},
			&cli.StringFlag{Name: "secret-screening", Value: "off", EnvVars: []string{"GITMEM_SECRET_SCREENING"},
				Usage: "secrets in what the model writes: off, refuse (the call fails) or mask (written as [REDACTED:rule])"},
			storesFlag("serve every store in `DIR` (each store NAME is the repository DIR/NAME) at /v1/stores/NAME/tool_use, with the operator API; needs --http"),
			&cli.StringFlag{Name: "tokens", EnvVars: []string{"GITMEM_TOKENS"}, Usage: "with --stores: the token `FILE` (named, scoped tokens; reloaded on SIGHUP)"},
			&cli.IntFlag{Name: "max-open-stores", Value: 256, Usage: "with --stores: most stores open at once",
				Action: func(c *cli.Context, v int) error { return zeroOrMore(c, "max-open-stores", v, "256") }},
			&cli.DurationFlag{Name: "idle-close", Value: 5 * time.Minute, Usage: "with --stores: close a store unused this long",
				Action: func(c *cli.Context, v time.Duration) error { return zeroOrMore(c, "idle-close", v, "5m") }},
			countLimit("max-memories", storesapi.DefaultMaxMemories, "with --stores: most memories a store holds through the Memory Stores API (0: no limit but --max-files)"),
			&cli.StringFlag{Name: "sync", EnvVars: []string{"GITMEM_SYNC"}, Usage: "share the memory through the git remote `REMOTE`: push new commits in the background, pull on --sync-every"},
			&cli.DurationFlag{Name: "sync-every", Value: 30 * time.Second, Usage: "with --sync: pull (and push) at least every `DURATION`"},
		},
		Action: serve,
	}
	cmd.Flags = append(cmd.Flags, remoteAuthFlags()...)
	return cmd
}

func serve(c *cli.Context) (err error) {
	// The log's lines go out from a goroutine of their own (logWriter):
	// a call's answer does not wait for stderr to take them.
	// A stderr that takes nothing neither holds a call nor the exit: lines
	// past 1 MiB are dropped and counted, and the exit waits at most
	// logFlushWait for it.
	lw := newLogWriter(c.App.ErrWriter, droppedNotice(c))
	c.App.ErrWriter = lw
	defer lw.Close()
	if os.Getenv("GOGC") == "" {
		// serve's heap is small (trees, the history index) and its
		// allocation rate high under load: collecting at three times the
		// live heap rather than twice made about 8% more calls per second
		// under 64 clients, for about a third more memory
		// (docs/performance.md). GOGC, when set, decides.
		debug.SetGCPercent(200)
	}
	// SIGHUP (kill -HUP, or the terminal closing) never ends a server: it
	// reloads the token file where there is one, else is logged.
	hup := notifyHangup()
	defer signal.Stop(hup)
	// SIGINT and SIGTERM too, before the repository is opened: a start
	// under way finishes (a log replayed, the worktree at HEAD), then the
	// clean shutdown.
	ctx, started, stop := stopSignals(logTo(c))
	defer stop()
	author, err := parseAuthor(c.String("author"))
	if err != nil {
		return err
	}
	if c.String("stores") != "" {
		if c.String("sync") != "" {
			return failf(exitUsage, "--sync shares one repository; with --stores, run gitmem sync per store (or a serve --sync per store)")
		}
		return serveStores(ctx, started, c, author, hup)
	}
	if c.Duration("sync-every") <= 0 {
		return failf(exitUsage, "--sync-every must be positive")
	}
	addr, mcpAddr, token := c.String("http"), c.String("mcp-http"), c.String("token")
	modes := 0
	for _, on := range []bool{addr != "", mcpAddr != "", c.Bool("mcp")} {
		if on {
			modes++
		}
	}
	if modes > 1 {
		return failf(exitUsage, "--http, --mcp and --mcp-http are different ways to serve: choose one")
	}
	for _, a := range []string{addr, mcpAddr} {
		if _, port, err := net.SplitHostPort(a); a != "" && (err != nil || port == "") {
			example := strings.TrimSuffix(a, ":") + ":7077"
			if _, err := strconv.ParseUint(a, 10, 16); err == nil { // a port alone
				example = "127.0.0.1:" + a
			}
			return failf(exitUsage, "%q has no port: listen on HOST:PORT, such as %s (--http alone listens on %s)", a, example, defaultAddr)
		}
		if a != "" && token == "" && !isLoopback(a) {
			return failf(exitUsage, "refusing to serve %s without a token: set --token or GITMEM_TOKEN, or listen on a loopback address", a)
		}
	}
	expireEvery, expireAge, err := expireFlags(c)
	if err != nil {
		return err
	}
	keep, err := keepGlobs(c, "expire-keep")
	if err != nil {
		return err
	}
	screen, err := policy.ParseScreenMode(c.String("secret-screening"))
	if err != nil {
		return failf(exitUsage, "--secret-screening: %v", err)
	}
	log, err := logger(c)
	if err != nil {
		return err
	}
	// Listen before anything else: a port already in use fails the start
	// before the repository is created, fetched or merged into. Requests
	// are answered from then on: "starting" until the memory is open.
	var web *httpServer
	listening := ""
	if a := addr + mcpAddr; a != "" {
		ln, err := listen(a)
		if err != nil {
			return err
		}
		web = startHTTP(ctx, ln, startWait)
		defer web.close()
		listening = "http://" + announceAddr(a, ln.Addr())
	}
	dir := c.String("repo")
	logf := logTo(c)
	// Not serve's context: a signal never cuts the start short (see
	// stopSignals; a second one ends the process).
	repo, _, err := gitmem.Init(context.Background(), dir, oneRepo(repoOptions(c, author, listening)))
	if err != nil {
		return storeErr(err, dir)
	}
	defer closeRepo(repo, &err)
	if started(); ctx.Err() != nil {
		return nil // stopped during the start: closed as at any other time
	}
	m := newMetrics(repo)
	h := handler.New(repo, handler.Options{
		Limits: limitFlags(c),
		Author: author,
		Screen: screen,
		Logger: log,
		OnCall: m.call,
	})
	// A short-lived server packs too: at start (in the background: calls
	// are served meanwhile) and at exit, for at most exitPackWait, when
	// loose objects passed --gc-loose, as in the background while it runs.
	// A packing is never needed for what was acknowledged (the
	// write-ahead log holds it until git's files do), so one the stop
	// cuts short (closeRepo stops it) is only redone later.
	pack := func(trigger string) {
		if n := c.Int("gc-loose"); n <= 0 || !repo.GCDue(n) {
			return
		}
		st, err := repo.GC(context.Background(), false)
		switch {
		case errors.Is(err, gitmem.ErrClosed):
			log.Info("packing stopped: the server stops; the next start packs", "trigger", trigger)
			return
		case err != nil:
			m.gc(trigger, err)
			log.Error("gc failed", "trigger", trigger, "err", err)
			return
		}
		m.gc(trigger, nil)
		log.Info("packed loose objects", "trigger", trigger, "objects", st.Packed)
	}
	defer func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			pack("exit")
		}()
		select {
		case <-done:
		case <-time.After(exitPackWait):
		}
	}()
	go onHangup(ctx, hup, nil, logf, nil)
	go maintain(ctx, repo, maintenance{c.Duration("adopt-every"), expireEvery, expireAge, keep, pack}, logf)
	httpOpt := handler.HTTPOptions{Token: token, Metrics: m.handler(), Ready: writable(filepath.Join(dir, ".git", "gitmem"), func() error {
		if _, err := repo.Commit(ctx, "HEAD"); err != nil {
			return errors.New("the repository cannot be read")
		}
		return nil
	})}
	if remote := c.String("sync"); remote != "" {
		stopSync, health, err := startSync(c, repo, remote, logf)
		if err != nil {
			return err
		}
		defer stopSync() // before the repository closes: the last commits go out
		httpOpt.Health = health
	}
	caller := handler.Caller{Session: c.String("session"), Agent: c.String("agent")}
	switch {
	case addr != "":
		var login func(string) (policy.Token, bool)
		if token != "" {
			login = console.SingleToken(token)
		}
		httpOpt.Console = console.New(console.Options{Repo: repo, Login: login, Sync: syncOptions(c), Now: now, Logger: log})
		log.Info("the console is at " + listening + handler.ConsolePath)
		return web.serve(ctx, listening+"/v1/tool_use", h.HTTP(httpOpt), log)
	case mcpAddr != "":
		return web.serve(ctx, listening+handler.MCPPath, h.MCPHTTP(httpOpt, handler.MCPOptions{}), log)
	case c.Bool("mcp"):
		if err := h.ServeMCP(ctx, c.App.Reader, c.App.Writer, caller, handler.MCPOptions{}); err != nil {
			return failf(exitFailure, "mcp: %v", err)
		}
		return nil
	}
	if isTerminal(c.App.Reader) {
		fmt.Fprintln(c.App.ErrWriter, "gitmem: waiting for tool_use blocks on stdin, one JSON object (or content array) per line; results go to stdout; Ctrl-D ends")
	}
	if err := h.ServeStdio(ctx, c.App.Reader, c.App.Writer, caller); err != nil {
		return failf(exitFailure, "stdio: %v", err)
	}
	return nil
}

// repoOptions are what serve opens a repository with: a hand-made file
// over --max-file-bytes is not committed, nor one made past --max-files
// or --max-total-bytes, as the model cannot write one. listening is the URL serve answers on
// meanwhile ("" for stdio), for the notice of a wait for the writer lock.
func repoOptions(c *cli.Context, author gitmem.Signature, listening string) gitmem.Options {
	return gitmem.Options{Author: author, Now: clock(), Logf: logTo(c), Errorf: errorLog(c),
		MaxFileBytes: unlimited(c.Int64("max-file-bytes")), MaxFiles: unlimited(c.Int("max-files")), MaxTotalBytes: unlimited(c.Int64("max-total-bytes")),
		Process: processName(c), Waiting: serveWaiting(logAt(c, slog.LevelWarn), listening)}
}

// serveWriteEvery is how long, at most, a change of serve's one
// repository waits to be written to git's files (gitmem's
// Options.MaterialiseEvery): the calls of a burst share one pack, one move
// of the branch and one pass over the worktree. Written after each call,
// at once, that work took a core beside the next call's: a burst of
// renames answered at 0.49 ms p50 against 0.32 ms so (issue 25,
// docs/performance.md). The write-ahead log stays the commit point; plain
// git beside the repository sees a change up to 10 to 20 ms after its
// answer (the maintenance loop looks every 10 ms). A store of serve
// --stores waits stores.WriteEvery instead.
const serveWriteEvery = 10 * time.Millisecond

// oneRepo is opt for serve's one repository (not a folder of stores):
// its changes are written to git's files every serveWriteEvery.
func oneRepo(opt gitmem.Options) gitmem.Options {
	opt.MaterialiseEvery = serveWriteEvery
	return opt
}

// unlimited is a limit flag's value as gitmem.Options takes it: a flag's
// 0 is no limit, for hand edits as for the model, which Options writes
// as a negative value (its 0 is the default).
func unlimited[T int | int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// serveWaiting logs, a second into a wait for the writer lock another
// process holds (the start beside a serve whose checkpoint fails, which
// keeps the lock until one succeeds), which process holds it and why:
// once per holder, not for every call that waits on the same one. A
// server listening at listening says how it answers meanwhile.
func serveWaiting(logf func(string, ...any), listening string) func(gitmem.Holder) {
	meanwhile := ""
	if listening != "" {
		meanwhile = "; meanwhile " + listening + " answers 503 (starting)"
	}
	var mu sync.Mutex
	var last *gitmem.Holder
	return func(h gitmem.Holder) {
		mu.Lock()
		defer mu.Unlock()
		if last != nil && *last == h {
			return
		}
		last = &h
		logf("waiting for the writer lock of this memory: %s; serve waits as long as it takes%s", heldBy(h), meanwhile)
	}
}

func limitFlags(c *cli.Context) policy.Limits {
	return policy.Limits{
		MaxFileBytes:  c.Int64("max-file-bytes"),
		MaxTotalBytes: c.Int64("max-total-bytes"),
		MaxFiles:      c.Int("max-files"),
		MaxViewBytes:  c.Int("max-view-bytes"),
	}
}

// serveStores serves every store of --stores over HTTP.
func serveStores(ctx context.Context, started func(), c *cli.Context, author gitmem.Signature, hup <-chan os.Signal) (err error) {
	addr := c.String("http")
	switch {
	case addr == "":
		return failf(exitUsage, "--stores serves HTTP: add --http ADDR")
	case c.String("mcp-http") != "" || c.Bool("mcp"):
		return failf(exitUsage, "--stores serves the HTTP tool_use endpoint and the operator API, not MCP")
	case c.String("token") != "":
		return failf(exitUsage, "with --stores, give named, scoped tokens in a token file (--tokens FILE), not --token")
	case c.IsSet("expire-every") || c.IsSet("expire-older-than"):
		return failf(exitUsage, "--expire-every works on one repository; with --stores, expire each store with gitmem --repo DIR/NAME expire (from cron, say)")
	case c.String("tokens") == "" && !isLoopback(addr):
		return failf(exitUsage, "refusing to serve %s without tokens: set --tokens or GITMEM_TOKENS, or listen on a loopback address", addr)
	}
	screen, err := policy.ParseScreenMode(c.String("secret-screening"))
	if err != nil {
		return failf(exitUsage, "--secret-screening: %v", err)
	}
	log, err := logger(c)
	if err != nil {
		return err
	}
	logf := logTo(c)
	ln, err := listen(addr) // first: a busy port fails the start before anything is opened
	if err != nil {
		return err
	}
	defer ln.Close()
	listening := "http://" + announceAddr(addr, ln.Addr())
	var tokens *storesapi.Tokens
	if path := c.String("tokens"); path != "" {
		if tokens, err = storesapi.LoadTokens(path); err != nil {
			return failf(exitUsage, "--tokens: %v", err)
		}
		logf("gitmem: %d token(s) from %s", tokens.Len(), path)
	}
	dir, err := stores.Open(c.String("stores"), stores.Options{
		Repo:    repoOptions(c, author, listening),
		MaxOpen: c.Int("max-open-stores"), IdleClose: c.Duration("idle-close"), GCLoose: c.Int("gc-loose"),
	})
	if err != nil {
		return failf(exitFailure, "%v", err)
	}
	defer func() {
		// A store whose last checkpoint failed keeps its acknowledged
		// changes in its write-ahead log: the exit says so.
		if cerr := dir.Close(); cerr != nil && err == nil {
			err = storesClosed(cerr)
		}
	}()
	if started(); ctx.Err() != nil {
		return nil
	}
	var reload func() error
	if tokens != nil {
		reload = func() error {
			if err := tokens.Reload(); err != nil {
				return fmt.Errorf("the token file was not reloaded, the old tokens stay: %v", err)
			}
			logf("gitmem: SIGHUP: reloaded %d token(s)", tokens.Len())
			return nil
		}
	}
	go onHangup(ctx, hup, reload, logf, logAt(c, slog.LevelError))
	m := newMetrics(nil)
	httpOpt := handler.HTTPOptions{Metrics: m.handler(), Ready: writable(dir.Root(), nil)}
	var login func(string) (policy.Token, bool)
	if tokens != nil {
		login = tokens.Lookup
	}
	httpOpt.Console = console.New(console.Options{Stores: dir, Login: login, Sync: syncOptions(c), Now: now, Logger: log})
	log.Info("the console is at " + listening + handler.ConsolePath)
	h := storesapi.New(dir, storesapi.Options{Limits: limitFlags(c), Author: author, Screen: screen,
		Tokens: tokens, Logger: log, OnCall: m.call, Now: now, HTTP: httpOpt, MaxMemories: maxMemories(c.Int("max-memories"))})
	// Served once the folder is open (milliseconds: a store opens at its
	// first request), so that no request is answered "starting" in the
	// gitmem shape on the Memory Stores routes, whose errors have the
	// Anthropic API's.
	web := startHTTP(ctx, ln, startWait)
	defer web.close()
	return web.serve(ctx, listening+"/v1/stores/{store}/tool_use", h, log)
}

// maxMemories is --max-memories as storesapi.Options takes it (0: none).
func maxMemories(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// stopSignals catches SIGINT and SIGTERM from the start of serve on; the
// first ends ctx. Until started is called (the repository is open: a
// write-ahead log replayed, the worktree brought to HEAD) the start goes
// on, and serve then stops as it does when serving — a signal never cuts
// a recovery short. A second signal during the start ends the process at
// once (a start waiting for another process's writer lock waits for no
// one; what it began, the next start finishes). stop releases the
// signals.
func stopSignals(logf func(string, ...any)) (ctx context.Context, started, stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	up, quit := make(chan struct{}), make(chan struct{})
	var upOnce, quitOnce sync.Once
	go func() {
		select {
		case <-quit:
			return
		case s := <-sigs:
			cancel()
			select {
			case <-up:
				return
			default:
			}
			name := "SIGTERM"
			if s == os.Interrupt {
				name = "SIGINT"
			}
			logf("gitmem: %s during start: serve stops once the repository is open (a recovery under way finishes first); a second signal stops it at once", name)
			select {
			case <-sigs:
				logf("gitmem: stopped during start; the next start finishes what this one began")
				os.Exit(exitFailure)
			case <-up:
			case <-quit:
			}
		}
	}()
	started = func() { upOnce.Do(func() { close(up) }) }
	stop = func() {
		signal.Stop(sigs)
		quitOnce.Do(func() { close(quit) })
		cancel()
	}
	return ctx, started, stop
}

// notifyHangup catches SIGHUP from the start of serve on, so that it
// never ends the process (Go's default for it is to exit).
func notifyHangup() chan os.Signal {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup
}

// onHangup runs reload at each SIGHUP until ctx ends, and logs a failed
// one with errorf (an operator who keeps only problems sees it); with
// nothing to reload (no token file), it logs so.
func onHangup(ctx context.Context, hup <-chan os.Signal, reload func() error, logf, errorf func(string, ...any)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			switch {
			case reload == nil:
				logf("gitmem: SIGHUP: nothing to reload (only serve --stores --tokens reloads its token file); still serving")
			default:
				if err := reload(); err != nil {
					errorf("gitmem: SIGHUP: %v", err)
				}
			}
		}
	}
}

// announceAddr is the address serve says it listens on: the host as the
// operator gave it (0.0.0.0 stays 0.0.0.0, where the listener would say
// [::]; none is 0.0.0.0), with the port the listener has (the one picked
// for port 0).
func announceAddr(given string, ln net.Addr) string {
	host, _, err := net.SplitHostPort(given)
	_, port, lerr := net.SplitHostPort(ln.String())
	if err != nil || lerr != nil {
		return ln.String()
	}
	if host == "" {
		host = "0.0.0.0" // ":7077" listens on every interface; "http://:7077/" is no URL
	}
	return net.JoinHostPort(host, port)
}

// listen opens the TCP listener of addr; serve does it first of all.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, failf(exitFailure, "cannot listen on %s: %v", addr, err)
	}
	return ln, nil
}

// httpServer serves HTTP on serve's listener from the moment it listens.
// While the memory opens (a write-ahead log replayed, the worktree brought
// to HEAD, or a wait for the writer lock another process keeps, which
// lasts as long as that process does), GET /healthz and GET /readyz
// answer 503 "not ready: starting" at once, and any other request waits
// for the start up to startWait, as long as a request waits for room when
// the server is busy, then is served, or answered 503 with Retry-After,
// changing nothing. As many wait as requests may be in flight; the rest
// are answered at once. A listener not served held every connection in its
// backlog, with no answer at all, for as long as the start lasted.
type httpServer struct {
	srv       *http.Server  // every timeout and bound of HTTPOptions.Server
	startWait time.Duration // how long a request waits for the start (serve: startWait)
	routes    atomic.Pointer[http.Handler]
	ready     chan struct{} // closed once routes is set
	waiting   chan struct{} // a token per request waiting for the start
	errc      chan error    // Serve's end
}

// startWait is how long a request that comes during the start waits for it.
const startWait = handler.DefaultQueueWait

// startHTTP serves on ln; requests run in ctx (see serve), and one that
// comes during the start waits up to wait for it (serve: startWait).
func startHTTP(ctx context.Context, ln net.Listener, wait time.Duration) *httpServer {
	s := &httpServer{startWait: wait, ready: make(chan struct{}), waiting: make(chan struct{}, handler.DefaultMaxInflight), errc: make(chan error, 1)}
	s.srv = handler.HTTPOptions{}.Server(s)
	s.srv.BaseContext = func(net.Listener) context.Context { return ctx }
	go func() { s.errc <- s.srv.Serve(ln) }()
	return s
}

func (s *httpServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.routes.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	probe := r.Method == http.MethodGet && (r.URL.Path == "/healthz" || r.URL.Path == "/readyz")
	if !probe && s.wait() {
		defer func() { <-s.waiting }()
		t := time.NewTimer(s.startWait)
		defer t.Stop()
		select {
		case <-s.ready:
			(*s.routes.Load()).ServeHTTP(w, r)
			return
		case <-r.Context().Done():
		case <-t.C:
		}
	}
	w.Header().Set("Retry-After", "1")
	if probe {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("not ready: starting\n"))
		return
	}
	w.Header().Set("x-should-retry", "true")
	handler.HTTPError(w, http.StatusServiceUnavailable, startingMsg)
}

// wait takes a place among the requests waiting for the start, if one is free.
func (s *httpServer) wait() bool {
	select {
	case s.waiting <- struct{}{}:
		return true
	default:
		return false
	}
}

// startingMsg is the answer to a request that came while serve started,
// and waited startWait for it.
const startingMsg = "the server is starting; nothing was changed; retry after 1 s"

// serve answers requests with routes (url: where the memory tool is, for
// the log) until ctx ends. Requests run in ctx: when it ends, the
// requests in flight are answered, but a call that has not reached its
// commit point is stopped with nothing changed (as when its client goes
// away).
func (s *httpServer) serve(ctx context.Context, url string, routes http.Handler, log *slog.Logger) error {
	s.routes.Store(&routes)
	close(s.ready)
	log.Info("serving the memory tool on " + url)
	select {
	case err := <-s.errc:
		return failf(exitFailure, "http: %v", err)
	case <-ctx.Done():
	}
	log.Info("shutting down; finishing requests in flight")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return failf(exitFailure, "http shutdown: %v", err)
	}
	return nil
}

// close stops serving at once (after serve's shutdown: nothing is left;
// after a start that failed: the "starting" answers).
func (s *httpServer) close() { s.srv.Close() }

// isLoopback reports whether addr listens only on a loopback interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func expireFlags(c *cli.Context) (every, age time.Duration, err error) {
	e, a := c.String("expire-every"), c.String("expire-older-than")
	if (e == "") != (a == "") {
		return 0, 0, failf(exitUsage, "--expire-every and --expire-older-than go together")
	}
	if e == "" {
		return 0, 0, nil
	}
	if every, err = policy.ParseDuration(e); err != nil || every <= 0 {
		return 0, 0, failf(exitUsage, "--expire-every: %v", err)
	}
	if age, err = policy.ParseDuration(a); err != nil {
		return 0, 0, failf(exitUsage, "--expire-older-than: %v", err)
	}
	return every, age, nil
}

// gcCheckEvery is how often serve looks whether packing is due (cheap:
// a folder listing); exitPackWait how long a stop waits for packing.
const (
	gcCheckEvery = 5 * time.Second
	exitPackWait = 2 * time.Second
)

type maintenance struct {
	adoptEvery             time.Duration
	expireEvery, expireAge time.Duration
	keep                   []string
	pack                   func(trigger string) // packs when loose objects pile up
}

// maintain runs the periodic expire and packs loose objects when they pile
// up, until ctx ends. Both take the writer lock like any change.
func maintain(ctx context.Context, repo *gitmem.Repo, m maintenance, logf func(string, ...any)) {
	m.pack("start")
	gcTick := time.NewTicker(gcCheckEvery)
	defer gcTick.Stop()
	var adoptTick, expireTick <-chan time.Time
	if m.adoptEvery > 0 {
		t := time.NewTicker(m.adoptEvery)
		defer t.Stop()
		adoptTick = t.C
	}
	if m.expireEvery > 0 {
		t := time.NewTicker(m.expireEvery)
		defer t.Stop()
		expireTick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-adoptTick:
			c, err := repo.Adopt(ctx)
			switch {
			case errors.Is(err, gitmem.ErrNoChange), errors.Is(err, gitmem.ErrClosed), ctx.Err() != nil: // stopped: the next start adopts
			case err != nil:
				logf("gitmem: committing hand edits: %v", err)
			default:
				logf("gitmem: committed hand edits to %d file(s) in %s", len(c.Paths), short(c.Hash))
			}
		case <-expireTick:
			stale, c, err := repo.Expire(ctx, now().Add(-m.expireAge), gitmem.ExpireOptions{Keep: m.keep, Author: gitmem.Signature{Name: "gitmem expire", Email: "gitmem@gitmem.invalid"}})
			switch {
			case ctx.Err() != nil: // stopped: the next run expires
			case err != nil:
				logf("gitmem: periodic expire: %v", err)
			case len(stale) > 0:
				logf("gitmem: expired %d file(s) in commit %s", len(stale), short(c.Hash))
			}
		case <-gcTick.C:
			m.pack("background")
		}
	}
}
