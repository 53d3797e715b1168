package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacegate/pacegate/policy/config"
	"github.com/pacegate/pacegate/policy/policytest"
)

// The cluster suite runs three gateways in this process sharing one
// Redis: PACEGATE_CLUSTER_STORE, as `bash scripts/redis/redis.sh env`
// prints it (make cluster-test starts it). Every test names its tenant
// afresh, so that the counters of an earlier test or run in the same
// minute cannot leak in.
func clusterStore(t *testing.T) string {
	t.Helper()
	raw := os.Getenv("PACEGATE_CLUSTER_STORE")
	if raw == "" {
		t.Skip("set PACEGATE_CLUSTER_STORE (bash scripts/redis/redis.sh fetch start; eval \"$(bash scripts/redis/redis.sh env)\") to run the cluster suite; make test does")
	}
	return raw
}

// clusterStacks starts n replicas of one cluster in front of sim with the
// config body (defaults, tenants...).
func clusterStacks(t *testing.T, n int, store, body string, sim *simServer) []*stack {
	t.Helper()
	var out []*stack
	for i := range n {
		c := fmt.Sprintf("\ncluster: {replica_id: r%d, replicas: %d, store: %q}\n", i, n, store)
		out = append(out, startStack(t, c+body, sim))
	}
	return out
}

// freshTenant is a tenants section with one tenant whose id and key are
// new to the store.
func freshTenant(t *testing.T, limits string) (yaml, apiKey string) {
	id := fmt.Sprintf("t%d", time.Now().UnixNano())
	return fmt.Sprintf("\ntenants:\n  - id: %s\n    keys: [sk-%s]\n    limits: %s\n", id, id, limits), "sk-" + id
}

// A 60-RPM tenant whose 180 requests are spread over three replicas gets
// exactly 60 answered; the rest get 429 RPM_LIMIT.
func TestClusterRPMExactAcrossThreeReplicas(t *testing.T) {
	store := clusterStore(t)
	sim := newSim(t, fastSim())
	tenant, key := freshTenant(t, "{rpm: 60, rate: 1000}")
	gws := clusterStacks(t, 3, store, tenant, sim)
	policytest.InOneWindow(t, 20*time.Second)
	codes := postSpread(t, gws, key, 180, 6)
	if codes[200] != 60 || codes[429] != 120 || len(codes) != 2 {
		t.Fatalf("statuses %v, want 60 × 200 and 120 × 429", codes)
	}
	if n := len(sim.Arrivals()); n != 60 {
		t.Fatalf("the model saw %d requests", n)
	}
	var trips, reqs uint64
	for _, g := range gws {
		st := g.app.Store.Stats()
		trips, reqs = trips+st.RoundTrips, reqs+st.Requests
	}
	if trips > reqs {
		t.Errorf("store round trips %d for %d admissions: more than one per request", trips, reqs)
	}
	t.Logf("store round trips %d for %d admissions", trips, reqs)
}

// postSpread sends n chat requests round robin over gws, conc at a time,
// and counts the statuses.
func postSpread(t *testing.T, gws []*stack, key string, n, conc int) map[int]int {
	t.Helper()
	return postSpreadCounting(t, gws, key, n, conc, nil)
}

// postSpreadCounting is postSpread that also adds each answer to answered
// (unless nil) as it comes.
func postSpreadCounting(t *testing.T, gws []*stack, key string, n, conc int, answered *atomic.Int64) map[int]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[int]int{}
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			resp := gws[i%len(gws)].post(context.Background(), "/v1/chat/completions", key, chatBody)
			body := readAll(t, resp.Body)
			if os.Getenv("DEBUG429") != "" && resp.StatusCode == 429 {
				t.Log(body)
			}
			if resp.StatusCode != 200 && resp.StatusCode != 429 {
				t.Errorf("status %d: %s", resp.StatusCode, body)
			}
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
			if answered != nil {
				answered.Add(1)
			}
		})
	}
	wg.Wait()
	return codes
}

