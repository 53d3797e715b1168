package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/policy"
)

// PropRequestID is the user property that carries the request id.
const PropRequestID = "reqid"

// Backend is a [consume.Backend] on RocketMQ Lite. Create it with [New]. It
// is safe for concurrent use.
//
// mu guards pending, retries, topics, nsubs, quotaHit, wstats, lag and
// closing; it is never held across an RPC (subscription RPCs run in
// goroutines started under mu and counted in bg).
type Backend struct {
	cfg   Config
	log   *slog.Logger
	cl    atomic.Pointer[clients] // replaced when the proxy connection was lost
	probe *prober

	handler atomic.Pointer[consume.Handler]
	started atomic.Bool
	closed  atomic.Bool
	health  atomic.Pointer[healthState]
	// groupLost is set when the proxy refused the current clients' call
	// because it does not know the consumer group; the probe loop then
	// rebuilds the clients, and publishes are refused until that works.
	groupLost atomic.Pointer[error]

	// handlerCtx is passed to handler calls; cancelled when Close gives up.
	handlerCtx    context.Context
	cancelHandler context.CancelFunc

	rebuildMu sync.Mutex     // one client rebuild at a time
	bg        sync.WaitGroup // sends cut off by PublishTimeout, subscription RPCs, old clients stopping
	subSem    chan struct{}  // bounds concurrent subscription RPCs (SubscribeConcurrency)

	mu       sync.Mutex
	closing  bool
	inflight sync.WaitGroup    // handler calls; Add only under mu while !closing
	topics   map[string]*topic // LiteTopics this process uses
	nsubs    int               // topics subscribed or being subscribed
	quotaHit time.Time         // the broker's last quota refusal
	wstats   WatchdogStats
	lag      lagTracker        // how late deliveries are now (watchdog)
	pending  map[string]string // request id → LiteTopic: published, not acknowledged
	retries  map[string]int    // request id → Retry results so far

	loopQuit chan struct{}
	loopDone chan struct{}
	kick     chan struct{} // cap 1: ask the probe loop to check now
	wkick    chan struct{} // cap 1: ask the watchdog to sweep now
	wdone    chan struct{} // closed when the watchdog loop returned
}

var _ consume.Backend = (*Backend)(nil)

type healthState struct {
	up    bool
	err   error // why it is down
	since time.Time
}

// New connects to the proxy at cfg.Endpoint, starts the producer and the
// LitePushConsumer, and starts probing. A broker that is not usable at
// start (unreachable, parent topic missing, group refused) does not fail
// New: the backend starts down, logs why, reports it through Ready (so
// /readyz is false) and fails Publish with [consume.ErrUnavailable] (so
// clients get a 503), and the probe connects it as soon as the broker
// answers. Only a bad Config is an error.
func New(cfg Config) (*Backend, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("component", "rocketmq", "endpoint", cfg.Endpoint, "replica", cfg.ReplicaID)
	rmq.EnableSsl = false // the client's default is TLS; a local proxy speaks plaintext
	quietClient()

	p, err := newProber(cfg.Endpoint, cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("rocketmq: %w", err)
	}
	b := &Backend{
		cfg:      cfg,
		log:      log,
		probe:    p,
		topics:   make(map[string]*topic),
		pending:  make(map[string]string),
		retries:  make(map[string]int),
		subSem:   make(chan struct{}, cfg.SubscribeConcurrency),
		loopQuit: make(chan struct{}),
		loopDone: make(chan struct{}),
		kick:     make(chan struct{}, 1),
		wkick:    make(chan struct{}, 1),
		wdone:    make(chan struct{}),
	}
	b.handlerCtx, b.cancelHandler = context.WithCancel(context.Background())
	if err := b.connect(); err != nil {
		b.setDown(err, time.Now())
		log.Error("rocketmq: broker unusable at start; /readyz is false and requests get 503 until it is reachable "+
			"(for a local broker: bash scripts/rocketmq/rmq.sh fetch start init)", "err", err)
	} else {
		b.health.Store(&healthState{up: true, since: time.Now()})
		log.Info("rocketmq: connected", "topic", cfg.Topic, "group", cfg.Group)
	}
	go b.probeLoop()
	go b.watchdogLoop()
	return b, nil
}

