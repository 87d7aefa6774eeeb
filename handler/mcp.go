package handler

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MemoryProtocol is the memory protocol of the memory tool's documentation.
// The Messages API adds it to the system prompt when the memory tool
// (memory_20250818) is present, so an agent loop on the API does not send
// it; an MCP tool is not that tool, so gitmem gives it to MCP clients as
// the server's instructions.
const MemoryProtocol = "IMPORTANT: ALWAYS VIEW YOUR MEMORY DIRECTORY BEFORE DOING ANYTHING ELSE.\n" +
	"MEMORY PROTOCOL:\n" +
	"1. Use the `view` command of your `memory` tool to check for earlier progress.\n" +
	"2. ... (work on the task) ...\n" +
	"     - As you make progress, record status / progress / thoughts etc in your memory.\n" +
	"ASSUME INTERRUPTION: Your context window might be reset at any moment, so you risk losing any progress that is not recorded in your memory directory."

// MetaToolUseID is the key of the tool_use id in an MCP request's and
// result's _meta. A request may also spell it MetaToolUseIDKeys[1:]; the
// first key present wins.
const MetaToolUseID = "tool_use_id"

// MetaToolUseIDKeys are the _meta keys read for a call's tool_use id, in
// order: gitmem's own, its camel-case spelling, and the one Claude Code sends.
var MetaToolUseIDKeys = []string{MetaToolUseID, "toolUseId", "claudecode/toolUseId"}

// mcpDescription tells a model what the memory tool does; MCP clients show
// it with the tool.
const mcpDescription = "Your persistent memory: a directory, /memories, that outlives this conversation. " +
	"Check it before you start and record progress and what you learn as you go. Commands: " +
	"view (a folder two levels deep, or a file with line numbers; view_range [start, end] for some lines), " +
	"create (a new file with file_text), str_replace (replace old_str, which must occur exactly once, with new_str), " +
	"insert (insert_text after line insert_line; 0 is the top), delete (a file or folder), rename (old_path to new_path). " +
	"Every path starts with /memories. Every change is a git commit that can be audited and undone."

// mcpSchema is the memory tool's input: the six memory_20250818 commands.
// It is flat (no oneOf), as the Messages API requires of a tool's schema;
// the handler checks which parameters a command needs. (Made per server,
// not in every command's start-up.)
func mcpSchema() map[string]any {
	return map[string]any{
		"type":     "object",
		"required": []string{"command"},
		"properties": map[string]any{
			"command": map[string]any{
				"type":        "string",
				"enum":        []string{"view", "create", "str_replace", "insert", "delete", "rename"},
				"description": "The operation to perform.",
			},
			"path":        str("view, create, str_replace, insert, delete: the file or folder, starting with /memories."),
			"view_range":  map[string]any{"type": "array", "items": map[string]any{"type": "integer"}, "minItems": 2, "maxItems": 2, "description": "view of a file: [start_line, end_line], 1-based and inclusive; -1 as end_line means the last line."},
			"file_text":   str("create: the content of the new file."),
			"old_str":     str("str_replace: the exact text to replace; it must occur once in the file."),
			"new_str":     str("str_replace: the text to put in its place."),
			"insert_line": map[string]any{"type": "integer", "description": "insert: the line after which insert_text goes; 0 is the top of the file."},
			"insert_text": str("insert: the text to insert."),
			"old_path":    str("rename: the file or folder to rename."),
			"new_path":    str("rename: its new path."),
		},
	}
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }

// MCPOptions configure the MCP transports.
type MCPOptions struct {
	// NewID makes the tool_use id of a call whose _meta names none
	// (default: NewMCPID).
	NewID func() string
}

func (o *MCPOptions) defaults() {
	if o.NewID == nil {
		o.NewID = NewMCPID
	}
}

// NewMCPID returns a fresh tool_use id for an MCP call that brought none:
// "mcp_" and 24 random lowercase hex digits.
func NewMCPID() string {
	var b [12]byte
	rand.Read(b[:])
	return "mcp_" + hex.EncodeToString(b[:])
}

