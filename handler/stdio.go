package handler

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
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
	type line struct {
		data []byte
		err  error
	}
	lines := make(chan line)
	done := make(chan struct{})
	defer close(done)
	go func() {
		r := bufio.NewReaderSize(in, 64<<10)
		for {
			data, err := readLine(r)
			select {
			case lines <- line{data, err}:
			case <-done:
				return
			}
			if err != nil && !errors.Is(err, errTooLong) {
				return
			}
		}
	}()
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for {
		var l line
		select {
		case <-ctx.Done():
			return nil
		case l = <-lines:
		}
		var res any
		trimmed := bytes.TrimSpace(l.data)
		switch {
		case errors.Is(l.err, errTooLong):
			res = errorResult("", "Input line is longer than 16 MiB; it was skipped")
		case len(trimmed) == 0:
			if l.err == io.EOF {
				return nil
			}
			if l.err != nil {
				return l.err
			}
			continue
		case trimmed[0] == '[':
			// An assistant message's content, as over HTTP: one line
			// with the array of results.
			results, err := h.HandleArray(ctx, c, trimmed)
			if err != nil {
				res = errorResult("", err.Error())
			} else {
				res = results
			}
		default:
			res = h.HandleJSON(ctx, c, l.data)
		}
		if err := enc.Encode(res); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if l.err == io.EOF {
			return nil
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
