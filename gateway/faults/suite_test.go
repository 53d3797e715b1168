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
	slowloris   int           // connections trickling headers
	flood       int           // bad requests, a multiple of len(badRequests)
	width       int           // concurrent faulted or bad requests
	workers     int           // the legitimate tenant's concurrent streams
	legitPeriod time.Duration // each worker's pace
	hold        time.Duration // the least time each scenario holds the legitimate load
}

var (
	fastSizes = sizes{faults: 6, readers: 2, readerToks: 200000, slowloris: 50, flood: 70, width: 8,
		workers: 2, legitPeriod: 50 * time.Millisecond, hold: 500 * time.Millisecond}
	longSizes = sizes{faults: 60, readers: 8, readerToks: 200000, slowloris: 200, flood: 700, width: 32,
		workers: 4, legitPeriod: 20 * time.Millisecond, hold: 5 * time.Second}
)

// outcome is what a scenario did.
type outcome struct {
	results []result
	faults  int // faults injected (upstream misbehaviours, hostile clients)
	bad     int // bad inputs tried
}

// scenario is one fault, with the exact tally of its requests' ends and,
// when set, the exact error body each of them must carry.
type scenario struct {
	name     string
	run      func(h *harness, z sizes) outcome
	want     func(z sizes) tally
	wantBody string
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

func all(class string, n func(z sizes) int) func(z sizes) tally {
	return func(z sizes) tally { return tally{class: n(z)} }
}

func nFaults(z sizes) int { return z.faults }

var scenarios = []scenario{
	{name: "clean baseline", run: marked("no fault"), want: all("ok", nFaults)},
	{name: "upstream stall mid-stream", run: marked(markStall), want: all("error:upstream_error", nFaults), wantBody: stalledBody},
	{name: "garbage SSE", run: marked(markGarbage), want: all("error:upstream_error", nFaults), wantBody: malformedBody},
	{name: "truncated JSON", run: marked(markTruncated), want: all("error:upstream_error", nFaults), wantBody: malformedBody},
	{name: "close without [DONE]", run: marked(markNoDone), want: all("error:upstream_error", nFaults), wantBody: malformedBody},
	{name: "slow upstream headers", run: marked(markSlow), want: all("ok", nFaults)},
	{name: "5xx burst on one upstream", run: burst, want: all("ok", nFaults)},
	{name: "client stops reading", run: stopReaders, want: all("cut", func(z sizes) int { return z.readers })},
	{name: "slowloris headers", run: slowlorisFlood, want: all("timeout", func(z sizes) int { return z.slowloris })},
	{name: "unauthenticated/malformed flood", run: badFlood, want: floodWant},
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
	parallel(z.readers, z.readers, func(i int) { res[i] = h.stopReading(h.app.Addr(), z.readerToks) })
	// Every upstream call of a cut stream was aborted.
	eventually(h.t, 15*time.Second, "the simulators to see the stalled streams aborted", func() bool {
		_, aborted := h.simStats()
		return aborted-aborted0 == int64(z.readers)
	})
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

func floodWant(z sizes) tally {
	t := tally{}
	for i := range z.flood {
		t[fmt.Sprintf("4xx:%d", badRequests[i%len(badRequests)].want)]++
	}
	return t
}

// row is one line of RELIABILITY.md.
type row struct {
	name                 string
	legitN, legitWorkers int
	faults, bad, sent    int
	tally                tally
	lost                 int
	p50, p95             time.Duration
	peakHeap             uint64
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
	h := newHarness(t)
	var rows []row
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			h.t = t
			rows = append(rows, runScenario(t, h, sc, z))
		})
	}
	h.t = t
	if path := os.Getenv("PACEGATE_FAULTS_REPORT"); path != "" {
		if err := os.WriteFile(path, report(rows, z, string(loadAtStart)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func runScenario(t *testing.T, h *harness, sc scenario, z sizes) row {
	h.settled()
	peak := heapPeak()
	legit := h.startLegit(z.workers, z.legitPeriod)
	held := time.After(z.hold)
	out := sc.run(h, z)
	<-held // the legitimate load runs at least z.hold, for a TTFT sample
	legitRes := legit.stop()
	r := row{name: sc.name, legitN: len(legitRes), legitWorkers: z.workers, faults: out.faults, bad: out.bad,
		sent: len(out.results), tally: tally{}}
	for _, res := range out.results {
		r.tally.add(res)
		if sc.wantBody != "" && res.body != sc.wantBody {
			t.Errorf("error body %q\nwant %q", res.body, sc.wantBody)
		}
	}
	r.lost = r.tally.lost()
	if want := sc.want(z); r.tally.String() != want.String() {
		t.Errorf("requests ended as {%s}, want {%s}", r.tally, want)
	}
	var ttfts []time.Duration
	legitTally := tally{}
	for _, res := range legitRes {
		legitTally.add(res)
		ttfts = append(ttfts, res.ttft)
	}
	if len(legitRes) == 0 || legitTally["ok"] != len(legitRes) {
		t.Errorf("the legitimate tenant's %d requests ended as {%s}, want all ok", len(legitRes), legitTally)
	}
	r.p50, r.p95 = percentile(ttfts, 50), percentile(ttfts, 95)
	h.settled() // nothing left running: every slot was given back
	r.peakHeap = peak()
	return r
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}
