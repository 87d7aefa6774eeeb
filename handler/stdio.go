package handler

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// MaxLineBytes bounds one stdio input line (one tool_use block).
const MaxLineBytes = 16 << 20

// ServeStdio reads one JSON tool_use block per line from in and writes one
// tool_result per line to out, flushed at once, in order. A line holding a
// JSON array (an assistant message's content) is answered with one line
// holding the array of results, as HandleArray. A malformed line
// gets an error result and the loop goes on; blank lines are skipped.
// Every call runs in ctx (as Handle). It returns nil at the end of input,
// or when ctx is cancelled, after answering the block in hand.
func (h *Handler) ServeStdio(ctx context.Context, in io.Reader, out io.Writer, c Caller) error {
	// The goroutine that reads a line answers it too: handing each line
	// to another goroutine woke a second thread for every call. This one
	// waits for the end of input or of ctx; at ctx's end it takes the
	// turn (answering holds it), so the block in hand is answered first,
	// and none after.
	var (
		turn    sync.Mutex
		stopped bool
	)
	ended := make(chan error, 1)
	go func() { ended <- h.stdioLoop(ctx, in, out, c, &turn, &stopped) }()
	select {
	case err := <-ended:
		return err
	case <-ctx.Done():
		turn.Lock()
		stopped = true
		turn.Unlock()
		return nil
	}
}

// stdioLoop is ServeStdio's reading and answering, each line under turn
// unless stopped.
func (h *Handler) stdioLoop(ctx context.Context, in io.Reader, out io.Writer, c Caller, turn *sync.Mutex, stopped *bool) error {
	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	answer := func(data []byte, rerr error) (end bool, err error) {
		turn.Lock()
		defer turn.Unlock()
		if *stopped || ctx.Err() != nil {
			return true, nil
		}
		var res any
		trimmed := bytes.TrimSpace(data)
		switch {
		case errors.Is(rerr, errTooLong):
			res, _ = h.refuse(c, "", "Input line is longer than 16 MiB; it was skipped")
		case len(trimmed) == 0:
			if rerr == io.EOF {
				return true, nil
			}
			return rerr != nil, rerr
		case trimmed[0] == '[':
			// An assistant message's content, as over HTTP: one line
			// with the array of results.
			results, err := h.HandleArray(ctx, c, trimmed)
			if err != nil {
				res, _ = h.refuse(c, "", err.Error())
			} else {
				res = results
			}
		default:
			res = h.HandleJSON(ctx, c, data)
		}
		if err := enc.Encode(res); err != nil {
			return true, err
		}
		if err := w.Flush(); err != nil {
			return true, err
		}
		switch {
		case rerr == nil || errors.Is(rerr, errTooLong):
			return false, nil
		case rerr == io.EOF:
			return true, nil
		}
		return true, rerr
	}
	for {
		data, rerr := readLine(r)
		if end, err := answer(data, rerr); end || err != nil {
			return err
		}
	}
}

var errTooLong = errors.New("line too long")

// readLine reads up to the next newline. A line over MaxLineBytes is
// consumed and reported as errTooLong.
func readLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) > MaxLineBytes {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			return nil, errTooLong
		}
		buf = append(buf, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, err
		}
	}
}
