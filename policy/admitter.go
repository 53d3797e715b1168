package policy

import (
	"math"
	"time"
)

// Window is one fixed-window cap as the x-ratelimit-{limit,remaining,
// reset}-{requests,tokens} headers report it. The zero value means "no
// cap" (send no headers).
type Window struct {
	Limit, Remaining int64
	Reset            time.Duration
}

// Reservation records what one admitted request reserved, so that
// [Admitter.Reconcile] or [Admitter.Refund] can settle it. It is an
// opaque value; the zero Reservation settles nothing. Settle each
// reservation exactly once.
type Reservation struct {
	key     Key
	org     string
	win     int64 // the minute the windows were charged in
	tokens  int64 // tokens reserved
	charged uint8 // which windows were charged: the charged* bits
	burst   bool  // a burst token was spent
	// Ext is for another admitter of the same contract (policy/cluster)
	// to record what it reserved; Admitter leaves it nil. It must be
	// comparable (a pointer).
	Ext any
}

// Admission is the answer to one [Admitter.Admit]; a plain value. The
// zero value is a denial with no reason.
type Admission struct {
	Allowed bool
	Reason  Reason
	// RetryAfter is, for a denial, when a retry would pass every check
	// if nothing else happens meanwhile.
	RetryAfter  time.Duration
	Requests    Window      // the tenant+model RPM window
	Tokens      Window      // the tenant+model TPM window
	Reservation Reservation // settle with Reconcile or Refund when Allowed
}

// Admitter runs the admission checks in order: the org's fixed-minute
// RPM and TPM windows, the tenant+model fixed-minute RPM and TPM windows
// (reserving the estimated tokens, so that concurrent requests cannot
// overshoot), then the burst check: a [TokenBucket] of capacity Burst
// refilled at RPM/60 tokens per second, or at Rate when RPM is 0. RPM is
// checked once, by its fixed window, so a denial's reason, RetryAfter and
// x-ratelimit headers always agree. A denial refunds every reservation
// made before it in the same call.
//
// Admitter reads the wall clock (time.Now) once per call. It is safe for
// concurrent use and never starts a goroutine. Make it with
// [NewAdmitter].
type Admitter struct {
	table  *Table
	orgReq *FixedWindow
	orgTok *FixedWindow
	req    *FixedWindow
	tok    *FixedWindow
	burst  *TokenBucket
}

// NewAdmitter returns an admitter enforcing t's live limits.
func NewAdmitter(t *Table) *Admitter {
	return &Admitter{table: t,
		orgReq: newReasonWindow(ReasonOrgRPM),
		orgTok: newReasonWindow(ReasonOrgTPM),
		req:    newReasonWindow(ReasonRPM),
		tok:    newReasonWindow(ReasonTPM),
		burst:  NewTokenBucket(BucketParams{}),
	}
}

// CapWindow is the length of the hard caps' windows (RPM, TPM, per
// tenant+model and per org): fixed windows aligned to the Unix epoch, so
// each is a wall-clock minute, and a cap's count starts again at the
// minute's turn.
const CapWindow = time.Minute

// CapWindowLeft is how long the cap window holding now has left.
func CapWindowLeft(now time.Time) time.Duration {
	return now.Truncate(CapWindow).Add(CapWindow).Sub(now)
}

func newReasonWindow(r Reason) *FixedWindow {
	w := NewFixedWindow(CapWindow, 0)
	w.reason = r
	return w
}

// check is one fixed-window step of the admission.
type check struct {
	w     *FixedWindow
	k     Key
	limit int64
	cost  int64
}

// Bits of Reservation.charged, one per check in admission order.
const (
	chargedOrgReq = 1 << iota
	chargedOrgTok
	chargedReq
	chargedTok
)

