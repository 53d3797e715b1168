package faults

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// sizes bound a run's load. The fast sizes run in `go test ./...`; the
// long ones in `make faults`.
type sizes struct {
	faults      int           // faulted streams per upstream-fault scenario
	readers     int           // clients that stop reading
	readerToks  int           // tokens each of them asks for (far beyond the socket buffers)
	slowloris   int           // connections trickling headers, all at once
	slowBodies  int           // connections trickling bodies, all at once
	flood       int           // bad requests, a multiple of len(badRequests)
	procFlood   int           // bad requests to the gateway process, for its CPU time
	keys        int           // requests with random API keys to the gateway process
	keyWarmup   int           // random-key requests before its RSS is read
	reloads     int           // config reloads under a flood (SIGHUP and file change in turn)
	width       int           // concurrent faulted or bad requests
	workers     int           // the legitimate tenant's concurrent streams
	legitPeriod time.Duration // each worker's pace
	hold        time.Duration // the least time each scenario holds the legitimate load
	ttftRatio   float64       // the most a hostile scenario may raise legit TTFT p50 (0: not checked)
}

var (
	fastSizes = sizes{faults: 6, readers: 2, readerToks: 200000, slowloris: 200, slowBodies: 100, flood: 70,
		procFlood: 700, keys: 20000, keyWarmup: 2000, reloads: 4, width: 8,
		workers: 2, legitPeriod: 50 * time.Millisecond, hold: 500 * time.Millisecond}
	longSizes = sizes{faults: 60, readers: 8, readerToks: 200000, slowloris: 4000, slowBodies: 2000, flood: 700,
		procFlood: 7000, keys: 1_000_000, keyWarmup: 50_000, reloads: 10, width: 32,
		workers: 4, legitPeriod: 20 * time.Millisecond, hold: 4 * time.Second, ttftRatio: 1.5}
)

// outcome is what a scenario did.
type outcome struct {
	results []result
	faults  int      // faults injected (upstream misbehaviours, hostile clients)
	bad     int      // bad inputs tried
	measure *measure // what a process scenario read of the gateway process
}

// scenario is one fault, with the exact tally of its requests' ends and,
// when set, the exact error body each of them must carry.
type scenario struct {
	name string
	run  func(h *harness, z sizes) outcome
	// want is the exact tally; nil means any, as long as nothing is
	// lost (a restart: how many streams it cuts depends on timing).
	want     func(z sizes, out outcome) tally
	wantBody string
	proc     bool // against the gateway process (harness.proc)
	retry    bool // clients retry what a restart refuses (harness.retry)
	// legitMayErr allows the legitimate tenant's streams to end with an
	// explicit error: a restart cuts its streams too.
	legitMayErr bool
	// hostile scenarios' legit TTFT p50 must stay within sizes.ttftRatio
	// of the clean baseline's: the slowloris floods. (The floods of bad
	// requests are closed loops that take all the CPU they can: there the
	// figures are the CPU per request and the memory.)
	hostile bool
}

const (
	stalledBody   = `{"error":{"message":"The model server's stream stalled: it sent nothing within its idle timeout.","type":"server_error","param":null,"code":"upstream_error"}}`
	malformedBody = `{"error":{"message":"The model server's stream was malformed (not JSON, or it ended without [DONE]).","type":"server_error","param":null,"code":"upstream_error"}}`
)

// marked sends z.faults streams whose prompt carries mark.
func marked(mark string) func(h *harness, z sizes) outcome {
	return func(h *harness, z sizes) outcome {
		failed0, _ := h.simStats()
		res := make([]result, z.faults)
		parallel(z.faults, z.width, func(i int) {
			res[i] = h.stream(faultyKey, chatBody(fmt.Sprintf("%s request %d", mark, i), 8))
		})
		failed, _ := h.simStats()
		return outcome{results: res, faults: int(failed - failed0)}
	}
}

func all(class string, n func(z sizes) int) func(z sizes, out outcome) tally {
	return func(z sizes, _ outcome) tally { return tally{class: n(z)} }
}

func nFaults(z sizes) int { return z.faults }

// allOK wants every request of the scenario to be a complete stream.
func allOK(_ sizes, out outcome) tally { return tally{"ok": len(out.results)} }

