package control

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Factors is the part of [policy.Pacer] the loop drives.
type Factors interface {
	ColumnFactor(model string) float64
	SetColumnFactor(model string, f float64)
}

// Options configure a [Loop].
type Options struct {
	Config Config
	Pacer  Factors // required
	// Upstreams returns the base URLs to scrape (e.g. http://10.0.0.5:8000);
	// /metrics is appended. Called once per scrape, so the pool may change.
	Upstreams func() []string
	// Client scrapes the upstreams. If nil, a client whose timeout is the
	// smaller of the interval and 5s is used.
	Client *http.Client
	// Logger: if nil, slog.Default().
	Logger *slog.Logger
}

// Loop scrapes the pool and applies the [Controller]'s decisions. Its
// methods are safe for concurrent use. mu guards the controller, the pins
// and the status; it is held while a decision is applied, so a Pin can
// never be overwritten by a scrape that read the factor before it. It is
// not held during the scrape itself. Make a Loop with [NewLoop].
type Loop struct {
	o      Options
	scrape *scraper

	mu     sync.Mutex
	ctrl   *Controller
	pinned map[string]bool
	status map[string]ModelStatus

	runMu  sync.Mutex // guards cancel and the started state
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// ModelStatus is what the loop last saw and did for one model.
type ModelStatus struct {
	Model     string    `json:"model"`
	Factor    float64   `json:"factor"`
	Pinned    bool      `json:"pinned"`
	Waiting   float64   `json:"waiting"`
	Running   float64   `json:"running"`
	KVCache   float64   `json:"kv_cache_usage"`
	Upstreams int       `json:"upstreams"`
	Reason    string    `json:"reason"`
	ScrapedAt time.Time `json:"scraped_at"`
	ChangedAt time.Time `json:"changed_at,omitzero"`
}

// NewLoop returns a stopped loop.
func NewLoop(o Options) *Loop {
	if o.Pacer == nil {
		panic("control: Options.Pacer is required")
	}
	o.Config = o.Config.withDefaults()
	if o.Upstreams == nil {
		o.Upstreams = func() []string { return nil }
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: min(o.Config.Interval, 5*time.Second)}
	}
	return &Loop{o: o, scrape: newScraper(o.Client, o.Logger), ctrl: NewController(o.Config),
		pinned: map[string]bool{}, status: map[string]ModelStatus{}}
}

// Config returns the effective thresholds.
func (l *Loop) Config() Config { return l.o.Config }

// ErrStarted is returned by Start on a loop that is already running.
var ErrStarted = errors.New("control: loop already started")

// Start runs the loop in its own goroutine, one [Loop.Tick] per interval,
// until ctx is cancelled or [Loop.Stop] is called.
func (l *Loop) Start(ctx context.Context) error {
	l.runMu.Lock()
	defer l.runMu.Unlock()
	if l.cancel != nil {
		return ErrStarted
	}
	ctx, l.cancel = context.WithCancel(ctx)
	l.wg.Add(1)
	go l.run(ctx)
	return nil
}

func (l *Loop) run(ctx context.Context) {
	defer l.wg.Done()
	t := time.NewTicker(l.o.Config.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.Tick(ctx)
		}
	}
}

// Stop ends the loop, aborting a scrape in progress, and waits for its
// goroutine. It is a no-op on a loop that is not running; a stopped loop
// can be started again.
func (l *Loop) Stop() {
	l.runMu.Lock()
	defer l.runMu.Unlock()
	if l.cancel == nil {
		return
	}
	l.cancel()
	l.wg.Wait()
	l.cancel = nil
}

// Tick scrapes every upstream once and applies one decision per model
// seen. The ticker calls it; tests call it directly to step the loop.
func (l *Loop) Tick(ctx context.Context) {
	samples := l.scrape.all(ctx, l.o.Upstreams())
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, model := range l.models(samples) {
		l.decide(now, model, samples[model])
	}
}

// models returns the models to decide on: those scraped now and those
// seen before (which now get a no-data hold), sorted for stable logs.
// Requires l.mu held.
func (l *Loop) models(samples map[string]Sample) []string {
	out := make([]string, 0, len(samples)+len(l.status))
	for m := range samples {
		out = append(out, m)
	}
	for m := range l.status {
		if _, ok := samples[m]; !ok {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

// decide runs one Step and applies it. Requires l.mu held.
func (l *Loop) decide(now time.Time, model string, s Sample) {
	old := l.o.Pacer.ColumnFactor(model)
	d := l.ctrl.Step(now, model, old, s, l.pinned[model])
	if d.Changed {
		l.o.Pacer.SetColumnFactor(model, d.Factor)
		l.o.Logger.Info("control: column factor changed", "model", model, "from", old, "to", d.Factor,
			"reason", d.Reason, "waiting", s.Waiting, "target", l.o.Config.WaitingTarget)
	}
	l.status[model] = ModelStatus{Model: model, Factor: d.Factor, Pinned: l.pinned[model],
		Waiting: s.Waiting, Running: s.Running, KVCache: s.KVCache, Upstreams: s.Upstreams,
		Reason: d.Reason, ScrapedAt: now, ChangedAt: l.ctrl.ChangedAt(model)}
}

// Pin sets model's column factor to f and keeps the loop off that model
// until [Loop.Unpin]. f must be > 0 (the pacer panics otherwise).
func (l *Loop) Pin(model string, f float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pinned[model] = true
	l.o.Pacer.SetColumnFactor(model, f)
}

// Set sets model's column factor to f without pinning it: the loop may
// move it again from there. An earlier pin is removed.
func (l *Loop) Set(model string, f float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pinned, model)
	l.o.Pacer.SetColumnFactor(model, f)
}

// Unpin hands model back to the loop; its factor stays where it is.
func (l *Loop) Unpin(model string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pinned, model)
}

// Pinned reports whether model's factor is pinned.
func (l *Loop) Pinned(model string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pinned[model]
}

// Status returns what the loop last saw per model, sorted by model.
func (l *Loop) Status() []ModelStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]ModelStatus, 0, len(l.status))
	for _, s := range l.status {
		s.Pinned = l.pinned[s.Model]
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b ModelStatus) int { return strings.Compare(a.Model, b.Model) })
	return out
}
