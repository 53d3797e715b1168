package vllmsim

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Headers go out at once; the role chunk and tok0 at TTFT; then one token
// per ITL; the tail right after the last token.
func TestStreamTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{TTFT: 200 * time.Millisecond, ITL: 20 * time.Millisecond})
		t0 := time.Now()
		rec := serve(t.Context(), s, "POST", "/v1/chat/completions", chatBody(`,"stream":true,"max_tokens":3`), nil)
		want := []time.Duration{200, 200, 220, 240, 240, 240} // role, tok0..2, finish, [DONE]
		if len(rec.writes) != len(want) {
			t.Fatalf("%d writes, want %d", len(rec.writes), len(want))
		}
		for i, w := range rec.writes {
			if got := w.at.Sub(t0); got != want[i]*time.Millisecond {
				t.Errorf("write %d at %v, want %v", i, got, want[i]*time.Millisecond)
			}
		}
		if st := s.Stats(); st.Completed != 1 || st.Requests != 1 || st.Running != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestNonStreamTimingAndSetLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		s.SetLatency(100*time.Millisecond, 10*time.Millisecond)
		t0 := time.Now()
		rec := serve(t.Context(), s, "POST", "/v1/chat/completions", chatBody(`,"max_tokens":5`), nil)
		if d := time.Since(t0); d != 140*time.Millisecond || rec.Code != 200 {
			t.Fatalf("took %v (status %d), want 140ms", d, rec.Code)
		}
	})
}

func TestWrongContentType(t *testing.T) {
	s := New(Config{})
	req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(chatBody("")))
	req.Header.Set("Content-Type", "text/plain")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "Only 'application/json'") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if s.Stats().Requests != 0 {
		t.Error("an invalid request was counted")
	}
}

func TestGeneratedRequestID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := serve(t.Context(), New(Config{}), "POST", "/v1/completions", `{"prompt":"x","max_tokens":1}`, nil)
		id := rec.Header().Get("X-Request-Id")
		if len(id) != 32 || !strings.Contains(rec.Body.String(), `"id":"cmpl-`+id+`"`) {
			t.Fatalf("id %q, body %s", id, rec.Body)
		}
	})
}

// A client that leaves mid-stream is noticed at once, not at the next token.
func TestAbortMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{TTFT: 200 * time.Millisecond, ITL: 20 * time.Millisecond})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan *recorder)
		go func() {
			done <- serve(ctx, s, "POST", "/v1/chat/completions", chatBody(`,"stream":true,"max_tokens":10`), reqID)
		}()
		time.Sleep(225 * time.Millisecond) // after tok1 (220ms), before tok2
		leftAt := time.Now()
		cancel()
		rec := <-done
		ab := <-s.Aborts()
		if ab.ID != "r1" || ab.Queued || !ab.At.Equal(leftAt) {
			t.Errorf("abort %+v, want r1 at %v not queued", ab, leftAt)
		}
		if n := strings.Count(rec.Body.String(), "data: "); n != 3 {
			t.Errorf("%d events sent, want 3 (role, tok0, tok1)", n)
		}
		if st := s.Stats(); st.Aborted != 1 || st.Completed != 0 || st.Running != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestAbortDuringTTFTNonStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		serve(ctx, s, "POST", "/v1/chat/completions", chatBody(""), reqID)
		if ab := <-s.Aborts(); ab.Queued || time.Since(ab.At) != 0 {
			t.Errorf("abort %+v", ab)
		}
	})
}

// Beyond MaxNumSeqs requests wait in FIFO order; one that leaves while
// waiting is aborted as queued and frees its place.
func TestQueueAndQueuedAbort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{MaxNumSeqs: 1, TTFT: time.Second, ITL: time.Millisecond})
		results := make(chan string, 3)
		start := func(ctx context.Context, id string) {
			go func() {
				rec := serve(ctx, s, "POST", "/v1/chat/completions", chatBody(`,"max_tokens":1`), map[string]string{"X-Request-Id": id})
				results <- id + ":" + http.StatusText(rec.Code)
			}()
		}
		start(t.Context(), "a")
		synctest.Wait()
		ctxB, cancelB := context.WithCancel(t.Context())
		start(ctxB, "b")
		start(t.Context(), "c")
		synctest.Wait()
		if st := s.Stats(); st.Running != 1 || st.Waiting != 2 {
			t.Fatalf("stats %+v, want running 1 waiting 2", st)
		}
		cancelB()
		if ab := <-s.Aborts(); ab.ID != "b" || !ab.Queued {
			t.Fatalf("abort %+v", ab)
		}
		synctest.Wait()
		if st := s.Stats(); st.Waiting != 1 {
			t.Fatalf("stats %+v, want waiting 1", st)
		}
		got := []string{<-results, <-results, <-results}
		want := []string{"b:OK", "a:OK", "c:OK"} // b wrote nothing: the recorder's default 200
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("results %v, want %v", got, want)
			}
		}
		if st := s.Stats(); st.Completed != 2 || st.Aborted != 1 || st.Running != 0 || st.Waiting != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}
