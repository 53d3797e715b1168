package config

import "time"

// Built-in limits used when the defaults section leaves a field unset.
const (
	DefaultRate    = 10.0 // requests/s
	DefaultBacklog = 1000
	DefaultMaxWait = 30 * time.Second

	// DefaultUpstreamIdleTimeout is upstreams[i].idle_timeout when unset.
	DefaultUpstreamIdleTimeout = 30 * time.Second
)

// SetDefaults fills every unset (zero) field with its documented default.
// Negative values are left alone for [File.Validate] to report.
func (f *File) SetDefaults() {
	setString(&f.Listen, "127.0.0.1:8080")
	setString(&f.Admin.Listen, "127.0.0.1:9090")
	setNum(&f.Admin.AuthBurst, 5)
	setNum(&f.Admin.AuthRefill, 10*time.Second)
	setNum(&f.Admin.AuthMaxSources, 10000)
	f.Server.setDefaults()
	for i := range f.Upstreams {
		setPtr(&f.Upstreams[i].IdleTimeout, DefaultUpstreamIdleTimeout)
	}
	f.Queue.setDefaults()
	f.Cluster.setDefaults(&f.Queue.RocketMQ)
	f.Control.setDefaults()
	f.Defaults.setDefaults()
	for i := range f.Tenants {
		setString(&f.Tenants[i].Priority, PriorityNormal)
		setNum(&f.Tenants[i].Weight, 1)
	}
	setString(&f.Routing.Policy, RoutingPrefix)
	setNum(&f.Routing.LoadBound, 1.25)
	setNum(&f.Routing.MaxPrefixBytes, 64<<10)
	setString(&f.Fairness.Mode, FairnessFair)
	setNum(&f.Fairness.CompletionWeight, DefaultCompletionWeight)
	setNum(&f.Fairness.Bands.High.MaxSlowdown, DefaultHighMaxSlowdown)
}

func (s *Server) setDefaults() {
	setNum(&s.MaxBodyBytes, 8<<20)
	setNum(&s.ReadHeaderTimeout, 10*time.Second)
	setNum(&s.ReadBodyTimeout, 30*time.Second)
	setNum(&s.MaxHeaderBytes, 64<<10)
	setNum(&s.RequestTimeout, 120*time.Second)
	setNum(&s.Heartbeat, 5*time.Second)
	setPtr(&s.ShutdownDelay, 5*time.Second)
	setNum(&s.ShutdownGrace, 30*time.Second)
	setPtr(&s.WriteStallTimeout, 30*time.Second)
	setNum(&s.MaxConnections, 10000)
	setNum(&s.IdleTimeout, 120*time.Second)
	setNum(&s.StoredResponses, 65536)
	setNum(&s.StoredResponseTTL, time.Hour)
}

func (q *Queue) setDefaults() {
	setString(&q.Backend, BackendEmbedded)
	e := &q.Embedded
	setNum(&e.Workers, 64)
	setNum(&e.MaxMessages, 100000)
	setNum(&e.MaxBytes, 256<<20)
	setNum(&e.IdleTTL, 10*time.Minute)
	r := &q.RocketMQ
	setString(&r.Endpoint, "127.0.0.1:8081")
	setString(&r.Topic, "LLM_REQ")
	setString(&r.Group, "GID_PACEGATE")
	setNum(&r.Invisible, 10*time.Second)
}

func (c *Control) setDefaults() {
	setNum(&c.Interval, 2*time.Second)
	setNum(&c.WaitingTarget, 8)
	setNum(&c.MinFactor, 0.1)
	setNum(&c.MaxFactor, 1)
	setNum(&c.Decrease, 0.5)
	setNum(&c.Increase, 0.05)
}

// setDefaults fills the built-in limits: no RPM/TPM/burst cap, rate 10/s,
// backlog 1000, max_wait 30s.
func (l *LimitsSpec) setDefaults() {
	setPtr(&l.RPM, 0)
	setPtr(&l.TPM, 0)
	setPtr(&l.Burst, 0)
	setPtr(&l.Rate, DefaultRate)
	setPtr(&l.Backlog, DefaultBacklog)
	setPtr(&l.MaxWait, DefaultMaxWait)
}

func setString(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func setNum[T int | int64 | float64 | time.Duration](p *T, v T) {
	if *p == 0 {
		*p = v
	}
}

func setPtr[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}
