package app

import "github.com/pacegate/pacegate/policy"

// replicaShare divides every bucket's base rate by the number of replicas
// sharing the tenants (RocketMQ deployments with replicas > 1): each
// replica paces its own LiteTopic, so N replicas at rate/N release the
// tenant's configured rate in total.
func replicaShare(src policy.RateSource, n int) policy.RateSource {
	if n <= 1 {
		return src
	}
	return shared{src: src, n: float64(n)}
}

type shared struct {
	src policy.RateSource
	n   float64
}

func (s shared) BaseRate(k policy.Key) (float64, bool) {
	r, high := s.src.BaseRate(k)
	return r / s.n, high
}