// MCPServer returns an MCP server with one tool, memory, answered by h.
// Each call's tool_use id is taken from the request's _meta
// (MetaToolUseIDKeys) or made by opt.NewID; the Session and Agent
// trailers are c's, else the Gitmem-Session and Gitmem-Agent headers of an
// HTTP request, and the Agent is otherwise the MCP client's
// "name/version". The result's text is the handler's exact string, an
// error result has isError set, and the id used is in the result's _meta.
func (h *Handler) MCPServer(c Caller, opt MCPOptions) *mcp.Server {
	return h.mcpServer(c, opt, nil, nil)
}

// mcpServer is MCPServer; each call holds inflight, when not nil, for
// reading, and none starts once a writer waits for it. calls, when not
// nil, gives the calls of a session (by its id) a transport follows: a
// call runs in the context they give it (mcpCalls.start).
func (h *Handler) mcpServer(c Caller, opt MCPOptions, inflight *sync.RWMutex, calls func(session string) *mcpCalls) *mcp.Server {
	opt.defaults()
	s := mcp.NewServer(&mcp.Implementation{Name: "gitmem", Version: version()},
		&mcp.ServerOptions{Instructions: MemoryProtocol})
	s.AddTool(&mcp.Tool{
		Name:        ToolName,
		Title:       "Memory",
		Description: mcpDescription,
		InputSchema: mcpSchema(),
		Annotations: &mcp.ToolAnnotations{Title: "Memory", DestructiveHint: new(true), OpenWorldHint: new(false)},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if inflight != nil {
			if !inflight.TryRLock() {
				return nil, errors.New("gitmem is shutting down; nothing was changed")
			}
			defer inflight.RUnlock()
		}
		caller := c
		if req.Extra != nil && req.Extra.Header != nil {
			caller.Session = firstOf(caller.Session, req.Extra.Header.Get(HeaderSession))
			caller.Agent = firstOf(caller.Agent, req.Extra.Header.Get(HeaderAgent))
		}
		if info := req.ClientInfo(); caller.Agent == "" && info != nil && info.Name != "" {
			caller.Agent = info.Name
			if info.Version != "" {
				caller.Agent += "/" + info.Version
			}
		}
		var res Result
		if id, err := metaID(req.Params.Meta); err != nil {
			res = errorResult("", err.Error())
		} else {
			if id == "" {
				id = opt.NewID()
			}
			if m := sessionCalls(calls, req); m != nil {
				var done func()
				ctx, done = m.start(ctx, id)
				defer done()
			}
			res = h.Handle(ctx, caller, Block{Type: "tool_use", ID: id, Name: ToolName, Input: req.Params.Arguments})
		}
		out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Content}}, IsError: res.IsError}
		if res.ToolUseID != "" {
			out.Meta = mcp.Meta{MetaToolUseID: res.ToolUseID}
		}
		return out, nil
	})
	return s
}

// sessionCalls returns the calls of req's session a transport follows,
// or nil.
func sessionCalls(calls func(string) *mcpCalls, req *mcp.CallToolRequest) *mcpCalls {
	if calls == nil || req.Session == nil {
		return nil
	}
	return calls(req.Session.ID())
}

// firstOf returns the first of a and b that is not empty.
func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// metaID reads the tool_use id from a request's _meta.
func metaID(meta mcp.Meta) (string, error) {
	for _, key := range MetaToolUseIDKeys {
		v, ok := meta[key]
		if !ok {
			continue
		}
		if id, ok := v.(string); ok && id != "" {
			return id, nil
		}
		return "", fmt.Errorf("_meta %q must be a non-empty string, the call's tool_use id", key)
	}
	return "", nil
}

