package upstream

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/upstream/prefix"
	"github.com/pacegate/pacegate/consume/upstream/vllmmetrics"
)

// Pool is the set of upstreams. Create it with [NewPool]; the zero value
// is not usable. All methods are safe for concurrent use. Pool
// implements [consume.Upstreams].
type Pool struct {
	cfg    Config
	client *http.Client
	log    *slog.Logger

	mu   sync.Mutex // guards ups' mutable fields, next, all and live
	ups  []*upstream
	next int // rotates the starting point so ties spread out
	// all is every upstream's requests in flight together and their
	// recent load: the sum of the upstreams' recent loads, which have
	// one time constant. Change it with add.
	all struct {
		inFlight int
		load     recentLoad
	}
	live liveConversations // the window of every upstream's conv
	// index is where prompt prefixes were routed; nil unless
	// Routing.Policy is RoutePrefix. It has its own lock, never taken
	// with mu held.
	index *prefix.Index

	onFree atomic.Pointer[func(models []string)] // see OnFree

	life    sync.Mutex // guards the fields below
	started bool
	closed  bool
	ctx     context.Context // the prober's; set by Start
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// upstream is one server; fields below the line are guarded by Pool.mu.
type upstream struct {
	id       int // its place in Pool.ups, and in the prefix index
	url      string
	max      int           // MaxConcurrency, or DefaultMaxConcurrency: the limit without readings
	headroom int           // slots beyond the limit, for TryAcquireHeadroom only
	dynamic  bool          // models come from /v1/models
	idle     time.Duration // a stream silent this long is stalled; 0 = no limit
	learns   bool          // its limit is learned from its /metrics

	models   []string // sorted
	inFlight int      // change it with add, which keeps load
	// reserved counts the slots of inFlight taken by acquire and not yet
	// used by a call: granted to a waiting bucket whose delivery has not
	// come yet. Atomic: a slot's take changes it without Pool.mu.
	reserved  atomic.Int64
	load      recentLoad
	healthy   bool
	downUntil time.Time
	backoff   time.Duration
	errors    uint64
	routed    map[string]uint64 // routing decisions (Decision*) that sent a request here
	conv      liveSet           // the conversations it holds that are still going

	// The prompt tokens of the responses it served and how many of them
	// it reported as prefix-cache hits (when it reports them). Atomic:
	// updated after a response, outside mu.
	promptTokens, cachedTokens atomic.Int64

	// learn is the limit learned from the readings of its /metrics,
	// used while metricsOK; fails counts the readings failed in a row
	// and gauges is the last good reading.
	learn     learner
	metricsOK bool
	fails     int
	gauges    vllmmetrics.Gauges
	speed     slowdown // how its steps slow as its batch fills
}

var _ consume.Upstreams = (*Pool)(nil)

// NewPool checks cfg and returns a Pool whose upstreams count as healthy
// until they fail. Call Start to discover models and run the prober.
func NewPool(cfg Config) (*Pool, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Pool{cfg: cfg, log: cfg.Logger}
	maxConc := 0
	cacheTokens := make([]int64, 0, len(cfg.Upstreams))
	for i, u := range cfg.Upstreams {
		models := slices.Clone(u.Models)
		slices.Sort(models)
		p.ups = append(p.ups, newUpstream(cfg, u, slices.Compact(models)))
		p.ups[i].id = i
		maxConc = max(maxConc, cmp.Or(u.MaxConcurrency, DefaultMaxConcurrency)+u.Headroom)
		cacheTokens = append(cacheTokens, u.CacheTokens)
	}
	if cfg.Routing.Policy == RoutePrefix {
		p.index = prefix.NewIndex(cacheTokens)
	}
	rt := cfg.Transport
	if rt == nil {
		rt = newTransport(maxConc)
	}
	p.client = &http.Client{
		Transport: rt,
		// A redirect would resend a POST elsewhere: report it instead.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return p, nil
}

// TryAcquire implements [consume.Upstreams.TryAcquire]: it reserves a
// slot on the available upstream serving model with the fewest requests
// in flight, or returns false at once.
func (p *Pool) TryAcquire(model string) (consume.Slot, bool) {
	s := p.acquire(model, nil, false)
	return s, s != nil
}

// TryAcquireHeadroom implements [consume.Upstreams.TryAcquireHeadroom]:
// TryAcquire with each upstream's headroom counted as room.
func (p *Pool) TryAcquireHeadroom(model string) (consume.Slot, bool) {
	s := p.acquire(model, nil, true)
	return s, s != nil
}

// acquire picks an upstream other than skip, counting its headroom when
// headroom is true; nil if none has room.
func (p *Pool) acquire(model string, skip *upstream, headroom bool) *slot {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	var best *upstream
	n := len(p.ups)
	for i := range n {
		u := p.ups[(p.next+i)%n]
		if u == skip || u.inFlight >= u.limit(headroom) || !u.available(now) || !u.serves(model) {
			continue
		}
		if best == nil || u.inFlight < best.inFlight {
			best = u
		}
	}
	if best == nil {
		return nil
	}
	p.next++
	p.add(best, 1, now)
	best.reserved.Add(1)
	return &slot{p: p, u: best, headroom: headroom, reserved: true}
}

func newUpstream(cfg Config, u UpstreamConfig, models []string) *upstream {
	up := &upstream{url: u.URL, max: u.MaxConcurrency, headroom: u.Headroom, idle: u.IdleTimeout, dynamic: len(u.Models) == 0,
		models: models, healthy: true, learns: cfg.MetricsInterval > 0 && !u.FixedConcurrency, routed: map[string]uint64{}}
	ceiling := u.MaxConcurrency
	if ceiling == 0 {
		up.max, ceiling = DefaultMaxConcurrency, learnCeiling
	}
	up.learn = newLearner(ceiling, cfg.KVThreshold)
	return up
}

// limit is how many requests u may run: the limit learned from its
// metrics while they can be read, otherwise its MaxConcurrency; plus its
// headroom when the caller may use it. Every decision on u's room goes
// through it. Requires Pool.mu held.
func (u *upstream) limit(headroom bool) int {
	n := u.max
	if u.learns && u.metricsOK {
		n = u.learn.limit
	}
	if headroom {
		n += u.headroom
	}
	return n
}

func (p *Pool) release(u *upstream) {
	p.mu.Lock()
	p.add(u, -1, time.Now())
	models := u.models
	p.mu.Unlock()
	p.freed(models)
}

// OnFree implements [consume.Upstreams.OnFree].
func (p *Pool) OnFree(f func(models []string)) { p.onFree.Store(&f) }

// freed tells the OnFree listener that capacity may be free for models.
// models must not be modified afterwards (u.models is replaced, never
// changed in place). Requires Pool.mu not held.
func (p *Pool) freed(models []string) {
	if f := p.onFree.Load(); f != nil && len(models) > 0 {
		(*f)(models)
	}
}

// available: healthy, or down but past its backoff (on trial). Requires
// Pool.mu held.
func (u *upstream) available(now time.Time) bool {
	return u.healthy || !now.Before(u.downUntil)
}

// serves requires Pool.mu held.
func (u *upstream) serves(model string) bool {
	_, ok := slices.BinarySearch(u.models, model)
	return ok
}

// Models returns the models served by any upstream, sorted, without
// duplicates.
func (p *Pool) Models() []string {
	p.mu.Lock()
	var all []string
	for _, u := range p.ups {
		all = append(all, u.models...)
	}
	p.mu.Unlock()
	slices.Sort(all)
	return slices.Compact(all)
}

// Free implements [consume.Upstreams.Free].
func (p *Pool) Free(model string) (free, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for _, u := range p.ups {
		if u.available(now) && u.serves(model) {
			total += u.limit(false)
			free += u.limit(false) - u.inFlight
		}
	}
	return free, total
}

// Calm implements [consume.Calmer]. The band's own requests are taken
// as spread evenly over the upstreams serving model, as the least loaded
// pick spreads them.
func (p *Pool) Calm(model string, factor float64, own int) (running, calm int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	serving := 0
	for _, u := range p.ups {
		if u.available(now) && u.serves(model) {
			serving++
			running += u.inFlight
		}
	}
	from := max((own+serving-1)/max(serving, 1), 1)
	for _, u := range p.ups {
		if !u.available(now) || !u.serves(model) {
			continue
		}
		n := u.limit(false)
		if within := u.calmBatch(factor, from); within > 0 {
			n = min(n, within)
		}
		calm += n
	}
	return running, calm
}

// calmBatch is the batch within which u's steps take at most factor
// times as long as in a batch of from, as learned from its metrics; 0
// when it does not know (or they do not slow). Requires Pool.mu held.
func (u *upstream) calmBatch(factor float64, from int) int {
	if !u.learns || !u.metricsOK {
		return 0
	}
	return u.speed.batchWithin(factor, from)
}

// Serves reports whether some upstream, healthy or not, serves model.
func (p *Pool) Serves(model string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, u := range p.ups {
		if u.serves(model) {
			return true
		}
	}
	return false
}

// Ready reports whether some upstream can serve: it passed its last
// check and its models are known (configured, or discovered). An
// upstream merely past its backoff does not count: until a check or a
// request proves it back, and its models are discovered, /v1/models
// would be empty and every request a 404.
func (p *Pool) Ready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, u := range p.ups {
		if u.healthy && len(u.models) > 0 {
			return true
		}
	}
	return false
}

// Stats returns a snapshot of every upstream, in configuration order.
func (p *Pool) Stats() []UpstreamStat {
	out := p.stats()
	if p.index != nil {
		for i := range out {
			st := p.index.Stat(i)
			out[i].IndexBlocks, out[i].IndexCapacity = st.Blocks, st.Capacity
		}
	}
	return out
}

func (p *Pool) stats() []UpstreamStat {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]UpstreamStat, 0, len(p.ups))
	for _, u := range p.ups {
		out = append(out, UpstreamStat{URL: u.url, InFlight: u.inFlight, Reserved: int(u.reserved.Load()), MaxConcurrency: u.max, Headroom: u.headroom,
			Healthy: u.healthy, Errors: u.errors, DownUntil: u.downUntil, Models: slices.Clone(u.models),
			Limit: u.limit(false), Room: u.roomSource(), Running: u.gauges.Running, Waiting: u.gauges.Waiting, KVCache: u.gauges.KVCache,
			Routed: maps.Clone(u.routed), PromptTokens: u.promptTokens.Load(), CachedTokens: u.cachedTokens.Load()})
		if sp := u.speed; sp.fitted {
			out[len(out)-1].StepSeconds, out[len(out)-1].StepGrowth = sp.base, sp.perRequest/sp.base
		}
	}
	return out
}

// roomSource says where u's limit comes from (UpstreamStat.Room).
// Requires Pool.mu held.
func (u *upstream) roomSource() string {
	switch {
	case !u.learns:
		return RoomFixed
	case u.metricsOK:
		return RoomMetrics
	}
	return RoomFallback
}
