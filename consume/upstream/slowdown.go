package upstream

import (
	"math"

	"github.com/pacegate/pacegate/consume/upstream/vllmmetrics"
)

const (
	// slowdownMinTokens is how many tokens the server must have made
	// since the last sample for a new one: fewer say little about a step.
	slowdownMinTokens = 16
	// slowdownMaxBatch bounds the batches remembered; a larger one counts
	// as this one.
	slowdownMaxBatch = 1024
	// slowdownMove is how far a new sample moves its batch's mean.
	slowdownMove = 0.3
	// slowdownTrust caps a batch's weight in the fit, in samples: a batch
	// seen for an hour does not drown out one seen a few times.
	slowdownTrust = 8
)

// slowdown learns how much one server's steps slow down as its batch
// fills: the mean time between two tokens of a stream (the difference of
// vLLM's inter-token latency histogram between two readings) against the
// requests it ran meanwhile (its running gauge, averaged over the two
// readings), kept per batch size and fitted with a straight line. On
// memory-bound decoding the line is nearly flat and nothing is held back;
// where the steps stretch with the batch (a compute-bound server, or a
// simulator with --time-factor-under-load), it says how full the batch
// may be for a request to run within a given factor of its speed alone.
// It is a pure decision over readings; the Pool calls it under its lock.
type slowdown struct {
	last   vllmmetrics.Gauges // the reading the next sample is measured from
	hasRef bool
	// byBatch[n-1] is the mean inter-token time (seconds) at a batch of
	// n and how many samples made it.
	byBatch []batchSpeed
	// The fit: the inter-token time at a batch of one and what each
	// further request adds; fitted is false until two batches at least
	// two apart were seen.
	base, perRequest float64
	fitted           bool
}

type batchSpeed struct {
	itl     float64
	samples int
}

// observe takes one reading of the server's gauges (summed over its
// models). A histogram that went back (the server restarted) starts
// over from this reading.
func (s *slowdown) observe(g vllmmetrics.Gauges) {
	if !s.hasRef || g.ITLTokens < s.last.ITLTokens || g.ITLSeconds < s.last.ITLSeconds {
		s.last, s.hasRef = g, true
		return
	}
	tokens := g.ITLTokens - s.last.ITLTokens
	if tokens < slowdownMinTokens {
		return // keep the reference: the next reading adds to these tokens
	}
	itl := (g.ITLSeconds - s.last.ITLSeconds) / tokens
	batch := int(math.Round((s.last.Running + g.Running) / 2))
	s.last = g
	if batch < 1 || itl <= 0 {
		return
	}
	s.add(min(batch, slowdownMaxBatch), itl)
	s.fit()
}

func (s *slowdown) add(batch int, itl float64) {
	if len(s.byBatch) < batch {
		s.byBatch = append(s.byBatch, make([]batchSpeed, batch-len(s.byBatch))...)
	}
	b := &s.byBatch[batch-1]
	if b.samples == 0 {
		b.itl = itl
	} else {
		b.itl += slowdownMove * (itl - b.itl)
	}
	b.samples++
}

// fit draws the weighted least-squares line through the batches' means.
func (s *slowdown) fit() {
	var sw, sx, sy, sxx, sxy float64
	lo, hi := 0, 0
	for i, b := range s.byBatch {
		if b.samples == 0 {
			continue
		}
		n := i + 1
		if lo == 0 {
			lo = n
		}
		hi = n
		w, x := float64(min(b.samples, slowdownTrust)), float64(n)
		sw, sx, sy, sxx, sxy = sw+w, sx+w*x, sy+w*b.itl, sxx+w*x*x, sxy+w*x*b.itl
	}
	d := sw*sxx - sx*sx
	if hi-lo < 2 || d <= 0 {
		s.fitted = false
		return
	}
	s.perRequest = (sw*sxy - sx*sy) / d
	s.base = (sy-s.perRequest*sx)/sw + s.perRequest
	s.fitted = true
}

// batchWithin is the largest batch at which a request's steps take at
// most factor times as long as in a batch of from (>= 1), by the fit; 0
// when it sets no bound: nothing fitted yet, a line that does not rise,
// or one too noisy to say (its value at one is not positive).
func (s *slowdown) batchWithin(factor float64, from int) int {
	if !s.fitted || s.perRequest <= 0 || s.base <= 0 || math.IsInf(factor, 1) {
		return 0
	}
	at := func(n float64) float64 { return s.base + s.perRequest*(n-1) }
	n := 1 + (factor*at(float64(max(from, 1)))-s.base)/s.perRequest
	return int(min(max(n, 1), slowdownMaxBatch))
}