var scenarios = []scenario{
	{name: "clean baseline", run: marked("no fault"), want: all("ok", nFaults)},
	{name: "upstream stall mid-stream", run: marked(markStall), want: all("error:upstream_error", nFaults), wantBody: stalledBody},
	{name: "garbage SSE", run: marked(markGarbage), want: all("error:upstream_error", nFaults), wantBody: malformedBody},
	{name: "truncated JSON", run: marked(markTruncated), want: all("error:upstream_error", nFaults), wantBody: malformedBody},
	{name: "close without [DONE]", run: marked(markNoDone), want: all("error:upstream_error", nFaults), wantBody: malformedBody},
	{name: "slow upstream headers", run: marked(markSlow), want: all("ok", nFaults)},
	{name: "5xx burst on one upstream", run: burst, want: all("ok", nFaults)},
	{name: "client stops reading", run: stopReaders, want: all("cut", func(z sizes) int { return z.readers })},
	{name: "slowloris headers", run: slowlorisFlood, want: all("timeout", func(z sizes) int { return z.slowloris }), hostile: true},
	{name: "slowloris bodies", run: slowBodyFlood, want: all("4xx:408", func(z sizes) int { return z.slowBodies }),
		wantBody: readTimeoutBody, hostile: true},
	{name: "unauthenticated/malformed flood", run: badFlood, want: floodWant},
	{name: "upstream restart under a flood", run: restartUpstream, legitMayErr: true},
	{name: "clean baseline (process)", run: marked("no fault"), want: all("ok", nFaults), proc: true},
	{name: "malformed flood (process)", run: procFlood, want: func(z sizes, _ outcome) tally { return floodWant(sizes{flood: z.procFlood}, outcome{}) },
		proc: true},
	{name: "random API keys (process)", run: randomKeys, want: func(z sizes, _ outcome) tally { return tally{"4xx:401": z.keys} },
		proc: true},
	{name: "config reload under a flood (process)", run: reloadUnderFlood, want: allOK, proc: true},
	{name: "gateway restart under a flood (process)", run: restartGateway, proc: true, retry: true, legitMayErr: true},
}

// burst makes the next z.faults requests to the first upstream fail with
// 503; each is retried on the other, so every client still gets its
// answer.
func burst(h *harness, z sizes) outcome {
	h.sims[0].InjectFailure(vllmsim.Failure{Count: z.faults, StatusBeforeFirstByte: 503})
	defer h.sims[0].ClearFailures()
	return marked("burst")(h, z)
}

func stopReaders(h *harness, z sizes) outcome {
	_, aborted0 := h.simStats()
	res := make([]result, z.readers)
	readNow, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		parallel(z.readers, z.readers, func(i int) { res[i] = h.stopReading(h.app.Addr(), z.readerToks, readNow) })
	}()
	// Every upstream call of a cut stream is aborted, while its client
	// still reads nothing; then the clients read what they were sent.
	abortedAll := func() bool {
		_, aborted := h.simStats()
		return aborted-aborted0 == int64(z.readers)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !abortedAll() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	close(readNow)
	<-done
	eventually(h.t, 15*time.Second, "the simulators to see the stalled streams aborted", abortedAll)
	return outcome{results: res, faults: z.readers}
}

func slowlorisFlood(h *harness, z sizes) outcome {
	res := make([]result, z.slowloris)
	parallel(z.slowloris, z.slowloris, func(i int) { res[i] = slowloris(h.app.Addr()) })
	return outcome{results: res, faults: z.slowloris}
}

func badFlood(h *harness, z sizes) outcome {
	res := make([]result, z.flood)
	parallel(z.flood, z.width, func(i int) { res[i] = h.send(badRequests[i%len(badRequests)]) })
	return outcome{results: res, bad: z.flood}
}

func floodWant(z sizes, _ outcome) tally {
	t := tally{}
	for i := range z.flood {
		t[fmt.Sprintf("4xx:%d", badRequests[i%len(badRequests)].want)]++
	}
	return t
}

// row is one line of RELIABILITY.md.
type row struct {
	name                 string
	proc                 bool // against the gateway process: compared with its own baseline
	legitN, legitWorkers int
	legitTally           tally
	faults, bad, sent    int
	tally                tally
	lost                 int
	retries              int
	p50, p95             time.Duration
	peakHeap             uint64
	measure              *measure
	cpu                  time.Duration // the gateway process's CPU time over the row (utime+stime)
	cpuPerLegit          time.Duration // the process baseline's gateway CPU per stream
}