// ServeMCP speaks MCP over in and out (newline-delimited JSON-RPC, the
// stdio transport) until the client closes in or ctx is cancelled. It
// returns once the calls in hand are finished.
//
// Calls are answered in the order the client sent them: a message is
// handed to the SDK (which would run calls concurrently) only once every
// call sent before it has its answer, so a view sent right after a write,
// without waiting for its answer, sees it. A notifications/cancelled is
// taken at once: the call it names is not run if its turn has not come,
// and is stopped if its change is not yet committed (mcpcalls.go); a
// cancelled call gets no answer (MCP). A line that is not a JSON-RPC
// message, or is over MaxLineBytes, gets a JSON-RPC error and the session
// goes on (the SDK alone would end it).
func (h *Handler) ServeMCP(ctx context.Context, in io.Reader, out io.Writer, c Caller, opt MCPOptions) error {
	opt.defaults()
	var inflight sync.RWMutex
	defer inflight.Lock() // waits for the calls in hand; refuses later ones
	messages, feed := io.Pipe()
	conn := &stdioConn{feed: feed, out: out, calls: newMCPCalls(opt.NewID), running: map[any]bool{}}
	conn.cond.L = &conn.mu
	go conn.read(in)
	go conn.hand()
	t := &mcp.IOTransport{Reader: messages, Writer: conn, MaxLineLength: -1} // read bounds lines
	err := h.mcpServer(c, opt, &inflight, func(string) *mcpCalls { return conn.calls }).Run(ctx, t)
	conn.end()
	messages.Close()
	if ctx.Err() != nil || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// stdioConn stands between an MCP client's stream and the SDK: it screens
// the client's lines, hands them to the SDK one call at a time, in order,
// and writes the SDK's answers.
type stdioConn struct {
	feed  *io.PipeWriter // to the SDK
	out   io.Writer      // to the client
	calls *mcpCalls
	wmu   sync.Mutex // one write to out at a time

	mu       sync.Mutex
	cond     sync.Cond    // (mu) a change of the fields below
	queue    []*stdioLine // lines not yet handed to the SDK, in the order sent
	running  map[any]bool // calls handed to the SDK and not answered, by JSON-RPC id: cancelled?
	closed   bool         // the client's input ended (closeErr: how)
	closeErr error
	ended    bool // the session ended
	noBatch  bool // the protocol version agreed at initialize has no batches
}

// batchless is the first MCP protocol version without JSON-RPC batches;
// the SDK ends a stdio session at a batch line from then on, so such a
// line is answered here and never handed to it.
const batchless = "2025-06-18"

// noBatchProblem answers a batch line once the session's version has none.
const noBatchProblem = "Invalid Request: JSON-RPC batching is not supported in MCP " + batchless + " and later"

// stdioLine is a line of the client's or the SDK's: one JSON-RPC message,
// or a batch.
type stdioLine struct {
	batch bool
	raws  []json.RawMessage
	msgs  []jsonrpc.Message
}

func (l *stdioLine) bytes() []byte {
	if !l.batch {
		return append(slices.Clip(l.raws[0]), '\n')
	}
	b := []byte{'['}
	for i, m := range l.raws {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m...)
	}
	return append(b, ']', '\n')
}

// call returns the i-th message when it is a call (a request with an id).
func (l *stdioLine) call(i int) (*jsonrpc.Request, bool) {
	r, ok := l.msgs[i].(*jsonrpc.Request)
	return r, ok && r.IsCall()
}

// read takes the client's lines in: a line that is not a JSON-RPC message
// is answered with a JSON-RPC error (the id null, or the line's own when
// it can be read), a cancel is taken at once, anything else is queued.
func (s *stdioConn) read(in io.Reader) {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := readLine(r)
		code, problem := 0, ""
		switch trimmed := bytes.TrimSpace(line); {
		case errors.Is(err, errTooLong):
			code, problem = jsonrpc.CodeInvalidRequest, "Invalid Request: the message is longer than 16 MiB; it was skipped"
		case len(trimmed) == 0:
		case !json.Valid(trimmed):
			code, problem = jsonrpc.CodeParseError, "Parse error: the line is not JSON"
		default:
			l, ok := decodeLine(trimmed)
			if !ok {
				code, problem = jsonrpc.CodeInvalidRequest, "Invalid Request: the line is not a JSON-RPC 2.0 message"
				break
			}
			if !s.take(l) {
				return // the session has ended
			}
		}
		if problem != "" {
			var id any
			if v := readID(line); v != "" {
				id = v
			}
			reply, _ := json.Marshal(rpcError{"2.0", id, rpcErrorBody{code, problem}})
			s.write(append(reply, '\n'))
		}
		if err != nil && !errors.Is(err, errTooLong) {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			s.mu.Lock()
			s.closed, s.closeErr = true, err
			s.cond.Broadcast()
			s.mu.Unlock()
			return
		}
	}
}

