package admin

import (
	"math"
	"net/http"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/policy"
)

// bucketRow is one bucket as listed; bucketJSON adds its limits.
type bucketRow struct {
	Tenant        string  `json:"tenant"`
	Model         string  `json:"model"`
	Backlog       int     `json:"backlog"`
	Rate          float64 `json:"rate"`           // live base rate (config + overrides), requests/s; -1 = unpaced
	EffectiveRate float64 `json:"effective_rate"` // rate × column factor × global factor
	State         string  `json:"state"`          // idle, queued, suspended
	OldestWaitMS  int64   `json:"oldest_wait_ms"` // age of the oldest queued request
	Released      uint64  `json:"released"`
	Suspends      uint64  `json:"suspends"`
	// Service is the bucket's attained service in the fair share of a
	// saturated pool: weighted tokens (prompt + w × completion, over the
	// tenant's weight) since it was last idle at its band's floor.
	Service float64 `json:"service"`
	// Share is its part of its model's recent service among the buckets
	// competing for the pool (0..1; 0 when it is not competing).
	Share float64 `json:"share"`
}

type bucketJSON struct {
	bucketRow
	Priority string       `json:"priority"`
	Weight   float64      `json:"weight"` // fair-share weight
	Limits   limitsJSON   `json:"limits"`
	Override overrideJSON `json:"override"` // the bucket's own override (tenant overrides are under /admin/tenants)
}

// row renders a stat with the bucket's live rates; now is the reference
// for the oldest wait.
func (a *api) row(st consume.BucketStat, now time.Time) bucketRow {
	base, _ := a.cfg.Table.BaseRate(st.Key)
	r := bucketRow{Tenant: st.Key.Tenant, Model: st.Key.Model, Backlog: st.Backlog,
		Rate: jsonRate(base), EffectiveRate: jsonRate(a.cfg.Pacer.EffectiveRate(st.Key)),
		State: st.State, Released: st.Released, Suspends: st.Suspends}
	if st.State == "" {
		r.State = consume.StateIdle
	}
	if !st.Oldest.IsZero() {
		r.OldestWaitMS = max(0, now.Sub(st.Oldest).Milliseconds())
	}
	if a.cfg.Fairness != nil {
		if f, ok := a.cfg.Fairness.Flow(st.Key, now); ok {
			r.Service, r.Share = round3(f.Counter), round3(f.Share)
		}
	}
	return r
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// bucketFromPath resolves /admin/buckets/{tenant}/{model...}: 404 for an
// unknown tenant or model.
func (a *api) bucketFromPath(r *http.Request) (policy.Key, *policy.Tenant, *apiError) {
	k, e := bucketKey(r)
	if e != nil {
		return k, nil, e
	}
	t, ok := a.cfg.Table.Tenant(k.Tenant)
	if !ok {
		return k, nil, notFound("Unknown tenant '"+k.Tenant+"'.", "tenant", "tenant_not_found")
	}
	return k, t, a.checkModel(k.Model)
}

func (a *api) bucketBody(k policy.Key, t *policy.Tenant) bucketJSON {
	st, _ := a.cfg.Buckets.Stat(k) // a bucket nothing has used yet is idle
	st.Key = k
	overrides, _ := a.cfg.Table.Overrides()
	return bucketJSON{bucketRow: a.row(st, time.Now()), Priority: t.Priority.String(), Weight: t.Weight,
		Limits: toLimitsJSON(a.cfg.Table.Limits(k)), Override: toOverrideJSON(overrides[k])}
}

func (a *api) getBucket(w http.ResponseWriter, r *http.Request) {
	k, t, e := a.bucketFromPath(r)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, a.bucketBody(k, t))
}

func (a *api) putBucket(w http.ResponseWriter, r *http.Request) {
	k, t, e := a.bucketFromPath(r)
	if e != nil {
		writeError(w, e)
		return
	}
	fields, e := decodeFields(r, overrideFields...)
	if e != nil {
		writeError(w, e)
		return
	}
	a.mu.Lock() // read-modify-write of the override
	defer a.mu.Unlock()
	overrides, _ := a.cfg.Table.Overrides()
	o, e := patch(overrides[k], fields)
	if e != nil {
		writeError(w, e)
		return
	}
	a.setBucket(w, k, t, o)
}

func (a *api) deleteBucket(w http.ResponseWriter, r *http.Request) {
	k, t, e := a.bucketFromPath(r)
	if e != nil {
		writeError(w, e)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.setBucket(w, k, t, policy.Override{})
}

// setBucket stores o. Requires a.mu held.
func (a *api) setBucket(w http.ResponseWriter, k policy.Key, t *policy.Tenant, o policy.Override) {
	if err := a.cfg.Table.SetBucketOverride(k, o); err != nil {
		writeError(w, notFound(err.Error(), "tenant", "tenant_not_found")) // vanished in a reload
		return
	}
	a.log.Info("admin: bucket override set", "tenant", k.Tenant, "model", k.Model, "override", toOverrideJSON(o).String())
	writeJSON(w, a.bucketBody(k, t))
}
