package rocketmq_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/rocketmq"
)

// brokerStores is the store root of each running broker group
// (PACEGATE_ROCKETMQ_BROKER_STORES from rmq.sh env, colon-separated).
func brokerStores() []string {
	v := os.Getenv("PACEGATE_ROCKETMQ_BROKER_STORES")
	if v == "" {
		return nil
	}
	return strings.Split(v, ":")
}

// TestLiteTopicsSpreadOverBrokerGroups runs only against two or more
// broker groups behind one name server (rmq.sh start-b): the LiteTopics of
// one replica spread over the groups, each LiteTopic's queue lives on
// exactly one of them (so its messages keep their order and one handler
// call at a time), and every message is delivered once. Where a queue
// lives is read from the brokers' own stores: a LiteTopic is an LMQ named
// %LMQ%$<parent>$<LiteTopic> in its broker's consumequeue directory.
func TestLiteTopicsSpreadOverBrokerGroups(t *testing.T) {
	stores := brokerStores()
	if len(stores) < 2 {
		t.Skip("one broker group; start a second with rmq.sh start-b init")
	}
	in := sharedInstance(t)
	parent := envOr("PACEGATE_ROCKETMQ_TOPIC", rocketmq.DefaultTopic)
	const n = 32
	got := make(chan string, n)
	lts := make([]string, n)
	for i := range lts {
		lts[i] = liteTopic(in.b, fmt.Sprintf("spread%d", i))
		defer in.r.set(lts[i], func(_ context.Context, d *consume.Delivery) consume.Result {
			got <- d.ID
			return consume.Success()
		})()
		publish(t, in.b, message(fmt.Sprintf("spread-%s-%d", runID, i), lts[i]))
	}
	seen := map[string]int{}
	for range n {
		seen[recv(t, got, deliveryTimeout, fmt.Sprintf("delivery (%d of %d)", len(seen), n))]++
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("%s delivered %d times", id, k)
		}
	}
	perStore := make([]int, len(stores))
	for _, lt := range lts {
		var on []string
		for i, s := range stores {
			if lmqExists(s, parent, lt) {
				on = append(on, s)
				perStore[i]++
			}
		}
		if len(on) != 1 {
			t.Errorf("LiteTopic %s has a queue in %d broker stores %v, want exactly 1", lt, len(on), on)
		}
	}
	t.Logf("%d LiteTopics over %d broker groups: %v per group", n, len(stores), perStore)
	for i, k := range perStore {
		if k == 0 {
			t.Errorf("no LiteTopic on the broker group with store %s: they do not spread", stores[i])
		}
	}
}

func lmqExists(store, parent, lt string) bool {
	_, err := os.Stat(filepath.Join(store, "consumequeue", "%LMQ%$"+parent+"$"+lt))
	return err == nil
}
