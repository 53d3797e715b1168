package vllmsim

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pacegate/pacegate/sse"
)

// These tests use real loopback sockets: resets and disconnects are what
// they check.

func post(t *testing.T, ctx context.Context, url, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "sock")
	return http.DefaultClient.Do(req)
}

func TestInjectedStatusCount(t *testing.T) {
	s := New(Config{TTFT: -1, ITL: -1})
	srv := httptest.NewServer(s)
	defer srv.Close()
	s.InjectFailure(Failure{Count: 2, StatusBeforeFirstByte: 500})
	for i, want := range []int{500, 500, 200} {
		resp, err := post(t, t.Context(), srv.URL+"/v1/chat/completions", chatBody(`,"max_tokens":1`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("request %d: %d %s, want %d", i, resp.StatusCode, b, want)
		}
	}
	if st := s.Stats(); st.Failed != 2 || st.Completed != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestResetAfterChunks(t *testing.T) {
	s := New(Config{TTFT: -1, ITL: -1})
	srv := httptest.NewServer(s)
	defer srv.Close()
	s.InjectFailure(Failure{ResetAfterChunks: 2})
	resp, err := post(t, t.Context(), srv.URL+"/v1/chat/completions", chatBody(`,"stream":true,"max_tokens":5`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	d := sse.NewDecoder(resp.Body)
	for i := range 2 {
		if _, err := d.Next(); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	if _, err := d.Next(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("after the reset: %v, want a broken stream", err)
	}
	s.ClearFailures()
	resp2, err := post(t, t.Context(), srv.URL+"/v1/completions", `{"prompt":"x","max_tokens":1}`)
	if err != nil || resp2.StatusCode != 200 {
		t.Fatalf("after ClearFailures: %v", err)
	}
	resp2.Body.Close()
}

func TestResetBeforeFirstByte(t *testing.T) {
	s := New(Config{TTFT: -1, ITL: -1})
	srv := httptest.NewServer(s)
	defer srv.Close()
	s.InjectFailure(Failure{Count: 1, ResetBeforeFirstByte: true})
	if resp, err := post(t, t.Context(), srv.URL+"/v1/completions", `{"prompt":"x"}`); err == nil {
		resp.Body.Close()
		t.Fatalf("got %d, want a connection error", resp.StatusCode)
	}
}

// A client leaving over a real connection is noticed before the next
// token is due, not when the simulator next writes: the abort is
// recorded, for the running request, less than one ITL after the client
// left. Without synctest (sockets are not durably blocking), the bound is
// the configured ITL, 10 s, against a notice that takes milliseconds.
func TestAbortOnDisconnectBeforeNextToken(t *testing.T) {
	const itl = 10 * time.Second
	s := New(Config{TTFT: -1, ITL: itl})
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	resp, err := post(t, ctx, srv.URL+"/v1/chat/completions", chatBody(`,"stream":true,"max_tokens":3`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sse.NewDecoder(resp.Body).Next(); err != nil { // the role chunk: it is running
		t.Fatal(err)
	}
	left := time.Now()
	cancel()
	resp.Body.Close()
	guard := time.NewTimer(time.Minute) // against a hang only
	defer guard.Stop()
	select {
	case ab := <-s.Aborts():
		if ab.ID != "sock" || ab.Queued {
			t.Fatalf("abort %+v, want request sock aborted while running", ab)
		}
		if d := ab.At.Sub(left); d >= itl {
			t.Fatalf("abort noticed %v after the client left, want before the next token (%v)", d, itl)
		}
	case <-guard.C:
		t.Fatal("no abort recorded")
	}
	if st := s.Stats(); st.Completed != 0 || st.Aborted != 1 {
		t.Fatalf("stats = %+v, want 1 aborted, none completed", st)
	}
}

func TestRunCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- RunCommand(ctx, []string{"--listen", "127.0.0.1:0", "--ttft", "0", "--itl", "0", "--model", "x,y", "--prefix-cache-tokens", "4096"}, pw)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"id":"y"`) {
		t.Errorf("models: %s", b)
	}
	resp, err = http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "\nvllm:cache_config_info{block_size=\"16\",enable_prefix_caching=\"True\",num_gpu_blocks=\"256\"} 1\n") {
		t.Errorf("metrics lack cache_config_info: %s", b)
	}
	cancel()
	go io.Copy(io.Discard, pr) // drain so RunCommand never blocks on stdout
	if err := <-done; err != nil {
		t.Fatalf("RunCommand: %v", err)
	}
}

func TestRunCommandBadFlag(t *testing.T) {
	if err := RunCommand(t.Context(), []string{"--nope"}, io.Discard); err == nil {
		t.Fatal("want an error")
	}
}