// connect checks the broker and starts the clients.
func (b *Backend) connect() error {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.PublishTimeout)
	err := b.probe.check(ctx)
	cancel()
	if err != nil {
		return fmt.Errorf("%w: rocketmq at %s: %v", consume.ErrUnavailable, b.cfg.Endpoint, err)
	}
	cl, err := b.startClients(1)
	if err != nil {
		return err
	}
	b.cl.Store(cl)
	return nil
}

// clients are one producer and one LitePushConsumer. v5.1.4 does not
// recover from a proxy restart on its own (its telemetry stream is dropped
// and settings are re-sent only every 5 minutes, so the new proxy answers
// every receive with UNRECOGNIZED_CLIENT_TYPE); the backend then replaces
// both (see rebuild).
type clients struct {
	producer rmq.Producer
	consumer rmq.LitePushConsumer
	// gen numbers the clients (1 at New, +1 per rebuild): a LiteTopic
	// subscribed on an older generation must be subscribed again.
	gen uint64
	// started is when the consumer's Start returned: the base of its
	// full-sync ticker (see syncTickWithin).
	started time.Time
}

func (b *Backend) startClients(gen uint64) (*clients, error) {
	cfg := b.cfg
	creds := &credentials.SessionCredentials{} // ACL off: empty credentials
	prod, err := rmq.NewProducer(&rmq.Config{Endpoint: cfg.Endpoint, Credentials: creds}, rmq.WithTopics(cfg.Topic))
	if err != nil {
		return nil, fmt.Errorf("rocketmq: new producer: %w", err)
	}
	if err := prod.Start(); err != nil {
		return nil, fmt.Errorf("%w: rocketmq: start producer on topic %s: %v", consume.ErrUnavailable, cfg.Topic, err)
	}
	cons, err := rmq.NewLitePushConsumer(
		&rmq.Config{Endpoint: cfg.Endpoint, ConsumerGroup: cfg.Group, Credentials: creds},
		rmq.NewLitePushConsumerConfig(cfg.Topic, cfg.InvisibleDuration),
		rmq.WithPushEnableFifoConsumeAccelerator(true),
		rmq.WithPushConsumptionThreadCount(int32(cfg.ConsumptionThreads)),
		rmq.WithPushMaxCacheMessageCount(int32(cfg.MaxCacheMessages)),
		rmq.WithPushMessageListener(&rmq.FuncMessageListener{Consume: b.consume}),
	)
	if err != nil {
		_ = prod.GracefulStop()
		return nil, fmt.Errorf("rocketmq: new lite push consumer: %w", err)
	}
	if err := cons.Start(); err != nil {
		_ = prod.GracefulStop()
		return nil, fmt.Errorf("%w: rocketmq: start lite consumer (group %s bound to %s?): %v",
			consume.ErrUnavailable, cfg.Group, cfg.Topic, err)
	}
	return &clients{producer: prod, consumer: cons, gen: gen, started: time.Now()}, nil
}

// stop stops both clients; the consumer waits for its long poll.
func (c *clients) stop() error {
	err := c.consumer.GracefulStop()
	if perr := c.producer.GracefulStop(); err == nil {
		err = perr
	}
	return err
}

// LiteTopic is the LiteTopic name for a tenant's requests to model on this
// replica: [consume.LiteTopicName](tenant, model, Config.ReplicaID).
func (b *Backend) LiteTopic(tenant, model string) string {
	return consume.LiteTopicName(tenant, model, b.cfg.ReplicaID)
}

// ReplicaID is Config.ReplicaID.
func (b *Backend) ReplicaID() string { return b.cfg.ReplicaID }

// MinSuspend implements [consume.Backend.MinSuspend]: the client's 50 ms
// minimum.
func (b *Backend) MinSuspend() time.Duration { return minSuspend }

