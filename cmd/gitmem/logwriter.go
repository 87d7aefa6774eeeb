package main

import (
	"io"
	"sync"
	"time"
)

// logBufferMax is how many bytes of log lines logWriter holds for a
// stderr that takes them slower than they come; past it, lines are
// dropped (and counted) rather than a call made to wait.
const logBufferMax = 1 << 20

// logFlushWait is how long Close waits for stderr to take what is left.
const logFlushWait = 5 * time.Second

// logWriter is serve's stderr: the log's lines are copied into a buffer
// and written out by a goroutine of its own, so that a call's answer does
// not wait for stderr (a pipe, a terminal, journald) to take them. slog
// holds its lock across each write(2): under 50 clients over 100 stores,
// a third of the calls in flight were waiting for it, and a server that
// logged nothing answered 1.3x the calls a second (docs/performance.md).
// Order is kept. A stderr that takes nothing (a pipe nobody reads) never
// holds the server up: once logBufferMax bytes wait, a line is dropped
// and counted, and notice(n) — a line saying n were dropped — goes out
// after the lines that waited, when stderr takes them; as Docker's
// non-blocking log mode and journald's rate limit do, not as zap's
// BufferedWriteSyncer (which waits). Close waits at most flushWait, and
// so does each Write after it (the process's last words: an error that
// ended serve); once one has not been taken in that time, later ones
// are dropped.
type logWriter struct {
	w         io.Writer
	notice    func(dropped int) []byte
	flushWait time.Duration
	mu        sync.Mutex
	cond      sync.Cond // signalled when buf or shut changes
	buf       []byte    // what is yet to be written
	dropped   int       // lines dropped since the last notice
	shut      bool      // Close began
	exited    bool      // drain returned: Writes go to w, waiting at most flushWait
	stuck     bool      // a Write after drain returned was not taken in flushWait
	done      chan struct{}
}

func newLogWriter(w io.Writer, notice func(dropped int) []byte) *logWriter {
	l := &logWriter{w: w, notice: notice, flushWait: logFlushWait, done: make(chan struct{})}
	l.cond.L = &l.mu
	go l.drain()
	return l
}

// Write copies p into the buffer, or drops it when logBufferMax bytes
// wait, and returns at once.
func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	if l.exited { // after Close, once the rest is out: in the caller
		defer l.mu.Unlock()
		return l.writeLast(p)
	}
	if len(l.buf) >= logBufferMax {
		l.dropped++
	} else {
		l.buf = append(l.buf, p...)
		l.cond.Signal()
	}
	l.mu.Unlock()
	return len(p), nil
}

// drain writes out the buffer, a batch at a time, until Close, with the
// notice of lines dropped after the batch they followed.
func (l *logWriter) drain() {
	defer close(l.done)
	var batch []byte
	l.mu.Lock()
	for {
		for len(l.buf) == 0 && l.dropped == 0 && !l.shut {
			l.cond.Wait()
		}
		if len(l.buf) == 0 && l.dropped == 0 {
			l.exited = true
			l.mu.Unlock()
			return
		}
		dropped := l.dropped
		batch, l.buf, l.dropped = l.buf, batch[:0], 0
		l.mu.Unlock()
		if dropped > 0 {
			batch = append(batch, l.notice(dropped)...)
		}
		l.w.Write(batch) // a log that cannot be written is no reason to fail a call
		l.mu.Lock()
	}
}

// writeLast writes p to w for a Write after Close, waiting at most
// flushWait; l.mu is held, so that such Writes keep their order.
func (l *logWriter) writeLast(p []byte) (int, error) {
	if l.stuck {
		return len(p), nil
	}
	p = append([]byte(nil), p...) // w may still hold it after this returns
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		l.w.Write(p)
	}()
	t := time.NewTimer(l.flushWait)
	defer t.Stop()
	select {
	case <-wrote:
	case <-t.C:
		l.stuck = true
	}
	return len(p), nil
}

// Close writes out what is buffered, waiting at most flushWait for
// stderr to take it; later Writes go to the output once it has, each
// waiting at most flushWait, or wait in the buffer with the rest. What a
// stuck stderr has not taken by then is lost with the process.
func (l *logWriter) Close() {
	l.mu.Lock()
	l.shut = true
	l.cond.Broadcast()
	l.mu.Unlock()
	t := time.NewTimer(l.flushWait)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
	}
}
