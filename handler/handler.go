package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
)

// ToolName is the name of the tool gitmem serves.
const ToolName = "memory"

// Block is a tool_use content block.
type Block struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// Result is a tool_result content block.
type Result struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error,omitempty"`
}

// Caller names who is calling. Session and Agent become commit trailers.
type Caller struct {
	Session string
	Agent   string
	// Author, when set, is the author of the caller's commits (a token's
	// name: attribution the caller cannot choose); else an Agent becomes
	// the author's name.
	Author gitmem.Signature
	// ReadOnly callers may view but not change the memory.
	ReadOnly bool
}

// Handler executes memory tool calls against one repository. It is safe
// for concurrent use.
type Handler struct {
	repo       *gitmem.Repo
	limits     policy.Limits
	author     gitmem.Signature
	archived   bool
	archivedAt func(tip string) (bool, error)
	screening  policy.ScreenMode
	secrets    *policy.SecretRules
	log        *slog.Logger
	onCall     func(Call)
	down       error
	clean      *gitmem.View
}

// Options configure a Handler.
type Options struct {
	Limits policy.Limits
	// Author of the commits (default: the repository's). A caller that
	// names an agent becomes the author's name.
	Author gitmem.Signature
	// Archived memories answer views and refuse every change.
	Archived bool
	// ArchivedAt, when set, says whether the memory is archived at tip,
	// the commit a change builds on: asked under the writer lock, it
	// refuses as Archived does a change whose memory was archived after
	// the call began (by another process).
	ArchivedAt func(tip string) (bool, error)
	// Screen is what happens to secrets in the content of create,
	// str_replace and insert (default off); Secrets the rules (default
	// policy.DefaultSecretRules).
	Screen  policy.ScreenMode
	Secrets *policy.SecretRules
	// Logger gets one line per tool call (and per HTTP request), and the
	// cause of every store failure (default: warnings and errors to
	// stderr).
	Logger *slog.Logger
	// OnCall, when set, is called after each tool call (for metrics).
	OnCall func(Call)
	// Unavailable, when set, is why the memory could not be opened (repo
	// is then nil): every command that passes the checks of its call is
	// answered as a storage failure, Unavailable its cause in the log.
	Unavailable error
	// View, when set, answers a view of a folder it holds (no view_range)
	// in place of repo, which may then be nil: a store's clean view
	// (gitmem.CleanView; see ViewedFolder). Nothing else may be asked of
	// such a Handler.
	View *gitmem.View
}

// New returns a Handler for repo.
func New(repo *gitmem.Repo, opt Options) *Handler {
	if opt.Logger == nil {
		opt.Logger = defaultLogger
	}
	if opt.Screen == "" {
		opt.Screen = policy.ScreenOff
	}
	if opt.Screen != policy.ScreenOff && opt.Secrets == nil {
		opt.Secrets = policy.DefaultSecretRules()
	}
	author := gitmem.Signature{Name: policy.CommitIdent(opt.Author.Name), Email: policy.CommitIdent(opt.Author.Email)}
	return &Handler{repo: repo, limits: opt.Limits, author: author, archived: opt.Archived, archivedAt: opt.ArchivedAt,
		screening: opt.Screen, secrets: opt.Secrets, log: opt.Logger, onCall: opt.OnCall, down: opt.Unavailable, clean: opt.View}
}

// ViewedPath reports whether body, a request's body for ServeToolUse, is
// one tool_use block whose input is a view of a whole file or folder (a
// command and a path, nothing else), and the path it views (relative to
// /memories), read as the call itself reads them: a server may then
// answer it with Options.View, where that view holds the path as a folder.
func ViewedPath(body []byte) (string, bool) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return "", false
	}
	b, ok := parseBlock(trimmed)
	if !ok || b.Type != "tool_use" {
		return "", false
	}
	fields := map[string]json.RawMessage{}
	if !json.Valid(b.Input) || !members(b.Input, func(k string, v []byte) { fields[k] = v }) || len(fields) != 2 {
		return "", false
	}
	in := input{fields: fields}
	if cmd, ok := decodeString(fields["command"]); !ok || cmd != "view" {
		return "", false
	}
	in.command = "view"
	_, rel, err := in.path("path")
	return rel, err == nil
}

// toolError is a failure shown to the model; its text is exact.
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

func fail(format string, args ...any) error { return &toolError{fmt.Sprintf(format, args...)} }

// archivedError refuses a change to an archived memory.
func archivedError(command string) error {
	return fail("This memory is archived: view works, but %s is not allowed; nothing was changed", command)
}

