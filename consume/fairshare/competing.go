package fairshare

import "math"

// competingSums are a model's sums over its competing flows, those that
// waited for the pool within the last half-life: their recent service,
// its squares and their number, for Jain's index and the shares. They are
// kept as flows change, so that a scrape reads them instead of making a
// pass over the model's flows. Every flow's recent service decays at the
// same rate, so the sums decay as a whole: they are valued at time at,
// and a read brings them to its own time. Guarded by the model's lock.
type competingSums struct {
	at             int64 // unix ns the sums are valued at; never goes back
	total, squares float64
	n              int
	// first and last hold the competing flows in a list by when they
	// last waited (one that waits again moves to the end), so that those
	// whose half-life has passed leave the sums from its front. Calls a
	// moment apart may pass their times out of order: a flow can then
	// leave the sums that much late.
	first, last *flow
}

// append puts f at the end of c's list.
func (c *competingSums) append(f *flow) {
	f.cprev, f.cnext, f.competes = c.last, nil, true
	if c.last != nil {
		c.last.cnext = f
	} else {
		c.first = f
	}
	c.last = f
}

// unlink takes f out of c's list.
func (c *competingSums) unlink(f *flow) {
	if f.cprev != nil {
		f.cprev.cnext = f.cnext
	} else {
		c.first = f.cnext
	}
	if f.cnext != nil {
		f.cnext.cprev = f.cprev
	} else {
		c.last = f.cprev
	}
	f.cprev, f.cnext, f.competes = nil, nil, false
}

// advance brings the sums to t, if t is later than their time.
func (c *competingSums) advance(t int64, halfLife float64) {
	if t <= c.at {
		return
	}
	if c.n > 0 {
		d := math.Exp2(-float64(t-c.at) / 1e9 / halfLife)
		c.total *= d
		c.squares *= d * d
	}
	c.at = t
}

// value is f's recent service at the sums' time.
func (c *competingSums) value(f *flow, halfLife float64) float64 {
	return f.decayedTo(c.at, halfLife)
}

// add counts x, a flow's recent service at the sums' time.
func (c *competingSums) add(x float64) {
	c.total += x
	c.squares += x * x
	c.n++
}

// remove uncounts x, a counted flow's recent service at the sums' time.
func (c *competingSums) remove(x float64) {
	c.n--
	if c.n == 0 {
		c.total, c.squares = 0, 0 // no float residue once nothing competes
		return
	}
	c.total = max(c.total-x, 0)
	c.squares = max(c.squares-x*x, 0)
}

// waited counts f in the sums, or moves it to the end of their list if
// it is counted already: it has just waited for the pool (its waitedAt
// is now). Requires m.mu held.
func (m *model) waited(f *flow) {
	c := &m.comp
	if f.competes { // waited again: to the end
		c.unlink(f)
		c.append(f)
		return
	}
	c.advance(f.waitedAt, m.s.halfLife)
	c.add(c.value(f, m.s.halfLife))
	c.append(f)
}

// recharged moves f's part of the sums from old to its recent service
// now: a charge changed it (both are valued at now). Requires m.mu held.
func (m *model) recharged(f *flow, old float64, now int64) {
	if !f.competes {
		return
	}
	c := &m.comp
	c.advance(now, m.s.halfLife)
	if now < c.at { // a call a moment behind another: value both at the sums' time
		d := math.Exp2(-float64(c.at-now) / 1e9 / m.s.halfLife)
		old *= d
	}
	x := c.value(f, m.s.halfLife)
	c.total = max(c.total+x-old, 0)
	c.squares = max(c.squares+x*x-old*old, 0)
}

// uncompete takes f out of the sums (its half-life passed, or it is
// being dropped). Requires m.mu held.
func (m *model) uncompete(f *flow) {
	if !f.competes {
		return
	}
	m.comp.unlink(f)
	m.comp.remove(m.comp.value(f, m.s.halfLife))
}

// competing returns the sums at now, after the flows that have not
// waited within the half-life before it left them. Requires m.mu held.
func (m *model) competing(now int64) (total, squares float64, n int) {
	c := &m.comp
	c.advance(now, m.s.halfLife)
	horizon := c.at - int64(m.s.halfLife*1e9)
	for c.first != nil && c.first.waitedAt < horizon {
		m.uncompete(c.first)
	}
	return c.total, c.squares, c.n
}
