package upstream

import (
	"sync"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/upstream/prefix"
	"github.com/pacegate/pacegate/policy"
)

// Routing policies.
const (
	// RoutePrefix sends a request with a prompt prefix to the upstream
	// whose KV cache most probably holds the longest part of it, within
	// the load bound; ties and misses go to the least loaded.
	RoutePrefix = "prefix"
	// RouteLeastOutstanding sends every request to the available
	// upstream with the fewest requests in flight.
	RouteLeastOutstanding = "least_outstanding"
)

// DefaultLoadBound is Routing.LoadBound when unset: KubeAI's and
// SGLang's bound for consistent hashing with bounded loads.
const DefaultLoadBound = 1.25

// Routing decisions, counted per upstream (UpstreamStat.Routed).
const (
	// DecisionPrefix: the upstream holds part of the prompt's prefix and
	// no upstream holding more of it could take the request.
	DecisionPrefix = "prefix"
	// DecisionMiss: no upstream holds any of it; the least loaded took it.
	DecisionMiss = "miss"
	// DecisionLoad: an upstream holding more of it was skipped, at its
	// concurrency limit or over the load bound.
	DecisionLoad = "load"
)

// route moves s to the upstream that should serve req, if that is not
// where it is: the one holding the longest prefix of req's prompt among
// those with room and within the load bound; s.matched is how many of
// its blocks that upstream was predicted to hold. It requires s counted
// and not yet used by a call. The caller records the prompt there
// (Index.Record), once the decision is made.
func (p *Pool) route(s *slot, req *consume.Request) {
	chain := prefix.Chain{Hashes: req.Prefix, Bytes: req.PromptBytes}
	buf := matchBufs.Get().(*[]int)
	matched := p.index.Match(chain, *buf)
	conv, isConv := conversation(req.Prefix)
	p.mu.Lock()
	from := s.u
	now := time.Now()
	if isConv && noneHolds(matched) { // a new conversation: the tenant's last one may have ended
		p.live.retireLone(p.ups, req.Key, loadClock(now))
	}
	to, decision := p.choose(from, req.Key, matched, s.headroom, now)
	if to != from {
		p.add(from, -1, now)
		p.add(to, 1, now)
		s.u = to
	}
	if isConv {
		p.live.touch(&to.conv, conv, req.Key, loadClock(now))
	}
	to.routed[decision]++
	freed := from.models
	p.mu.Unlock()
	s.matched = matched[to.id]
	*buf = matched
	matchBufs.Put(buf)
	if to != from {
		p.freed(freed) // from has a slot free now
	}
}

// noneHolds reports whether no upstream holds any block of the prompt.
func noneHolds(matched []int) bool {
	for _, m := range matched {
		if m > 0 {
			return false
		}
	}
	return true
}

// matchBufs recycles Match's per-upstream results.
var matchBufs = sync.Pool{New: func() any { b := make([]int, 0, 64); return &b }}

// record notes in the index that upstream id holds req's prompt now.
func (p *Pool) record(id int, req *consume.Request) {
	p.index.Record(id, prefix.Chain{Hashes: req.Prefix, Bytes: req.PromptBytes})
}

// choose is where a request holding a slot on from should go: among the
// available upstreams serving key's model that have room (from has: its slot
// is the request's), within the load bound, the one holding the most
// blocks (matched, by upstream id), then the least loaded, then from.
// An upstream holding part of the prompt has room up to its hard limit,
// not only its learned one (see [upstream.room]). Requires Pool.mu held.
func (p *Pool) choose(from *upstream, key policy.Key, matched []int, headroom bool, now time.Time) (*upstream, string) {
	var buf [64]*upstream // the candidates; on the stack for pools of up to 64
	cands := buf[:0]
	total, longest, holders := 0, 0, 0
	for _, u := range p.ups {
		if u.available(now) && u.serves(key.Model) {
			cands = append(cands, u)
			total += u.inFlight
			switch m := matched[u.id]; {
			case m > longest:
				longest, holders = m, 1
			case m == longest && m > 0:
				holders++
			}
		}
	}
	d := decision{matched: matched, from: from, clock: loadClock(now), miss: longest == 0, live: &p.live, owner: key,
		bound: p.cfg.Routing.LoadBound*float64(total)/float64(max(len(cands), 1)) + 1}
	if holders == 1 {
		d.recentBound = p.cfg.Routing.LoadBound*p.recentLoad(cands, d.clock)/float64(len(cands)) + 1
	}
	best := from
	for _, u := range cands {
		sole := holders == 1 && matched[u.id] == longest
		if u != from && d.better(u, best) && d.admits(u, headroom, matched[u.id] > 0, sole) {
			best = u
		}
	}
	switch {
	case longest == 0:
		return best, DecisionMiss
	case matched[best.id] < longest:
		return best, DecisionLoad
	}
	return best, DecisionPrefix
}

