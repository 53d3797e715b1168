package cluster

import (
	"math"
	"sync"
	"time"

	"github.com/pacegate/pacegate/policy"
)

// Admitter runs policy.Admitter's checks (org RPM and TPM, tenant+model
// RPM and TPM in fixed minutes, then the burst bucket) against counters
// shared by every replica. It leases units of each cap from the store and
// admits from the lease, so that about one request in limit/(16·N) makes
// a round trip; a request whose lease is short leases everything it needs
// in one atomic call.
//
// When the store is unreachable it admits from what it holds, then from
// a fallback allowance of its own: cap/N of each window that begins
// during the outage, and a burst bucket of capacity/N refilled at
// refill/N. The window in which the outage began gets no allowance (the
// shared counter may already be full), so no window's total passes its
// cap. What it admitted locally is charged to the store when the store
// answers again, before it leases anything new.
//
// Admitter is safe for concurrent use; its periodic work runs on the
// Store's goroutine. Make it with [NewAdmitter].
type Admitter struct {
	st    *Store
	table *policy.Table
	n     int
	local *policy.TokenBucket // the fallback burst buckets

	mu     sync.Mutex // guards leases and reupload
	leases map[leaseKey]*lease
	// reupload is set when a reply showed a new epoch: the store lost its
	// counters, and this replica's use of the current windows goes back
	// to it on the next tick.
	reupload bool
}

// ticket is what an admitted request took, kept in its Reservation.
type ticket struct {
	win    int64 // the minute it was admitted in
	tokens int64 // tokens reserved
	n      int
	took   [numCounters]struct {
		lk   leaseKey
		cost int64
	}
}

// NewAdmitter returns an admitter enforcing t's live limits through st.
func NewAdmitter(st *Store, t *policy.Table) *Admitter {
	a := &Admitter{st: st, table: t, n: st.opt.Replicas, local: policy.NewTokenBucket(policy.BucketParams{}),
		leases: map[leaseKey]*lease{}}
	st.onTick(a.tick)
	return a
}

// Admit decides a request of tenant for model with an estimated token
// cost, as policy.Admitter.Admit does.
func (a *Admitter) Admit(tenant *policy.Tenant, model string, estTokens int64) policy.Admission {
	return a.admitAt(time.Now().UnixNano(), tenant, model, estTokens)
}

// admitAt is Admit at now (unix ns).
func (a *Admitter) admitAt(now int64, tenant *policy.Tenant, model string, estTokens int64) policy.Admission {
	k := policy.Key{Tenant: tenant.ID, Model: model}
	lim := a.table.Limits(k)
	est := max(estTokens, 0)
	cs := checks(lim, a.table.OrgLimits(tenant.Org), tenant, k, est, a.n)
	a.st.stats.requests.Add(1)
	win := windowOf(now)
	needs, complete := a.claim(cs, win, now)
	if d := a.cachedDenial(cs, needs, win, now); d.denied {
		a.unclaim(cs, needs, win)
		return a.deny(cs, lim, win, now, d)
	}
	if !complete {
		var d denial
		if a.st.Up() {
			extras := a.ask(cs, needs, win, 1)
			d = a.lease(cs, needs, extras, win, now)
			a.ask(cs, needs, win, -1)
		}
		if !a.st.Up() {
			a.st.stats.fallbacks.Add(1)
			d = a.fallback(cs, needs, win, now)
		}
		if d.denied {
			a.unclaim(cs, needs, win)
			return a.deny(cs, lim, win, now, d)
		}
	}
	return a.admitted(cs, lim, win, now, est)
}

// denial says which check failed and when a retry could pass.
type denial struct {
	denied bool
	c      counter
	wait   time.Duration
}

// claim takes what each check costs from the replica's leases, as far as
// they hold it, and returns what is still needed of each.
func (a *Admitter) claim(cs []check, win, now int64) (needs [numCounters]int64, complete bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	complete = true
	for i := range cs {
		l := a.get(cs[i].leaseKey(win))
		got := min(l.balance, cs[i].cost)
		l.balance -= got
		l.used = now
		if needs[i] = cs[i].cost - got; needs[i] > 0 {
			complete = false
		}
	}
	return needs, complete
}

// ask counts a call to the store for the short checks in (delta 1) or
// out (-1); going in, it returns the extra each may lease: the check's
// extra for the first call in flight, 0 for the others.
func (a *Admitter) ask(cs []check, needs [numCounters]int64, win int64, delta int) (extras [numCounters]int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range cs {
		if needs[i] == 0 {
			continue
		}
		l := a.get(cs[i].leaseKey(win))
		if delta > 0 && l.asking == 0 {
			extras[i] = cs[i].extra
		}
		l.asking += delta
	}
	return extras
}

