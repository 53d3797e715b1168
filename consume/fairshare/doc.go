// Package fairshare decides who gets the next free slot of a saturated
// model pool. Pacing (policy.Pacer) says when a bucket may release a
// request; fairshare says, among the buckets that may release one and are
// waiting for the pool, which goes first.
//
// # The rule
//
// Every bucket (tenant+model) has a virtual counter of the service it has
// received: prompt tokens plus w × completion tokens, divided by the
// tenant's weight. A slot that frees goes to the waiting bucket of the
// highest priority band with the lowest counter (ties: the one that has
// waited longest). Completion tokens are charged as they stream, so a long
// generation is paid for while it runs, not only at its end. A bucket that
// becomes backlogged is lifted to its band's virtual time, the counter of
// the last bucket granted a slot in the band (never more than the lowest
// counter still waiting): idle time is never banked, and a newcomer
// cannot starve the others by arriving with a counter of zero.
//
// This is the Virtual Token Counter of Sheng et al., "Fairness in Serving
// Large Language Models" (OSDI 2024), applied to a gateway's buckets
// instead of an engine's clients, with weights and strict bands added.
// Two buckets that stay backlogged receive service within a bounded
// difference of each other, whatever their request sizes and rates.
//
// # Bands
//
// Bands are strict: a waiting high bucket is always served before any
// normal one, and normal before low. Within a band the counters decide.
//
// # Locks
//
// Each model's wait sets and buckets have a lock of their own: a grant of
// one model never waits on another's. Only [Scheduler.Best] (an upstream
// that serves several models) and the listings read several models, one
// lock at a time.
//
// A [Scheduler] starts no goroutine and never reads the clock itself:
// every method that needs time takes it as an argument.
package fairshare
