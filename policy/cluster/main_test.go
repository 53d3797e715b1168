package cluster

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy/config"
)

// The tests below need a real Redis: PACEGATE_CLUSTER_STORE, as printed
// by `bash scripts/redis/redis.sh env` (make cluster-test sets it). Each
// test works under a key prefix of its own.
var prefixes atomic.Int64

func storeURL(t *testing.T) config.StoreURL {
	t.Helper()
	raw := os.Getenv("PACEGATE_CLUSTER_STORE")
	if raw == "" {
		t.Skip("PACEGATE_CLUSTER_STORE unset: no Redis to test against (bash scripts/redis/redis.sh fetch start)")
	}
	u, err := config.ParseStoreURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// testPrefix is a key prefix no other test (or earlier run) uses.
func testPrefix(t *testing.T) string {
	return fmt.Sprintf("pgtest:%d:%d:%s:", time.Now().UnixNano(), prefixes.Add(1), t.Name())
}

// newTestStore returns a started store on the test Redis under prefix,
// closed when the test ends. Its goroutine never ticks within a test
// (Tick is an hour): the tests stamp leases with a fake now (the start of
// the current minute), which a real-time tick would find idle (or in a
// past window) and hand back mid-test; a test that needs a tick calls
// the admitter's tick with its own now.
func newTestStore(t *testing.T, prefix string, replicas int) *Store {
	t.Helper()
	u := storeURL(t)
	s := New(Options{Addr: u.Addr, DB: u.DB, Username: u.Username, Password: u.Password, Prefix: prefix, Replicas: replicas,
		Tick: time.Hour})
	s.Start(context.Background())
	t.Cleanup(func() { s.Close() })
	if !s.Up() {
		t.Fatal("test store unreachable")
	}
	return s
}
