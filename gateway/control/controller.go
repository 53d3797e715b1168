package control

import (
	"time"

	"github.com/pacegate/pacegate/policy/config"
)

// Defaults of the decision thresholds that the config file does not carry.
const (
	// DefaultHysteresis is how many consecutive scrapes must agree before
	// the factor moves.
	DefaultHysteresis = 3
	// DefaultDrainRatio: a model has drained when its waiting queue is at
	// most this fraction of the target. Between that and the target the
	// factor holds, so the loop does not oscillate around the target.
	DefaultDrainRatio = 0.5
)

// Config holds the loop's thresholds and bounds. Zero fields take the
// defaults of [config.Control] (interval 2s, target 8, factor in
// [0.1, 1], decrease ×0.5, increase +0.05) and the constants above.
type Config struct {
	Interval      time.Duration
	WaitingTarget float64 // mean vLLM waiting requests per upstream serving the model
	MinFactor     float64
	MaxFactor     float64
	Decrease      float64 // multiplicative decrease, in (0, 1)
	Increase      float64 // additive increase, > 0
	Hysteresis    int     // consecutive scrapes; default DefaultHysteresis
	DrainRatio    float64 // default DefaultDrainRatio
}

// FromConfig converts the config file's control section.
func FromConfig(c config.Control) Config {
	return Config{Interval: c.Interval, WaitingTarget: c.WaitingTarget, MinFactor: c.MinFactor,
		MaxFactor: c.MaxFactor, Decrease: c.Decrease, Increase: c.Increase}
}

func (c Config) withDefaults() Config {
	// The file's own defaulting is the single source of the defaults.
	f := config.File{Control: config.Control{Interval: c.Interval, WaitingTarget: c.WaitingTarget,
		MinFactor: c.MinFactor, MaxFactor: c.MaxFactor, Decrease: c.Decrease, Increase: c.Increase}}
	f.SetDefaults()
	out := FromConfig(f.Control)
	out.Hysteresis, out.DrainRatio = c.Hysteresis, c.DrainRatio
	if out.Hysteresis <= 0 {
		out.Hysteresis = DefaultHysteresis
	}
	if !(out.DrainRatio > 0) {
		out.DrainRatio = DefaultDrainRatio
	}
	return out
}

// Sample is one scrape's view of a model across the pool.
type Sample struct {
	Waiting   float64 // mean waiting requests per reporting upstream
	Running   float64 // running requests, summed over the pool
	KVCache   float64 // highest KV-cache usage (0..1) among the upstreams
	Upstreams int     // upstreams that reported the model; 0 = no data
}

// Reasons a [Decision] gives.
const (
	ReasonCongested = "congested" // waiting above target: factor × decrease
	ReasonDrained   = "drained"   // waiting at most target × drain ratio: factor + increase
	ReasonHold      = "hold"      // in the band, or not yet for long enough
	ReasonPinned    = "pinned"    // an operator pinned the factor
	ReasonNoData    = "no_data"   // no upstream reported the model
)

// Decision is the outcome of one [Controller.Step].
type Decision struct {
	Factor  float64 // the factor to apply (equal to the old one unless Changed)
	Changed bool
	Reason  string
}

// Controller is the pure AIMD decision with hysteresis, one state per
// model. Time is passed in, so tests step it scrape by scrape. It is not
// safe for concurrent use ([Loop] serialises it). Make it with
// [NewController].
type Controller struct {
	cfg    Config
	models map[string]*modelState
}

type modelState struct {
	above, below int // consecutive scrapes above the target / drained
	changedAt    time.Time
}

// NewController returns a controller with cfg's thresholds (zero fields
// take their defaults).
func NewController(cfg Config) *Controller {
	return &Controller{cfg: cfg.withDefaults(), models: map[string]*modelState{}}
}

// Config returns the effective thresholds.
func (c *Controller) Config() Config { return c.cfg }

// Step decides model's next column factor from its current factor and
// this scrape's sample.
//
// A decrease needs Hysteresis consecutive congested scrapes, and then
// another Hysteresis before the next one, giving the queue time to react
// to the lower pace. An increase needs Hysteresis consecutive drained
// scrapes, then repeats each scrape while the model stays drained
// (additive increase is gentle already). A pinned model, a scrape without
// data, or a value in between resets both streaks. The factor never
// leaves [MinFactor, MaxFactor] through the loop, and a factor an
// operator set outside it is not pulled back in the opposite direction.
func (c *Controller) Step(now time.Time, model string, factor float64, s Sample, pinned bool) Decision {
	st := c.models[model]
	if st == nil {
		st = &modelState{}
		c.models[model] = st
	}
	hold := Decision{Factor: factor, Reason: ReasonHold}
	switch {
	case pinned:
		st.above, st.below = 0, 0
		hold.Reason = ReasonPinned
		return hold
	case s.Upstreams == 0:
		st.above, st.below = 0, 0
		hold.Reason = ReasonNoData
		return hold
	case s.Waiting > c.cfg.WaitingTarget:
		st.above, st.below = st.above+1, 0
		if st.above < c.cfg.Hysteresis {
			return hold
		}
		st.above = 0
		return c.change(now, st, factor, max(c.cfg.MinFactor, factor*c.cfg.Decrease), ReasonCongested)
	case s.Waiting <= c.cfg.WaitingTarget*c.cfg.DrainRatio:
		st.above, st.below = 0, st.below+1
		if st.below < c.cfg.Hysteresis {
			return hold
		}
		return c.change(now, st, factor, min(c.cfg.MaxFactor, factor+c.cfg.Increase), ReasonDrained)
	default:
		st.above, st.below = 0, 0
		return hold
	}
}

// change returns the move from old to next, unless next would go the
// wrong way (old was already beyond the bound) or nowhere.
func (c *Controller) change(now time.Time, st *modelState, old, next float64, reason string) Decision {
	wrongWay := (reason == ReasonCongested && next > old) || (reason == ReasonDrained && next < old)
	if next == old || wrongWay {
		return Decision{Factor: old, Reason: ReasonHold}
	}
	st.changedAt = now
	return Decision{Factor: next, Changed: true, Reason: reason}
}

// ChangedAt returns when the loop last moved model's factor (zero if
// never).
func (c *Controller) ChangedAt(model string) time.Time {
	if st := c.models[model]; st != nil {
		return st.changedAt
	}
	return time.Time{}
}
