package vllmsim

import "time"

// The engine's step clock. vLLM produces one token for every running
// request in each forward pass of its model (an engine step), so the
// tokens of concurrent streams are produced together, at the ends of
// the engine's steps, not each on a clock of its own. The simulator
// models that: a request's token is produced at the end of the step in
// progress when it is due, and its next one at the end of the next
// step. A step lasts ITL stretched by the load factor of the batch
// running when it is reckoned. The clock is anchored by the first token
// due while it is stopped, and stops when the last running request
// ends, so a request alone sees exactly its TTFT and ITL.
//
// Without it every stream kept the phase its arrival gave it, and the
// chunks of 32 streams reached a proxy at 32 scattered instants of each
// ITL instead of in one burst: how many times the proxy's threads slept
// and woke (and so its CPU per request) followed how the phases of
// that run happened to spread.

// stepEndAt returns when the engine step in progress at t ends (t when
// a step ends at t), anchoring a stopped clock at t. A t at or before
// the start of the last step reckoned (a request that woke late) gets
// that start: its token is produced as soon as it can be. Steps not yet
// reckoned up to t are reckoned with the batch running now.
func (s *Server) stepEndAt(t time.Time) time.Time {
	if s.cfg.OwnClocks {
		return t
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	step := scale(s.itl, s.factorOf(s.running))
	switch start := s.stepEnd.Add(-s.step); {
	case s.stepEnd.IsZero() || step <= 0:
		s.stepEnd, s.step = t, 0
	case !t.After(start):
		return start
	case s.stepEnd.Before(t):
		n := (t.Sub(s.stepEnd) + step - 1) / step
		s.stepEnd, s.step = s.stepEnd.Add(n*step), step
	}
	return s.stepEnd
}