// HandleJSON answers one JSON-encoded tool_use block, as Handle. A block
// that cannot be parsed gets an error result, with its id when the id can
// be read.
func (h *Handler) HandleJSON(ctx context.Context, c Caller, raw []byte) Result {
	res, _ := h.handleJSON(ctx, c, raw)
	return res
}

// handleJSON is HandleJSON, with what the call did.
func (h *Handler) handleJSON(ctx context.Context, c Caller, raw []byte) (Result, Call) {
	b, ok := parseBlock(raw)
	if !ok {
		return h.refuse(c, readID(raw), "Invalid tool_use block: not a JSON object with type, id, name and input")
	}
	return h.handleCall(ctx, c, b)
}

// refuse answers what is not a tool_use block at all (it does not parse,
// or a transport skipped it) with an error result, logged and given to
// OnCall as any refused call.
func (h *Handler) refuse(c Caller, id, msg string) (Result, Call) {
	call := Call{ID: id, Caller: c, Outcome: OutcomeError}
	h.observe(call)
	return errorResult(id, msg), call
}

// parseBlock reads a content block; its Input is a slice of raw, not a
// copy. ok is false when raw is not a JSON object or its type, id or name
// is not a string.
func parseBlock(raw []byte) (b Block, ok bool) {
	if !json.Valid(raw) {
		return b, false
	}
	strs := true
	ok = members(raw, func(key string, val []byte) {
		var dst *string
		switch key {
		case "type":
			dst = &b.Type
		case "id":
			dst = &b.ID
		case "name":
			dst = &b.Name
		case "input":
			b.Input = val
			return
		}
		if dst == nil || string(val) == "null" {
			return
		}
		s, isString := decodeString(val)
		strs = strs && isString
		*dst = s
	})
	return b, ok && strs
}

// readID finds the top-level "id" of a block that does not parse as a
// whole (cut short, say), reading tokens until the damage.
func readID(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	depth := 1
	wantKey := true
	for {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		switch v := t.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
			} else {
				depth--
			}
			if depth == 1 {
				wantKey = true
			}
			continue
		case string:
			if depth == 1 && wantKey {
				if v == "id" {
					if t, err := dec.Token(); err == nil {
						id, _ := t.(string)
						return id
					}
					return ""
				}
				wantKey = false
				continue
			}
		}
		if depth == 1 {
			wantKey = true
		}
	}
}

// Handle answers one tool_use block. ctx is the call's (its request's):
// once it is done, the call's change is not committed (it is checked
// under the writer lock, just before the commit point) and the answer
// says nothing was changed; a change committed before stays.
func (h *Handler) Handle(ctx context.Context, c Caller, b Block) Result {
	res, _ := h.handleCall(ctx, c, b)
	return res
}

// handleCall is Handle, with what the call did.
func (h *Handler) handleCall(ctx context.Context, c Caller, b Block) (Result, Call) {
	call := Call{ID: b.ID, Caller: c, Outcome: OutcomeOK}
	start := time.Now()
	res := h.handle(ctx, c, b, &call)
	call.Duration = time.Since(start)
	if res.IsError && call.Outcome == OutcomeOK {
		call.Outcome = OutcomeError
	}
	h.observe(call)
	return res, call
}

// outOfFiles reports whether the call failed for want of file
// descriptors (gitmem.OutOfFiles) before its change was committed: it
// changed nothing, and the same call a moment later may succeed.
func (c Call) outOfFiles() bool {
	return c.Outcome == OutcomeFailure && c.Commit == "" && gitmem.OutOfFiles(c.Err)
}

func (h *Handler) handle(ctx context.Context, c Caller, b Block, call *Call) Result {
	switch {
	case b.Type != "" && b.Type != "tool_use":
		return errorResult(b.ID, fmt.Sprintf("Expected a tool_use block, got type %q", policy.Clip(b.Type, policy.MaxEchoBytes)))
	case b.ID == "":
		return errorResult("", "The tool_use block has no id")
	case b.Name != ToolName:
		return errorResult(b.ID, fmt.Sprintf("Tool '%s' is not handled here: gitmem serves only the '%s' tool", policy.Clip(b.Name, policy.MaxEchoBytes), ToolName))
	}
	if err := policy.CheckToolUseID(b.ID); err != nil {
		return errorResult(b.ID, err.Error())
	}
	content, err := h.run(ctx, c, b.ID, b.Input, call)
	if err != nil {
		var te *toolError
		var pe *policy.PathError
		var le *policy.LimitError
		if !errors.As(err, &te) && !errors.As(err, &pe) && !errors.As(err, &le) {
			// A storage failure: the operator's log gets the cause (a
			// StorageError's text names it); the model gets no host path
			// or library text.
			call.Outcome, call.Err = OutcomeFailure, err
			return errorResult(b.ID, "The memory store could not complete the command; nothing was changed")
		}
		return errorResult(b.ID, err.Error())
	}
	return Result{Type: "tool_result", ToolUseID: b.ID, Content: content}
}

