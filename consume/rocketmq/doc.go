// Package rocketmq implements [consume.Backend] on Apache RocketMQ 5.5 Lite
// mode (LiteTopics under one LITE parent topic) through the Go client
// github.com/apache/rocketmq-clients/golang/v5 v5.1.4 and a cluster-mode
// proxy (the local-mode proxy cannot serve Lite consumers in 5.5.x).
//
// # Mapping
//
// Publish sends one message per request to the parent topic with
// SetLiteTopic(m.LiteTopic); the request id is the message key and the
// "reqid" user property, m.Key becomes the "tenant" and "model" user
// properties (and the Delivery's Key again), and m.Properties become user
// properties. One
// LitePushConsumer per process, in a consumer group bound to the parent
// topic (lite.bind.topic, no lite.sub.wildcard), receives them. A Handler's
// [consume.Result] maps to:
//
//   - Success → SUCCESS (ack).
//   - Suspend(d) → NewConsumerResultSuspend(max(d, 50ms)): the broker keeps
//     the message invisible for d without counting a retry, and the LiteTopic
//     stays blocked (FIFO). The client panics below 50 ms, so shorter waits
//     are never passed on; [Backend.MinSuspend] tells the consumer to make up
//     the rest locally. The broker re-dispatches on a 100 ms timer tick, so a
//     Suspend ends up to ~100 ms late.
//   - Retry → a Suspend with exponential backoff (RetryBackoff doubling up
//     to MaxRetryBackoff), not FAILURE. FAILURE in v5.1.4 retries inside the
//     client while the message's fixed invisibility (AutoRenew=false) keeps
//     running, so the broker can hand the same message out again in parallel,
//     and after retryMaxTimes it goes to the DLQ where no replica sees it.
//     The backend counts Retries per request id itself: Delivery.Attempt is
//     1 + that count for the messages this process published (the broker's
//     delivery attempt is not usable: it rises from 1 to 2 on a message's
//     first Suspend). After MaxRetries it acknowledges the message and logs
//     it as given up.
//
// The client consumes with WithPushEnableFifoConsumeAccelerator(true), so the
// messages of one receive batch run in parallel across LiteTopics and one
// slow tenant does not hold up the others; within a LiteTopic delivery is
// sequential (one message in flight, as the contract requires).
// InvisibleDuration bounds how long a received message may wait in the
// client cache plus its handler call before the broker redelivers it; keep
// handlers short (the consumer acks at dispatch).
//
// # Replicas
//
// Several gateway processes share one broker, one parent topic and one
// consumer group. A response channel lives in the process that accepted the
// request, so each replica must consume exactly what it published. LiteTopic
// names therefore carry the replica id ([consume.LiteTopicName](tenant,
// model, replicaID), or [Backend.LiteTopic]), and each replica subscribes
// (SubscribeLite) only the names it publishes to, before its first message to
// that name. The broker's LiteEventDispatcher tells only subscribed clients
// about a LiteTopic, so replicas never see each other's traffic; a wildcard
// group would break this (every client would get every LiteTopic).
//
// Rate with N replicas: a pacing bucket is per LiteTopic, which is now per
// (tenant, model, replica); the bucket's pace across replicas is the cluster
// section's business (policy/cluster). With cluster.store the replicas share
// each bucket's release schedule in Redis and the configured rate holds in
// total wherever the traffic goes; without it, cluster.replicas = N makes
// each replica pace at rate/N, exact only when the load balancer spreads a
// tenant evenly, and less, never more, otherwise.
//
// Restart: a new process gets a new client id and the broker forgets the old
// client's subscriptions (they are session state). Names are deterministic,
// so a restarted replica with the same id re-subscribes a name on its first
// publish to it. Messages its previous incarnation left behind are delivered
// then; the consumer finds no registry entry for them and drops them as
// "client gone" (nobody is waiting for them any more). After a proxy or
// broker outage the backend rebuilds its clients when the probe sees the
// broker again; the watchdog (below) subscribes at once every LiteTopic with
// waiting messages, and a publish subscribes the others on first use.
//
// A dead replica's backlog: its LiteTopics have no subscriber, so nobody
// receives them. They wait until a replica with the same id returns and
// subscribes (then they are dropped as above), or until the LiteTopic TTL
// (lite.topic.expiration on the parent, 1440 min from scripts/rocketmq)
// deletes them with their backlog. Use stable replica ids (StatefulSet
// ordinals, host names) so that a replacement cleans up after its
// predecessor.
//
// # Subscriptions and the watchdog
//
// Subscriptions run concurrently (one RPC per LiteTopic at a time, at most
// SubscribeConcurrency in all), and a Publish waits for its LiteTopic's at
// most SubscribeWait before sending anyway: a burst of new LiteTopics does
// not turn into publish timeouts, and the broker keeps a message until its
// subscription lands. v5.1.4's full sync every 30 s can undo a SubscribeLite
// that overlapped it (see syncTickWithin), and the broker sometimes loses a
// LiteTopic's dispatch event; either would leave a message waiting 30 s or
// for good. The backend therefore re-sends a subscription that overlapped a
// sync, and a watchdog (every WatchdogInterval) unsubscribes and subscribes
// again a LiteTopic whose oldest stored message is overdue by StallAfter
// plus twice the current delivery lag with nothing being handled: the
// broker dispatches a fresh registration. The same watchdog unsubscribes
// LiteTopics idle for IdleUnsubscribe (the broker limits subscriptions per
// client), and re-subscribes before use a LiteTopic the broker may have
// expired (LiteTopicExpiration). A quota or rate refusal of the broker is
// a *consume.FullError (429), never an outage.
//
// # Backlog and failures
//
// A bucket's backlog is counted and capped once, by consume.Queue, the same
// on every backend. The backend itself only bounds what this process has
// published and not yet seen acknowledged (Config.MaxPending, a
// *consume.FullError of ScopeEngine).
//
// Broker trouble is never silent. New fails with a clear error when the
// proxy is unreachable or the topic/group are missing. A probe (QueryRoute
// on the parent topic every ProbeInterval, given PublishTimeout to answer)
// tracks reachability at runtime: on loss it logs an error, Ready returns
// an error wrapping [consume.ErrUnavailable], and Publish fails at once with
// consume.ErrUnavailable; a Send that fails or exceeds PublishTimeout also
// returns consume.ErrUnavailable. The client reconnects on its own; the
// probe logs the recovery and re-subscribes.
//
// The Go client writes its own log to $HOME/logs/rocketmq unless the
// environment variable rocketmq.client.logRoot names another directory,
// at level warn unless rocketmq.client.logLevel names another (at info it
// writes a line for every Suspend: see clientLogLevel).
package rocketmq
