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
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MemoryProtocol is the memory protocol of the memory tool's documentation.
// The Messages API adds it to the system prompt when the memory tool is
// present; gitmem gives it to MCP clients as the server's instructions, and
// agent loops put it in their system prompt.
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
// the handler checks which parameters a command needs.
var mcpSchema = map[string]any{
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

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }

// MCPOptions configure the MCP transports.
type MCPOptions struct {
	// NewID makes the tool_use id of a call whose _meta names none
	// (default: NewMCPID).
	NewID func() string
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
	return h.mcpServer(c, opt, nil)
}

// mcpServer is MCPServer; each call holds inflight, when not nil, for
// reading, and none starts once a writer waits for it.
func (h *Handler) mcpServer(c Caller, opt MCPOptions, inflight *sync.RWMutex) *mcp.Server {
	if opt.NewID == nil {
		opt.NewID = NewMCPID
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "gitmem", Version: version()},
		&mcp.ServerOptions{Instructions: MemoryProtocol})
	s.AddTool(&mcp.Tool{
		Name:        ToolName,
		Title:       "Memory",
		Description: mcpDescription,
		InputSchema: mcpSchema,
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
			res = h.Handle(caller, Block{Type: "tool_use", ID: id, Name: ToolName, Input: req.Params.Arguments})
		}
		out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Content}}, IsError: res.IsError}
		if res.ToolUseID != "" {
			out.Meta = mcp.Meta{MetaToolUseID: res.ToolUseID}
		}
		return out, nil
	})
	return s
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
// returns once the calls in hand are finished. A line that is not a
// JSON-RPC message, or is over MaxLineBytes, gets a JSON-RPC error and the
// session goes on (the SDK alone would end it).
func (h *Handler) ServeMCP(ctx context.Context, in io.Reader, out io.Writer, c Caller, opt MCPOptions) error {
	var inflight sync.RWMutex
	defer inflight.Lock() // waits for the calls in hand; refuses later ones
	calls := &unanswered{open: map[any]int{}, changed: make(chan struct{}, 1)}
	w := &lockedWriter{w: out, calls: calls}
	messages, feed := io.Pipe()
	ended := make(chan struct{})
	go screenMessages(in, feed, w, calls, ended)
	t := &mcp.IOTransport{Reader: messages, Writer: w, MaxLineLength: -1} // screenMessages bounds lines
	err := h.mcpServer(c, opt, &inflight).Run(ctx, t)
	close(ended)
	messages.Close()
	if ctx.Err() != nil || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// screenMessages copies the JSON-RPC messages of in, one per line, to
// feed, and answers a line that is not one on w with a JSON-RPC error (the
// id null, or the line's own when it can be read). The end of in reaches
// feed once every call fed has its answer (or the session ended): the SDK
// ends the session at the end of its input at once, and would drop the
// calls a client piped in just before closing its end.
func screenMessages(in io.Reader, feed *io.PipeWriter, w io.Writer, calls *unanswered, ended <-chan struct{}) {
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
			msgs, ok := decodeMessages(trimmed)
			if !ok {
				code, problem = jsonrpc.CodeInvalidRequest, "Invalid Request: the line is not a JSON-RPC 2.0 message"
				break
			}
			calls.sent(msgs)
			if _, werr := feed.Write(append(trimmed, '\n')); werr != nil {
				return // the session has ended
			}
		}
		if problem != "" {
			var id any
			if v := readID(line); v != "" {
				id = v
			}
			reply, _ := json.Marshal(rpcError{"2.0", id, rpcErrorBody{code, problem}})
			w.Write(append(reply, '\n'))
		}
		if err != nil && !errors.Is(err, errTooLong) {
			if errors.Is(err, io.EOF) {
				err = nil
				calls.wait(ended)
			}
			feed.CloseWithError(err)
			return
		}
	}
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

