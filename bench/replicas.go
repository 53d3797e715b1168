package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
	"github.com/pacegate/pacegate/policy"
	"github.com/pacegate/pacegate/policy/cluster"
)

const redisHowTo = "no Redis: PACEGATE_CLUSTER_STORE is not set and redis-server is not installed. Install it " +
	"(`bash scripts/redis/redis.sh fetch`), and the scenario starts one of its own; or point PACEGATE_CLUSTER_STORE at a " +
	"Redis to use that one."

// runReplicas measures the shared store (policy/cluster) with three
// gateways in this process on one Redis: cap overshoot under spread
// load, rate error for one-replica and spread traffic, the TTFT the
// store adds, and its round trips per request.
func runReplicas(ctx context.Context, e *env, res *ScenarioResult) error {
	res.Setup = "Three gateways in this process share one Redis (cluster.store, replicas: 3) in front of one vllmsim (TTFT 5ms, " +
		"ITL 1ms). Caps: a tenant with an RPM cap and one with a TPM cap each get 3× their cap in requests, spread round robin " +
		"(the RPM tenant 30 in flight; the TPM tenant all at once through three more gateways in front of a vllmsim with a 3 s TTFT, " +
		"so that no request settles and gives tokens back before all are decided). Rates: a 20/s tenant's requests all to one replica, then spread over three; the rate is (n−1)/(last − " +
		"first release). Latency: 16 closed-loop clients stream through one replica with the store and through a gateway " +
		"without it (the baseline), interleaved, each path first in half the pairs of rounds."
	res.Baseline = "the same gateway without cluster.store, same sim, same run (latency); the configured cap and rate (accuracy)."
	store, stopStore, err := replicasStore(res)
	if err != nil || store == "" {
		return err
	}
	defer stopStore()
	sim, err := startSim(vllmsim.Config{TTFT: 5 * time.Millisecond, ITL: time.Millisecond, MaxNumSeqs: 512}, false)
	if err != nil {
		return err
	}
	defer sim.Close()
	run := time.Now().UnixNano() % 1e9
	tenants := fmt.Sprintf("  - {id: rpm%[1]d, keys: [sk-rpm%[1]d], limits: {rpm: %[2]d, rate: .inf}}\n"+
		"  - {id: one%[1]d, keys: [sk-one%[1]d], limits: {rate: %[3]d}}\n"+
		"  - {id: spread%[1]d, keys: [sk-spread%[1]d], limits: {rate: %[3]d}}\n"+
		"  - {id: lat%[1]d, keys: [sk-lat%[1]d], limits: {rpm: 1000000, tpm: 100000000, rate: 100000}}\n",
		run, replicasRPM, replicasRate)
	var gws []*pacegate
	defer func() {
		for _, g := range gws {
			g.stop()
		}
	}()
	for i := range 3 {
		g, err := startPacegate(ctx, gwConfig{Upstream: sim.URL, MaxConcurrency: 512, Workers: 64, Tenants: 1,
			Defaults: "{rate: .inf, backlog: 100000, max_wait: 60s}", ExtraTenants: tenants,
			Extra: fmt.Sprintf("cluster: {replica_id: b%d, replicas: 3, store: %q}\n", i, store)})
		if err != nil {
			return err
		}
		gws = append(gws, g)
	}
	urls := make([]string, len(gws))
	for i, g := range gws {
		urls[i] = chatURL(g.URL())
	}
	waitFreshMinute(ctx, 25*time.Second)
	replicasCaps(ctx, res, store, urls, run)
	replicasRates(ctx, res, urls, run)
	return replicasLatency(ctx, e, res, sim.URL, gws, run)
}

const (
	replicasRPM  = 300
	replicasTPM  = 1200
	replicasRate = 20
)

