package app

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Log lines are written in batches: a line per request written on its
// own costs a write system call per request (2 % of the gateway's CPU
// per non-streamed request in a profile), which a batch shares.
const (
	logFlushBytes = 32 << 10
	logFlushEvery = 100 * time.Millisecond
)

// logWriter batches what is written to it and writes it to w when
// logFlushBytes are waiting, logFlushEvery after the first waiting line,
// on Flush (a warning or an error, see urgentFlush) and on Close, after
// which it writes through.
type logWriter struct {
	mu        sync.Mutex // guards every field below and the writes to w
	w         io.Writer
	buf       []byte
	timer     *time.Timer // flushes what waits; nil until the first line
	scheduled bool        // timer is set for the waiting lines
	closed    bool
}

// BufferLogs returns w batched (see logWriter) and the function that
// flushes it and stops the batching, for the process's end; w itself
// when it is a terminal, whose reader wants each line at once.
func BufferLogs(w io.Writer) (io.Writer, func()) {
	if isTerminal(w) {
		return w, func() {}
	}
	lw := &logWriter{w: w, buf: make([]byte, 0, logFlushBytes)}
	return lw, lw.Close
}

// Write keeps p for the next batch. Its error is the batch's, when p
// completed one.
func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.w.Write(p)
	}
	l.buf = append(l.buf, p...)
	if len(l.buf) >= logFlushBytes {
		return len(p), l.flushLocked()
	}
	if !l.scheduled {
		l.schedule()
	}
	return len(p), nil
}

func (l *logWriter) schedule() {
	l.scheduled = true
	if l.timer == nil {
		l.timer = time.AfterFunc(logFlushEvery, func() { _ = l.Flush() })
		return
	}
	l.timer.Reset(logFlushEvery)
}

// Flush writes what waits.
func (l *logWriter) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushLocked()
}

func (l *logWriter) flushLocked() error {
	l.scheduled = false
	if len(l.buf) == 0 {
		return nil
	}
	_, err := l.w.Write(l.buf)
	l.buf = l.buf[:0]
	return err
}

// Close flushes and stops the timer; later lines are written at once.
func (l *logWriter) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.flushLocked()
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
	}
}

// flusher is a log writer that batches.
type flusher interface{ Flush() error }

// urgentFlush flushes its writer's batch after each warning or error,
// so that what goes wrong is out at once, with the lines before it.
type urgentFlush struct {
	slog.Handler
	f flusher
}

func (h urgentFlush) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		if ferr := h.f.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

func (h urgentFlush) WithAttrs(attrs []slog.Attr) slog.Handler {
	return urgentFlush{h.Handler.WithAttrs(attrs), h.f}
}

func (h urgentFlush) WithGroup(name string) slog.Handler {
	return urgentFlush{h.Handler.WithGroup(name), h.f}
}
