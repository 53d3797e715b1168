package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pacegate/pacegate/policy"
)

// Defaults of [Options].
const (
	DefaultCallTimeout = time.Second
	DefaultTick        = 100 * time.Millisecond
	DefaultLeaseIdle   = time.Second
	DefaultHold        = 300 * time.Millisecond
)

// Options configure a [Store]. A zero field takes its default.
type Options struct {
	Addr     string // host:port
	DB       int
	Username string
	Password string
	TLS      bool
	// Replicas is N, how many replicas share the caps: while the store is
	// unreachable each keeps cap/N and rate/N. Default 1.
	Replicas int
	// Prefix starts every key ("pacegate:" by default): several gateways
	// may share a Redis under different prefixes.
	Prefix string
	// CallTimeout bounds one round trip; a slower store counts as down.
	CallTimeout time.Duration
	// Tick is how often the store's goroutine returns idle leases and,
	// while the store is down, probes it.
	Tick time.Duration
	// LeaseIdle is how long a lease may sit unused before it goes back.
	LeaseIdle time.Duration
	// Hold is how long, after the store came back empty or from an
	// outage, it grants nothing while replicas re-upload their usage.
	Hold   time.Duration
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Replicas < 1 {
		o.Replicas = 1
	}
	if o.Prefix == "" {
		o.Prefix = "pacegate:"
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.Tick <= 0 {
		o.Tick = DefaultTick
	}
	if o.LeaseIdle <= 0 {
		o.LeaseIdle = DefaultLeaseIdle
	}
	if o.Hold <= 0 {
		o.Hold = DefaultHold
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Stats are a Store's counters since it was made.
type Stats struct {
	Up         bool   // the store answered the last call
	RoundTrips uint64 // calls to the store, failed ones included
	Requests   uint64 // admissions decided (the denominator of round trips per request)
	Outages    uint64 // times the store was found unreachable
	Fallbacks  uint64 // admissions and releases decided locally while it was
}

// Store is the connection to the shared Redis and its health. It is safe
// for concurrent use. [Store.Start] starts its one goroutine (idle lease
// returns, probes while down); [Store.Close] stops it and closes the
// connections.
type Store struct {
	opt Options
	rdb *redis.Client
	log *slog.Logger

	up        atomic.Bool
	downSince atomic.Int64 // unix ns the current outage began; 0 while up
	recovered atomic.Bool  // the store answered a probe; the tick re-uploads before going up
	epoch     atomic.Pointer[string]
	stats     struct{ trips, requests, outages, fallbacks atomic.Uint64 }

	mu       sync.Mutex // guards tickers
	tickers  []func(now time.Time, up bool)
	stop     chan struct{}
	done     chan struct{}
	startOne sync.Once
	stopOne  sync.Once
}

// quiet keeps go-redis's own log lines (a failed dial, retried) out of
// the process's log: the Store logs an outage once, as slog.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var quietOnce sync.Once

// New returns a store for o without contacting it: the first call (or
// [Store.Start]'s probe) does.
func New(o Options) *Store {
	quietOnce.Do(func() { redis.SetLogger(quiet{}) })
	o = o.withDefaults()
	ro := &redis.Options{Addr: o.Addr, DB: o.DB, Username: o.Username, Password: o.Password,
		DialTimeout: o.CallTimeout, ReadTimeout: o.CallTimeout, WriteTimeout: o.CallTimeout,
		MaxRetries:            -1, // a failed call falls back at once; the probe decides when to come back
		ContextTimeoutEnabled: true, DisableIdentity: true}
	if o.TLS {
		ro.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: strings.Split(o.Addr, ":")[0]}
	}
	s := &Store{opt: o, rdb: redis.NewClient(ro), log: o.Logger, stop: make(chan struct{}), done: make(chan struct{})}
	s.up.Store(true)
	return s
}

// Start probes the store once (bounded by the call timeout) and starts
// the store's goroutine. An unreachable store is not an error: the
// replica starts on its fallback and comes back when the store answers.
func (s *Store) Start(ctx context.Context) {
	s.startOne.Do(func() {
		if err := s.ping(ctx); err != nil {
			s.markDown(err)
		}
		go s.loop()
	})
}

// Close stops the goroutine and closes the connections. It is safe to
// call more than once, and without Start.
func (s *Store) Close() error {
	var err error
	s.stopOne.Do(func() {
		close(s.stop)
		s.startOne.Do(func() { close(s.done) }) // never started: nothing to wait for
		<-s.done
		err = s.rdb.Close()
	})
	return err
}

// Up reports whether the store answered the last call.
func (s *Store) Up() bool { return s.up.Load() }

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{Up: s.up.Load(), RoundTrips: s.stats.trips.Load(), Requests: s.stats.requests.Load(),
		Outages: s.stats.outages.Load(), Fallbacks: s.stats.fallbacks.Load()}
}

// onTick registers f, called by the store's goroutine every tick with
// whether the store is up (the admitter's idle returns and re-uploads,
// the pacer's sweep).
func (s *Store) onTick(f func(now time.Time, up bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tickers = append(s.tickers, f)
}

func (s *Store) loop() {
	defer close(s.done)
	t := time.NewTicker(s.opt.Tick)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.tick(now)
		}
	}
}