// replicasStore is the scenario's Redis: PACEGATE_CLUSTER_STORE's, or
// one the harness starts (see startRedis). With neither, it marks res
// skipped and returns "".
func replicasStore(res *ScenarioResult) (store string, stop func(), err error) {
	if store := os.Getenv("PACEGATE_CLUSTER_STORE"); store != "" {
		res.note("The store: PACEGATE_CLUSTER_STORE's Redis.")
		return store, func() {}, nil
	}
	bin := redisBinary()
	if bin == "" {
		res.Skipped = redisHowTo
		return "", nil, nil
	}
	store, stop, err = startRedis(bin)
	if err != nil {
		return "", nil, err
	}
	res.note("The store: a redis-server the harness started for this scenario on 127.0.0.1 (%s), nothing saved to disk.", redisVersion(bin))
	return store, stop, nil
}

// waitFreshMinute waits for the next cap window when less than need is
// left in this one: fixed-window caps are measured inside one window.
func waitFreshMinute(ctx context.Context, need time.Duration) {
	if left := policy.CapWindowLeft(time.Now()); left < need {
		sleepCtx(ctx, left+10*time.Millisecond)
	}
}

// spread sends n non-streaming requests of key round robin over urls,
// conc in flight, and returns how many got 200 and the start of each
// 200's first byte, in order.
func spread(ctx context.Context, urls []string, key string, n, conc int, body []byte) (ok int, firsts []time.Time) {
	c := newClient(conc)
	var mu sync.Mutex
	closedLoop(ctx, conc, n, 2*time.Minute, func(ctx context.Context, i int) {
		tr := doStream(context.WithoutCancel(ctx), c, urls[i%len(urls)], key, "", body)
		if tr.Err == nil && tr.Status == http.StatusOK {
			mu.Lock()
			ok++
			firsts = append(firsts, tr.Start.Add(tr.TTFT))
			mu.Unlock()
		}
	})
	slices.SortFunc(firsts, func(a, b time.Time) int { return a.Compare(b) })
	return ok, firsts
}

func replicasCaps(ctx context.Context, res *ScenarioResult, store string, urls []string, run int64) {
	body := chatBody(simModel, 8, true)
	okRPM, _ := spread(ctx, urls, fmt.Sprintf("sk-rpm%d", run), 3*replicasRPM, 30, body)
	okTPM, per := replicasTPMRun(ctx, res, store, run)
	tokens := okTPM * per
	over := max(okRPM-replicasRPM, 0) + max(tokens-replicasTPM, 0)
	res.bar("Cap overshoot across 3 replicas, spread load", "0",
		fmt.Sprintf("RPM %d: %d admitted; TPM %d: %d tokens reserved", replicasRPM, okRPM, replicasTPM, tokens), over == 0)
	res.metric("rpm_admitted", float64(okRPM))
	res.metric("tpm_reserved", float64(tokens))
	res.note("Under the caps: %d of %d requests (%.1f %% of the RPM cap) and %d of %d tokens (%.1f %%) admitted; the rest "+
		"is what the replicas' leases held back when the cap was reached (the README's bound: at most cap/16 in all).",
		okRPM, replicasRPM, 100*float64(okRPM)/replicasRPM, tokens, replicasTPM, 100*float64(tokens)/replicasTPM)
}

