package vllmsim

import (
	"net/http/httptest"
	"testing"
)

func TestUnknownRoute(t *testing.T) {
	s := New(Config{})
	for _, c := range []struct {
		method, path    string
		code            int
		allow, wantBody string
	}{
		{"POST", "/v1/nope", 404, "", `{"detail":"Not Found"}`},
		{"GET", "/", 404, "", `{"detail":"Not Found"}`},
		{"GET", "/v1/chat/completions", 405, "POST", `{"detail":"Method Not Allowed"}`},
		{"POST", "/v1/models", 405, "GET", `{"detail":"Method Not Allowed"}`},
		{"DELETE", "/v1/responses/resp_x", 405, "GET", `{"detail":"Method Not Allowed"}`},
	} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != c.code || rec.Body.String() != c.wantBody || rec.Header().Get("Allow") != c.allow ||
			rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s %s = %d %s (Allow %q), want %d %s (Allow %q)", c.method, c.path, rec.Code, rec.Body, rec.Header().Get("Allow"), c.code, c.wantBody, c.allow)
		}
	}
}
