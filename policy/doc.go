// Package policy decides when pacegate lets a request in and when it
// releases it to the model pool.
//
// Throttling is layered: hard caps are fixed one-minute windows
// ([FixedWindow]) per tenant+model and per org, the per-tenant+model burst
// check is a [TokenBucket] (capacity Burst, refilled at RPM/60 per second
// or at Rate without an RPM cap), and admitted requests are then released
// at a constant pace by a leaky-bucket [Pacer] whose rate is
// base(tenant, model) × factor(model) × factor(global).
// [Admitter] composes the admission checks; [Quotas] and [Table] hold the
// configured and live limits.
//
// The limiters ([FixedWindow], [TokenBucket]) are pure decisions: every
// method takes the instant it decides at as its now argument, so tests
// pass fixed instants, including a clock that jumps back. [Pacer] and
// [Admitter] read time.Now() once per call and decide through the same
// kind of function of now; their tests run in testing/synctest bubbles.
// Nothing here starts a goroutine, and idle keys are evicted lazily: each
// insertion sweeps a few entries of its shard. All limiter types are
// safe for concurrent use.
package policy
