package main

import (
	"net/url"
	"testing"
)

// TestStartRedis starts the replicas scenario's own Redis, finds it
// answering PING at the address its URL names, and finds it gone after
// stop.
func TestStartRedis(t *testing.T) {
	bin := redisBinary()
	if bin == "" {
		t.Skip("redis-server is not installed (bash scripts/redis/redis.sh fetch)")
	}
	store, stop, err := startRedis(bin)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(store)
	if err != nil || u.Scheme != "redis" || u.Path != "/0" || u.Hostname() != "127.0.0.1" {
		stop()
		t.Fatalf("store %q: want redis://127.0.0.1:<port>/0 (%v)", store, err)
	}
	if !redisPong(u.Host) {
		stop()
		t.Fatalf("no PONG from %s", u.Host)
	}
	stop()
	if redisPong(u.Host) {
		t.Fatalf("%s still answers after stop", u.Host)
	}
}