// A tenant paced at 5/s: 20 requests that all reach one replica are
// released over 19 intervals (3.8 s), and 30 spread over three replicas
// over 29 (5.8 s): the rate is the tenant's in total, wherever its
// traffic goes.
func TestClusterPaceExactAcrossReplicas(t *testing.T) {
	store := clusterStore(t)
	for _, tc := range []struct {
		name     string
		n, reach int
	}{{"one replica", 20, 1}, {"spread", 30, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t, fastSim())
			tenant, key := freshTenant(t, "{rate: 5, max_wait: 60s}")
			gws := clusterStacks(t, 3, store, tenant, sim)
			start := time.Now() // before the schedule's first slot
			codes := postSpread(t, gws[:tc.reach], key, tc.n, tc.n)
			if codes[200] != tc.n {
				t.Fatalf("statuses %v", codes)
			}
			arr := sim.Arrivals()
			last := arr[len(arr)-1].at
			span := last.Sub(arr[0].at)
			const interval = 200 * time.Millisecond
			want := time.Duration(tc.n-1) * interval
			// Never early, but for one thing: the store's slots are an
			// interval apart from a first one after start, and a replica
			// turns a slot into its own time from a clock read taken
			// before the round trip, so it may release early by that
			// trip's first half. One interval covers it, far from the 3x
			// too fast of replicas each pacing at the full rate.
			if d := last.Sub(start); d < want-interval {
				t.Fatalf("%d releases within %v of the send, want >= %v (5/s in total)", tc.n, d, want-interval)
			}
			// Late by wake-ups and round trips, which do not add up (a
			// slot used late keeps the grid): a quarter covers them, far
			// from the 3x too slow of replicas each pacing at 5/3.
			if span > want+want/4 {
				t.Fatalf("%d releases over %v, want %v (5/s in total)", tc.n, span, want)
			}
			t.Logf("%d releases over %v (rate %.3f/s)", tc.n, span, float64(tc.n-1)/span.Seconds())
		})
	}
}

// 300 concurrent requests under a TPM cap across three replicas: the
// tokens reserved by the admitted ones never exceed the cap.
func TestClusterTPMNeverExceeded(t *testing.T) {
	store := clusterStore(t)
	sim := newSim(t, fastSim())
	tenant, apiKey := freshTenant(t, "{tpm: 2000, rate: 10000}")
	gws := clusterStacks(t, 3, store, tenant, sim)
	policytest.InOneWindow(t, 20*time.Second)
	// chatBody reserves its prompt estimate plus max_tokens: learn it from
	// one request's x-ratelimit headers on another tenant.
	per := reservationOf(t, store, sim)
	// No admitted request may settle (and give back the unused part of its
	// reservation) before all 300 are decided: the model holds them until
	// then.
	probes := len(sim.Arrivals())
	release := sim.hold(t)
	var answered atomic.Int64
	spread := make(chan map[int]int, 1)
	go func() { spread <- postSpreadCounting(t, gws, apiKey, 300, 300, &answered) }()
	k := key(strings.TrimPrefix(apiKey, "sk-"), "sim-model")
	eventually(t, time.Minute, "all 300 requests to be decided", func() bool {
		return allDecided(300, answered.Load(), sim, probes, k, gws...)
	})
	release()
	codes := <-spread
	if codes[200]+codes[429] != 300 {
		t.Fatalf("statuses %v", codes)
	}
	if got := codes[200] * per; got > 2000 || got < 2000-2000/16-3*per {
		t.Fatalf("%d admitted × %d tokens = %d against a TPM of 2000", codes[200], per, got)
	}
	t.Logf("%d admitted × %d tokens reserved = %d of 2000", codes[200], per, codes[200]*per)
}

// reservationOf is what chatBody reserves: limit minus remaining after
// one request on a fresh tenant with a TPM cap.
func reservationOf(t *testing.T, store string, sim *simServer) int {
	tenant, key := freshTenant(t, "{tpm: 1000000, rate: 10000}")
	g := clusterStacks(t, 1, store, tenant, sim)[0]
	resp := g.post(context.Background(), "/v1/chat/completions", key, chatBody)
	readAll(t, resp.Body)
	lim, _ := strconv.Atoi(resp.Header.Get("X-Ratelimit-Limit-Tokens"))
	rem, _ := strconv.Atoi(resp.Header.Get("X-Ratelimit-Remaining-Tokens"))
	if resp.StatusCode != 200 || lim != 1000000 || rem >= lim {
		t.Fatalf("probe: %d limit %d remaining %d", resp.StatusCode, lim, rem)
	}
	return lim - rem
}