// Ready implements [consume.Backend.Ready]. It reports the probe's latest
// view; the error wraps consume.ErrUnavailable.
func (b *Backend) Ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.closed.Load() {
		return consume.ErrClosed
	}
	h := b.health.Load()
	if !h.up {
		return fmt.Errorf("%w: rocketmq at %s down since %s: %v",
			consume.ErrUnavailable, b.cfg.Endpoint, h.since.Format(time.RFC3339), h.err)
	}
	return nil
}

// Publish implements [consume.Backend.Publish]. It subscribes m.LiteTopic
// first if this process has not yet, then sends, within PublishTimeout.
func (b *Backend) Publish(ctx context.Context, m *consume.Message) error {
	if b.closed.Load() {
		return consume.ErrClosed
	}
	if m.ID == "" {
		return errors.New("rocketmq: message has no ID")
	}
	if len(m.Body) == 0 {
		// The proxy refuses it (MESSAGE_BODY_EMPTY); said here, it is not
		// mistaken for an outage (ErrUnavailable, a probe kick).
		return errors.New("rocketmq: message has an empty body")
	}
	if err := consume.ValidLiteTopic(m.LiteTopic); err != nil {
		return err
	}
	if h := b.health.Load(); !h.up {
		return fmt.Errorf("%w: rocketmq at %s: %v", consume.ErrUnavailable, b.cfg.Endpoint, h.err)
	}
	if err := b.reserve(m); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.PublishTimeout)
	defer cancel()
	if err := b.ensureSubscribed(ctx, m.LiteTopic); err != nil {
		b.sent(m.ID, m.LiteTopic, false, time.Now())
		return err
	}
	msg := &rmq.Message{Topic: b.cfg.Topic, Body: m.Body}
	msg.SetLiteTopic(m.LiteTopic)
	msg.SetKeys(m.ID)
	if m.Key.Tenant != "" || m.Key.Model != "" {
		msg.AddProperty(consume.PropTenant, m.Key.Tenant)
		msg.AddProperty(consume.PropModel, m.Key.Model)
	}
	for k, v := range m.Properties {
		msg.AddProperty(k, v)
	}
	msg.AddProperty(PropRequestID, m.ID)
	if err := b.send(ctx, msg); err != nil {
		b.sent(m.ID, m.LiteTopic, false, time.Now())
		if cerr := ctx.Err(); cerr != nil && !errors.Is(cerr, context.DeadlineExceeded) {
			return cerr // the caller gave up
		}
		err = mapBrokerError("send to "+m.LiteTopic, m.LiteTopic, err)
		if _, full := consume.IsFull(err); !full {
			b.kickProbe()
		}
		return err
	}
	b.sent(m.ID, m.LiteTopic, true, time.Now())
	return nil
}

// sent records that a message to lt was stored by the broker (ok) or
// that its send failed (then it is released).
func (b *Backend) sent(id, lt string, ok bool, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[lt]
	if t != nil && t.sending > 0 {
		t.sending--
	}
	if !ok {
		b.releaseLocked(id)
		return
	}
	if t == nil {
		return
	}
	t.stored = now
	if t.waiting-t.sending == 1 && !t.busy {
		t.due = now // the only stored one: deliverable from now
	}
}

