package rocketmq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/rocketmq"
	"github.com/pacegate/pacegate/policy"
)

// The suite needs a broker: bash scripts/rocketmq/rmq.sh fetch start init,
// then PACEGATE_ROCKETMQ_ENDPOINT=127.0.0.1:8081 (rmq.sh env prints it).
const envEndpoint = "PACEGATE_ROCKETMQ_ENDPOINT"

const skipMsg = "set " + envEndpoint + " (bash scripts/rocketmq/rmq.sh fetch start init; eval $(bash scripts/rocketmq/rmq.sh env)) to run the RocketMQ suite"

// deliveryTimeout bounds each wait for a delivery in a test. The run's
// real bound is slowDelivery (5 s, checked over every delivery by
// TestMain); this one only keeps a test from waiting much longer than
// that for a message that never comes.
const deliveryTimeout = 10 * time.Second

// runID makes every LiteTopic name of this run unique.
var runID = randHex(3)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func TestMain(m *testing.M) {
	if os.Getenv(envEndpoint) != "" {
		// Keep the Go client's own log out of $HOME.
		dir := filepath.Join(os.TempDir(), "pacegate-rocketmq-client-log")
		_ = os.Setenv("rocketmq.client.logRoot", dir)
		rmq.ResetLogger()
	}
	code := m.Run()
	if slow := waits.report(os.Stderr); slow > 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d deliveries waited longer than %s\n", slow, slowDelivery)
		code = 1
	}
	closeShared()
	os.Exit(code)
}

// raceMsg explains why the broker tests skip under -race: the Go client
// v5.1.4 itself races (push_consumer.go:379 reads pcSettings.isFifo in
// Start while the telemetry goroutine writes it in applySettingsCommand,
// push_consumer_options.go:226), which the detector reports as a failure.
const raceMsg = "the RocketMQ Go client v5.1.4 has a data race in LitePushConsumer.Start (isFifo vs applySettingsCommand); run this suite without -race (go test -count=1 ./consume/rocketmq/), or set PACEGATE_ROCKETMQ_RACE=1"

func endpoint(t *testing.T) string {
	t.Helper()
	ep := os.Getenv(envEndpoint)
	if ep == "" {
		t.Skip(skipMsg)
	}
	if raceEnabled && os.Getenv("PACEGATE_ROCKETMQ_RACE") == "" {
		t.Skip(raceMsg)
	}
	return ep
}

func testConfig(t *testing.T, replica string) rocketmq.Config {
	return rocketmq.Config{
		Endpoint:          endpoint(t),
		Topic:             envOr("PACEGATE_ROCKETMQ_TOPIC", rocketmq.DefaultTopic),
		Group:             envOr("PACEGATE_ROCKETMQ_GROUP", rocketmq.DefaultGroup),
		ReplicaID:         replica,
		InvisibleDuration: 15 * time.Second,
		ProbeInterval:     500 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// router sends each delivery to the handler registered for its LiteTopic;
// deliveries for unknown LiteTopics (earlier runs) are acknowledged.
type router struct {
	mu sync.RWMutex
	m  map[string]consume.Handler
}

func (r *router) set(lt string, h consume.Handler) func() {
	r.mu.Lock()
	r.m[lt] = h
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.m, lt)
		r.mu.Unlock()
	}
}

func (r *router) handle(ctx context.Context, d *consume.Delivery) consume.Result {
	r.mu.RLock()
	h := r.m[d.LiteTopic]
	r.mu.RUnlock()
	if h == nil {
		return consume.Success()
	}
	waits.delivered(d)
	res := h(ctx, d)
	waits.answered(d, res)
	return res
}

type instance struct {
	b *rocketmq.Backend
	r *router
}

func newInstance(t *testing.T, replica string) (*instance, error) {
	b, err := rocketmq.New(testConfig(t, replica))
	if err != nil {
		return nil, err
	}
	in := &instance{b: b, r: &router{m: map[string]consume.Handler{}}}
	if err := b.Start(in.r.handle); err != nil {
		return nil, err
	}
	return in, nil
}

var (
	sharedOnce sync.Once
	shared     *instance
	sharedErr  error
)

// sharedInstance is one Backend for the whole run: starting and stopping a
// LitePushConsumer costs seconds (GracefulStop waits for the long poll).
func sharedInstance(t *testing.T) *instance {
	t.Helper()
	endpoint(t)
	sharedOnce.Do(func() { shared, sharedErr = newInstance(t, "a"+runID) })
	if sharedErr != nil {
		t.Fatalf("shared backend: %v", sharedErr)
	}
	waitReady(t, shared.b, 60*time.Second)
	return shared
}

// extraClose lists further backends the run opened; closed with shared.
var extraClose []*rocketmq.Backend

// closeShared closes every backend of the run in parallel (each Close
// waits for the client's long poll, tens of seconds).
func closeShared() {
	all := extraClose
	if shared != nil {
		all = append(all, shared.b)
	}
	var wg sync.WaitGroup
	for _, b := range all {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if _, err := b.Close(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "close backend:", err)
			}
		})
	}
	wg.Wait()
}

func waitReady(t *testing.T, b *rocketmq.Backend, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := b.Ready(t.Context())
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend not ready after %s: %v", timeout, err)
		}
		<-tick.C
	}
}

// liteTopic is a LiteTopic name unique to this run.
func liteTopic(b *rocketmq.Backend, tenant string) string {
	return b.LiteTopic(tenant+"-"+runID, "m1")
}

func message(id, lt string) *consume.Message {
	return &consume.Message{
		ID:        id,
		LiteTopic: lt,
		Key:       policy.Key{Tenant: "t", Model: "m1"},
		Body:      []byte(`{"id":"` + id + `"}`),
		Properties: map[string]string{
			"t0": strconv.FormatInt(time.Now().UnixNano(), 10),
		},
	}
}

func publish(t *testing.T, b *rocketmq.Backend, m *consume.Message) {
	t.Helper()
	if err := b.Publish(t.Context(), m); err != nil {
		t.Fatalf("Publish %s: %v", m.ID, err)
	}
	waits.published(m.ID)
}

// sinceProp is how long ago the message's "t0" property was stamped.
func sinceProp(d *consume.Delivery) time.Duration {
	ns, _ := strconv.ParseInt(d.Properties["t0"], 10, 64)
	return time.Since(time.Unix(0, ns))
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p * float64(len(s)-1))
	return s[i]
}

// recv waits for one value on ch or fails after timeout.
func recv[T any](t *testing.T, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
		var zero T
		return zero
	}
}
