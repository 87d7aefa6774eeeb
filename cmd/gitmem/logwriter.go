package main

import (
	"io"
	"sync"
)

// logBufferMax is how many bytes of log lines logWriter holds before a
// Write waits for the output to take some: lines are never dropped.
const logBufferMax = 1 << 20

// logWriter is serve's stderr: the log's lines are copied into a buffer
// and written out by a goroutine of its own, so that a call's answer does
// not wait for stderr (a pipe, a terminal, journald) to take them. slog
// holds its lock across each write(2): under 50 clients over 100 stores,
// a third of the calls in flight were waiting for it, and a server that
// logged nothing answered 1.3x the calls a second (docs/performance.md).
// Order is kept; a Write waits only once logBufferMax bytes wait. Close
// writes out what is left.
type logWriter struct {
	w    io.Writer
	mu   sync.Mutex
	cond sync.Cond // signalled when buf or closed changes
	buf  []byte    // what is yet to be written
	shut bool      // Close began
	done chan struct{}
}

func newLogWriter(w io.Writer) *logWriter {
	l := &logWriter{w: w, done: make(chan struct{})}
	l.cond.L = &l.mu
	go l.drain()
	return l
}

// Write copies p into the buffer (waiting while it holds logBufferMax
// bytes) and returns at once.
func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	for len(l.buf) >= logBufferMax && !l.shut {
		l.cond.Wait()
	}
	if l.shut { // after Close: once the rest is out, in the caller
		l.mu.Unlock()
		<-l.done
		return l.w.Write(p)
	}
	l.buf = append(l.buf, p...)
	l.cond.Broadcast()
	l.mu.Unlock()
	return len(p), nil
}

// drain writes out the buffer, a batch at a time, until Close.
func (l *logWriter) drain() {
	defer close(l.done)
	var batch []byte
	l.mu.Lock()
	for {
		for len(l.buf) == 0 && !l.shut {
			l.cond.Wait()
		}
		if len(l.buf) == 0 {
			l.mu.Unlock()
			return
		}
		batch, l.buf = l.buf, batch[:0]
		l.cond.Broadcast() // room for writers waiting
		l.mu.Unlock()
		l.w.Write(batch) // a log that cannot be written is no reason to fail a call
		l.mu.Lock()
	}
}

// Close writes out what is buffered, then lets later Writes go straight
// to the output.
func (l *logWriter) Close() {
	l.mu.Lock()
	l.shut = true
	l.cond.Broadcast()
	l.mu.Unlock()
	<-l.done
}