// Redis restarted mid-run (its data lost): every request still ends with
// a response (200 or 429, nothing lost), the RPM cap holds across the
// restart, and the replicas share the store again within seconds.
func TestClusterStoreRestartMidRun(t *testing.T) {
	store := clusterStore(t)
	sim := newSim(t, fastSim())
	tenant, key := freshTenant(t, "{rpm: 45, rate: 1000}")
	gws := clusterStacks(t, 3, store, tenant, sim)
	policytest.InOneWindow(t, 25*time.Second)
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range 120 { // 40 a second for 3 s, the restart after 1 s
		if i == 40 {
			wg.Go(func() { restartRedis(t, store) })
		}
		wg.Go(func() {
			resp := gws[i%3].post(context.Background(), "/v1/chat/completions", key, chatBody)
			readAll(t, resp.Body)
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		})
		time.Sleep(25 * time.Millisecond) // the client's own pace, not a synchronisation
	}
	wg.Wait()
	if codes[200]+codes[429] != 120 {
		t.Fatalf("statuses %v: every request must end with a response or a 429", codes)
	}
	if codes[200] > 45 {
		t.Fatalf("%d admitted under an RPM of 45 across a store restart", codes[200])
	}
	eventually(t, time.Minute, "every replica back on the store", func() bool { // a hang guard: a down store is probed every tick (100 ms)
		return gws[0].app.Store.Up() && gws[1].app.Store.Up() && gws[2].app.Store.Up()
	})
	t.Logf("statuses %v", codes)
	// Back to shared once the store's hold (replicas re-uploading what they
	// decided alone) is over: a new tenant's cap is exact again.
	tenant2, key2 := freshTenant(t, "{rpm: 12, rate: 1000}")
	probe, probeKey := freshTenant(t, "{rpm: 100000, rate: 1000}")
	gws2 := clusterStacks(t, 3, store, tenant2+probe[len("\ntenants:\n"):], sim)
	eventually(t, time.Minute, "a capped request admitted after the restart", func() bool { // a hang guard: the hold is 300 ms
		resp := gws2[0].post(context.Background(), "/v1/chat/completions", probeKey, chatBody)
		readAll(t, resp.Body)
		return resp.StatusCode == 200
	})
	if c := postSpread(t, gws2, key2, 30, 3); c[200] != 12 {
		t.Fatalf("after the restart: statuses %v, want 12 × 200", c)
	}
}

// restartRedis restarts the test Redis through its script (SHUTDOWN
// NOSAVE: the counters are gone, as after a crash).
func restartRedis(t *testing.T, store string) {
	u, err := config.ParseStoreURL(store)
	if err != nil {
		t.Error(err)
		return
	}
	_, port, _ := strings.Cut(u.Addr, ":")
	cmd := exec.Command("bash", "../../scripts/redis/redis.sh", "restart")
	cmd.Env = append(os.Environ(), "REDIS_PORT="+port)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("redis restart: %v\n%s", err, out)
	}
}

// A store that cannot be reached at start is the documented fallback,
// never a failed start: /readyz is ready, an uncapped tenant is served, a
// capped one gets nothing beyond cap/N of a window that began after the
// outage (here: the outage's own window, so 429 RPM_LIMIT), and the
// metric says the store is down.
func TestClusterUnreachableStoreFallback(t *testing.T) {
	sim := newSim(t, fastSim())
	s := startStack(t, `
cluster: {replica_id: r0, replicas: 3, store: "redis://127.0.0.1:1/0"}
admin: {listen: "127.0.0.1:0", token: "adm"}
tenants:
  - {id: free, keys: [sk-free]}
  - {id: capped, keys: [sk-capped], limits: {rpm: 30}}
`, sim)
	if resp, err := http.Get(s.url + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/readyz: %v %v", resp, err)
	}
	if resp := s.post(context.Background(), "/v1/chat/completions", "sk-free", chatBody); resp.StatusCode != 200 {
		t.Fatalf("uncapped tenant: %d %s", resp.StatusCode, readAll(t, resp.Body))
	}
	resp := s.post(context.Background(), "/v1/chat/completions", "sk-capped", chatBody)
	body := readAll(t, resp.Body)
	want := `{"error":{"message":"Rate limit reached for sim-model in tenant capped on requests per min (RPM): Limit 30, Remaining 0. Please try again in `
	if resp.StatusCode != 429 || !strings.HasPrefix(body, want) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("capped tenant in the outage's window: %d %s", resp.StatusCode, body)
	}
	if st := s.app.Store.Stats(); st.Up || st.Outages != 1 || st.Fallbacks == 0 {
		t.Fatalf("store stats %+v", st)
	}
}

// A malformed store URL is a startup error that names the field.
func TestClusterMalformedStoreURL(t *testing.T) {
	_, err := config.Parse([]byte("upstreams: [{url: http://127.0.0.1:8000}]\ncluster: {store: \"redis//127.0.0.1:6379\"}\n"))
	want := `cluster.store: scheme must be redis or rediss, got "redis//127.0.0.1:6379"`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
}