// send bounds the client's Send by ctx: v5.1.4 retries with its own
// 5 s connection timeouts and can take 10 s or more against a dead proxy.
// A send cut off here may still complete; its message is then delivered
// with no ledger entry (the consumer finds no waiting client and drops it).
func (b *Backend) send(ctx context.Context, msg *rmq.Message) error {
	done := make(chan error, 1)
	cl := b.cl.Load()
	if cl == nil {
		return consume.ErrUnavailable
	}
	prod := cl.producer
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return consume.ErrClosed
	}
	b.bg.Add(1) // under mu while !closing: cannot race Close's Wait
	b.mu.Unlock()
	go func() {
		defer b.bg.Done()
		_, err := prod.Send(ctx, msg)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reserve counts m against MaxPending, the bound on what this process
// has in the broker. (A bucket's own backlog limit is consume.Queue's.)
func (b *Backend) reserve(m *consume.Message) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, dup := b.pending[m.ID]; dup {
		return fmt.Errorf("rocketmq: request id %q is already queued", m.ID)
	}
	if len(b.pending) >= b.cfg.MaxPending {
		return &consume.FullError{Scope: consume.ScopeEngine, LiteTopic: m.LiteTopic,
			Limit: int64(b.cfg.MaxPending), RetryAfter: DefaultFullRetryAfter}
	}
	b.pending[m.ID] = m.LiteTopic
	now := time.Now()
	t := b.topics[m.LiteTopic]
	if t == nil {
		t = &topic{}
		b.topics[m.LiteTopic] = t
	}
	t.waiting++
	t.sending++
	t.used = now
	return nil
}

// release forgets id (acknowledged, or its send failed).
func (b *Backend) release(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releaseLocked(id)
}

// releaseLocked is release; requires mu held.
func (b *Backend) releaseLocked(id string) {
	lt, ok := b.pending[id]
	if !ok {
		return
	}
	delete(b.retries, id)
	delete(b.pending, id)
	if t := b.topics[lt]; t != nil && t.waiting > 0 {
		t.waiting--
	}
}

// Start implements [consume.Backend.Start]. Messages that arrive before
// Start are suspended for a second.
func (b *Backend) Start(h consume.Handler) error {
	if h == nil {
		return errors.New("rocketmq: nil handler")
	}
	if b.closed.Load() {
		return consume.ErrClosed
	}
	if !b.started.CompareAndSwap(false, true) {
		return errors.New("rocketmq: Start called twice")
	}
	b.handler.Store(&h)
	return nil
}

// consume is the client's listener: it runs on the client's pool, one
// message of a LiteTopic at a time.
func (b *Backend) consume(mv *rmq.MessageView) rmq.ConsumerResult {
	hp := b.handler.Load()
	b.mu.Lock()
	if b.closing || hp == nil {
		b.mu.Unlock()
		return rmq.NewConsumerResultSuspend(time.Second) // stays queued
	}
	b.inflight.Add(1)
	d := b.delivery(mv)
	own := b.deliveredLocked(d, time.Now())
	b.mu.Unlock()
	defer b.inflight.Done()

	res := b.call(*hp, d)
	var out rmq.ConsumerResult
	next := time.Duration(0) // when the LiteTopic can deliver again
	switch res.Action {
	case consume.ActionSuccess:
		b.release(d.ID)
		out = rmq.SUCCESS
	case consume.ActionSuspend:
		next = clampSuspend(res.Delay)
		out = rmq.NewConsumerResultSuspend(next)
	default:
		out, next = b.retry(d)
	}
	if own {
		b.answered(d.LiteTopic, time.Now().Add(next))
	}
	return out
}

// deliveredLocked marks d's LiteTopic busy if d is one of this process's
// messages, and reports whether it is; requires mu held.
func (b *Backend) deliveredLocked(d *consume.Delivery, now time.Time) bool {
	if _, ok := b.pending[d.ID]; !ok {
		return false
	}
	t := b.topics[d.LiteTopic]
	if t == nil {
		return false
	}
	if t.waiting-t.sending > 0 {
		b.lag.observe(now.Sub(t.due))
	}
	t.busy, t.kicks, t.nextKick, t.used = true, 0, time.Time{}, now
	return true
}

// answered ends a handler call on lt: its next message is due at next.
func (b *Backend) answered(lt string, next time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.topics[lt]; t != nil {
		t.busy, t.due = false, next
	}
}

