package vllmsim

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// routeCase is one request whose whole response (status, content type,
// body) must equal testdata/<name>.out.
type routeCase struct {
	name, method, path, body string
	hdr                      map[string]string
}

// runGolden runs each case on a fresh simulator in a synctest bubble
// ("created" is 946684800); a stalled response ends after 10 s.
func runGolden(t *testing.T, cases []routeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{MaxModelLen: 64, EmbeddingDim: 4})
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				method := tc.method
				if method == "" {
					method = "POST"
				}
				rec := serve(ctx, s, method, tc.path, tc.body, tc.hdr)
				got := fmt.Sprintf("%d %s\n%s", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
				checkGolden(t, filepath.Join("testdata", tc.name+".out"), got)
			})
		})
	}
}

// withFault is reqID plus an X-Sim-Fault header.
func withFault(v string) map[string]string {
	return map[string]string{"X-Request-Id": "r1", "X-Sim-Fault": v}
}
