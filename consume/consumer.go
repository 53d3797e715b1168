package consume

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/pacegate/pacegate/consume/fairshare"
	"github.com/pacegate/pacegate/policy"
)

// Observer receives the consumer's decisions, for metrics. Methods are
// called from handler and invocation goroutines and must not block.
type Observer interface {
	Released(k policy.Key, queueWait time.Duration)
	Suspended(k policy.Key, d time.Duration, reason string) // ReasonPace, ReasonCapacity, ReasonCapacityRecheck
	Dropped(k policy.Key, reason string)                    // ReasonClientGone, ReasonDuplicate
	Panicked(k policy.Key)
}

// Reasons passed to Observer.Suspended and Observer.Dropped.
const (
	ReasonPace       = "pace"
	ReasonClientGone = "client_gone"
	ReasonDuplicate  = "duplicate"
)

type nopObserver struct{}

func (nopObserver) Released(policy.Key, time.Duration)          {}
func (nopObserver) Suspended(policy.Key, time.Duration, string) {}
func (nopObserver) Dropped(policy.Key, string)                  {}
func (nopObserver) Panicked(policy.Key)                         {}

// ConsumerConfig wires a Consumer. Queue, Pacer and Upstreams are
// required.
type ConsumerConfig struct {
	Queue     *Queue
	Pacer     Pacer
	Upstreams Upstreams
	// Capacity is how a saturated pool is shared. The zero value is
	// CapacityFair.
	Capacity CapacityMode
	// CompletionWeight is w in a bucket's service (prompt tokens plus
	// w × completion tokens). Zero means DefaultCompletionWeight.
	CompletionWeight float64
	// Fairness is the fair-share scheduler. Nil means a new one with the
	// default half-life.
	Fairness *fairshare.Scheduler
	// Reserve is how many of a model's free slots are kept, in fair mode,
	// for buckets of the high band and buckets below their weighted share
	// of the model's slots: a newcomer then finds a slot at once instead of
	// waiting for the next one to free, at the cost of up to Reserve idle
	// slots while only buckets above their share wait. Zero (the default)
	// keeps the pool work-conserving: no slot waits while a bucket does.
	Reserve int
	// Headroom is how many requests of a model may run, in fair mode,
	// beyond its upstreams' concurrency limits (each upstream must allow
	// as much: upstream.UpstreamConfig.Headroom), and only for buckets
	// owed capacity: the high band, or a bucket below its weighted share
	// of the model's slots. It also keeps, up to that many, the slots owed
	// to buckets below their share that pause between requests, so that
	// their next request starts at once (fairshare.Scheduler.Access).
	// Zero (the default) keeps the pool work-conserving within its limits.
	Headroom int
	// MaxSlowdown holds, per band (0 = high), how much the steps of the
	// band's requests may slow down through the requests of lower bands
	// that run beside them, as a factor of their speed with the band's
	// own requests alone: while a bucket of the band is active on a
	// model, a bucket of a lower band takes a slot only while the
	// model's batch stays within that factor, as the upstreams learn it
	// from their metrics (Calmer). Values below 1 (and +Inf) bound
	// nothing. Fair mode only.
	MaxSlowdown [fairshare.NumBands]float64
	// Observer receives metrics hooks. Nil means none.
	Observer Observer
	// Logger receives panics. Nil means slog.Default().
	Logger *slog.Logger
	// CapacityBackoff is the poll mode's suspension when no upstream has
	// capacity. Zero means 25 ms.
	CapacityBackoff time.Duration
}

// maxSuspendWithoutWake caps one suspension on a backend that cannot be
// woken (RocketMQ holds suspensions in the broker): a rate increase then
// reaches requests already queued within this long.
const maxSuspendWithoutWake = time.Second

// ErrConsumerClosed is sent to a request delivered after Consumer.Close.
var ErrConsumerClosed = errors.New("consume: consumer closed")

// Consumer decides, for each delivery, whether to drop, suspend or
// dispatch it (see the package doc for the rules and their order). Create
// it with [NewConsumer] and pass [Consumer.Handle] to Backend.Start. It is
// safe for concurrent use. mu guards closed and running, so that no
// invocation goroutine starts once Close has begun waiting.
type Consumer struct {
	cfg        ConsumerConfig
	q          *Queue
	obs        Observer
	cap        *capacity
	minSuspend time.Duration
	maxSuspend time.Duration // 0: none
	pauses     bool          // the backend honours SuccessThenPause
	idle       chan struct{} // closed once closed and running == 0

	mu      sync.Mutex
	closed  bool
	running int // invocation goroutines
}

// NewConsumer returns a Consumer for cfg. In fair mode it installs itself
// as the pool's OnFree listener and the Queue's idle listener.
func NewConsumer(cfg ConsumerConfig) *Consumer {
	if cfg.CapacityBackoff <= 0 {
		cfg.CapacityBackoff = 25 * time.Millisecond
	}
	if cfg.CompletionWeight <= 0 {
		cfg.CompletionWeight = DefaultCompletionWeight
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Fairness == nil {
		cfg.Fairness = fairshare.New(0)
	}
	c := &Consumer{cfg: cfg, q: cfg.Queue, obs: cfg.Observer, idle: make(chan struct{}),
		minSuspend: cfg.Queue.Backend().MinSuspend(), pauses: cfg.Queue.Pauses()}
	if c.obs == nil {
		c.obs = nopObserver{}
	}
	if !c.q.Wakeable() {
		c.maxSuspend = max(maxSuspendWithoutWake, c.minSuspend)
	}
	c.cap = newCapacity(cfg, c.q)
	c.q.onIdle = cfg.Fairness.Idle
	c.q.onLeave = c.cap.trim
	return c
}

// Fairness is the scheduler behind the fair share, for its figures.
func (c *Consumer) Fairness() *fairshare.Scheduler { return c.cfg.Fairness }

// Close gives back the pool slots granted and not yet claimed, stops new
// dispatches and waits, bounded by ctx, for invocation goroutines; each
// ends when its upstream call does, at the latest when its request
// context ends. Close the Backend first, so that nothing is delivered
// meanwhile.
func (c *Consumer) Close(ctx context.Context) error {
	c.cap.releaseAll()
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

// goInvoke runs inv, tracked for Close, on the goroutine still
// submitting its request if it was delivered inline and that goroutine
// takes it (see Pending.handOff), else on a goroutine of its own; false
// once closed. A call delivered by a goroutine of the backend's is never
// handed off: the submitter may still wait for a broker's answer to its
// send, and the call would wait with it, holding its slot.
func (c *Consumer) goInvoke(inv *invocation, inline bool) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.running++
	c.mu.Unlock()
	if !inline || !inv.p.handOff(inv) {
		go inv.run()
	}
	return true
}

func (c *Consumer) invoked() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running--; c.running == 0 && c.closed {
		close(c.idle)
	}
}

func (c *Consumer) drop(k policy.Key, reason string) Result {
	c.obs.Dropped(k, reason)
	return Success()
}

func (c *Consumer) suspend(k policy.Key, d time.Duration, reason string) Result {
	return Suspend(c.paused(k, d, reason))
}

// paused records that k's LiteTopic delivers nothing for d, at most
// maxSuspend, and returns d so bounded.
func (c *Consumer) paused(k policy.Key, d time.Duration, reason string) time.Duration {
	if c.maxSuspend > 0 {
		d = min(d, c.maxSuspend)
	}
	c.q.markSuspended(k, time.Now().Add(d))
	c.obs.Suspended(k, d, reason)
	return d
}