// delivery builds the Delivery for mv; requires mu held (reads retries).
func (b *Backend) delivery(mv *rmq.MessageView) *consume.Delivery {
	props := mv.GetProperties()
	id := props[PropRequestID]
	if id == "" {
		if keys := mv.GetKeys(); len(keys) > 0 {
			id = keys[0]
		} else {
			id = mv.GetMessageId()
		}
	}
	k := policy.Key{Tenant: props[consume.PropTenant], Model: props[consume.PropModel]}
	var user map[string]string // the others, if any
	for name, v := range props {
		switch name {
		case PropRequestID, consume.PropTenant, consume.PropModel:
		default:
			if user == nil {
				user = make(map[string]string, len(props))
			}
			user[name] = v
		}
	}
	// The broker's delivery attempt cannot be used as is: it goes from 1 to
	// 2 on the first Suspend of a message (measured with a 5.5.1 broker),
	// although the contract says Suspensions do not count. For a message this
	// process published, Attempt is 1 + its Retry results; for one left by
	// an earlier process, the broker's count is all there is.
	attempt := int(mv.GetDeliveryAttempt())
	if _, ok := b.pending[id]; ok {
		attempt = 1 + b.retries[id]
	}
	return &consume.Delivery{
		Message: consume.Message{ID: id, LiteTopic: mv.GetLiteTopic(), Key: k, Body: mv.GetBody(), Properties: user},
		Attempt: attempt,
	}
}

// call runs h, turning a panic into a Retry so that it costs only this
// message.
func (b *Backend) call(h consume.Handler, d *consume.Delivery) (res consume.Result) {
	defer func() {
		if r := recover(); r != nil {
			b.log.Error("rocketmq: handler panicked", "id", d.ID, "litetopic", d.LiteTopic,
				"panic", r, "stack", string(debug.Stack()))
			res = consume.Retry()
		}
	}()
	return h(b.handlerCtx, d)
}

// retry turns a Retry result into a Suspend with exponential backoff; see
// the package doc for why not FAILURE.
func (b *Backend) retry(d *consume.Delivery) (rmq.ConsumerResult, time.Duration) {
	b.mu.Lock()
	b.retries[d.ID]++
	n := b.retries[d.ID]
	if n > b.cfg.MaxRetries {
		b.releaseLocked(d.ID)
		b.mu.Unlock()
		b.log.Error("rocketmq: giving up on a request after repeated Retry results; acknowledged",
			"id", d.ID, "litetopic", d.LiteTopic, "retries", n-1)
		return rmq.SUCCESS, 0
	}
	b.mu.Unlock()
	wait := clampSuspend(backoff(b.cfg.RetryBackoff, b.cfg.MaxRetryBackoff, n))
	return rmq.NewConsumerResultSuspend(wait), wait
}

func backoff(base, max time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

func clampSuspend(d time.Duration) time.Duration {
	return min(max(d, minSuspend), maxSuspend)
}

// Close implements [consume.Backend.Close]. The client's GracefulStop waits
// for its in-flight long poll (up to ~35 s); if ctx ends first, Close
// returns ctx's error and the client finishes stopping in the background.
// Leftover lists what this process published and did not see acknowledged.
func (b *Backend) Close(ctx context.Context) (consume.Leftover, error) {
	if !b.closed.CompareAndSwap(false, true) {
		return consume.Leftover{}, consume.ErrClosed
	}
	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	close(b.loopQuit)
	<-b.loopDone
	<-b.wdone

	done := make(chan error, 1)
	go func() {
		// Handler calls first (no new ones start: closing is set), then
		// the clients.
		b.inflight.Wait()
		var err error
		if cl := b.cl.Load(); cl != nil {
			err = cl.stop()
		}
		b.bg.Wait() // cut-off sends, clients replaced by rebuild
		b.probe.close()
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		b.cancelHandler()
		err = fmt.Errorf("rocketmq: close: %w", ctx.Err())
	}
	b.cancelHandler()

	b.mu.Lock()
	ids := make([]string, 0, len(b.pending))
	for id := range b.pending {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	sort.Strings(ids)
	b.log.Info("rocketmq: closed", "leftover", len(ids))
	return consume.Leftover{IDs: ids}, err
}