// decision is what choose compares candidates by.
type decision struct {
	matched []int     // blocks each upstream holds, by id
	from    *upstream // where the request's slot is
	clock   int64     // loadClock at the decision
	miss    bool      // no upstream holds any of the prompt
	live    *liveConversations
	owner   policy.Key // the request's tenant and model
	// bound is load_bound × the mean of the candidates' requests in
	// flight, + 1; recentBound is load_bound × the mean of their recent
	// loads, + 1, when one candidate alone holds the longest prefix.
	bound, recentBound float64
}

// admits reports whether u may take one more request (one it holds
// blocks of, if holds; the only upstream holding the longest prefix, if
// sole). The bound is on its requests in flight, with one exception: the
// sole holder of the longest prefix, within its learned limit, is bounded
// by its recent load, against the candidates' mean recent load (a recent
// load against a moment's mean would send turns away whenever the pool
// is quieter for a moment than it was over the last second). That is a
// conversation's own replica: the turns of the conversations it holds
// come and go, a moment when more of them run at once than the mean is
// no hot spot, and sending a turn away then costs its whole prefill. A prefix several upstreams hold (a
// preamble every request shares) keeps the bound on the moment, which
// spreads it over the pool; a prefix only one holds that draws the
// model's traffic shows in its recent load within a second, and the next
// request goes elsewhere, after which two hold it. Requires Pool.mu held.
func (d *decision) admits(u *upstream, headroom, holds, sole bool) bool {
	switch {
	case u.inFlight >= u.room(headroom, holds):
		return false
	case sole && u.inFlight < u.limit(headroom):
		return u.load.at(d.clock, u.inFlight) <= d.recentBound
	}
	return float64(u.inFlight+1) <= d.bound
}

// better: u holds more of the prefix than best, or as much with fewer
// requests in flight (from's count includes the request itself). On a
// miss, with fewer live conversations, then one of the tenant's, then a
// lower recent load: a new conversation's turns will follow it, so it
// goes where the conversations held are fewest, not where a moment's
// count is lowest (see liveConversations).
func (d *decision) better(u, best *upstream) bool {
	if d.matched[u.id] != d.matched[best.id] {
		return d.matched[u.id] > d.matched[best.id]
	}
	if d.miss {
		if a, b := d.live.count(&u.conv, d.clock), d.live.count(&best.conv, d.clock); a != b {
			return a < b
		}
		if a, b := u.conv.holds(d.owner), best.conv.holds(d.owner); a != b {
			return a
		}
		return u.load.at(d.clock, u.inFlight) < best.load.at(d.clock, best.inFlight)
	}
	return u.inFlight < load(best, d.from)
}

// room is how many requests u may run for a request it holds blocks of
// (holds) or not. Its learned limit is where vLLM starts to queue, and
// the fair gate counts the pool's room by it; but a request that moves
// to the upstream holding its prefix keeps the pool's count (it leaves
// room where it came from), and waiting a moment in that upstream's
// queue costs less than computing the prefix again elsewhere: a 1,300-
// token prompt at 0.2 ms a token is 260 ms of prefill. So a holder's
// room is its hard limit (MaxConcurrency, or none), still within the
// load bound. A configured or fallback limit is hard already.
// Requires Pool.mu held.
func (u *upstream) room(headroom, holds bool) int {
	if holds && u.learns && u.metricsOK {
		return u.learn.ceiling + u.limit(headroom) - u.limit(false)
	}
	return u.limit(headroom)
}

// recentLoad is the sum of cands' recent loads at clock: the pool's when
// every upstream is a candidate, one sum less per upstream. Requires
// Pool.mu held.
func (p *Pool) recentLoad(cands []*upstream, clock int64) float64 {
	if len(cands) == len(p.ups) {
		return p.all.load.at(clock, p.all.inFlight)
	}
	var sum float64
	for _, u := range cands {
		sum += u.load.at(clock, u.inFlight)
	}
	return sum
}

// load is u's requests in flight other than the one being routed.
func load(u, from *upstream) int {
	if u == from {
		return u.inFlight - 1
	}
	return u.inFlight
}
