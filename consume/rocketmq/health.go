package rocketmq

import (
	"context"
	"fmt"
	"os"
	"time"

	mqmd "github.com/apache/rocketmq-clients/golang/v5/metadata"
	"github.com/apache/rocketmq-clients/golang/v5/pkg/utils"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// prober asks the proxy for the parent topic's route: that needs the proxy,
// the name server and a registered broker, and fails with TOPIC_NOT_FOUND
// when the topic is missing. It has its own gRPC connection so that it
// sees the proxy as a new client would.
type prober struct {
	conn      *grpc.ClientConn
	client    v2.MessagingServiceClient
	endpoints *v2.Endpoints
	topic     string
	clientID  string
}

func newProber(endpoint, topic string) (*prober, error) {
	eps, err := utils.ParseTarget(endpoint)
	if err != nil {
		return nil, fmt.Errorf("bad endpoint %q: %w", endpoint, err)
	}
	// A short reconnect backoff: with gRPC's default (up to 120 s) a probe
	// during the backoff fails with the old error although the proxy is
	// back, which would keep the backend unready long after it returned.
	conn, err := grpc.NewClient(endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		}))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	host, _ := os.Hostname()
	return &prober{
		conn:      conn,
		client:    v2.NewMessagingServiceClient(conn),
		endpoints: eps,
		topic:     topic,
		clientID:  fmt.Sprintf("%s@%d@pacegate-probe@%s", host, os.Getpid(), uuid.NewString()[:8]),
	}, nil
}

func (p *prober) check(ctx context.Context) error {
	ctx = metadata.AppendToOutgoingContext(ctx,
		mqmd.LanguageKey, mqmd.LanguageValue,
		mqmd.ProtocolKey, mqmd.ProtocolValue,
		mqmd.VersionKey, mqmd.VersionValue,
		mqmd.RequestID, uuid.NewString(),
		mqmd.ClintID, p.clientID,
		mqmd.DateTime, time.Now().UTC().Format("20060102T150405Z"),
	)
	resp, err := p.client.QueryRoute(ctx, &v2.QueryRouteRequest{
		Topic:     &v2.Resource{Name: p.topic},
		Endpoints: p.endpoints,
	}, grpc.WaitForReady(false))
	if err != nil {
		return fmt.Errorf("query route of %s: %w", p.topic, err)
	}
	if st := resp.GetStatus(); st.GetCode() != v2.Code_OK {
		return fmt.Errorf("query route of %s: %s: %s", p.topic, st.GetCode(), st.GetMessage())
	}
	if len(resp.GetMessageQueues()) == 0 {
		return fmt.Errorf("topic %s has no queues", p.topic)
	}
	return nil
}

func (p *prober) close() { _ = p.conn.Close() }

// kickProbe asks the probe loop to check now (a send or subscribe failed).
func (b *Backend) kickProbe() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// probeLoop checks reachability every ProbeInterval (or when kicked) and
// logs every transition. When the proxy connection was lost (the probe
// failed, or its connection dropped between two probes), or the proxy
// refused the clients' consumer group (groupLost), it rebuilds the
// clients once the proxy answers again, and only then reports ready.
func (b *Backend) probeLoop() {
	defer close(b.loopDone)
	t := time.NewTicker(b.cfg.ProbeInterval)
	defer t.Stop()
	owed := b.cl.Load() == nil // the clients must be (re)built
	wasReady := !owed
	for {
		select {
		case <-b.loopQuit:
			return
		case <-t.C:
		case <-b.kick:
		}
		lost := wasReady && b.probe.conn.GetState() != connectivity.Ready
		// A probe has as long as a publish: a proxy that answers within
		// PublishTimeout serves sends, so declaring it down sooner would
		// refuse requests it could take (a 500 ms bound, with the probe
		// interval, did so on a loaded machine).
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.PublishTimeout)
		err := b.probe.check(ctx)
		cancel()
		wasReady = b.probe.conn.GetState() == connectivity.Ready
		why := "the proxy connection was lost between probes"
		if gl := b.groupLost.Swap(nil); gl != nil {
			lost, why = true, (*gl).Error()
		}
		if lost || err != nil {
			owed = true
		}
		prev := b.health.Load()
		if err != nil {
			if prev.up {
				b.setDown(err, time.Now())
				b.log.Error("rocketmq: broker unreachable; publishes fail with ErrUnavailable until it is back", "err", err)
			} else if err.Error() != prev.err.Error() {
				b.setDown(err, prev.since)
				b.log.Debug("rocketmq: still unreachable", "err", err)
			}
			continue
		}
		if owed {
			if prev.up {
				b.setDown(fmt.Errorf("reconnecting: %s", why), time.Now())
				b.log.Warn("rocketmq: reconnecting", "why", why)
			}
			if rerr := b.rebuild(); rerr != nil {
				b.log.Warn("rocketmq: reconnect failed; will retry", "err", rerr)
				b.setDown(rerr, b.health.Load().since)
				continue
			}
			owed = false
		}
		if h := b.health.Load(); !h.up {
			now := time.Now()
			b.health.Store(&healthState{up: true, since: now})
			b.restartClocks(now)
			b.log.Info("rocketmq: broker reachable again; publishing resumed", "down_for", now.Sub(h.since).Round(time.Millisecond))
		}
	}
}

// restartClocks makes every waiting message due no earlier than now, the
// moment the broker is back. A message held through an outage is not
// stalled: it was undeliverable. Counting the outage as delivery lag
// would make the watchdog re-subscribe every LiteTopic at once on
// reconnect, and then inflate the lag mean (and with it the stall bound)
// for the many deliveries after it.
func (b *Backend) restartClocks(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.topics {
		if t.due.Before(now) {
			t.due = now
		}
	}
}

func (b *Backend) setDown(err error, since time.Time) {
	b.health.Store(&healthState{up: false, err: err, since: since})
}

// rebuild replaces the producer and the consumer with new ones (new client
// ids). The new consumer has no subscriptions: every LiteTopic this
// process uses belongs to the old generation, so the watchdog subscribes
// at once those with waiting messages, and a publish subscribes the others
// on first use. The old clients stop in the background; what the old
// consumer had received and not acknowledged is redelivered after its
// invisibility. (The client's own 30 s COMPLETE_ADD sync is no help here:
// it runs on the old client, which never re-sends its settings.)
func (b *Backend) rebuild() error {
	b.rebuildMu.Lock()
	defer b.rebuildMu.Unlock()
	var gen uint64 = 1
	if old := b.cl.Load(); old != nil {
		gen = old.gen + 1
	}
	nc, err := b.startClients(gen)
	if err != nil {
		return err
	}
	if old := b.cl.Swap(nc); old != nil {
		b.bg.Add(1) // Close waits for loopDone before bg, so this cannot race its Wait
		go func() {
			defer b.bg.Done()
			if err := old.stop(); err != nil {
				b.log.Warn("rocketmq: stopping the replaced clients", "err", err)
			}
		}()
	}
	b.mu.Lock()
	n := len(b.topics)
	b.mu.Unlock()
	b.kickWatchdog()
	b.log.Info("rocketmq: reconnected with new clients; LiteTopics are subscribed again as they are used", "known", n, "generation", gen)
	return nil
}
