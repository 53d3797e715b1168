package upstream

import "time"

// loadTau is the time constant of an upstream's recent load: long enough
// that the turns of the conversations it holds, which come and go, average
// out; short enough that a prefix drawing every request to it is seen
// within a second.
const loadTau = time.Second

// loadEpoch is the origin of the recent loads' clock, so that a decision
// reads the time once and each upstream's load costs a few flops.
var loadEpoch = time.Now()

// loadClock is now on the recent loads' clock, in ns.
func loadClock(now time.Time) int64 { return int64(now.Sub(loadEpoch)) }

// recentLoad is the exponentially weighted mean of an upstream's
// requests in flight over time, with time constant loadTau. The zero
// value is an upstream that never ran anything.
type recentLoad struct {
	mean  float64
	since int64 // loadClock of when mean was last brought up to date
}

// at is the recent load at now (a loadClock), given that inFlight ran
// since the last change.
func (l recentLoad) at(now int64, inFlight int) float64 {
	if now <= l.since {
		return l.mean
	}
	x := float64(inFlight)
	return x + (l.mean-x)*decay(float64(now-l.since)/float64(loadTau))
}

// decay approximates e^-t for t ≥ 0 by 1/(1 + t + t²/2 + t³/6): within 2 %
// of it up to t = 1 and falling to 0 after, a tenth of math.Exp's cost, and
// a routing decision takes one per upstream.
func decay(t float64) float64 {
	return 1 / (1 + t*(1+t*(0.5+t/6)))
}

// add changes u's requests in flight by n at now, and the pool's, bringing
// their recent loads up to date first. Requires Pool.mu held.
func (p *Pool) add(u *upstream, n int, now time.Time) {
	t := loadClock(now)
	u.load = recentLoad{mean: u.load.at(t, u.inFlight), since: t}
	u.inFlight += n
	p.all.load = recentLoad{mean: p.all.load.at(t, p.all.inFlight), since: t}
	p.all.inFlight += n
}
