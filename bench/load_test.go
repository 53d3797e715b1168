package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestDoStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Request-Id", "srv-"+r.Header.Get("X-Request-Id"))
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n")
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"tok%d\"}}]}\n\n", i)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, ": comment\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	tr := doStream(context.Background(), newClient(1), srv.URL, "sk", "abc", chatBody("m", 3, true))
	if tr.Err != nil || tr.Status != 200 {
		t.Fatalf("trace: %+v", tr)
	}
	if len(tr.Chunks) != 3 || tr.TTFT <= 0 || tr.ReqID != "srv-abc" {
		t.Errorf("chunks %d ttft %v id %q", len(tr.Chunks), tr.TTFT, tr.ReqID)
	}
}

func TestDoStreamRejected(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "slow down", http.StatusTooManyRequests)
	}))
	defer srv.Close()
	tr := doStream(context.Background(), newClient(1), srv.URL, "", "", nil)
	if tr.Status != 429 || len(tr.Chunks) != 0 || tr.Err != nil {
		t.Errorf("trace: %+v", tr)
	}
}

func TestClosedLoopBoundedByCount(t *testing.T) {
	var calls atomic.Int64
	n, _ := closedLoop(context.Background(), 4, 10, time.Minute, func(context.Context, int) { calls.Add(1) })
	if n != 10 || calls.Load() != 10 {
		t.Errorf("started %d, called %d; want 10", n, calls.Load())
	}
}

// On virtual time: two workers whose calls take 6 ms start calls at 0,
// 6, ..., 48 ms; at 54 ms the 50 ms budget is spent and no more start.
func TestClosedLoopBoundedByTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, took := closedLoop(context.Background(), 2, 1<<30, 50*time.Millisecond, func(context.Context, int) {
			time.Sleep(6 * time.Millisecond)
		})
		if n != 18 || took != 54*time.Millisecond {
			t.Errorf("started %d calls in %v, want 18 in 54ms", n, took)
		}
	})
}

// On virtual time: four workers spread over 40 ms make their first calls
// at 0, 10, 20 and 30 ms and the next ones a call (25 ms) later, until
// the budget (42 ms) is spent; with a budget of 15 ms, the workers due
// at 20 and 30 ms make none.
func TestClosedLoopSpread(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i := range v {
			d[i] = time.Duration(v[i]) * time.Millisecond
		}
		return d
	}
	for _, c := range []struct {
		budget time.Duration
		want   []time.Duration
	}{
		{42 * time.Millisecond, ms(0, 10, 20, 25, 30, 35)},
		{15 * time.Millisecond, ms(0, 10)},
	} {
		synctest.Test(t, func(t *testing.T) {
			var mu sync.Mutex
			var starts []time.Duration
			t0 := time.Now()
			n, _ := closedLoopSpread(context.Background(), 4, 1<<30, c.budget, 40*time.Millisecond, func(context.Context, int) {
				mu.Lock()
				starts = append(starts, time.Since(t0))
				mu.Unlock()
				time.Sleep(25 * time.Millisecond)
			})
			slices.Sort(starts)
			if n != len(c.want) || !slices.Equal(starts, c.want) {
				t.Errorf("budget %v: started %d calls at %v, want %v", c.budget, n, starts, c.want)
			}
		})
	}
}

// On virtual time: each event starts at its offset, and replay stops at
// the deadline instead of waiting for the event an hour away.
func TestReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var started []time.Duration
		evs := []event{{At: 0}, {At: 10 * time.Millisecond}, {At: 20 * time.Millisecond}, {At: time.Hour}}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		replay(ctx, evs, func(context.Context, event) {
			mu.Lock()
			started = append(started, time.Since(t0))
			mu.Unlock()
		})
		if took := time.Since(t0); took != 200*time.Millisecond {
			t.Errorf("replay returned after %v, want at the 200ms deadline", took)
		}
		if want := []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond}; !slices.Equal(started, want) {
			t.Errorf("events started at %v, want %v (the last is past the deadline)", started, want)
		}
	})
}

// contentChunk tells generated text from the role and finish chunks, for
// vllmsim's tokens and any other text.
func TestContentChunk(t *testing.T) {
	for line, want := range map[string]bool{
		`data: {"choices":[{"delta":{"content":"tok3 "}}]}` + "\n":                      true,
		`data: {"choices":[{"delta":{"content":"I "}}],"usage":null}` + "\n":            true,
		`data: {"choices":[{"delta":{"role":"assistant","content":""}}]}` + "\n":        false,
		`data: {"choices":[{"delta":{"role":"assistant"}}]}` + "\n":                     false,
		`data: {"choices":[{"delta":{"reasoning_content":"x"}}]}` + "\n":                false,
		`data: {"choices":[{"delta":{},"finish_reason":"length"}],"usage":null}` + "\n": false,
		`data: {"choices":[{"delta":{"content":"`:                                       false,
	} {
		if got := contentChunk([]byte(line)); got != want {
			t.Errorf("contentChunk(%q) = %v, want %v", line, got, want)
		}
	}
}

// TestInOrder: interleaved pairs run a first, then b first, in turn.
func TestInOrder(t *testing.T) {
	var got []string
	for i := range 4 {
		inOrder(i%2 == 0, func() { got = append(got, "with") }, func() { got = append(got, "without") })
	}
	want := []string{"with", "without", "without", "with", "with", "without", "without", "with"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
