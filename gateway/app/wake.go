package app

import (
	"math"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/policy"
)

// maxSuspendWithoutWake caps one suspension on a backend that cannot be
// woken (RocketMQ holds suspensions in the broker): a rate increase then
// reaches requests already queued within this long.
const maxSuspendWithoutWake = time.Second

// watchRateChanges makes rate changes reach requests already queued: a
// slower rate is felt at the bucket's next delivery anyway, but a bucket
// suspended under an old, slower rate would sleep out that wait. On a
// backend that can, wake the suspended buckets a change touches; on one
// that cannot, the consumer caps each suspension instead.
func (a *App) watchRateChanges() {
	a.Table.OnChange(a.wake)
	a.Pacer.OnChange(a.wake)
}

// wake ends the suspension of every suspended bucket c touches; the
// consumer then asks the pacer again at the new rate.
func (a *App) wake(c policy.Change) {
	w, ok := a.Backend.(consume.Waker)
	if !ok {
		return
	}
	q := consume.ListQuery{State: consume.StateSuspended, Tenant: c.Tenant, Model: c.Model, Exact: true, Limit: math.MaxInt}
	if c.Key != (policy.Key{}) {
		q.Tenant, q.Model = c.Key.Tenant, c.Key.Model
	}
	items, _ := a.Buckets.List(q)
	replica := replicaID(a.config())
	for _, it := range items {
		if c.Matches(it.Key) {
			w.Wake(consume.LiteTopicName(it.Key.Tenant, it.Key.Model, replica))
		}
	}
}

func maxSuspend(b consume.Backend) time.Duration {
	if _, ok := b.(consume.Waker); ok {
		return 0
	}
	return maxSuspendWithoutWake
}