// TestFaultSuite runs every scenario against one gateway and checks the
// invariant after each: the faulted requests end exactly as the scenario
// says (none lost), and every request of the legitimate tenant, sent all
// the while, completes.
func TestFaultSuite(t *testing.T) {
	z := fastSizes
	if os.Getenv("PACEGATE_FAULTS_LONG") != "" {
		z = longSizes
	}
	loadAtStart, _ := os.ReadFile("/proc/loadavg")
	fdLimit := raiseFDLimit(t, uint64(2*(z.slowloris+z.slowBodies)+4096)) // a client and a server end each
	h := newHarness(t)
	var rows []row
	for _, sc := range scenarios {
		if sc.proc && h.proc == nil {
			h.startProc(t) // once, for the rest of the run
		}
		t.Run(sc.name, func(t *testing.T) {
			h.t = t
			if h.proc != nil {
				h.proc.t = t
			}
			rows = append(rows, runScenario(t, h, sc, z, rows))
		})
	}
	h.t = t
	if h.proc != nil {
		h.proc.t = t
	}
	if path := os.Getenv("PACEGATE_FAULTS_REPORT"); path != "" {
		if err := os.WriteFile(path, report(rows, z, string(loadAtStart), fdLimit), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// baseline is the row sc's legit TTFT is compared with: the first row,
// or the first process row for a process scenario.
func baseline(rows []row, proc bool) *row {
	for i := range rows {
		if rows[i].proc == proc {
			return &rows[i]
		}
	}
	return nil
}

func runScenario(t *testing.T, h *harness, sc scenario, z sizes, rows []row) row {
	h.settled()
	url := h.url
	if sc.proc {
		h.url = h.proc.url()
	}
	h.retry = sc.retry
	defer func() { h.url, h.retry = url, false }()
	peak := heapPeak()
	var cpu0 time.Duration
	var pid int
	if sc.proc {
		cpu0, pid = h.proc.cpu(), h.proc.pid()
	}
	legit := h.startLegit(z.workers, z.legitPeriod)
	held := time.After(z.hold)
	out := sc.run(h, z)
	<-held // the legitimate load runs at least z.hold, for a TTFT sample
	legitRes := legit.stop()
	r := row{name: sc.name, proc: sc.proc, legitN: len(legitRes), legitWorkers: z.workers, faults: out.faults, bad: out.bad,
		sent: len(out.results), tally: tally{}, legitTally: tally{}, measure: out.measure}
	if sc.proc && h.proc.pid() == pid { // a restart's new process has no CPU time to compare
		r.cpu = h.proc.cpu() - cpu0
		if baseline(rows, true) == nil { // the process baseline: what one stream costs the gateway
			r.cpuPerLegit = r.cpu / time.Duration(len(legitRes)+len(out.results))
		}
	}
	checkResults(t, sc, z, out, &r)
	var ttfts []time.Duration
	for _, res := range legitRes {
		r.legitTally.add(res)
		r.retries += res.retries
		ttfts = append(ttfts, res.ttft)
	}
	checkLegit(t, sc, r.legitTally, len(legitRes))
	r.p50, r.p95 = percentile(ttfts, 50), percentile(ttfts, 95)
	if base := baseline(rows, sc.proc); sc.hostile && z.ttftRatio > 0 && base != nil &&
		float64(r.p50) > z.ttftRatio*float64(base.p50) {
		t.Errorf("legit TTFT p50 %s, over %.1f× the clean baseline's %s", ms(r.p50), z.ttftRatio, ms(base.p50))
	}
	h.settled() // nothing left running: every slot was given back
	r.peakHeap = peak()
	return r
}

// checkResults tallies the scenario's requests into r and checks them:
// the exact tally wanted (or, with none, nothing lost) and the exact
// error body.
func checkResults(t *testing.T, sc scenario, z sizes, out outcome, r *row) {
	t.Helper()
	for _, res := range out.results {
		r.tally.add(res)
		r.retries += res.retries
		if sc.wantBody != "" && res.body != sc.wantBody {
			t.Errorf("error body %q\nwant %q", res.body, sc.wantBody)
		}
	}
	r.lost = r.tally.lost()
	if sc.want != nil {
		if want := sc.want(z, out); r.tally.String() != want.String() {
			t.Errorf("requests ended as {%s}, want {%s}", r.tally, want)
		}
	} else if r.lost > 0 || len(out.results) == 0 {
		t.Errorf("%d requests ended as {%s}, want none lost", len(out.results), r.tally)
	}
}

// checkLegit requires every legit stream to complete, or, when the
// scenario allows it, to end with an explicit error; none lost.
func checkLegit(t *testing.T, sc scenario, legit tally, n int) {
	t.Helper()
	if n == 0 {
		t.Errorf("the legitimate tenant sent nothing")
		return
	}
	if legit.lost() > 0 || (!sc.legitMayErr && legit["ok"] != n) {
		t.Errorf("the legitimate tenant's %d requests ended as {%s}, want all ok", n, legit)
	}
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}
