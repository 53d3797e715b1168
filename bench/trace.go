package main

import (
	"math/rand/v2"
	"slices"
	"time"
)

// traceSpec shapes the bursty multi-tenant trace of the throttling
// scenario.
type traceSpec struct {
	Tenants, Bursty int
	Rate            float64       // every tenant's configured rate, req/s
	SteadyFrac      float64       // steady tenants' Poisson rate as a fraction of Rate
	BurstyBaseFrac  float64       // bursty tenants' background Poisson rate, fraction of Rate
	BurstSize       int           // requests in one burst
	BurstLen        time.Duration // a burst's requests are spread evenly over this
	BurstEvery      time.Duration // one burst per tenant per this period, random phase
	Duration        time.Duration
	Seed            uint64
}

// buildTrace returns the trace's events sorted by time. Tenants
// 0..Bursty-1 are bursty; the trace is deterministic for a seed.
func buildTrace(s traceSpec) []event {
	rng := rand.New(rand.NewPCG(s.Seed, 7))
	var evs []event
	for t := range s.Tenants {
		class, frac := "steady", s.SteadyFrac
		if t < s.Bursty {
			class, frac = "bursty", s.BurstyBaseFrac
			evs = append(evs, bursts(rng, s, t)...)
		}
		evs = append(evs, poisson(rng, t, class, frac*s.Rate, s.Duration)...)
	}
	slices.SortFunc(evs, func(a, b event) int { return int(a.At - b.At) })
	return evs
}

func poisson(rng *rand.Rand, tenant int, class string, rate float64, dur time.Duration) []event {
	var evs []event
	if rate <= 0 {
		return nil
	}
	for at := time.Duration(rng.ExpFloat64() / rate * float64(time.Second)); at < dur; at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second)) {
		evs = append(evs, event{At: at, Tenant: tenant, Class: class})
	}
	return evs
}

func bursts(rng *rand.Rand, s traceSpec, tenant int) []event {
	var evs []event
	for start := time.Duration(rng.Int64N(int64(s.BurstEvery))); start < s.Duration; start += s.BurstEvery {
		for i := range s.BurstSize {
			at := start + time.Duration(i)*s.BurstLen/time.Duration(s.BurstSize)
			if at < s.Duration {
				evs = append(evs, event{At: at, Tenant: tenant, Class: "bursty"})
			}
		}
	}
	return evs
}
