package consume

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// Observer receives the consumer's decisions, for metrics. Methods are
// called from handler and invocation goroutines and must not block.
type Observer interface {
	Released(k policy.Key, queueWait time.Duration)
	Suspended(k policy.Key, d time.Duration, reason string) // "pace" | "capacity"
	Dropped(k policy.Key, reason string)                    // "client_gone" | "duplicate" | "bad_message"
	Panicked(k policy.Key)
}

// Reasons passed to Observer.Suspended and Observer.Dropped.
const (
	ReasonPace       = "pace"
	ReasonCapacity   = "capacity"
	ReasonClientGone = "client_gone"
	ReasonDuplicate  = "duplicate"
	ReasonBadMessage = "bad_message"
)

type nopObserver struct{}

func (nopObserver) Released(policy.Key, time.Duration)          {}
func (nopObserver) Suspended(policy.Key, time.Duration, string) {}
func (nopObserver) Dropped(policy.Key, string)                  {}
func (nopObserver) Panicked(policy.Key)                         {}

// ConsumerConfig wires a Consumer. Backend, Registry, Pacer and Upstreams
// are required.
type ConsumerConfig struct {
	Backend   Backend   // for MinSuspend
	Registry  *Registry // where waiting requests are found
	Pacer     Pacer
	Upstreams Upstreams
	// Buckets, if set, is told about departures, suspensions and releases.
	Buckets *Buckets
	// Observer receives metrics hooks. Nil means none.
	Observer Observer
	// Logger receives panics. Nil means slog.Default().
	Logger *slog.Logger
	// CapacityBackoff is how long a bucket is suspended when no upstream
	// has capacity for its model. Zero means 25 ms.
	CapacityBackoff time.Duration
	// MaxSuspend caps one suspension, so that a rate increase reaches a
	// bucket suspended under the old, slower rate within MaxSuspend. Zero
	// means no cap: right for a backend that implements [Waker], where
	// the app wakes the touched buckets instead.
	MaxSuspend time.Duration
}

// ErrConsumerClosed is sent to a request delivered after Consumer.Close.
var ErrConsumerClosed = errors.New("consume: consumer closed")

// Consumer decides, for each delivery, whether to drop, suspend or
// dispatch it (see the package doc for the rules and their order). Create
// it with [NewConsumer] and pass [Consumer.Handle] to Backend.Start. It is
// safe for concurrent use. mu guards closed and running, so that no
// invocation goroutine starts once Close has begun waiting.
type Consumer struct {
	cfg        ConsumerConfig
	obs        Observer
	minSuspend time.Duration
	idle       chan struct{} // closed once closed and running == 0

	mu      sync.Mutex
	closed  bool
	running int // invocation goroutines
}

// NewConsumer returns a Consumer for cfg.
func NewConsumer(cfg ConsumerConfig) *Consumer {
	if cfg.CapacityBackoff <= 0 {
		cfg.CapacityBackoff = 25 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Consumer{cfg: cfg, obs: cfg.Observer, minSuspend: cfg.Backend.MinSuspend(), idle: make(chan struct{})}
	if c.obs == nil {
		c.obs = nopObserver{}
	}
	return c
}

// Close stops new dispatches and waits, bounded by ctx, for invocation
// goroutines; each ends when its upstream call does, at the latest when
// its request context ends. Close the Backend first, so that nothing is
// delivered meanwhile.
func (c *Consumer) Close(ctx context.Context) error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		if c.running == 0 {
			close(c.idle)
		}
	}
	c.mu.Unlock()
	select {
	case <-c.idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// goInvoke runs f in a goroutine tracked for Close; false once closed.
func (c *Consumer) goInvoke(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.running++
	go func() {
		defer c.invoked()
		f()
	}()
	return true
}

func (c *Consumer) invoked() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running--; c.running == 0 && c.closed {
		close(c.idle)
	}
}

// delivery is what Handle extracts from a Delivery's properties.
type delivery struct {
	key      policy.Key
	cost     float64
	enqueued time.Time
}

func parseDelivery(d *Delivery) (delivery, error) {
	p := d.Properties
	x := delivery{key: policy.Key{Tenant: p[PropTenant], Model: p[PropModel]}, cost: 1, enqueued: EnqueuedAt(p)}
	if x.key.Tenant == "" || x.key.Model == "" {
		return x, errors.New("consume: message without tenant or model")
	}
	if s, ok := p[PropCost]; ok {
		c, err := strconv.ParseFloat(s, 64)
		if err != nil || c < 0 {
			return x, errors.New("consume: bad cost " + strconv.Quote(s))
		}
		x.cost = c
	}
	return x, nil
}

// depart tells the bucket tracker that a message left the queue.
func (c *Consumer) depart(x delivery) {
	if c.cfg.Buckets != nil {
		c.cfg.Buckets.Depart(x.key, x.enqueued)
	}
}

func (c *Consumer) drop(x delivery, reason string) Result {
	c.obs.Dropped(x.key, reason)
	return Success()
}

func (c *Consumer) suspend(x delivery, d time.Duration, reason string) Result {
	if c.cfg.MaxSuspend > 0 {
		d = min(d, max(c.cfg.MaxSuspend, c.minSuspend))
	}
	if c.cfg.Buckets != nil {
		c.cfg.Buckets.MarkSuspended(x.key, time.Now().Add(d))
	}
	c.obs.Suspended(x.key, d, reason)
	return Suspend(d)
}
