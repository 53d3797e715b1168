package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/policy"
	"github.com/pacegate/pacegate/policy/cluster"
	"github.com/pacegate/pacegate/policy/config"
)

// newLimits builds the admitter and the pacers from the cluster section
// and returns the pacer the consumer asks. Without a store (or with one
// replica) each replica enforces every cap itself and paces each bucket at
// rate/replicas, as before the store existed. With a store, caps and
// rates are shared through it: a.Pacer then carries each bucket's total
// rate (the gateway's wait estimates and the control loop's factors read
// it), and the cluster pacer hands out the shared schedule's slots.
func (a *App) newLimits(cfg *config.File) consume.Pacer {
	c := cfg.Cluster
	for _, d := range cfg.Deprecations() {
		a.logger.Warn("config: " + d)
	}
	if c.Store == "" {
		a.Pacer = policy.NewPacer(policy.SharedRate(a.Table, c.Replicas))
		a.Admitter = policy.NewAdmitter(a.Table)
		return a.Pacer
	}
	u, _ := config.ParseStoreURL(c.Store) // validated with the file
	a.Store = cluster.New(cluster.Options{Addr: u.Addr, DB: u.DB, Username: u.Username, Password: u.Password,
		TLS: u.TLS, Replicas: c.Replicas, Logger: a.logger})
	a.Pacer = policy.NewPacer(a.Table)
	p := cluster.NewPacer(a.Store, a.Pacer)
	a.Admitter = cluster.NewAdmitter(a.Store, a.Table)
	a.countQueued = p.CountQueued
	return p
}

// closeStore stops the store's goroutine and closes its connections.
func (a *App) closeStore() {
	if a.Store != nil {
		if err := a.Store.Close(); err != nil {
			a.logger.Warn("cluster store close", "err", err)
		}
	}
}

// storeMetrics exports the store's health and counters on /metrics.
func (a *App) storeMetrics() {
	if a.Store == nil {
		return
	}
	st := a.Store
	up := func() float64 {
		if st.Up() {
			return 1
		}
		return 0
	}
	a.Metrics.Registry().MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pacegate_cluster_store_up",
			Help: "1 while the cluster store answers; 0 while this replica runs on its cap/N and rate/N fallback."}, up),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pacegate_cluster_store_round_trips_total",
			Help: "Calls to the cluster store (leases, returns, release slots, probes)."},
			func() float64 { return float64(st.Stats().RoundTrips) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pacegate_cluster_admissions_total",
			Help: "Admissions decided with the cluster store configured (round trips per request = round_trips / admissions)."},
			func() float64 { return float64(st.Stats().Requests) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pacegate_cluster_store_outages_total",
			Help: "Times the cluster store was found unreachable."},
			func() float64 { return float64(st.Stats().Outages) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pacegate_cluster_fallback_decisions_total",
			Help: "Admissions and releases decided on the local fallback while the store was unreachable."},
			func() float64 { return float64(st.Stats().Fallbacks) }),
	)
}
