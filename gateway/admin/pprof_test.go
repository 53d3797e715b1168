package admin

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
)

func TestProfilesNeedTheToken(t *testing.T) {
	f := newFixture(t)
	const unauthorized = `{"error":{"message":"Missing or invalid admin token.","type":"invalid_request_error","param":null,"code":"invalid_admin_token"}}` + "\n"
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace", "/debug/pprof/sampling"} {
		if code, body := f.doAuth(http.MethodGet, path, "", ""); code != http.StatusUnauthorized || body != unauthorized {
			t.Errorf("%s without a token: got %d %s", path, code, body)
		}
	}
	// A fixture of its own: five misses from one address is the limiter's
	// burst, and a sixth would be a 429.
	if code, body := newFixture(t).doAuth(http.MethodPut, "/debug/pprof/sampling", `{"mutex_fraction":1}`, ""); code != http.StatusUnauthorized || body != unauthorized {
		t.Errorf("PUT /debug/pprof/sampling without a token: got %d %s", code, body)
	}
	if got := runtime.SetMutexProfileFraction(-1); got != 0 {
		t.Errorf("the mutex fraction is %d after a refused PUT, want 0", got)
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

// The block and mutex profiles are empty until their sampling is turned
// on; once it is, a blocking event shows in the block profile with its
// stack, and turning it off again puts the process back as it was.
func TestProfileSampling(t *testing.T) {
	t.Cleanup(func() {
		samplingMu.Lock()
		defer samplingMu.Unlock()
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
		blockRate = 0
	})
	f := newFixture(t)
	f.expect(http.MethodGet, "/debug/pprof/sampling", "", 200, `{"mutex_fraction":0,"block_rate_ns":0}`)
	f.expect(http.MethodPut, "/debug/pprof/sampling", `{"mutex_fraction":5}`, 200, `{"mutex_fraction":5,"block_rate_ns":0}`)
	if got := runtime.SetMutexProfileFraction(-1); got != 5 {
		t.Errorf("the runtime's mutex fraction is %d, want 5", got)
	}
	f.expect(http.MethodPut, "/debug/pprof/sampling", `{"block_rate_ns":1}`, 200, `{"mutex_fraction":5,"block_rate_ns":1}`)
	synctest.Test(t, blockOnce)
	if code, body := f.do(http.MethodGet, "/debug/pprof/block?debug=1", ""); code != 200 || !strings.Contains(body, "admin.blockOnce") {
		t.Errorf("block profile: got %d, without blockOnce:\n%.400s", code, body)
	}
	f.expect(http.MethodPut, "/debug/pprof/sampling", `{"mutex_fraction":0,"block_rate_ns":0}`, 200, `{"mutex_fraction":0,"block_rate_ns":0}`)
	f.expect(http.MethodGet, "/debug/pprof/sampling", "", 200, `{"mutex_fraction":0,"block_rate_ns":0}`)
}

// blockOnce blocks on a channel receive until a second goroutine sends,
// once it is sure the receive has blocked.
func blockOnce(t *testing.T) {
	ch := make(chan int)
	go func() {
		synctest.Wait() // blockOnce is blocked on its receive
		ch <- 1
	}()
	<-ch
}

func TestProfileSamplingRefusesBadRates(t *testing.T) {
	f := newFixture(t)
	for body, want := range map[string]string{
		`{"mutex_fraction":-1}`:  `{"error":{"message":"mutex_fraction: must be an integer >= 0 (0 turns sampling off), got -1","type":"invalid_request_error","param":"mutex_fraction","code":null}}`,
		`{"block_rate_ns":1.5}`:  `{"error":{"message":"block_rate_ns: must be an integer >= 0 (0 turns sampling off), got 1.5","type":"invalid_request_error","param":"block_rate_ns","code":null}}`,
		`{"block_rate_ns":"1s"}`: `{"error":{"message":"block_rate_ns: must be an integer >= 0 (0 turns sampling off), got \"1s\"","type":"invalid_request_error","param":"block_rate_ns","code":null}}`,
		`{"mutex":1}`:            `{"error":{"message":"mutex: unknown field; allowed: mutex_fraction, block_rate_ns","type":"invalid_request_error","param":"mutex","code":null}}`,
	} {
		f.expect(http.MethodPut, "/debug/pprof/sampling", body, 400, want)
	}
	f.expect(http.MethodGet, "/debug/pprof/sampling", "", 200, `{"mutex_fraction":0,"block_rate_ns":0}`)
}
