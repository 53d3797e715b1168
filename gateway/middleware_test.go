package gateway

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

type flushErrRW struct {
	http.ResponseWriter
	err error
}

func (f *flushErrRW) FlushError() error { return f.err }

// A flush through the status wrapper reaches the connection and brings
// its error back, as the SSE writer needs to see a vanished client.
func TestStatusWriterFlushReturnsTheConnectionsError(t *testing.T) {
	gone := errors.New("gone")
	sw := &statusWriter{ResponseWriter: &flushErrRW{ResponseWriter: httptest.NewRecorder(), err: gone}}
	if err := http.NewResponseController(sw).Flush(); !errors.Is(err, gone) {
		t.Fatalf("Flush = %v, want %v", err, gone)
	}
	rec := httptest.NewRecorder()
	sw = &statusWriter{ResponseWriter: rec}
	if err := http.NewResponseController(sw).Flush(); err != nil || !rec.Flushed {
		t.Fatalf("Flush over a recorder = %v, flushed %v", err, rec.Flushed)
	}
}
