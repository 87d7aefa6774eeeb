package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gitmem-dev/gitmem/policy"
)

// MaxBlocks bounds the content blocks of one array (one assistant
// message's content): an assistant turn holds a few tool calls, not
// thousands, and every call of an array must be answered in one reply.
const MaxBlocks = 100

// notRun answers a call of an array that was not started because the
// request's time (or the server) ran out first.
const notRun = "This call was not run (the request ran out of time, or the server is stopping); nothing was changed. Send it again"

// ArrayError is an array that is refused as a whole; nothing in it ran.
// TooMany says it held more than MaxBlocks blocks (else it was not JSON).
type ArrayError struct {
	Msg     string
	TooMany bool
}

func (e *ArrayError) Error() string { return e.Msg }

// HandleArray answers a JSON array of content blocks (an assistant
// message's content): the tool_results of its memory tool_use blocks, run
// one after another in order, each in ctx (as Handle); other blocks (text,
// thinking, other tools) are skipped. Once ctx is done no further call is
// started: each gets an error result saying it was not run, so every call
// is answered. An array that is not valid JSON or holds more than
// MaxBlocks blocks is refused with an *ArrayError and nothing runs.
func (h *Handler) HandleArray(ctx context.Context, c Caller, raw []byte) ([]Result, error) {
	return h.handleArray(ctx, c, raw, false)
}

// errOutOfFiles is an array whose calls stopped at one that failed for
// want of file descriptors, no call before it having committed a change:
// the array changed nothing and is answered as the server being busy.
var errOutOfFiles = errors.New("the server has too many files open")

// handleArray is HandleArray; with retry, a call that failed for want of
// file descriptors while no call before it committed a change
// (Call.outOfFiles) stops the array with errOutOfFiles, so that the
// whole array may be sent again.
func (h *Handler) handleArray(ctx context.Context, c Caller, raw []byte, retry bool) ([]Result, error) {
	if !json.Valid(raw) {
		return nil, &ArrayError{Msg: "Invalid content array: not a JSON array of content blocks"}
	}
	var blocks []Block
	count := 0
	ok := elements(raw, func(val []byte) bool {
		count++
		if b, ok := parseBlock(val); ok && b.Type == "tool_use" && b.Name == ToolName {
			blocks = append(blocks, b)
		}
		return true
	})
	switch {
	case !ok:
		return nil, &ArrayError{Msg: "Invalid content array: not a JSON array of content blocks"}
	case count > MaxBlocks:
		return nil, &ArrayError{Msg: fmt.Sprintf("The array holds %s content blocks, the limit is %d per request; none was run",
			policy.Thousands(int64(count)), MaxBlocks), TooMany: true}
	}
	results := make([]Result, 0, len(blocks))
	changed := false // a call of the array committed a change
	for i, b := range blocks {
		if i > 0 && ctx.Err() != nil {
			results = append(results, errorResult(b.ID, notRun))
			continue
		}
		res, call := h.handleCall(ctx, c, b)
		if retry && call.outOfFiles() && !changed {
			return nil, errOutOfFiles
		}
		changed = changed || call.Commit != ""
		results = append(results, res)
	}
	return results, nil
}
