package policy

// SharedRate divides every bucket's base rate from src by n, the number
// of replicas that share the tenants and pace their own copies of each
// bucket: n replicas at rate/n release the configured rate in total when
// a load balancer spreads a tenant evenly, and less, never more, when it
// does not. n <= 1 returns src itself.
func SharedRate(src RateSource, n int) RateSource {
	if n <= 1 {
		return src
	}
	if v, ok := src.(VersionedRates); ok {
		return sharedVersionedRate{sharedRate{src: src, n: float64(n)}, v}
	}
	return sharedRate{src: src, n: float64(n)}
}

type sharedRate struct {
	src RateSource
	n   float64
}

// BaseRate implements [RateSource.BaseRate].
func (s sharedRate) BaseRate(k Key) (float64, bool) {
	r, high := s.src.BaseRate(k)
	return r / s.n, high
}

// sharedVersionedRate is a sharedRate over a source with versions: its
// answers change only when the source's do.
type sharedVersionedRate struct {
	sharedRate
	v VersionedRates
}

// RateVersion implements [VersionedRates.RateVersion].
func (s sharedVersionedRate) RateVersion() uint64 { return s.v.RateVersion() }
