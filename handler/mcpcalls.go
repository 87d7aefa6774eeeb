package handler

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Cancellation and retries of MCP calls. The transports (ServeMCP's
// stdio connection, MCPHTTP's sessions) see every message a client sends,
// in order, before the SDK does; each session's mcpCalls follows its
// tools/call requests by JSON-RPC id:
//
//   - A call without a tool_use id in its _meta is given one here, in its
//     _meta, before the SDK sees it: so the transport knows the tool_use id
//     of every call, and a retry can take the id of the call it repeats.
//   - A notifications/cancelled stops the call it names: one not started
//     yet never starts, and one running is stopped if its change is not yet
//     in the write-ahead log (the handler checks, under the writer lock,
//     just before the commit point). A change already committed stays.
//   - Since the client ignores whatever answer a cancelled call gets (MCP),
//     it cannot know whether the call was applied. Its retry — the same
//     tool call (name and arguments) without a tool_use id, sent later in
//     the session, whatever other calls came in between — takes the
//     cancelled call's tool_use id when that call had started (so may have
//     committed): the store answers the retry from its commit if it was
//     applied, and applies the retry under that id if not. A call
//     cancelled before it started was not applied: its retry is a new
//     call. Either way the change is applied once.

// mcpRecent bounds what a session remembers: a cancel can name any call
// not yet answered and the last mcpRecent answered ones, and the last
// mcpRecent calls cancelled after they started wait for their retry.
// mcpFollowMax bounds the calls followed in all (those not answered are
// bounded by the transport: a stdio client's queue, HTTP's requests in
// flight; this is a backstop).
const (
	mcpRecent    = 64
	mcpFollowMax = 4096
)

// mcpCalls follows one MCP session's tool calls.
type mcpCalls struct {
	newID func() string

	mu       sync.Mutex
	byRPC    map[any]*mcpCall // the calls followed, by JSON-RPC id (jsonrpc.ID.Raw)
	order    []any            // their ids, oldest first
	answered int              // how many of them are answered
	retries  []*mcpCall       // calls cancelled after they started, oldest cancelled first, until retried
}

// mcpCall is a tools/call request.
type mcpCall struct {
	id        string // its tool_use id
	same      string // what a retry repeats: sameCall of its name and arguments; "" when it brought its own id
	cancelled bool
	started   bool               // it reached the handler (mcpCalls.start): it may have committed
	answered  bool               // answered, or dropped before it started
	stop      context.CancelFunc // while it runs
}

func newMCPCalls(newID func() string) *mcpCalls {
	return &mcpCalls{newID: newID, byRPC: map[any]*mcpCall{}}
}

// assign notes a tools/call request and returns it (raw) with its
// tool_use id in _meta: its own, else the id of the cancelled call it
// retries, else a new one. A request this cannot read is returned as it
// is, for the SDK to refuse.
func (m *mcpCalls) assign(req *jsonrpc.Request, raw []byte) []byte {
	var params map[string]json.RawMessage
	if json.Unmarshal(req.Params, &params) != nil || params == nil {
		return raw
	}
	var meta map[string]json.RawMessage
	if v, ok := params["_meta"]; ok && string(v) != "null" && (json.Unmarshal(v, &meta) != nil || meta == nil) {
		return raw
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if key, ok := metaKey(meta); ok {
		var id string
		json.Unmarshal(meta[key], &id) // not a string: the handler refuses the call
		m.note(req.ID.Raw(), &mcpCall{id: id})
		return raw
	}
	same := sameCall(params["name"], params["arguments"])
	c := &mcpCall{same: same}
	if i := slices.IndexFunc(m.retries, func(r *mcpCall) bool { return r.same == same }); i >= 0 {
		c.id = m.retries[i].id
		m.retries = slices.Delete(m.retries, i, i+1)
	} else {
		c.id = m.newID()
	}
	meta[MetaToolUseID], _ = json.Marshal(c.id)
	params["_meta"], _ = json.Marshal(meta)
	p, err1 := json.Marshal(params)
	out, err2 := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: req.ID, Method: req.Method, Params: p})
	if err1 != nil || err2 != nil {
		return raw
	}
	m.note(req.ID.Raw(), c)
	return out
}

// note records c as the call with JSON-RPC id rpc. Called with mu held.
func (m *mcpCalls) note(rpc any, c *mcpCall) {
	if old, ok := m.byRPC[rpc]; ok {
		m.forget(rpc, old) // the client used the id again
	}
	m.order = append(m.order, rpc)
	m.byRPC[rpc] = c
	m.trim()
}

// forget drops the call c with JSON-RPC id rpc. Called with mu held.
func (m *mcpCalls) forget(rpc any, c *mcpCall) {
	if c.answered {
		m.answered--
	}
	delete(m.byRPC, rpc)
	m.order = slices.DeleteFunc(m.order, func(id any) bool { return id == rpc })
}

// trim forgets the oldest answered calls past mcpRecent, and the oldest
// calls past mcpFollowMax. Called with mu held.
func (m *mcpCalls) trim() {
	if m.answered <= mcpRecent && len(m.order) <= mcpFollowMax {
		return
	}
	over, excess := m.answered-mcpRecent, len(m.order)-mcpFollowMax
	m.order = slices.DeleteFunc(m.order, func(rpc any) bool {
		c := m.byRPC[rpc]
		drop := excess > 0 || over > 0 && c.answered
		if drop {
			excess--
			if c.answered {
				m.answered--
				over--
			}
			delete(m.byRPC, rpc)
		}
		return drop
	})
}

