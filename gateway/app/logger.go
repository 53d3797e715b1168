package app

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/lmittmann/tint"
)

// NewLogger logs to w: colourful text through tint when w is a terminal,
// JSON otherwise (what log collectors want). level is debug, info, warn or
// error; empty means info. When w batches (BufferLogs), a warning or an
// error flushes the batch.
func NewLogger(w io.Writer, level string) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(strings.ToUpper(level))); err != nil || level == "" {
		lvl = slog.LevelInfo
	}
	if isTerminal(w) {
		return slog.New(tint.NewHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly}))
	}
	var h slog.Handler = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})
	if f, ok := w.(flusher); ok {
		h = urgentFlush{h, f}
	}
	return slog.New(h)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
