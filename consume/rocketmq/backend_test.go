package rocketmq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/rocketmq"
)

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  rocketmq.Config
	}{
		{"no endpoint", rocketmq.Config{ReplicaID: "r0"}},
		{"no replica", rocketmq.Config{Endpoint: "127.0.0.1:1"}},
		{"invisible below proxy minimum", rocketmq.Config{Endpoint: "127.0.0.1:1", ReplicaID: "r0", InvisibleDuration: time.Second}},
	} {
		if _, err := rocketmq.New(tc.cfg); err == nil {
			t.Errorf("%s: New succeeded", tc.name)
		}
	}
}

// An unreachable proxy at start leaves the backend down, not failed: Ready
// and Publish say ErrUnavailable at once (no broker needed for this test).
func TestNewUnreachableStartsDown(t *testing.T) {
	start := time.Now()
	b, err := rocketmq.New(rocketmq.Config{Endpoint: "127.0.0.1:1", ReplicaID: "r0", PublishTimeout: time.Second})
	if err != nil {
		t.Fatalf("New = %v, want a backend that is down", err)
	}
	defer b.Close(context.Background())
	if err := b.Ready(context.Background()); !errors.Is(err, consume.ErrUnavailable) {
		t.Fatalf("Ready = %v, want ErrUnavailable", err)
	}
	err = b.Publish(context.Background(), &consume.Message{ID: "1", LiteTopic: "t__m__r0", Body: []byte("{}")})
	if !errors.Is(err, consume.ErrUnavailable) {
		t.Fatalf("Publish = %v, want ErrUnavailable", err)
	}
	// An empty body is the caller's mistake, not an outage.
	err = b.Publish(context.Background(), &consume.Message{ID: "2", LiteTopic: "t__m__r0"})
	if err == nil || errors.Is(err, consume.ErrUnavailable) {
		t.Fatalf("Publish of an empty body = %v, want a plain error", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("New and Publish took %s", d)
	}
}

func TestPublishDeliver(t *testing.T) {
	in := sharedInstance(t)
	lt := liteTopic(in.b, "pd")
	got := make(chan *consume.Delivery, 1)
	lat := make(chan time.Duration, 1)
	defer in.r.set(lt, func(_ context.Context, d *consume.Delivery) consume.Result {
		lat <- sinceProp(d)
		got <- d
		return consume.Success()
	})()

	// The first message also subscribes the LiteTopic.
	m := message("first-"+runID, lt)
	t0 := time.Now()
	publish(t, in.b, m)
	d := recv(t, got, deliveryTimeout, "first delivery")
	<-lat
	t.Logf("first message (subscribe + send + deliver): %s", time.Since(t0).Round(time.Millisecond))
	if d.ID != m.ID || d.LiteTopic != lt || string(d.Body) != string(m.Body) || d.Attempt != 1 ||
		d.Key != m.Key || d.Properties[consume.PropTenant] != "" || d.Properties[rocketmq.PropRequestID] != "" ||
		d.Properties["t0"] == "" {
		t.Fatalf("delivery = %+v, want %+v attempt 1", d, m)
	}

	const n = 100
	var lats []time.Duration
	for i := range n {
		publish(t, in.b, message(fmt.Sprintf("pd-%s-%d", runID, i), lt))
		d := recv(t, got, deliveryTimeout, fmt.Sprintf("delivery %d", i))
		lats = append(lats, <-lat)
		if want := fmt.Sprintf("pd-%s-%d", runID, i); d.ID != want {
			t.Fatalf("delivery %d has id %s, want %s", i, d.ID, want)
		}
	}
	t.Logf("publish→deliver latency over %d sequential messages: p50 %s p90 %s p99 %s max %s",
		n, percentile(lats, .5), percentile(lats, .9), percentile(lats, .99), percentile(lats, 1))

	// Drain a backlog: one LiteTopic delivers one message at a time (FIFO),
	// so this is a single tenant's ceiling on this backend.
	const backlog = 100
	for i := range backlog {
		publish(t, in.b, message(fmt.Sprintf("drain-%s-%d", runID, i), lt))
	}
	var first time.Time
	for i := range backlog {
		recv(t, got, deliveryTimeout, "drained delivery")
		<-lat
		if i == 0 {
			first = time.Now()
		}
	}
	t.Logf("one LiteTopic drains a backlog of %d at %.0f messages/s", backlog, float64(backlog-1)/time.Since(first).Seconds())
}

// Retry becomes a Suspend with backoff; the backend counts the attempts.
func TestRetryCountsAttempts(t *testing.T) {
	in := sharedInstance(t)
	lt := liteTopic(in.b, "retry")
	attempts := make(chan int, 5)
	defer in.r.set(lt, func(_ context.Context, d *consume.Delivery) consume.Result {
		attempts <- d.Attempt
		if d.Attempt < 3 {
			return consume.Retry()
		}
		return consume.Success()
	})()
	publish(t, in.b, message("retry-"+runID, lt))
	for want := 1; want <= 3; want++ {
		if got := recv(t, attempts, deliveryTimeout, "attempt"); got != want {
			t.Fatalf("attempt = %d, want %d", got, want)
		}
	}
}
