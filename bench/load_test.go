package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
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

func TestClosedLoopBoundedByTime(t *testing.T) {
	start := time.Now()
	closedLoop(context.Background(), 2, 1<<30, 50*time.Millisecond, func(context.Context, int) {
		time.Sleep(5 * time.Millisecond)
	})
	if el := time.Since(start); el > time.Second {
		t.Errorf("ran %v", el)
	}
}

func TestReplay(t *testing.T) {
	var calls atomic.Int64
	evs := []event{{At: 0}, {At: 10 * time.Millisecond}, {At: 20 * time.Millisecond}, {At: time.Hour}}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	replay(ctx, evs, func(context.Context, event) { calls.Add(1) })
	if calls.Load() != 3 {
		t.Errorf("replayed %d events, want 3 (the last is past the deadline)", calls.Load())
	}
}
