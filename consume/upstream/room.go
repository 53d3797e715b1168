package upstream

import (
	"math"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmmetrics"
)

// Defaults of the room an upstream has, as learned from its /metrics.
const (
	// DefaultMaxConcurrency is an upstream's limit while its metrics
	// cannot be read and no MaxConcurrency is set.
	DefaultMaxConcurrency = 64
	// DefaultMetricsInterval is how often an upstream's /metrics is read.
	DefaultMetricsInterval = 250 * time.Millisecond
	// DefaultKVThreshold is the KV-cache usage (0 to 1) above which the
	// learned limit stops growing: past it vLLM would soon queue or
	// preempt for want of cache blocks, not of sequence slots.
	DefaultKVThreshold = 0.95
	// learnStart is the learned limit before anything was learned; it
	// grows by half of itself per reading while it is reached (slow
	// start), so a server's room is found within a few readings.
	learnStart = 8
	// learnCeiling bounds the learned limit of an upstream with no
	// MaxConcurrency: far above any vLLM --max-num-seqs in use.
	learnCeiling = 4096
	// metricsFailAfter is how many readings in a row must fail before an
	// upstream falls back to its MaxConcurrency: one timeout is noise.
	metricsFailAfter = 2
	// probeAfter is how many readings without a queue must follow one
	// with a queue before the limit probes one above the room found:
	// each probe can leave one request waiting at the server for two
	// readings.
	probeAfter = 8
	// probeMax bounds the wait between probes. Each probe that finds the
	// server full doubles the wait, up to this many readings (16 s at the
	// default interval): a server whose room is fixed (its
	// --max-num-seqs) would otherwise make one request in every few
	// seconds wait in its queue, and the request sent on a probe is most
	// often a short one of a light tenant (they make most of the
	// arrivals), whose first token that wait would delay many times over.
	probeMax = 64
)

// learner finds how many requests one vLLM server runs before it starts
// to queue: the concurrency at which pacegate should hold requests back,
// so that its fair order, not the server's FIFO, decides who runs next.
// It is a pure decision over readings; the Pool calls it under its lock.
//
// The rule, per reading: when the server queues (requests waiting in two
// readings in a row, or once right after the limit grew; otherwise a
// single reading with a waiting request is a request caught between two
// engine steps, or one we sent the moment ours ended and before the
// server freed its sequence), the limit drops
// to what the server runs of ours, our requests sent less its waiting
// requests. When it does not queue, the KV cache is under the threshold,
// and both our in-flight count and the server's running count are at
// the limit (ours alone may count a request the server has finished and
// we have not yet seen end), the limit grows: by half until the first
// time the server queued (never past kvRoom), by one afterwards, and
// then only after probeAfter readings without a queue, twice as many
// after each probe that found the server full (up to probeMax), and
// probeAfter again after one the server ran without a queue. So it
// settles where the server is full and probes above it now and then,
// less and less often while the room stays where it was, only while the
// cache has room, and a probe that overshoots costs one reading.
//
// Slots reserved for a waiting bucket and not yet used by a call count
// as running on the server: they are ours to fill. On a queue that cannot
// wake a bucket at once (RocketMQ redelivers a suspended message only
// when its delay ends) they stay unused for a while, and a server of
// short requests would otherwise never be seen running as many as the
// limit: the limit stayed at learnStart. For the same reason they are not
// counted among ours that the server runs when it queues.
type learner struct {
	limit     int // the learned limit, in [1, ceiling]
	ceiling   int // MaxConcurrency when set, else learnCeiling
	kvMax     float64
	saturated bool // the server has queued since the limit was set
	waited    bool // the previous reading had requests waiting
	calm      int  // readings without a queue since the last one with
	probeWait int  // calm readings before the next probe: probeAfter to probeMax
	grew      bool // the limit grew at the previous reading
}

// kvRoom is how many requests the server could run before its KV cache
// reaches kvMax, if each took what its running ones take on average
// (g.KVCache > 0): where slow start stops when the cache, not the batch,
// is what runs out first. Overshooting it would grant slots that a
// moment later are over the limit, held for a whole generation by
// whoever took them, most often the tenant with the most requests
// waiting.
func kvRoom(g vllmmetrics.Gauges, kvMax float64) int {
	return int(math.Ceil(g.Running * kvMax / g.KVCache))
}

func newLearner(ceiling int, kvMax float64) learner {
	return learner{limit: min(learnStart, ceiling), ceiling: ceiling, kvMax: kvMax, probeWait: probeAfter}
}

// observe applies one reading g, taken while inFlight of our slots were
// taken on the server, reserved of them not yet used by a call, and
// reports whether the limit grew.
func (l *learner) observe(g vllmmetrics.Gauges, inFlight, reserved int) (grew bool) {
	busy := int(g.Running) + reserved // what runs there, and what is ours to fill
	waiting := g.Waiting > 0
	probed := l.grew && l.saturated
	queued := waiting && (l.waited || l.grew)
	l.waited, l.grew = waiting, false
	switch {
	case probed && queued: // the server was full: probe less often
		l.probeWait = min(2*l.probeWait, probeMax)
	case probed && !waiting && busy >= l.limit: // it had room
		l.probeWait = probeAfter
	}
	if queued {
		l.saturated, l.calm = true, 0
		ours := inFlight - reserved - int(g.Waiting)
		l.limit = min(max(ours, 1), l.ceiling)
		return false
	}
	l.calm++
	if waiting || g.KVCache >= l.kvMax || inFlight < l.limit || busy < l.limit || l.limit >= l.ceiling {
		return false
	}
	step := max(l.limit/2, 1)
	if g.KVCache > 0 { // slow start never past the room the cache shows
		step = min(step, max(kvRoom(g, l.kvMax)-l.limit, 1))
	}
	if l.saturated {
		if l.calm < l.probeWait {
			return false
		}
		step, l.calm = 1, 0
	}
	l.limit = min(l.limit+step, l.ceiling)
	l.grew = true
	return true
}
