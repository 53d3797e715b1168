package admin

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProfilesNeedTheToken(t *testing.T) {
	f := newFixture(t)
	const unauthorized = `{"error":{"message":"Missing or invalid admin token.","type":"invalid_request_error","param":null,"code":"invalid_admin_token"}}` + "\n"
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace"} {
		if code, body := f.doAuth(http.MethodGet, path, "", ""); code != http.StatusUnauthorized || body != unauthorized {
			t.Errorf("%s without a token: got %d %s", path, code, body)
		}
	}
}

// The profiles are this process's, as net/http/pprof serves them; the
// command line is not served.
func TestProfiles(t *testing.T) {
	f := newFixture(t)
	code, body := f.do(http.MethodGet, "/debug/pprof/goroutine?debug=2", "")
	if code != http.StatusOK || !strings.Contains(body, "admin.TestProfiles(") {
		t.Errorf("goroutine profile: got %d, without this test's goroutine:\n%.300s", code, body)
	}
	if code, body := f.do(http.MethodGet, "/debug/pprof/heap?debug=1", ""); code != http.StatusOK || !strings.HasPrefix(body, "heap profile: ") {
		t.Errorf("heap profile: got %d %.80s", code, body)
	}
	if code, body := f.do(http.MethodGet, "/debug/pprof/", ""); code != http.StatusOK || !strings.Contains(body, "allocs") {
		t.Errorf("index: got %d %.80s", code, body)
	}
	f.expect(http.MethodGet, "/debug/pprof/cmdline", "", 404,
		`{"error":{"message":"Unknown profile \"cmdline\"; GET /debug/pprof/ lists them.","type":"invalid_request_error","param":null,"code":"unknown_profile"}}`)
	f.expect(http.MethodGet, "/debug/pprof/nope", "", 404,
		`{"error":{"message":"Unknown profile \"nope\"; GET /debug/pprof/ lists them.","type":"invalid_request_error","param":null,"code":"unknown_profile"}}`)
}

// A CPU profile is gzipped protobuf, as `go tool pprof` reads it. It
// ends early when its client goes: this one is gone before it starts.
func TestCPUProfile(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/debug/pprof/profile?seconds=30", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("got %d %q: %.200s", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
	}
	zr, err := gzip.NewReader(bytes.NewReader(rec.Body.Bytes()))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	if b, err := io.ReadAll(zr); err != nil || len(b) == 0 {
		t.Errorf("profile: %d bytes, %v", len(b), err)
	}
}
