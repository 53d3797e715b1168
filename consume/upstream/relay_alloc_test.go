//go:build !race

package upstream

import "testing"

// A relayed chunk allocates nothing: a stream of 1,100 chunks through
// the relay, the Pending's hand-off and the SSE writer allocates what
// one of 100 chunks does (per-request setup only). The race detector
// allocates on its own, hence the build tag.
func TestRelayChunkAllocatesNothing(t *testing.T) {
	allocs := func(n int) float64 {
		p := relayPool(t, n)
		defer p.Close()
		relayStreamOnce(t, p, n) // warm: the Pending's chunk buffers reach their size
		return testing.AllocsPerRun(5, func() { relayStreamOnce(t, p, n) })
	}
	short, long := allocs(100), allocs(1100)
	if perChunk := (long - short) / 1000; perChunk > 0.01 {
		t.Fatalf("%.0f allocations for 100 chunks, %.0f for 1,100: %.3f per chunk, want 0", short, long, perChunk)
	}
	t.Logf("%.0f allocations per request of 100 chunks, %.0f of 1,100", short, long)
}
