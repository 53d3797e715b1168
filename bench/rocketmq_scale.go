package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/rocketmq"
	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// runRocketMQScale is the scale test on the real broker, in two
// parts. The burst: 1,000 tenants new to the gateway (so 1,000 new
// LiteTopics) send their first requests at the same moment through the
// whole gateway; no request may get a 503. The backend at scale: one
// replica's backend keeps 5,000 LiteTopics subscribed, with more than half
// of them active at once, and the publish→deliver latency, the stalls
// (deliveries later than 5 s), the watchdog's work and the process's
// memory are measured.
func runRocketMQScale(ctx context.Context, e *env, res *ScenarioResult) error {
	// Tenant t0 answers the readiness probe; the other 1,000 are new.
	tenants, perTenant := 1001, e.pick(2, 5)
	topics, rounds := 5000, e.pick(3, 10)
	res.Setup = fmt.Sprintf("Burst: %d tenants new to one gateway (one LiteTopic each) send %d streamed requests each, all started at "+
		"the same moment, through the gateway on the broker and then on the embedded backend (vllmsim, TTFT 5ms). Scale: one "+
		"backend (one replica) publishes to %d LiteTopics (one message each, all at once, 256 publishers), then %d rounds in which "+
		"a random %d%% of them (more than half active at once) get one message each; the handler acknowledges at once.",
		tenants-1, perTenant, topics, rounds, 60)
	res.Baseline = "the embedded backend for the burst; absolute bars for the backend at scale."
	if rocketmqEndpoint() == "" {
		res.Skipped = rmqHowTo
		return nil
	}
	if err := scaleBurst(ctx, res, tenants, perTenant); err != nil {
		return err
	}
	return scaleBackend(ctx, res, topics, rounds)
}

// scaleBurst is the cold-start burst through the whole gateway.
func scaleBurst(ctx context.Context, res *ScenarioResult, tenants, perTenant int) error {
	sim, err := startSim(vllmsim.Config{TTFT: 5 * time.Millisecond, ITL: time.Millisecond, MaxNumSeqs: 256}, false)
	if err != nil {
		return err
	}
	defer sim.Close()
	t := Table{Title: "Cold-start burst", Header: []string{"backend", "requests", "200", "503", "other", "wall (s)", "TTFT p50 (ms)", "TTFT p99 (ms)"}}
	for _, backend := range []string{"rocketmq", "embedded"} {
		gw, err := startPacegate(ctx, gwConfig{Upstream: sim.URL, MaxConcurrency: 256, Workers: 64, Tenants: tenants, Backend: backend,
			Defaults: "{rpm: 0, tpm: 0, burst: 0, rate: .inf, backlog: 100000, max_wait: 60s}"})
		if err != nil {
			return fmt.Errorf("%s: %w", backend, err)
		}
		c := newClient(tenants * perTenant)
		body := chatBody(simModel, 16, true)
		var mu sync.Mutex
		codes := map[int]int{}
		var ttft []float64
		var first503 string
		start := make(chan struct{})
		var wg sync.WaitGroup
		// Tenant t0 was used by waitReady; the others are new.
		for i := 1; i < tenants; i++ {
			for range perTenant {
				wg.Go(func() {
					<-start
					tr := doStream(ctx, c, chatURL(gw.URL()), "sk-t"+strconv.Itoa(i), "", body)
					mu.Lock()
					defer mu.Unlock()
					codes[tr.Status]++
					if tr.Status == http.StatusOK {
						ttft = append(ttft, ms(tr.TTFT))
					} else if tr.Status == http.StatusServiceUnavailable && first503 == "" {
						first503 = "t" + strconv.Itoa(i)
					}
				})
			}
		}
		t0 := time.Now()
		close(start)
		wg.Wait()
		wall := time.Since(t0)
		gw.stop()
		n := (tenants - 1) * perTenant
		other := n - codes[200] - codes[503]
		t.Rows = append(t.Rows, []string{backend, strconv.Itoa(n), strconv.Itoa(codes[200]), strconv.Itoa(codes[503]), strconv.Itoa(other),
			f2(wall.Seconds()), f1(Quantile(ttft, .5)), f1(Quantile(ttft, .99))})
		res.metric("burst_503_"+backend, float64(codes[503]))
		if backend == "rocketmq" {
			res.bar(fmt.Sprintf("cold-start burst of %d new buckets on the broker", tenants-1), "zero 503",
				fmt.Sprintf("%d × 503, %d other errors of %d", codes[503], other, n), codes[503] == 0 && other == 0)
			if first503 != "" {
				res.note("first tenant with a 503: %s", first503)
			}
		}
	}
	res.Tables = append(res.Tables, t)
	return nil
}

