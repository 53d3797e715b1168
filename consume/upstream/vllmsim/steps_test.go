package vllmsim

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// streamBody is a streamed completion of three tokens: its writes are
// tok0, tok1, tok2, the finish chunk and [DONE].
const streamBody = `{"prompt":"a","max_tokens":3,"stream":true}`

// twoStreams serves stream A and, 3 ms after it, stream B on s, and
// returns the offsets of their writes from A's start.
func twoStreams(t *testing.T, s *Server) (a, b []time.Duration) {
	t0 := time.Now()
	done := make(chan *recorder)
	go func() { done <- serve(t.Context(), s, "POST", "/v1/completions", streamBody, nil) }()
	time.Sleep(3 * time.Millisecond)
	recB := serve(t.Context(), s, "POST", "/v1/completions", streamBody, nil)
	return writeTimes(<-done, t0), writeTimes(recB, t0)
}

// Concurrent streams get their tokens at the ends of the same engine
// steps: A starts alone and anchors the steps at its first token (20
// ms); B, due 3 ms after A, gets each token with A's. Once both have
// ended the clock stops, and C, alone, sees exactly TTFT and ITL again.
func TestStreamsShareTheEngineSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{TTFT: 20 * time.Millisecond, ITL: 10 * time.Millisecond})
		a, b := twoStreams(t, s)
		if want := ms(20, 30, 40, 40, 40); !slices.Equal(a, want) {
			t.Errorf("A's writes at %v, want %v", a, want)
		}
		if want := ms(30, 40, 50, 50, 50); !slices.Equal(b, want) {
			t.Errorf("B's writes at %v, want %v (due at 23 ms, produced with A's tokens)", b, want)
		}
		time.Sleep(7 * time.Millisecond)
		t1 := time.Now()
		c := serve(t.Context(), s, "POST", "/v1/completions", streamBody, nil)
		if got, want := writeTimes(c, t1), ms(20, 30, 40, 40, 40); !slices.Equal(got, want) {
			t.Errorf("C's writes at %v after it arrived, want %v (alone, on a stopped clock)", got, want)
		}
	})
}

// A non-streamed response that joins a running engine ends with the
// step its last token falls in: B is due at 23 + 2·10 ms and ends at
// 50 ms, with A's last step.
func TestNonStreamedEndsWithAStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{TTFT: 20 * time.Millisecond, ITL: 10 * time.Millisecond})
		t0 := time.Now()
		go serve(t.Context(), s, "POST", "/v1/completions", `{"prompt":"a","max_tokens":4,"stream":true}`, nil)
		time.Sleep(3 * time.Millisecond)
		serve(t.Context(), s, "POST", "/v1/completions", `{"prompt":"a","max_tokens":3}`, nil)
		if d := time.Since(t0); d != 50*time.Millisecond {
			t.Errorf("B done at %v, want 50ms", d)
		}
	})
}

// With OwnClocks each stream keeps the phase its start gave it: B, 3 ms
// after A, gets each token 3 ms after A's.
func TestOwnClocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := twoStreams(t, New(Config{TTFT: 20 * time.Millisecond, ITL: 10 * time.Millisecond, OwnClocks: true}))
		if want := ms(20, 30, 40, 40, 40); !slices.Equal(a, want) {
			t.Errorf("A's writes at %v, want %v", a, want)
		}
		if want := ms(23, 33, 43, 43, 43); !slices.Equal(b, want) {
			t.Errorf("B's writes at %v, want %v", b, want)
		}
	})
}
