// Package embedded is an in-process LiteTopic broker: the single-binary
// implementation of [consume.Backend]. It behaves like a RocketMQ Lite
// parent topic with one wildcard consumer group, so the consumer code is
// the same on both backends:
//
//   - A LiteTopic exists from its first message and, once empty, is
//     reclaimed lazily after Config.IdleTTL.
//   - Delivery is FIFO per LiteTopic with at most one message of a
//     LiteTopic in flight; its head stays queued until acknowledged.
//   - Suspend(d) keeps the message and parks the LiteTopic in a timer heap
//     for d without counting an attempt; Retry counts one and parks it for
//     Config.RetryBackoff. Unlike RocketMQ's 100 ms tick, a parked topic is
//     resumed within about 1 ms of its due time.
//
// # Ready set
//
// Workers only ever see the ready queue: a FIFO of LiteTopics that have a
// deliverable message. Idle topics sit in an idle list and suspended ones
// in the timer heap, so dispatch cost does not depend on how many of those
// exist. After a delivery a topic that still has messages goes to the back
// of the ready queue, which makes the pool round-robin across tenants.
//
// # Goroutines
//
// Start launches Config.Workers workers and one timer goroutine; Close
// stops them all and waits for handler calls in progress (bounded by its
// context). A worker never sleeps for a topic; waiting is the timer's job.
//
// # Bounded memory
//
// Publish fails at once with a *consume.FullError when the engine holds
// Config.MaxMessages messages or Config.MaxBytes body bytes (a bucket's own
// backlog limit is enforced once, by consume.Queue).
// Nothing queued is ever dropped to make room, except a message whose
// handler panicked or exhausted Config.MaxAttempts.
package embedded
