// Package upstream is the pool of vLLM servers behind the consumer and
// the call to one of them.
//
// [Pool.TryAcquire] reserves a slot on the healthy upstream serving the
// model with the fewest outstanding requests, never more than its limit:
// beyond that the consumer keeps requests in their buckets instead of
// piling them onto the GPUs. [Slot.Do] posts the request and turns the
// response into consume.Events.
//
// An upstream's limit is learned from its vLLM /metrics, read every
// MetricsInterval (room.go): the concurrency at which the server starts
// to queue, so that pacegate queues instead and its fair order decides
// who runs next. MaxConcurrency caps it, and is the limit while the
// metrics cannot be read.
//
// Failures are split at the first response byte. Before it (a dial
// error, a connection reset before the headers, a 5xx status) nothing
// reached the client, so the upstream is marked down with exponential
// backoff and Do retries once on another upstream that has room. After
// it the response belongs to the client and a failure is reported as
// [ErrStreamBroken], never retried. Cancelling the ctx given to Do
// cancels the upstream request; Go's Transport then closes that
// connection, which is what makes vLLM abort the request and free its
// KV cache.
//
// Health is passive (failures mark an upstream down until its backoff
// has passed; it then gets requests again on trial) and active: the
// prober started by [Pool.Start] GETs /health of every upstream whose
// backoff has passed, marking it up on 200 and down otherwise, and
// refreshes the models of upstreams configured without a model list.
//
// [Pool.Ready] means some upstream can serve: it is healthy and its
// models are known. Until then the prober checks every upstream every
// DownBackoff, backoff or not, so a vLLM that was still loading its
// model serves within a second of coming up. A discovering upstream
// that a successful request brings back is probed at once.
package upstream
