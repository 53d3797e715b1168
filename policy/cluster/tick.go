package cluster

import (
	"time"
)

// settleBatch bounds the counters of one settle call, so that one script
// run stays short (Redis runs scripts one at a time).
const settleBatch = 256

// settlement is one counter's delta for settleLua.
type settlement struct {
	lk    leaseKey
	check check // kind, limit and parameter of the counter
	delta int64
	// local is the part of a positive delta that came from the fallback
	// allowance; debt the part charged after the fact; reup the part
	// re-uploaded after a restart. On failure they go back where they came
	// from.
	local, debt int64
}

// tick runs on the Store's goroutine: it drops past windows and, with the
// store reachable, returns idle leases and sends debts; a store coming
// back gets this replica's local use (and, after a restart, its leased
// use) before anything new is leased.
func (a *Admitter) tick(now time.Time, up bool) {
	recovering := !up && a.st.recovering()
	if !up && !recovering {
		a.sweep(now.UnixNano())
		return
	}
	items := a.collect(now.UnixNano(), recovering)
	hold := time.Duration(0)
	if recovering {
		hold = a.st.opt.Hold
	}
	epoch, ok := a.settle(items, hold)
	if !ok {
		a.restore(items)
		return
	}
	if a.st.sawEpoch(epoch) {
		a.mu.Lock()
		a.reupload = true
		a.mu.Unlock()
	}
	if a.takeReupload() {
		items := a.collectTaken(now.UnixNano())
		if _, ok := a.settle(items, 0); !ok {
			a.mu.Lock()
			a.reupload = true
			a.mu.Unlock()
		}
	}
}

func (a *Admitter) takeReupload() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.reupload
	a.reupload = false
	return r
}

// sweep drops the leases of past windows and idle empty burst leases.
// requires mu not held
func (a *Admitter) sweep(now int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sweepLocked(now)
}

func (a *Admitter) sweepLocked(now int64) {
	cur := windowOf(now)
	idle := int64(a.st.opt.LeaseIdle)
	for lk, l := range a.leases {
		if lk.c != burst && lk.win < cur {
			delete(a.leases, lk)
		} else if lk.c == burst && l.balance == 0 && l.debt == 0 && l.local == 0 && now-l.used > idle {
			delete(a.leases, lk)
		}
	}
}

// collect gathers what goes to the store: idle balances back, debts,
// and on recovery the fallback use of the current windows.
func (a *Admitter) collect(now int64, recovering bool) []settlement {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sweepLocked(now)
	idle := int64(a.st.opt.LeaseIdle)
	var out []settlement
	for lk, l := range a.leases {
		s := settlement{lk: lk}
		if l.balance > 0 && now-l.used > idle {
			s.delta -= l.balance
			l.taken -= l.balance
			l.balance = 0
		}
		if l.debt > 0 {
			s.debt, s.delta = l.debt, s.delta+l.debt
			l.taken += l.debt
			l.debt = 0
		}
		if recovering && l.local > 0 {
			s.local, s.delta = l.local, s.delta+l.local
			l.taken += l.local
			l.local = 0
		}
		if s.delta != 0 {
			out = append(out, s)
		}
	}
	return out
}

// collectTaken gathers this replica's use of the current windows for a
// store that lost its counters. Burst buckets are not re-uploaded: a
// restarted store starts them full (see the README's bound).
func (a *Admitter) collectTaken(now int64) []settlement {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := windowOf(now)
	var out []settlement
	for lk, l := range a.leases {
		if lk.win == cur && lk.c != burst && l.taken > 0 {
			out = append(out, settlement{lk: lk, delta: l.taken})
		}
	}
	return out
}

// restore puts back what a failed settle took out of the leases: the
// local use and the debts (returned balances stay counted as used: the
// conservative side).
func (a *Admitter) restore(items []settlement) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range items {
		l := a.get(s.lk)
		l.local += s.local
		l.debt += s.debt
		l.taken -= s.local + s.debt
	}
}

// settle sends items in batches; it returns the store's epoch ("" when
// there was nothing to send) and false when a call failed.
func (a *Admitter) settle(items []settlement, hold time.Duration) (string, bool) {
	epoch := ""
	for first := true; first || len(items) > 0; first = false {
		n := min(len(items), settleBatch)
		batch := items[:n]
		items = items[n:]
		if len(batch) == 0 && hold == 0 {
			return epoch, true
		}
		keys := []string{a.st.epochKey(), a.st.holdKey()}
		args := []any{0, a.st.knownEpoch(), hold.Milliseconds()}
		for _, s := range batch {
			c := a.limitOf(s.lk)
			keys = append(keys, a.st.counterKey(&c, s.lk.win))
			args = append(args, kindOf(s.lk.c), s.delta, c.limit, c.param())
		}
		v, err := a.st.run(settleScript, keys, args...)
		if err != nil {
			return "", false
		}
		e, ok := v.(string)
		if !ok {
			a.st.markDown(errBadReply)
			return "", false
		}
		epoch, hold = e, 0
	}
	return epoch, true
}

// limitOf rebuilds the check of a lease from the live limits: the kind,
// cap and parameter a settle needs.
func (a *Admitter) limitOf(lk leaseKey) check {
	c := check{c: lk.c, k: lk.k, ttlMs: int64(2 * window / time.Millisecond)}
	switch lk.c {
	case orgRPM:
		c.limit = a.table.OrgLimits(lk.k.Tenant).RPM
	case orgTPM:
		c.limit = a.table.OrgLimits(lk.k.Tenant).TPM
	case rpm:
		c.limit = a.table.Limits(lk.k).RPM
	case tpm:
		c.limit = a.table.Limits(lk.k).TPM
	case burst:
		capacity, refill, _ := burstOf(a.table.Limits(lk.k))
		c.limit, c.rate = capacity, refill
	}
	return c
}