// Admit decides a request of tenant for model with an estimated token
// cost (prompt plus expected completion; <= 0 reserves nothing).
func (a *Admitter) Admit(tenant *Tenant, model string, estTokens int64) Admission {
	now := time.Now()
	k := Key{Tenant: tenant.ID, Model: model}
	lim := a.table.Limits(k)
	org := a.table.OrgLimits(tenant.Org)
	orgKey := Key{Tenant: tenant.Org}
	est := max(estTokens, 0)
	checks := [4]check{
		{a.orgReq, orgKey, org.RPM, 1},
		{a.orgTok, orgKey, org.TPM, est},
		{a.req, k, lim.RPM, 1},
		{a.tok, k, lim.TPM, est},
	}
	ad := Admission{Allowed: true, Reason: ReasonOK,
		Reservation: Reservation{key: k, org: tenant.Org, win: a.req.Window(now), tokens: est}}
	for i := range checks {
		c := &checks[i]
		if c.limit <= 0 || c.cost <= 0 {
			continue
		}
		d, win := c.w.ReserveAt(now, c.k, c.limit, c.cost)
		if !d.Allowed {
			a.settle(now, &ad.Reservation)
			return a.deny(now, k, lim, &checks, d)
		}
		ad.Reservation.charged |= 1 << i
		ad.Reservation.win = win
		switch i { // the tenant windows' headers come free with the charge
		case 2:
			ad.Requests = Window{Limit: d.Limit, Remaining: d.Remaining, Reset: d.Reset}
		case 3:
			ad.Tokens = Window{Limit: d.Limit, Remaining: d.Remaining, Reset: d.Reset}
		}
	}
	if bp, ok := burstParams(lim); ok {
		d, _ := a.burst.TakeAt(now, k, 1, bp)
		if !d.Allowed {
			a.settle(now, &ad.Reservation)
			return a.deny(now, k, lim, &checks, d)
		}
		ad.Reservation.burst = true
	}
	if ad.Tokens == (Window{}) && lim.TPM > 0 { // nothing reserved: report usage
		ad.Tokens = a.window(now, a.tok, k, lim.TPM)
	}
	return ad
}

// burstParams returns the burst bucket of a bucket's limits, and false
// when there is no burst check: Burst is 0, or the bucket refills
// infinitely fast (no RPM and an unpaced Rate), so it could never deny.
func burstParams(l Limits) (BucketParams, bool) {
	refill := float64(l.RPM) / 60
	if l.RPM <= 0 {
		refill = l.Rate // no RPM: the burst refills at the release pace
	}
	return BucketParams{Capacity: float64(l.Burst), Refill: refill}, l.Burst > 0 && !math.IsInf(refill, 1)
}

// deny builds a denial whose RetryAfter is when every check would pass:
// each check's own wait is exact and only shrinks with time, so the
// latest of them is the answer.
func (a *Admitter) deny(now time.Time, k Key, lim Limits, checks *[4]check, d Decision) Admission {
	wait := d.RetryAfter
	for _, c := range checks {
		if c.limit > 0 && c.cost > 0 {
			wait = max(wait, c.w.WaitAt(now, c.k, c.limit, c.cost))
		}
	}
	if bp, ok := burstParams(lim); ok {
		wait = max(wait, a.burst.WaitAt(now, k, 1, bp))
	}
	return Admission{Reason: d.Reason, RetryAfter: wait,
		Requests: a.window(now, a.req, k, lim.RPM), Tokens: a.window(now, a.tok, k, lim.TPM)}
}

// window reports k's usage of w under limit (zero Window for no cap).
func (a *Admitter) window(now time.Time, w *FixedWindow, k Key, limit int64) Window {
	if limit <= 0 {
		return Window{}
	}
	used, reset := w.UsageAt(now, k)
	return Window{Limit: limit, Remaining: max(limit-used, 0), Reset: reset}
}

// Reconcile charges a request's actual token usage in place of its
// reservation: in the reservation's window if that is still current,
// otherwise any excess over the reservation goes to the current window
// (the old window is gone; the new one pays for what was not reserved).
func (a *Admitter) Reconcile(t Reservation, actualTokens int64) {
	now := time.Now()
	actual := max(actualTokens, 0)
	for _, c := range []struct {
		w       *FixedWindow
		k       Key
		charged bool
	}{{a.orgTok, Key{Tenant: t.org}, t.charged&chargedOrgTok != 0}, {a.tok, t.key, t.charged&chargedTok != 0}} {
		if !c.charged {
			continue
		}
		if !c.w.AdjustAt(now, c.k, t.win, actual-t.tokens) && actual > t.tokens {
			c.w.AddAt(now, c.k, actual-t.tokens)
		}
	}
}

// Refund gives back everything t reserved (the request never reached the
// model): its request and tokens in windows that are still current, and
// its burst token.
func (a *Admitter) Refund(t Reservation) {
	now := time.Now()
	a.settle(now, &t)
	if t.burst {
		a.burst.RefundAt(now, t.key, 1) // RefundAt skips a forgotten key
	}
}

// settle gives back the window reservations recorded in t (used on a
// denial inside Admit, and by Refund).
func (a *Admitter) settle(now time.Time, t *Reservation) {
	orgKey := Key{Tenant: t.org}
	if t.charged&chargedOrgReq != 0 {
		a.orgReq.AdjustAt(now, orgKey, t.win, -1)
	}
	if t.charged&chargedOrgTok != 0 {
		a.orgTok.AdjustAt(now, orgKey, t.win, -t.tokens)
	}
	if t.charged&chargedReq != 0 {
		a.req.AdjustAt(now, t.key, t.win, -1)
	}
	if t.charged&chargedTok != 0 {
		a.tok.AdjustAt(now, t.key, t.win, -t.tokens)
	}
}
