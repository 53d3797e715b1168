// Package consume is the queue between pacegate's HTTP side and the GPUs:
// the LiteTopic contract ([Backend], [Message], [Handler]), the response
// registry through which the consumer answers the waiting HTTP handler
// ([Registry], [Pending]), the backend-agnostic [Consumer] that applies
// pacing and upstream capacity, and the per-bucket queue tracker
// ([Buckets]) behind queue positions and the admin bucket matrix.
//
// Each tenant+model bucket is one LiteTopic ([LiteTopicName]); backends are
// the in-process engine (consume/embedded) and RocketMQ Lite
// (consume/rocketmq). Both deliver FIFO per LiteTopic with at most one
// message of a LiteTopic in flight, and both honour Suspend(d): the
// message stays, the LiteTopic is skipped for d, no retry is counted.
//
// # The consumer's rules
//
// On each delivery, in this order:
//
//  1. The request's [Pending] is gone from the Registry or its context is
//     done (the client disconnected or timed out): acknowledge, count it as
//     dropped ("client_gone"), never call the model. If it was already
//     dispatched (a redelivery after a lost ack), acknowledge again and
//     drop it as "duplicate": a second model call would burn seconds of GPU
//     and stitch two answers into one response. Pending.MarkDispatched is
//     the idempotency key; it lives in the same process as the Registry.
//  2. No upstream has capacity for the model: Suspend(CapacityBackoff).
//     Capacity is reserved before the pacer is asked, so a pacer slot is
//     never consumed by a request that cannot be dispatched (the pacer's
//     schedule would otherwise advance with nothing released).
//  3. The pacer says wait: give the capacity back and Suspend(wait). A wait
//     shorter than Backend.MinSuspend is made up with a local timer (at
//     most MinSuspend, cancelled with the contexts) and the pacer is asked
//     once more, as the seeds do below RocketMQ's Suspend precision.
//  4. Otherwise mark the request dispatched, hand it to an invocation
//     goroutine that streams the upstream's events into the Pending and
//     ends with EventDone or EventError, and acknowledge at once.
//
// Messages without a tenant or model, or with a bad cost, are dropped as
// "bad_message" (the client, if still waiting, gets an EventError). A panic
// in the handler or the invocation is recovered, reported to the Observer
// and answered with an EventError; the message is not retried.
//
// # Why acknowledge at dispatch
//
// A Lite queue delivers one message of a LiteTopic at a time, so holding
// the ack for the length of the model call (20 s for a long stream) would
// cap a tenant at one request per stream time however fast its bucket is
// paced. And in this single-process shape the response channel (the
// Registry) dies with the process: a message redelivered after a crash
// would have nobody to answer. So the consumer acks as soon as the call is
// handed off; model errors go to the client as EventError and are never
// redelivered (a retry would burn the GPU again for the same result). The
// call is therefore at-most-once, and a lost ack can only cause a duplicate
// delivery, which rule 1 drops.
package consume
