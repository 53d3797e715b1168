package vllmsim

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"
)

// timedWrite is one Write the handler made and the (bubble) time of it.
type timedWrite struct {
	at   time.Time
	data string
}

// recorder is a ResponseRecorder that also timestamps writes.
type recorder struct {
	*httptest.ResponseRecorder
	writes []timedWrite
}

func (r *recorder) Write(p []byte) (int, error) {
	r.writes = append(r.writes, timedWrite{time.Now(), string(p)})
	return r.ResponseRecorder.Write(p)
}

// serve runs one request through s synchronously.
func serve(ctx context.Context, s *Server, method, path, body string, hdr map[string]string) *recorder {
	req := httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := &recorder{ResponseRecorder: httptest.NewRecorder()}
	s.ServeHTTP(rec, req)
	return rec
}

func chatBody(extra string) string {
	return `{"model":"sim-model","messages":[{"role":"user","content":"hello  there"}]` + extra + `}`
}

var reqID = map[string]string{"X-Request-Id": "r1"}

var _ http.ResponseWriter = (*recorder)(nil)

func contains(s, sub string) bool { return strings.Contains(s, sub) }