// scaleBackend drives one backend at topics LiteTopics.
func scaleBackend(ctx context.Context, res *ScenarioResult, topics, rounds int) error {
	replica := fmt.Sprintf("sc%d", time.Now().UnixNano()%1e6)
	b, err := rocketmq.New(rocketmq.Config{Endpoint: rocketmqEndpoint(), Topic: envOr("PACEGATE_ROCKETMQ_TOPIC", "LLM_REQ"),
		Group: envOr("PACEGATE_ROCKETMQ_GROUP", "GID_PACEGATE"), ReplicaID: replica, InvisibleDuration: 30 * time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		_, _ = b.Close(cctx)
	}()
	var mu sync.Mutex
	lat := map[string][]float64{} // phase → publish→deliver (ms)
	var delivered atomic.Int64
	if err := b.Start(func(_ context.Context, d *consume.Delivery) consume.Result {
		ns, _ := strconv.ParseInt(d.Properties["t0"], 10, 64)
		l := ms(time.Since(time.Unix(0, ns)))
		mu.Lock()
		lat[d.Properties["phase"]] = append(lat[d.Properties["phase"]], l)
		mu.Unlock()
		delivered.Add(1)
		return consume.Success()
	}); err != nil {
		return err
	}
	if !waitFor(ctx, 60*time.Second, func() bool { return b.Ready(ctx) == nil }) {
		return fmt.Errorf("backend not ready")
	}
	names := make([]string, topics)
	for i := range names {
		names[i] = b.LiteTopic("s"+strconv.Itoa(i), "m")
	}
	var seq atomic.Int64
	var pubErrs atomic.Int64
	var firstErr atomic.Value
	// publishAll publishes one message to each LiteTopic in idx, spread
	// evenly over spread (0: as fast as 256 publishers go).
	publishAll := func(phase string, idx []int, spread time.Duration) time.Duration {
		t0 := time.Now()
		work := make(chan int)
		var wg sync.WaitGroup
		for range 256 {
			wg.Go(func() {
				for i := range work {
					id := fmt.Sprintf("%s-%d", replica, seq.Add(1))
					m := &consume.Message{ID: id, LiteTopic: names[i], Body: []byte(`{}`),
						Properties: map[string]string{"phase": phase, "t0": strconv.FormatInt(time.Now().UnixNano(), 10)}}
					if err := b.Publish(ctx, m); err != nil {
						pubErrs.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
				}
			})
		}
		for k, i := range idx {
			if spread > 0 {
				time.Sleep(time.Until(t0.Add(spread * time.Duration(k) / time.Duration(len(idx)))))
			}
			work <- i
		}
		close(work)
		wg.Wait()
		return time.Since(t0)
	}
	all := make([]int, topics)
	for i := range all {
		all[i] = i
	}
	// Cold: the first message of every LiteTopic, as fast as the
	// publishers go (this also measures what the consumer drains).
	coldStart := time.Now()
	coldTook := publishAll("cold", all, 0)
	active := topics * 6 / 10
	waitFor(ctx, 60*time.Second, func() bool { return delivered.Load() >= int64(topics)-pubErrs.Load() })
	coldDrained, coldDrain := delivered.Load(), time.Since(coldStart)
	mem := memSnapshot()
	stats := b.WatchdogStats()
	// Warm: each round, 60% of the LiteTopics get one message each, spread
	// over 4 s: 750 messages/s at 5,000 LiteTopics. What one replica drains
	// on this machine (broker, proxy, gateway and load on 2 shared cores)
	// is 1,100-1,250 messages/s, one pop and one ack RPC per message of a
	// LiteTopic with one message; offered above that, the backlog grows and
	// the p99 measures the overload, not the backend (1,500/s gave a p99 of
	// 0.3 s in one run and 3.8-5 s in two others).
	const roundSpread = 4 * time.Second
	warmStart := time.Now()
	for range rounds {
		rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		publishAll("warm", all[:active], roundSpread)
	}
	warmTook := time.Since(warmStart)
	want := int64(topics + rounds*active)
	published := want - pubErrs.Load()
	waitFor(ctx, 60*time.Second, func() bool { return delivered.Load() >= published })
	drainTook := time.Since(warmStart)
	mu.Lock()
	over5, n := 0, 0
	for _, ls := range lat {
		n += len(ls)
		for _, l := range ls {
			if l > 5000 {
				over5++
			}
		}
	}
	cold, warm := lat["cold"], lat["warm"]
	p99 := Quantile(warm, .99)
	mu.Unlock()
	end := b.WatchdogStats()
	t := Table{Title: "One backend at scale", Header: []string{"phase", "LiteTopics", "messages", "offered msgs/s", "publish→deliver p50 / p99 / max (ms)", "> 5 s"}}
	t.Rows = append(t.Rows,
		[]string{"cold (all at once)", strconv.Itoa(topics), strconv.Itoa(topics), f1(float64(topics) / coldTook.Seconds()),
			f1(Quantile(cold, .5)) + " / " + f1(Quantile(cold, .99)) + " / " + f1(Quantile(cold, 1)), strconv.Itoa(countOver(cold, 5000))},
		[]string{fmt.Sprintf("warm (%d rounds, 60%% active)", rounds), strconv.Itoa(topics), strconv.Itoa(rounds * active),
			f1(float64(rounds*active) / warmTook.Seconds()),
			f1(Quantile(warm, .5)) + " / " + f1(p99) + " / " + f1(Quantile(warm, 1)), strconv.Itoa(countOver(warm, 5000))})
	res.Tables = append(res.Tables, t)
	res.note("Cold phase: %d first messages published in %.2f s by 256 publishers and %d delivered; the consumer drained the flood at about %.0f messages/s. Warm phase: %d of %d delivered %.2f s after it began; %d publish errors in all.",
		topics, coldTook.Seconds(), coldDrained, float64(coldDrained)/max(coldDrain.Seconds(), 1e-9), len(warm), rounds*active, drainTook.Seconds(), pubErrs.Load())
	res.bar(fmt.Sprintf("publish→deliver p99 at %d LiteTopics, 60%% active (warm, %.0f msgs/s offered)", topics, float64(rounds*active)/warmTook.Seconds()),
		"< 1000 ms", f1(p99)+" ms", p99 < 1000)
	res.bar("deliveries later than 5 s", "0", strconv.Itoa(over5), over5 == 0)
	res.bar("every published message delivered", strconv.FormatInt(published, 10), strconv.Itoa(n), int64(n) >= published)
	res.metric("scale_p99_ms", p99)
	res.metric("scale_rss_mib", mem.rssMiB)
	res.note("Gateway-process memory with %d LiteTopics subscribed (after the cold publish): RSS %.0f MiB, Go heap in use %.0f MiB, %d goroutines; backend subscribed %d.",
		topics, mem.rssMiB, mem.heapMiB, mem.goroutines, stats.Subscribed)
	res.note("Watchdog over the run: %d subscribes of LiteTopics with waiting messages, %d confirmations after the client's sync, %d stall kicks, %d idle unsubscribes.",
		end.Subscribes, end.Confirms, end.Kicks, end.Unsubscribes)
	if e, ok := firstErr.Load().(string); ok {
		res.note("first publish error: %s", e)
	}
	return nil
}

func countOver(xs []float64, limit float64) int {
	n := 0
	for _, x := range xs {
		if x > limit {
			n++
		}
	}
	return n
}

type memInfo struct {
	rssMiB, heapMiB float64
	goroutines      int
}

// memSnapshot reads this process's RSS (/proc/self/status) and Go heap.
func memSnapshot() memInfo {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := memInfo{heapMiB: float64(ms.HeapInuse) / (1 << 20), goroutines: runtime.NumGoroutine()}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				m.rssMiB = kb / 1024
			}
		}
	}
	return m
}

// cpuSeconds returns the CPU time (user+system) used so far by this
// process and by the local broker's JVMs, whose pid files rmq.sh keeps
// under $RMQ_HOME/run (default: .cache/rocketmq next to the script). A
// JVM without a pid file (a remote broker) is left out.
func cpuSeconds() map[string]float64 {
	out := map[string]float64{}
	if d, err := procCPU(os.Getpid()); err == nil {
		out["gateway+load (this process)"] = d.Seconds()
	}
	home := os.Getenv("RMQ_HOME")
	if home == "" {
		// rmq.sh's own default, from the module root (where `go run
		// ./bench` runs), unless the script is elsewhere.
		home = filepath.Join(".cache", "rocketmq")
		if s := os.Getenv("PACEGATE_ROCKETMQ_SCRIPT"); s != "" {
			home = filepath.Join(filepath.Dir(s), "..", "..", ".cache", "rocketmq")
		}
	}
	for _, n := range []string{"proxy", "broker", "namesrv"} {
		b, err := os.ReadFile(filepath.Join(home, "run", n+".pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			continue
		}
		if d, err := procCPU(pid); err == nil {
			out[n] = d.Seconds()
		}
	}
	return out
}