// unclaim gives back what claim took for a denied request.
func (a *Admitter) unclaim(cs []check, needs [numCounters]int64, win int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range cs {
		a.get(cs[i].leaseKey(win)).balance += cs[i].cost - needs[i]
	}
}

// get returns the lease at lk, adding an empty one. requires mu held
func (a *Admitter) get(lk leaseKey) *lease {
	l, ok := a.leases[lk]
	if !ok {
		l = &lease{}
		a.leases[lk] = l
	}
	return l
}

// lease asks the store, in one round trip, for what every short check
// needs plus its lease extra.
func (a *Admitter) lease(cs []check, needs, extras [numCounters]int64, win, now int64) denial {
	// No release slot with the lease (interval 0): slots are taken at
	// release, in batches (Pacer).
	keys := []string{a.st.epochKey(), a.st.holdKey(), a.st.key("pace", cs[0].k, "")}
	args := []any{0, a.st.knownEpoch(), a.st.opt.Hold.Milliseconds(), 0, 0, 0}
	var asked []int
	for i := range cs {
		if needs[i] == 0 {
			continue
		}
		c := &cs[i]
		keys = append(keys, a.st.counterKey(c, win))
		args = append(args, kindOf(c.c), c.limit, needs[i], needs[i]+extras[i], c.param())
		asked = append(asked, i)
	}
	v, err := a.st.run(admitScript, keys, args...)
	if err != nil {
		return denial{}
	}
	r, ok := parseAdmitReply(v, len(asked))
	if !ok {
		a.st.markDown(errBadReply)
		return denial{}
	}
	if a.st.sawEpoch(r.epoch) {
		a.mu.Lock()
		a.reupload = true
		a.mu.Unlock()
	}
	switch r.status {
	case statusHold:
		return denial{denied: true, c: cs[asked[0]].c, wait: r.wait}
	case statusDenied:
		c := &cs[asked[r.failed]]
		wait := r.wait
		if c.c != burst {
			wait = resetOf(win, now)
		}
		a.remember(c.leaseKey(win), now, wait)
		return denial{denied: true, c: c.c, wait: wait}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for j, i := range asked {
		l := a.get(cs[i].leaseKey(win))
		l.balance += r.grants[j] - needs[i]
		l.taken += r.grants[j]
		l.shared = r.after[j]
	}
	return denial{}
}

// remember records a store's denial so that it is repeated locally for
// denyFor.
func (a *Admitter) remember(lk leaseKey, now int64, wait time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.get(lk)
	l.denyUntil = now + int64(min(wait, denyFor))
	l.retryAt = now + int64(min(wait, time.Duration(math.MaxInt64-now)))
}

// cachedDenial repeats a recent denial of the store for a check the
// leases cannot cover.
func (a *Admitter) cachedDenial(cs []check, needs [numCounters]int64, win, now int64) denial {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range cs {
		if needs[i] == 0 {
			continue
		}
		if l := a.get(cs[i].leaseKey(win)); l.denyUntil > now {
			return denial{denied: true, c: cs[i].c, wait: time.Duration(l.retryAt - now)}
		}
	}
	return denial{}
}

// fallback decides the short checks locally while the store is down:
// cap/N of a window that began during the outage, and the local burst
// bucket. All or nothing: the burst bucket, which cannot be undone, is
// asked last.
func (a *Admitter) fallback(cs []check, needs [numCounters]int64, win, now int64) denial {
	a.mu.Lock()
	defer a.mu.Unlock()
	began := win * int64(window)
	down := a.st.outageStart()
	for i := range cs {
		c := &cs[i]
		if needs[i] == 0 || c.c == burst {
			continue
		}
		l := a.get(c.leaseKey(win))
		if down == 0 || began < down || l.local+needs[i] > c.limit/int64(a.n) {
			return denial{denied: true, c: c.c, wait: resetOf(win, now)}
		}
	}
	for i := range cs {
		c := &cs[i]
		if needs[i] == 0 || c.c != burst {
			continue
		}
		n := float64(a.n)
		d, err := a.local.TakeAt(time.Unix(0, now), c.k, float64(needs[i]),
			policy.BucketParams{Capacity: float64(c.limit) / n, Refill: c.rate / n})
		if err != nil || !d.Allowed {
			return denial{denied: true, c: burst, wait: d.RetryAfter}
		}
		a.get(c.leaseKey(win)).local += needs[i]
	}
	for i := range cs {
		if needs[i] > 0 && cs[i].c != burst {
			a.get(cs[i].leaseKey(win)).local += needs[i]
		}
	}
	return denial{}
}

// admitted builds the admission of a request that took every cost.
func (a *Admitter) admitted(cs []check, lim policy.Limits, win, now, est int64) policy.Admission {
	t := &ticket{win: win, tokens: est, n: len(cs)}
	for i := range cs {
		t.took[i].lk, t.took[i].cost = cs[i].leaseKey(win), cs[i].cost
	}
	ad := policy.Admission{Allowed: true, Reason: policy.ReasonOK, Reservation: policy.Reservation{Ext: t}}
	ad.Requests, ad.Tokens = a.windows(lim, cs, win, now)
	return ad
}

func (a *Admitter) deny(cs []check, lim policy.Limits, win, now int64, d denial) policy.Admission {
	ad := policy.Admission{Reason: counterReasons[d.c], RetryAfter: d.wait}
	ad.Requests, ad.Tokens = a.windows(lim, cs, win, now)
	switch d.c { // the cap that denied has nothing left for this request
	case rpm:
		ad.Requests.Remaining = 0
	case tpm:
		ad.Tokens.Remaining = 0
	}
	return ad
}

// windows reports the tenant+model RPM and TPM windows for the
// x-ratelimit headers: remaining is the cap less what the store has
// handed out, plus what this replica still holds.
func (a *Admitter) windows(lim policy.Limits, cs []check, win, now int64) (req, tok policy.Window) {
	reset := resetOf(win, now)
	a.mu.Lock()
	defer a.mu.Unlock()
	report := func(c counter, limit int64) policy.Window {
		if limit <= 0 {
			return policy.Window{}
		}
		for i := range cs {
			if cs[i].c == c {
				l := a.get(cs[i].leaseKey(win))
				used := max(l.shared, l.taken) - l.balance + l.local
				return policy.Window{Limit: limit, Remaining: min(max(limit-used, 0), limit), Reset: reset}
			}
		}
		return policy.Window{Limit: limit, Remaining: limit, Reset: reset}
	}
	return report(rpm, lim.RPM), report(tpm, lim.TPM)
}

// resetOf is how long until window win ends.
func resetOf(win, now int64) time.Duration {
	return time.Duration((win+1)*int64(window) - now)
}

// Reconcile charges a request's actual token usage in place of its
// reservation, as policy.Admitter.Reconcile does: a saving goes back to
// the lease while its window lasts; an excess is taken from the lease,
// and what the lease lacks is charged to the store on the next tick.
func (a *Admitter) Reconcile(r policy.Reservation, actualTokens int64) {
	t, ok := r.Ext.(*ticket)
	if !ok {
		return
	}
	a.reconcileAt(time.Now().UnixNano(), t, actualTokens)
}

func (a *Admitter) reconcileAt(now int64, t *ticket, actualTokens int64) {
	cur := windowOf(now)
	delta := max(actualTokens, 0) - t.tokens
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range t.n {
		lk := t.took[i].lk
		if lk.c != orgTPM && lk.c != tpm {
			continue
		}
		switch {
		case delta < 0 && lk.win == cur:
			a.get(lk).balance -= delta
		case delta > 0:
			lk.win = cur // a past window is gone: the excess goes to this one
			l := a.get(lk)
			got := min(l.balance, delta)
			l.balance -= got
			if a.st.Up() {
				l.debt += delta - got
			} else {
				l.local += delta - got
			}
		}
	}
}

// Refund gives back everything r took (the request never reached the
// model) to the leases: a window's units while that window lasts, and the
// burst token.
func (a *Admitter) Refund(r policy.Reservation) {
	t, ok := r.Ext.(*ticket)
	if !ok {
		return
	}
	cur := windowOf(time.Now().UnixNano())
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range t.n {
		if lk := t.took[i].lk; lk.c == burst || lk.win == cur {
			a.get(lk).balance += t.took[i].cost
		}
	}
}

// param is the fifth script argument of a check: a window key's TTL or a
// bucket's refill.
func (c *check) param() any {
	if c.c == burst {
		return c.rate
	}
	return c.ttlMs
}

func kindOf(c counter) string {
	if c == burst {
		return "b"
	}
	return "w"
}

// counterKey is the store key of a check's shared counter in window win.
func (s *Store) counterKey(c *check, win int64) string {
	if c.c == burst {
		return s.key(counterNames[c.c], c.k, "")
	}
	return s.key(counterNames[c.c], c.k, ":"+itoa(win))
}

// saturate converts a script's µs wait, -1 meaning never.
func saturate(us int64) time.Duration {
	if us < 0 || us > math.MaxInt64/1000 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(us) * time.Microsecond
}