// done notes that the calls with JSON-RPC ids rpcs were answered, or
// dropped before they started (a cancel came first).
func (m *mcpCalls) done(rpcs ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, rpc := range rpcs {
		if c, ok := m.byRPC[rpc]; ok && !c.answered {
			c.answered = true
			m.answered++
		}
	}
	m.trim()
}

// cancel stops the call with JSON-RPC id rpc (if it is running: its
// context ends; if not started: it will not start) and, if it had
// started, keeps it for a retry. It reports whether the call was known.
func (m *mcpCalls) cancel(rpc any) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.byRPC[rpc]
	if !ok {
		return false
	}
	c.cancelled = true
	if c.stop != nil {
		c.stop()
	}
	if c.started && c.same != "" && !slices.Contains(m.retries, c) {
		m.retries = append(m.retries, c)
		if len(m.retries) > mcpRecent {
			m.retries = slices.Delete(m.retries, 0, 1)
		}
	}
	return true
}

// start returns the context the call with tool_use id runs in: ctx,
// ended also when the client cancels the call (at once if it already
// did). done must be called when the call is answered.
func (m *mcpCalls) start(ctx context.Context, id string) (context.Context, func()) {
	ctx, stop := context.WithCancel(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, rpc := range m.order { // oldest first: a retry takes the id of a call sent before it
		if c := m.byRPC[rpc]; c.id == id && !c.started && !c.answered {
			c.started = true
			if c.cancelled {
				stop()
			}
			c.stop = stop
			return ctx, func() {
				m.mu.Lock()
				c.stop = nil
				m.mu.Unlock()
				stop()
			}
		}
	}
	return ctx, stop
}

// metaKey returns the first of MetaToolUseIDKeys that meta holds.
func metaKey(meta map[string]json.RawMessage) (string, bool) {
	for _, k := range MetaToolUseIDKeys {
		if _, ok := meta[k]; ok {
			return k, true
		}
	}
	return "", false
}

// sameCall is the same for two calls with the same name and arguments,
// however their JSON is spaced or ordered: a hash of both, canonical.
func sameCall(name, args json.RawMessage) string {
	sum := sha256.Sum256([]byte(canonical(name) + "\x00" + canonical(args)))
	return string(sum[:])
}

// canonical is the JSON value raw with its objects' keys sorted and no
// spaces: the same value sent twice reads the same.
func canonical(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return string(raw)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(out)
}

// take gives the tools/call requests of a message the SDK reads (or a
// batch of them), raw, their tool_use ids, and takes its cancels. It
// returns the message to hand on (raw itself when nothing changed or raw
// is not one) and the JSON-RPC ids of its calls.
func (m *mcpCalls) take(raw []byte) ([]byte, []any) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || !json.Valid(trimmed) {
		return raw, nil
	}
	l, ok := decodeLine(trimmed)
	if !ok {
		return raw, nil
	}
	var calls []any
	for i, msg := range l.msgs {
		r, ok := msg.(*jsonrpc.Request)
		switch {
		case !ok:
		case r.IsCall() && r.Method == "tools/call":
			l.raws[i] = m.assign(r, l.raws[i])
			calls = append(calls, r.ID.Raw())
		case r.Method == "notifications/cancelled":
			if id, ok := cancelledID(r); ok {
				m.cancel(id)
			}
		}
	}
	return l.bytes(), calls
}

// mcpMaxSessions bounds the streamable HTTP sessions whose calls MCPHTTP
// follows; past it the one unused longest is forgotten.
const mcpMaxSessions = 4096

// mcpSessions follows the calls of MCPHTTP's sessions, by Mcp-Session-Id.
type mcpSessions struct {
	newID func() string
	mu    sync.Mutex
	m     map[string]*mcpSession
	clock uint64
}

type mcpSession struct {
	calls *mcpCalls
	used  uint64
}

// calls returns the calls of the session id (nil for none: a request
// outside a session).
func (ss *mcpSessions) calls(id string) *mcpCalls {
	if id == "" {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.clock++
	s, ok := ss.m[id]
	if !ok {
		if len(ss.m) >= mcpMaxSessions {
			var oldest string
			for k, v := range ss.m {
				if oldest == "" || v.used < ss.m[oldest].used {
					oldest = k
				}
			}
			delete(ss.m, oldest)
		}
		s = &mcpSession{calls: newMCPCalls(ss.newID)}
		ss.m[id] = s
	}
	s.used = ss.clock
	return s.calls
}

// screen hands the SDK each POST of a session with its tool calls given
// their tool_use ids and its cancels taken (mcpCalls.take), and forgets a
// session its client ends (DELETE).
func (ss *mcpSessions) screen(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		switch {
		case id == "":
		case r.Method == http.MethodDelete:
			ss.mu.Lock()
			delete(ss.m, id)
			ss.mu.Unlock()
		case r.Method == http.MethodPost:
			body, ok := ReadBody(w, r)
			if !ok {
				return
			}
			calls := ss.calls(id)
			var rpcs []any
			body, rpcs = calls.take(body)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			// The calls of a POST are answered in its response.
			defer calls.done(rpcs...)
		}
		next.ServeHTTP(w, r)
	})
}