// replicasTPMRun puts three more gateways in front of a slow vllmsim
// (TTFT 3 s), so that no admitted request settles, and gives back the
// unused part of its reservation, before all are decided: then admitted
// × reservation is the charge. All 3×cap/reservation requests go at once.
func replicasTPMRun(ctx context.Context, res *ScenarioResult, store string, run int64) (ok, per int) {
	slow, err := startSim(vllmsim.Config{TTFT: 3 * time.Second, ITL: time.Millisecond, MaxNumSeqs: 1024}, false)
	if err != nil {
		res.note("TPM part not run: %v", err)
		return 0, 0
	}
	defer slow.Close()
	tenant := fmt.Sprintf("  - {id: tpm%[1]d, keys: [sk-tpm%[1]d], limits: {tpm: %[2]d, rate: .inf}}\n"+
		"  - {id: probe%[1]d, keys: [sk-probe%[1]d], limits: {tpm: %[2]d, rate: .inf}}\n", run, replicasTPM)
	var urls []string
	var gws []*pacegate
	for i := range 3 {
		g, err := startPacegate(ctx, gwConfig{Upstream: slow.URL, MaxConcurrency: 1024, Workers: 64, Tenants: 1,
			Defaults: "{rate: .inf, backlog: 100000, max_wait: 60s}", ExtraTenants: tenant,
			Extra: fmt.Sprintf("cluster: {replica_id: s%d, replicas: 3, store: %q}\n", i, store)})
		if err != nil {
			res.note("TPM part not run: %v", err)
			return 0, 0
		}
		defer g.stop()
		gws = append(gws, g)
		urls = append(urls, chatURL(g.URL()))
	}
	body := chatBody(simModel, 8, true)
	key := fmt.Sprintf("sk-tpm%d", run)
	per = replicasReservation(ctx, urls[0], fmt.Sprintf("sk-probe%d", run), body) // another tenant: its own counter
	n := 3 * replicasTPM / max(per, 1)
	ok, _ = spread(ctx, urls, key, n, n, body)
	var outages uint64
	for _, g := range gws {
		outages += g.Store.Stats().Outages
	}
	res.note("TPM: %d requests of %d reserved tokens each, all at once: %d admitted; store outages seen by these gateways: %d.", n, per, ok, outages)
	return ok, per
}

// replicasReservation sends one request and reads what it reserved
// from its x-ratelimit headers (limit − remaining).
func replicasReservation(ctx context.Context, url, key string, body []byte) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	lim, _ := strconv.Atoi(resp.Header.Get("X-Ratelimit-Limit-Tokens"))
	rem, _ := strconv.Atoi(resp.Header.Get("X-Ratelimit-Remaining-Tokens"))
	return lim - rem
}

func replicasRates(ctx context.Context, res *ScenarioResult, urls []string, run int64) {
	body := chatBody(simModel, 1, true)
	const n = 100
	want := float64(replicasRate)
	var errs []string
	pass := true
	for _, tc := range []struct {
		name, key string
		urls      []string
	}{{"one replica", fmt.Sprintf("sk-one%d", run), urls[:1]}, {"spread over 3", fmt.Sprintf("sk-spread%d", run), urls}} {
		ok, firsts := spread(ctx, tc.urls, tc.key, n, n, body)
		if ok < 2 {
			errs = append(errs, tc.name+": no releases")
			pass = false
			continue
		}
		rate := float64(len(firsts)-1) / firsts[len(firsts)-1].Sub(firsts[0]).Seconds()
		e := math.Abs(rate/want - 1)
		pass = pass && ok == n && e < 0.02
		errs = append(errs, fmt.Sprintf("%s %.3f/s (%.2f %%)", tc.name, rate, 100*e))
		res.metric("rate_"+map[bool]string{true: "one", false: "spread"}[len(tc.urls) == 1], rate)
	}
	res.bar(fmt.Sprintf("Rate error across 3 replicas at %d/s, one-replica and spread traffic", replicasRate), "< 2 %",
		fmt.Sprint(errs), pass)
}

