package e2e

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// logTailLines is how many of the gateway's last log lines a failed test
// prints.
const logTailLines = 200

// logTail keeps the gateway's last log lines (warnings and errors) so that
// a failing test shows what the gateway saw, while a passing one stays
// quiet. Safe for concurrent use: mu guards lines.
type logTail struct {
	mu    sync.Mutex
	lines []string
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for line := range strings.SplitSeq(string(bytes.TrimRight(p, "\n")), "\n") {
		l.lines = append(l.lines, line)
	}
	if over := len(l.lines) - logTailLines; over > 0 {
		l.lines = append(l.lines[:0], l.lines[over:]...)
	}
	return len(p), nil
}

// captureLogs returns a logger for a gateway under test; if t fails, its
// last warnings and errors are printed.
func captureLogs(t testing.TB) *slog.Logger {
	tail := &logTail{}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		tail.mu.Lock()
		defer tail.mu.Unlock()
		t.Logf("the gateway's last %d warnings and errors:\n%s", len(tail.lines), strings.Join(tail.lines, "\n"))
	})
	return slog.New(slog.NewTextHandler(tail, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
