package rocketmq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/rocketmq"
)

// TestUnknownGroupRebuildsTheClients: after a broker restart the proxy
// answers ILLEGAL_CONSUMER_GROUP ("group not found") until its cache of
// the group is refreshed, and clients started before never recover from
// it on their own (a CI run saw a LiteTopic refused for 30 s and more,
// while its publishes were accepted). Such a refusal makes the backend
// rebuild its clients: the publish that met it is refused with
// ErrUnavailable, not accepted onto a LiteTopic nothing consumes; once the
// new clients run, a publish is accepted and delivered.
func TestUnknownGroupRebuildsTheClients(t *testing.T) {
	in := secondInstance(t)
	lt := liteTopic(in.b, "nogroup")
	got := make(chan string, 2)
	defer in.r.set(lt, func(_ context.Context, d *consume.Delivery) consume.Result {
		got <- d.ID
		return consume.Success()
	})()
	gen := rocketmq.Generation(in.b)
	rocketmq.RefuseGroup(in.b)

	err := in.b.Publish(t.Context(), message("nogroup1-"+runID, lt))
	if !errors.Is(err, consume.ErrUnavailable) || !strings.Contains(err.Error(), "group not found") {
		t.Fatalf("Publish with the group refused = %v, want ErrUnavailable saying the group is not found", err)
	}
	// Until the new clients run, Ready says why, naming the group and no
	// LiteTopic (/readyz shows it, and a LiteTopic is a tenant's).
	deadline := time.Now().Add(30 * time.Second)
	downs := 0
	for {
		err := in.b.Ready(t.Context())
		if err == nil && rocketmq.Generation(in.b) != gen {
			break
		}
		if err != nil {
			downs++
			if msg := err.Error(); strings.Contains(msg, lt) || !strings.Contains(msg, "does not know the consumer group GID") {
				t.Fatalf("Ready = %q, want the group named and no LiteTopic", msg)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new clients 30 s after the refusal: generation %d, Ready = %v", rocketmq.Generation(in.b), err)
		}
		time.Sleep(5 * time.Millisecond) // polls a real broker's clients: no fake clock here
	}
	t.Logf("unready for %d polls of 5 ms while the clients were rebuilt", downs)
	if g := rocketmq.Generation(in.b); g != gen+1 {
		t.Errorf("generation %d after the refusal, want %d: one rebuild", g, gen+1)
	}
	publish(t, in.b, message("nogroup2-"+runID, lt))
	if id := recv(t, got, deliveryTimeout, "the publish after the rebuild"); id != "nogroup2-"+runID {
		t.Errorf("delivered %s, want nogroup2-%s (the refused publish must not arrive)", id, runID)
	}
}