// decodeLine decodes a JSON-RPC message the SDK reads, or a non-empty
// batch of them; ok is false when raw is neither.
func decodeLine(raw []byte) (l *stdioLine, ok bool) {
	l = &stdioLine{raws: []json.RawMessage{raw}}
	if raw[0] == '[' {
		l.raws = nil
		if json.Unmarshal(raw, &l.raws) != nil || len(l.raws) == 0 {
			return nil, false
		}
		l.batch = true
	}
	for _, m := range l.raws {
		msg, err := jsonrpc.DecodeMessage(m)
		if err != nil {
			return nil, false
		}
		l.msgs = append(l.msgs, msg)
	}
	return l, true
}

// take queues a line (its tools/call requests given their tool_use ids),
// or takes a cancel (a line of one notifications/cancelled) at once. It
// reports false once the session has ended.
func (s *stdioConn) take(l *stdioLine) bool {
	if r, ok := l.msgs[0].(*jsonrpc.Request); ok && !l.batch && r.Method == "notifications/cancelled" {
		return s.cancel(r)
	}
	for i := range l.msgs {
		if r, ok := l.call(i); ok && r.Method == "tools/call" {
			l.raws[i] = s.calls.assign(r, l.raws[i])
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, l)
	s.cond.Broadcast()
	return !s.ended
}

// cancel takes a notifications/cancelled: the call it names is dropped
// from the queue if its turn has not come, else stopped if it is running
// and its change is not yet committed (mcpCalls.cancel); either way its
// answer, if it gets one, is not written. The SDK is not told: it has
// nothing more to do.
func (s *stdioConn) cancel(r *jsonrpc.Request) bool {
	id, ok := cancelledID(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok {
		return !s.ended
	}
	// The mark goes first, then the call is stopped, both under mu: a
	// call stopped while it waits is answered at once, and Write (which
	// reads the mark under mu) must find it. Stopped first, its answer
	// could be written before the mark was made. (mu, then the calls'
	// lock: the calls never take mu.)
	_, handed := s.running[id]
	if handed {
		s.running[id] = true
	}
	s.calls.cancel(id)
	if handed {
		return !s.ended
	}
	for qi, q := range s.queue {
		for i := range q.msgs {
			if c, ok := q.call(i); ok && c.ID.Raw() == id {
				s.calls.done(id) // never to start
				q.raws, q.msgs = slices.Delete(q.raws, i, i+1), slices.Delete(q.msgs, i, i+1)
				if len(q.msgs) == 0 {
					s.queue = slices.Delete(s.queue, qi, qi+1)
				}
				return !s.ended
			}
		}
	}
	return !s.ended
}

// cancelledID reads the id of the call a notifications/cancelled names
// (jsonrpc.ID.Raw).
func cancelledID(r *jsonrpc.Request) (any, bool) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(r.Params, &p) != nil {
		return nil, false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	return id.Raw(), err == nil && id.IsValid()
}

// hand gives the SDK the queued lines, each once every call handed before
// it has its answer; at the end of the client's input, once the last is
// answered, it ends the SDK's input too (the SDK would end the session at
// the end of its input at once, and drop the calls in hand).
func (s *stdioConn) hand() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		for !s.ended && (len(s.running) > 0 || len(s.queue) == 0 && !s.closed) {
			s.cond.Wait()
		}
		if s.ended {
			return
		}
		if len(s.queue) == 0 { // closed, and every call answered
			s.feed.CloseWithError(s.closeErr)
			return
		}
		l := s.queue[0]
		s.queue = slices.Delete(s.queue, 0, 1)
		if l.batch && s.noBatch {
			for i := range l.msgs {
				if c, ok := l.call(i); ok {
					s.calls.done(c.ID.Raw())
				}
			}
			s.mu.Unlock()
			reply, _ := json.Marshal(rpcError{"2.0", nil, rpcErrorBody{jsonrpc.CodeInvalidRequest, noBatchProblem}})
			s.write(append(reply, '\n'))
			s.mu.Lock()
			continue
		}
		for i := range l.msgs {
			if c, ok := l.call(i); ok {
				s.running[c.ID.Raw()] = false
			}
		}
		s.mu.Unlock()
		_, err := s.feed.Write(l.bytes())
		s.mu.Lock()
		if err != nil {
			return // the session has ended
		}
	}
}

