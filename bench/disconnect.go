package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
	"github.com/pacegate/pacegate/policy"
)

const dcWait = 2 * time.Second // how long an abort is waited for

// dcStream starts a streamed request with key, reads until ready says
// so, then cancels it; it returns the request id and the cancel time.
func dcStream(ctx context.Context, c *http.Client, url, key string, tokens int, ready func(chunks int) bool) (string, time.Time, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodPost, url, strings.NewReader(string(chatBody(simModel, tokens, true))))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() { r, err := c.Do(req); got <- answer{r, err} }()
	var resp *http.Response
	select {
	case a := <-got:
		if a.err != nil {
			return "", time.Time{}, a.err
		}
		resp = a.resp
	case <-time.After(dcWait):
		return "", time.Time{}, fmt.Errorf("no response headers within %s", dcWait)
	}
	id := resp.Header.Get("X-Request-Id")
	var tr streamTrace
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = readChunksUntil(resp.Body, &tr, ready)
	}()
	<-done
	at := time.Now()
	cancel()
	resp.Body.Close()
	return id, at, nil
}

// readChunksUntil reads content chunks until ready(count) holds.
func readChunksUntil(body interface{ Read([]byte) (int, error) }, tr *streamTrace, ready func(int) bool) error {
	if ready(0) {
		return nil
	}
	buf := make([]byte, 4096)
	for {
		n, err := body.Read(buf)
		tr.Chunks = append(tr.Chunks, make([]time.Time, strings.Count(string(buf[:n]), string(contentMark)))...)
		if ready(len(tr.Chunks)) || err != nil {
			return err
		}
	}
}

// dcCancelWhen starts a streamed request with key, waits until cond
// holds (the request is queued somewhere; no response byte needs to have
// arrived), cancels it and returns the cancel time.
func dcCancelWhen(ctx context.Context, c *http.Client, url, key string, cond func() bool) (time.Time, error) {
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		doStream(rctx, c, url, key, "", chatBody(simModel, 10, true))
	}()
	ok := waitFor(ctx, dcWait, cond)
	at := time.Now()
	cancel()
	<-done
	if !ok {
		return at, fmt.Errorf("request never queued")
	}
	return at, nil
}

// awaitAbort waits for the sim's abort of id ("" = any queued request)
// and returns it.
func awaitAbort(sim *upstreamSim, id string) (vllmsim.Abort, bool) {
	timeout := time.After(dcWait)
	for {
		select {
		case a := <-sim.Aborts():
			if a.ID == id || (id == "" && a.Queued) {
				return a, true
			}
		case <-timeout:
			return vllmsim.Abort{}, false
		}
	}
}

// dcMidStream measures disconnect → upstream abort while streaming.
func dcMidStream(ctx context.Context, gw *pacegate, sim *upstreamSim, n int) ([]float64, int) {
	c := newClient(4)
	var lat []float64
	missed := 0
	for range n {
		id, at, err := dcStream(ctx, c, chatURL(gw.URL()), "sk-t0", 500, func(k int) bool { return k >= 5 })
		a, ok := awaitAbort(sim, id)
		if err != nil || !ok {
			missed++
			continue
		}
		lat = append(lat, ms(a.At.Sub(at)))
	}
	return lat, missed
}

// dcQueuedUpstream measures disconnect → abort of a request waiting for
// a running slot at the (saturated) upstream.
func dcQueuedUpstream(ctx context.Context, gw *pacegate, sim *upstreamSim, n int) ([]float64, int) {
	c := newClient(4)
	bctx, stopBlocker := context.WithCancel(ctx)
	defer stopBlocker()
	go doStream(bctx, c, chatURL(gw.URL()), "sk-t0", "", chatBody(simModel, 30000, true))
	waitFor(ctx, dcWait, func() bool { return sim.Stats().Running >= 1 })
	var lat []float64
	missed := 0
	for range n {
		at, err := dcCancelWhen(ctx, c, chatURL(gw.URL()), "sk-t0", func() bool { return sim.Stats().Waiting >= 1 })
		a, ok := awaitAbort(sim, "")
		if err != nil || !ok || !a.Queued {
			missed++
			continue
		}
		lat = append(lat, ms(a.At.Sub(at)))
	}
	return lat, missed
}

// dcQueuedGateway measures disconnect → the request leaving pacegate's
// own queue (bucket backlog back to 0) for a bucket paced far below its
// demand; such a request must never reach the upstream.
func dcQueuedGateway(ctx context.Context, gw *pacegate, sim *upstreamSim, n int) ([]float64, int, int64) {
	c := newClient(4)
	k := policy.Key{Tenant: "slow", Model: simModel}
	doStream(ctx, c, chatURL(gw.URL()), "sk-slow", "", chatBody(simModel, 2, true)) // takes the bucket's one slot
	before := sim.Stats().Requests
	var lat []float64
	missed := 0
	for range n {
		at, err := dcCancelWhen(ctx, c, chatURL(gw.URL()), "sk-slow", func() bool { return gw.Queue.Backlog(k) >= 1 })
		var gone time.Time
		if err == nil && waitFor(ctx, dcWait, func() bool { return gw.Queue.Backlog(k) == 0 }) {
			gone = time.Now()
		}
		if gone.IsZero() {
			missed++
			continue
		}
		lat = append(lat, ms(gone.Sub(at)))
	}
	return lat, missed, sim.Stats().Requests - before
}
