// Package consume is the queue between pacegate's HTTP side and the GPUs.
//
// [Queue] is the one owner of a queued request's state: the gateway
// submits a [Request] to it and gets a [Pending] back (the in-process
// response channel, or the [Sink] the response is written to on the
// upstream call's goroutine, found again by request id through the
// Queue's registry), and finishes it when the handler returns. The Queue keeps
// each bucket's ledger (the one count of its backlog, matched by the
// sequence number each request got at submission), names the LiteTopics
// ([LiteTopicName]) and publishes to the [Backend]: the in-process engine
// (consume/embedded) or RocketMQ Lite (consume/rocketmq). Both deliver FIFO
// per LiteTopic with at most one message of a LiteTopic in flight, and
// both honour Suspend(d): the message stays, the LiteTopic is skipped for
// d, no retry is counted.
//
// # The consumer's rules
//
// [Consumer.Handle] decides each delivery, in this order:
//
//  1. A request the registry no longer holds, or whose client has gone
//     (its context is done, or its handler abandoned it): acknowledge,
//     count it as dropped ("client_gone"), never call the model. A request
//     already dispatched (a redelivery after a lost ack) is acknowledged
//     again and dropped as "duplicate": a second model call would burn
//     seconds of GPU and stitch two answers into one response.
//  2. The bucket's pacer says wait: Suspend(wait), holding nothing. A wait
//     shorter than Backend.MinSuspend is made up with a local timer (at
//     most MinSuspend, cancelled with the contexts).
//  3. The pool: a slot granted to the bucket, or a free one when no bucket
//     of the model waits. Otherwise the bucket joins its model's wait set
//     and is suspended; it holds no worker and nothing polls. When a slot
//     frees it is granted at once to the waiting bucket owed the most
//     (package fairshare: weighted fair queuing on tokens in strict
//     priority bands), which is woken to take it. A backend that cannot
//     end a suspension early (RocketMQ) holds the granted slot until the
//     bucket's next delivery, a bounded time.
//  4. The pacer's slot is taken, the request is marked dispatched, and an
//     invocation goroutine streams the upstream's events into the Pending,
//     charging the bucket's fair share as tokens stream, and ends with
//     EventDone or EventError. The message is acknowledged at once. When
//     requests still wait in the bucket, the acknowledgement pauses its
//     LiteTopic until the pacer's next slot ([SuccessThenPause]), on a
//     backend that can (the embedded engine: [Pauser]): the next request
//     is then delivered once, when it can go, rather than delivered to be
//     suspended (step 2) and delivered again. The pause is a suspension
//     like any other: recorded on the bucket, ended by a rate increase.
//
// A panic in the handler or the invocation is recovered, reported to the
// Observer and answered with an EventError; the message is not retried.
//
// # Why acknowledge at dispatch
//
// A Lite queue delivers one message of a LiteTopic at a time, so holding
// the ack for the length of the model call (20 s for a long stream) would
// cap a tenant at one request per stream time however fast its bucket is
// paced. And in this single-process shape the response channel (the
// registry) dies with the process: a message redelivered after a crash
// would have nobody to answer. So the consumer acks as soon as the call is
// handed off; model errors go to the client as EventError and are never
// redelivered (a retry would burn the GPU again for the same result). The
// call is therefore at-most-once, and a lost ack can only cause a duplicate
// delivery, which rule 1 drops.
package consume