// Write writes a line of the SDK's (a message or a batch) to the client,
// and notes the answers it holds, and the protocol version the answer to
// initialize agrees. An answer to a cancelled call is not written.
func (s *stdioConn) Write(p []byte) (int, error) {
	var ids []any
	noBatch := false
	if trimmed := bytes.TrimSpace(p); len(trimmed) > 0 {
		if l, ok := decodeLine(trimmed); ok {
			for _, m := range l.msgs {
				if r, ok := m.(*jsonrpc.Response); ok {
					ids = append(ids, r.ID.Raw())
					noBatch = noBatch || agreesNoBatch(r.Result)
				}
			}
		}
	}
	s.mu.Lock()
	s.noBatch = s.noBatch || noBatch
	silent := len(ids) > 0
	for _, id := range ids {
		silent = silent && s.running[id]
	}
	s.mu.Unlock()
	n, err := len(p), error(nil)
	if !silent {
		n, err = s.write(p)
	}
	s.calls.done(ids...)
	s.mu.Lock()
	for _, id := range ids {
		delete(s.running, id)
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	return n, err
}

// agreesNoBatch reports whether result is an answer to initialize that
// agrees a protocol version without batches (versions are dates, which
// compare as text, as the SDK compares them).
func agreesNoBatch(result json.RawMessage) bool {
	if !bytes.Contains(result, []byte(`"protocolVersion"`)) {
		return false
	}
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	return json.Unmarshal(result, &r) == nil && r.ProtocolVersion >= batchless
}

func (s *stdioConn) write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.out.Write(p)
}

func (*stdioConn) Close() error { return nil }

// end notes that the session ended.
func (s *stdioConn) end() {
	s.mu.Lock()
	s.ended = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

type rpcError struct {
	JSONRPC string       `json:"jsonrpc"`
	ID      any          `json:"id"`
	Error   rpcErrorBody `json:"error"`
}

type rpcErrorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// MCPPath is where MCPHTTP serves the streamable HTTP transport.
const MCPPath = "/mcp"

// MCPHTTP returns MCP's streamable HTTP transport at /mcp (and GET
// /healthz), behind the same guards as HTTP (token, browser guard,
// limits). Each MCP session keeps its client's name for the Agent trailer;
// sessions idle for an hour are closed. The SDK also refuses a request
// that reaches a loopback address with a non-loopback Host, token or not.
func (h *Handler) MCPHTTP(opt HTTPOptions, mopt MCPOptions) http.Handler {
	opt.defaults()
	mopt.defaults()
	sessions := &mcpSessions{newID: mopt.NewID, m: map[string]*mcpSession{}}
	s := h.mcpServer(Caller{}, mopt, nil, sessions.calls)
	streamable := sessions.screen(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{JSONResponse: true, SessionTimeout: time.Hour, MaxRequestBodyBytes: opt.MaxBodyBytes}))
	mux := http.NewServeMux()
	// gitmem sends no messages of its own, so it offers no stream to GET
	// (which would only idle against the server's write timeout).
	mux.HandleFunc("GET "+MCPPath, func(w http.ResponseWriter, r *http.Request) {
		methodNotAllowed(w, r, "POST, DELETE", "gitmem sends no server-initiated messages, so there is no stream to GET")
	})
	mux.Handle(MCPPath, streamable)
	return opt.Protect(h.log, opt.Token != "", opt.bearer, mux)
}

// version is gitmem's module version, for the MCP handshake.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