func errorResult(id, msg string) Result {
	if !strings.HasPrefix(msg, "Error: ") {
		msg = "Error: " + msg
	}
	return Result{Type: "tool_result", ToolUseID: id, Content: msg, IsError: true}
}

// input reads the parameters of a command, naming what is missing or of
// the wrong type.
type input struct {
	ctx     context.Context // done: the client cancelled the call
	command string
	fields  map[string]json.RawMessage
	call    *Call // what the call did, for the log and OnCall
}

// str reads a text parameter; text that is not valid UTF-8 is refused
// (encoding/json would replace it with U+FFFD without a word).
func (in input) str(name string) (string, error) {
	s, err := in.rawStr(name)
	if err == nil && !utf8.ValidString(s) {
		return "", fail("Parameter %q is not valid UTF-8", name)
	}
	return s, err
}

// logPath is the path a call names, for its log line: path, or for a
// rename "old -> new".
func (in input) logPath() string {
	p, _ := decodeString(in.fields["path"])
	if old, ok := decodeString(in.fields["old_path"]); ok {
		nw, _ := decodeString(in.fields["new_path"])
		p = old + " -> " + nw
	}
	return policy.Clip(strings.ToValidUTF8(p, "\uFFFD"), 256)
}

// rawStr reads a string parameter as sent, invalid UTF-8 included.
func (in input) rawStr(name string) (string, error) {
	raw, ok := in.fields[name]
	if !ok || string(raw) == "null" {
		return "", fail("Missing required parameter %q for command %q", name, in.command)
	}
	s, ok := decodeString(raw)
	if !ok {
		return "", fail("Parameter %q must be a string", name)
	}
	return s, nil
}

func (in input) integer(name string) (int, error) {
	raw, ok := in.fields[name]
	if !ok || string(raw) == "null" {
		return 0, fail("Missing required parameter %q for command %q", name, in.command)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, fail("Parameter %q must be an integer", name)
	}
	return n, nil
}

func (in input) path(name string) (raw, rel string, err error) {
	if raw, err = in.rawStr(name); err != nil {
		return "", "", err
	}
	rel, err = policy.ParsePath(raw) // refuses invalid UTF-8 in its own words
	return raw, rel, err
}

func (h *Handler) run(ctx context.Context, c Caller, id string, rawInput json.RawMessage, call *Call) (string, error) {
	in := input{ctx: ctx, fields: map[string]json.RawMessage{}, call: call}
	if !json.Valid(rawInput) || !members(rawInput, func(k string, v []byte) { in.fields[k] = v }) {
		return "", fail("Invalid input: expected a JSON object with a \"command\" field")
	}
	cmd, ok := in.fields["command"]
	if !ok {
		return "", fail("Missing required parameter \"command\"")
	}
	if in.command, ok = decodeString(cmd); !ok {
		return "", fail("Parameter \"command\" must be a string")
	}
	call.Command, call.Path = policy.Clip(in.command, 64), in.logPath()
	switch in.command {
	case "create", "str_replace", "insert", "delete", "rename":
		switch {
		case h.archived:
			return "", archivedError(in.command)
		case c.ReadOnly:
			return "", fail("This memory is read-only for you: view works, but %s is not allowed; nothing was changed", in.command)
		}
		fallthrough
	case "view":
		if h.down != nil {
			return "", h.down
		}
	}
	switch in.command {
	case "view":
		return h.view(in)
	case "create":
		return h.create(c, id, in)
	case "str_replace":
		return h.strReplace(c, id, in)
	case "insert":
		return h.insert(c, id, in)
	case "delete":
		return h.delete(c, id, in)
	case "rename":
		return h.rename(c, id, in)
	}
	return "", fail("Unknown command %q. The memory tool's commands are: view, create, str_replace, insert, delete, rename", policy.Clip(in.command, policy.MaxEchoBytes))
}

// jsonInts decodes a JSON array of integers; 1.5 or "1" is an error.
func jsonInts(raw json.RawMessage, out *[]int) error {
	var nums []json.Number
	if err := json.Unmarshal(raw, &nums); err != nil {
		return err
	}
	for _, n := range nums {
		i, err := strconv.Atoi(n.String())
		if err != nil {
			return err
		}
		*out = append(*out, i)
	}
	return nil
}

// errNoRepo is a call a Handler given only a View (Options.View) cannot
// answer: answered as a storage failure, which a server that checks
// ViewedPath first never meets.
var errNoRepo = errors.New("the call needs the repository, and only a clean view was given")