// tick probes a store that is down and runs the tickers. A store that
// answers again is marked up only after the tickers ran with up=false
// and recovered set, so that re-uploads go out before new leases.
func (s *Store) tick(now time.Time) {
	if !s.up.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), s.opt.CallTimeout)
		err := s.ping(ctx)
		cancel()
		if err == nil {
			s.recovered.Store(true)
		}
	}
	s.mu.Lock()
	tickers := s.tickers
	s.mu.Unlock()
	for _, f := range tickers {
		f(now, s.up.Load())
	}
	if s.recovered.CompareAndSwap(true, false) && !s.up.Load() {
		s.markUp()
	}
}

func (s *Store) ping(ctx context.Context) error {
	s.stats.trips.Add(1)
	return s.rdb.Ping(ctx).Err()
}

// markDown records an outage: a log line and the counter, once per
// outage.
func (s *Store) markDown(err error) {
	if s.up.CompareAndSwap(true, false) {
		s.downSince.Store(time.Now().UnixNano())
		s.stats.outages.Add(1)
		s.log.Warn("cluster store unreachable; each replica keeps cap/N and rate/N until it answers",
			"addr", s.opt.Addr, "replicas", s.opt.Replicas, "err", err)
	}
}

func (s *Store) markUp() {
	since := time.Unix(0, s.downSince.Swap(0))
	s.up.Store(true)
	s.log.Info("cluster store reachable again; caps and rates are shared", "addr", s.opt.Addr,
		"outage", time.Since(since).Round(time.Millisecond))
}

// recovering reports whether the store answered a probe and is about to
// be marked up: the tickers re-upload what was decided locally.
func (s *Store) recovering() bool { return s.recovered.Load() }

// downAt reports whether the store was down at the given instant's
// outage: the unix ns the current outage began (0 while up).
func (s *Store) outageStart() int64 { return s.downSince.Load() }

// knownEpoch is the store's epoch as last seen ("" before the first
// reply).
func (s *Store) knownEpoch() string {
	if e := s.epoch.Load(); e != nil {
		return *e
	}
	return ""
}

// sawEpoch records the epoch a reply carried and reports whether it
// differs from a known earlier one: the store restarted (or was flushed)
// and lost its counters.
func (s *Store) sawEpoch(e string) (changed bool) {
	if e == "" { // no call was made
		return false
	}
	old := s.epoch.Swap(&e)
	return old != nil && *old != e
}

// run makes one round trip: a script call, counted, with the call
// timeout. A network failure marks the store down.
func (s *Store) run(sc *redis.Script, keys []string, args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opt.CallTimeout)
	defer cancel()
	s.stats.trips.Add(1)
	v, err := sc.Run(ctx, s.rdb, keys, args...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		s.markDown(err)
		return nil, fmt.Errorf("cluster store: %w", err)
	}
	return v, nil
}

// key builds a store key: the prefix, a kind, the bucket, and a suffix.
// Tenant ids and model names may hold any printable character, so they
// are length-prefixed rather than joined by a separator.
func (s *Store) key(kind string, k policy.Key, suffix string) string {
	return fmt.Sprintf("%s%s:%d:%s%d:%s%s", s.opt.Prefix, kind, len(k.Tenant), k.Tenant, len(k.Model), k.Model, suffix)
}

func (s *Store) epochKey() string { return s.opt.Prefix + "epoch" }
func (s *Store) holdKey() string  { return s.opt.Prefix + "hold" }
