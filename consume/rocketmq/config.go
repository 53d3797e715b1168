package rocketmq

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults for the zero fields of [Config].
const (
	DefaultTopic              = "LLM_REQ"
	DefaultGroup              = "GID_PACEGATE"
	DefaultInvisibleDuration  = 10 * time.Second
	DefaultConsumptionThreads = 64
	DefaultMaxCacheMessages   = 256
	DefaultMaxPending         = 200000
	DefaultPublishTimeout     = 3 * time.Second
	DefaultProbeInterval      = 2 * time.Second
	DefaultRetryBackoff       = 500 * time.Millisecond
	DefaultMaxRetryBackoff    = 30 * time.Second
	DefaultMaxRetries         = 16
	DefaultFullRetryAfter     = time.Second
	DefaultSubscribeWait      = time.Second
	DefaultSubscribeConc      = 32
	DefaultStallAfter         = 2 * time.Second
	DefaultWatchdogInterval   = 250 * time.Millisecond
	DefaultIdleUnsubscribe    = 5 * time.Minute
	DefaultLiteTopicExpiry    = 1440 * time.Minute
)

// minSuspend is the client's smallest Suspend: NewConsumerResultSuspend
// panics below it.
const minSuspend = 50 * time.Millisecond

// maxSuspend is the proxy's largest invisibility (maxInvisibleTimeMills).
const maxSuspend = 12 * time.Hour

// minInvisible is the proxy's smallest receive invisibility
// (minInvisibleTimeMillsForRecv).
const minInvisible = 10 * time.Second

// Config configures a [Backend]. Zero fields take the defaults above.
type Config struct {
	// Endpoint is the proxy's gRPC address, host:port. Required.
	Endpoint string
	// Topic is the LITE parent topic (message.type=LITE). If empty,
	// DefaultTopic.
	Topic string
	// Group is the consumer group bound to Topic (lite.bind.topic=Topic,
	// without lite.sub.wildcard). If empty, DefaultGroup.
	Group string
	// ReplicaID names this process among the replicas sharing Group; it is
	// part of every LiteTopic name this process uses ([Backend.LiteTopic]).
	// Required.
	ReplicaID string
	// InvisibleDuration is how long a received message stays invisible
	// before the broker redelivers it (v5.1.4 does not renew it). At least
	// 10 s (the proxy's minimum); if zero, DefaultInvisibleDuration.
	InvisibleDuration time.Duration
	// ConsumptionThreads is the client's handler pool size. If zero,
	// DefaultConsumptionThreads.
	ConsumptionThreads int
	// MaxCacheMessages caps the messages the client holds; it also caps a
	// receive batch. If zero, DefaultMaxCacheMessages.
	MaxCacheMessages int
	// MaxPending limits the messages this process has published and not
	// yet seen acknowledged, over all LiteTopics (ScopeEngine). If zero,
	// DefaultMaxPending.
	MaxPending int
	// PublishTimeout bounds one Publish (subscribe + send). If zero,
	// DefaultPublishTimeout.
	PublishTimeout time.Duration
	// ProbeInterval is how often reachability is checked; each check is
	// given PublishTimeout to answer. If zero, DefaultProbeInterval.
	ProbeInterval time.Duration
	// RetryBackoff is the first Suspend after a Retry result; it doubles per
	// Retry of the same request up to MaxRetryBackoff. If zero,
	// DefaultRetryBackoff and DefaultMaxRetryBackoff.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// MaxRetries is how many Retry results a request gets before it is
	// acknowledged and logged as given up. If zero, DefaultMaxRetries.
	MaxRetries int
	// SubscribeWait is how long a Publish to a LiteTopic not yet
	// subscribed waits for its SubscribeLite before sending anyway (the
	// broker keeps the message; the subscription completes in the
	// background or through the watchdog). If zero, DefaultSubscribeWait.
	SubscribeWait time.Duration
	// SubscribeConcurrency bounds the subscription RPCs in flight. If
	// zero, DefaultSubscribeConc.
	SubscribeConcurrency int
	// StallAfter is how long a LiteTopic's oldest message may be overdue
	// (deliverable, nothing being handled) before the watchdog subscribes
	// the LiteTopic again. If zero, DefaultStallAfter.
	StallAfter time.Duration
	// WatchdogInterval is how often the watchdog sweeps. If zero,
	// DefaultWatchdogInterval.
	WatchdogInterval time.Duration
	// IdleUnsubscribe is how long a LiteTopic with nothing waiting stays
	// subscribed after its last use (the broker limits subscriptions per
	// client: lite.sub.client.quota). If zero, DefaultIdleUnsubscribe.
	IdleUnsubscribe time.Duration
	// MaxLiteTopics caps the LiteTopics this process keeps subscribed; a
	// publish to a new one beyond it fails with a *consume.FullError
	// (ScopeEngine, 429) while idle ones are unsubscribed. Set it to the
	// group's lite.sub.client.quota. If zero, no local cap: the broker's
	// quota refusal gives the same error.
	MaxLiteTopics int
	// LiteTopicExpiration is the parent topic's lite.topic.expiration:
	// a LiteTopic with no message stored for that long may have been
	// deleted by the broker with its subscription, so it is subscribed
	// again before its next message. If zero, DefaultLiteTopicExpiry
	// (scripts/rocketmq's 1440 min); negative: never expires.
	LiteTopicExpiration time.Duration
	// Logger receives the backend's log lines. If nil, slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Endpoint == "" {
		return c, errors.New("rocketmq: Config.Endpoint is required (the proxy's gRPC host:port)")
	}
	if c.ReplicaID == "" {
		return c, errors.New("rocketmq: Config.ReplicaID is required")
	}
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	defD := func(p *time.Duration, v time.Duration) {
		if *p <= 0 {
			*p = v
		}
	}
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	defD(&c.InvisibleDuration, DefaultInvisibleDuration)
	if c.InvisibleDuration < minInvisible {
		return c, fmt.Errorf("rocketmq: InvisibleDuration %s is below the proxy's minimum %s", c.InvisibleDuration, minInvisible)
	}
	def(&c.ConsumptionThreads, DefaultConsumptionThreads)
	def(&c.MaxCacheMessages, DefaultMaxCacheMessages)
	def(&c.MaxPending, DefaultMaxPending)
	def(&c.MaxRetries, DefaultMaxRetries)
	defD(&c.PublishTimeout, DefaultPublishTimeout)
	defD(&c.ProbeInterval, DefaultProbeInterval)
	defD(&c.RetryBackoff, DefaultRetryBackoff)
	defD(&c.MaxRetryBackoff, DefaultMaxRetryBackoff)
	defD(&c.SubscribeWait, DefaultSubscribeWait)
	def(&c.SubscribeConcurrency, DefaultSubscribeConc)
	defD(&c.StallAfter, DefaultStallAfter)
	defD(&c.WatchdogInterval, DefaultWatchdogInterval)
	defD(&c.IdleUnsubscribe, DefaultIdleUnsubscribe)
	if c.LiteTopicExpiration == 0 {
		c.LiteTopicExpiration = DefaultLiteTopicExpiry
	} else if c.LiteTopicExpiration < 0 {
		c.LiteTopicExpiration = 0 // never
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