func replicasLatency(ctx context.Context, e *env, res *ScenarioResult, upstream string, gws []*pacegate, run int64) error {
	base, err := startPacegate(ctx, gwConfig{Upstream: upstream, MaxConcurrency: 512, Workers: 64, Tenants: 1,
		Defaults:     "{rate: .inf, backlog: 100000, max_wait: 60s}",
		ExtraTenants: fmt.Sprintf("  - {id: lat%[1]d, keys: [sk-lat%[1]d], limits: {rpm: 1000000, tpm: 100000000, rate: 100000}}\n", run)})
	if err != nil {
		return err
	}
	defer base.stop()
	key := fmt.Sprintf("sk-lat%d", run)
	body := chatBody(simModel, 4, true)
	st0 := gws[0].Store.Stats()
	var with, without []float64
	rounds, dur := e.pick(4, 6), time.Duration(e.pick(3, 5))*time.Second
	for i := range rounds {
		// Each path goes first in half the pairs: the first round of a
		// pair had the longer tail, whichever path it was (p99 about 5 ms
		// over the second's, either way round; bench/findings/replicas.md).
		inOrder(i%2 == 0, func() {
			with = append(with, latencyRound(ctx, chatURL(gws[0].URL()), key, body, dur)...)
		}, func() {
			without = append(without, latencyRound(ctx, chatURL(base.URL()), key, body, dur)...)
		})
	}
	st1 := gws[0].Store.Stats()
	added99 := Quantile(with, 0.99) - Quantile(without, 0.99)
	added50 := Quantile(with, 0.5) - Quantile(without, 0.5)
	res.Tables = append(res.Tables, Table{Header: []string{"gateway", "requests", "TTFT p50 (ms)", "TTFT p99 (ms)"},
		Rows: [][]string{{"with the store", fmt.Sprint(len(with)), f3(Quantile(with, 0.5)), f3(Quantile(with, 0.99))},
			{"without (baseline)", fmt.Sprint(len(without)), f3(Quantile(without, 0.5)), f3(Quantile(without, 0.99))}}})
	calls := storeCallLatency(gws[0])
	res.Tables = append(res.Tables, Table{Title: "One store round trip, as a release pays it (cluster.Pacer, a fresh slot per call)",
		Header: []string{"calls", "p50 (ms)", "p99 (ms)", "max (ms)"},
		Rows:   [][]string{{fmt.Sprint(len(calls)), f3(Quantile(calls, 0.5)), f3(Quantile(calls, 0.99)), f3(slices.Max(calls))}}})
	res.bar("Added latency p99 from the store (loopback): one round trip, which a request pays at most once", "< 1 ms",
		fmt.Sprintf("%s ms per round trip (p50 %s ms); end to end TTFT p99 with − without the store %s ms, p50 %s ms",
			f3(Quantile(calls, 0.99)), f3(Quantile(calls, 0.5)), f3(added99), f3(added50)), Quantile(calls, 0.99) < 1)
	trips := float64(st1.RoundTrips-st0.RoundTrips) / float64(max(st1.Requests-st0.Requests, 1))
	res.bar("Store round trips per request (a tenant paced at 100,000/s under RPM and TPM caps)", "≤ 1", f3(trips), trips <= 1)
	res.metric("added_ttft_p99_ms", added99)
	res.metric("round_trips_per_request", trips)
	return nil
}

// latencyRound runs 16 closed-loop streaming clients for dur and returns
// their TTFTs in ms.
func latencyRound(ctx context.Context, url, key string, body []byte, dur time.Duration) []float64 {
	c := newClient(16)
	var mu sync.Mutex
	var out []float64
	closedLoop(ctx, 16, 1_000_000, dur, func(ctx context.Context, _ int) {
		tr := doStream(context.WithoutCancel(ctx), c, url, key, "", body)
		if tr.Err == nil && tr.Status == http.StatusOK {
			mu.Lock()
			out = append(out, ms(tr.TTFT))
			mu.Unlock()
		}
	})
	return out
}

// storeCallLatency times 2,000 releases of a bucket paced at 10^6/s
// through the gateway's own store, each taking one fresh slot: one round
// trip each, the most a request pays.
func storeCallLatency(g *pacegate) []float64 {
	p := cluster.NewPacer(g.Store, policy.NewPacer(fixedRate(1e6)))
	k := policy.Key{Tenant: fmt.Sprintf("latency%d", time.Now().UnixNano()), Model: simModel}
	out := make([]float64, 0, 2000)
	for range 2000 {
		t := time.Now()
		p.AcquireOrSuspend(k, 1)
		out = append(out, ms(time.Since(t)))
	}
	return out
}

// fixedRate is one rate for every bucket.
type fixedRate float64

func (r fixedRate) BaseRate(policy.Key) (float64, bool) { return float64(r), false }