// decodeMessages decodes raw, a JSON-RPC message the SDK reads or a
// non-empty batch of them; ok is false when it is neither.
func decodeMessages(raw []byte) (msgs []jsonrpc.Message, ok bool) {
	if raw[0] != '[' {
		m, err := jsonrpc.DecodeMessage(raw)
		return []jsonrpc.Message{m}, err == nil
	}
	var batch []json.RawMessage
	if json.Unmarshal(raw, &batch) != nil || len(batch) == 0 {
		return nil, false
	}
	for _, b := range batch {
		m, err := jsonrpc.DecodeMessage(b)
		if err != nil {
			return nil, false
		}
		msgs = append(msgs, m)
	}
	return msgs, true
}

// unanswered counts the calls (requests with an id) given to the SDK that
// it has not answered yet, by id.
type unanswered struct {
	mu      sync.Mutex
	open    map[any]int
	changed chan struct{} // a token after an answer
}

func (u *unanswered) sent(msgs []jsonrpc.Message) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, m := range msgs {
		r, ok := m.(*jsonrpc.Request)
		switch {
		case !ok:
		case r.IsCall():
			u.open[r.ID.Raw()]++
		case r.Method == "notifications/cancelled":
			// A cancelled call may get no answer (MCP: it should not).
			var p struct {
				RequestID any `json:"requestId"`
			}
			if json.Unmarshal(r.Params, &p) == nil {
				if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
					delete(u.open, id.Raw())
				}
			}
		}
	}
}

// wrote notes the answers among what the SDK wrote (a message or a batch,
// one line).
func (u *unanswered) wrote(line []byte) {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return
	}
	msgs, _ := decodeMessages(trimmed)
	u.mu.Lock()
	for _, m := range msgs {
		if r, ok := m.(*jsonrpc.Response); ok && u.open[r.ID.Raw()] > 0 {
			if u.open[r.ID.Raw()]--; u.open[r.ID.Raw()] == 0 {
				delete(u.open, r.ID.Raw())
			}
		}
	}
	u.mu.Unlock()
	select {
	case u.changed <- struct{}{}:
	default:
	}
}

// wait returns once every call has its answer, or the session ended.
func (u *unanswered) wait(ended <-chan struct{}) {
	for {
		u.mu.Lock()
		n := len(u.open)
		u.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-u.changed:
		case <-ended:
			return
		}
	}
}

// lockedWriter writes whole messages from several goroutines, and tells
// calls of the answers the SDK writes.
type lockedWriter struct {
	mu    sync.Mutex
	w     io.Writer
	calls *unanswered
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	n, err := l.w.Write(p)
	l.mu.Unlock()
	if l.calls != nil {
		l.calls.wrote(p)
	}
	return n, err
}

func (*lockedWriter) Close() error { return nil }

// MCPPath is where MCPHTTP serves the streamable HTTP transport.
const MCPPath = "/mcp"

// MCPHTTP returns MCP's streamable HTTP transport at /mcp (and GET
// /healthz), behind the same guards as HTTP (token, browser guard,
// limits). Each MCP session keeps its client's name for the Agent trailer;
// sessions idle for an hour are closed. The SDK also refuses a request
// that reaches a loopback address with a non-loopback Host, token or not.
func (h *Handler) MCPHTTP(opt HTTPOptions, mopt MCPOptions) http.Handler {
	opt.defaults()
	s := h.MCPServer(Caller{}, mopt)
	streamable := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{JSONResponse: true, SessionTimeout: time.Hour, MaxRequestBodyBytes: opt.MaxBodyBytes})
	mux := http.NewServeMux()
	// gitmem sends no messages of its own, so it offers no stream to GET
	// (which would only idle against the server's write timeout).
	mux.HandleFunc("GET "+MCPPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "gitmem sends no server-initiated messages: there is no stream to GET", http.StatusMethodNotAllowed)
	})
	mux.Handle(MCPPath, streamable)
	return opt.protect(h.log, opt.Token != "", opt.bearer, mux)
}

// version is gitmem's module version, for the MCP handshake.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
