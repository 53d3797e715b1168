package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The process part of the overhead scenario: pacegate and the bare proxy
// each run as an OS process of their own (the sim stays in the harness),
// so that each one's CPU time can be read from /proc/<pid>/stat.
const (
	ohProcClients = 32  // closed-loop streams of the CPU rounds
	ohOpenRate    = 1e3 // requests/s of the open-loop rounds
	ohOpenTokens  = 8   // tokens per stream of the open-loop rounds
	ohOpenTenants = 200 // buckets the open loop spreads over: 5 req/s each
	ohProcRate    = 50  // each bucket's pacing rate (req/s): never binds here
)

// ohProcKind is one kind of CPU round: an answer of tokens tokens,
// streamed or one JSON body.
type ohProcKind struct {
	tokens int
	stream bool
}

// ohProcKinds are the CPU rounds' kinds, in the order each round runs
// them: a short stream, where per-request work weighs most, a long one,
// where per-chunk work does, and a short answer not streamed (8 tokens:
// 120 ms each, so that a round completes enough of them for 10 ms CPU
// ticks to count).
var ohProcKinds = []ohProcKind{{64, true}, {256, true}, {8, false}}

// ohKindsList names the kinds for the report.
func ohKindsList() string {
	names := make([]string, len(ohProcKinds))
	for i, k := range ohProcKinds {
		names[i] = k.String()
	}
	return strings.Join(names, ", ")
}

func (k ohProcKind) String() string {
	if k.stream {
		return fmt.Sprintf("%d tok", k.tokens)
	}
	return fmt.Sprintf("%d tok JSON", k.tokens)
}

// ohProcRound is one measured round through one process.
type ohProcRound struct {
	path     string
	kind     ohProcKind
	ok, errs int
	cpu      time.Duration // utime+stime of the process over the round
	switches int64         // context switches of its threads over the round
	ttft     []float64     // ms; a JSON answer's is its whole body's
	waits    waitHist      // pacegate's queue waits over an open round
}

// cpuPerReq is the process CPU per completed request, in µs.
func (r ohProcRound) cpuPerReq() float64 {
	if r.ok == 0 {
		return 0
	}
	return us(r.cpu) / float64(r.ok)
}

// switchesPerReq is the process's context switches per completed request.
func (r ohProcRound) switchesPerReq() float64 {
	if r.ok == 0 {
		return 0
	}
	return float64(r.switches) / float64(r.ok)
}

// ohProcs are the two processes under test.
type ohProcs struct {
	bare, pg *child
	dir      string
}

// startOhProcs builds pacegate and starts both processes in front of
// upstream, pacegate with config gc (its Upstream set here) and env added
// to its environment.
func startOhProcs(ctx context.Context, upstream string, gc gwConfig, env ...string) (*ohProcs, error) {
	dir, err := os.MkdirTemp("", "pacegate-bench-")
	if err != nil {
		return nil, err
	}
	p := &ohProcs{dir: dir}
	bin, err := buildPacegate(ctx, dir)
	if err != nil {
		p.stop()
		return nil, err
	}
	p.bare, err = startBareProxyProc(ctx, upstream, 256)
	if err != nil {
		p.stop()
		return nil, err
	}
	gc.Upstream = upstream
	p.pg, err = startPacegateProc(ctx, bin, dir, gc, env...)
	if err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// ohCPUConfig is pacegate's config in the process rounds. The pool's cap
// is set out of reach, like the pacing rate: the bare proxy has neither,
// and a transient stall of the shared machine would otherwise hold
// requests at the cap and measure that instead.
var ohCPUConfig = gwConfig{MaxConcurrency: 1024, Fixed: true, Workers: 64, Tenants: ohOpenTenants,
	Defaults: fmt.Sprintf("{rpm: 0, tpm: 0, burst: 0, rate: %d, backlog: 100000, max_wait: 30s}", ohProcRate)}

func (p *ohProcs) stop() {
	for _, c := range []*child{p.bare, p.pg} {
		if c != nil {
			c.stop()
		}
	}
	_ = os.RemoveAll(p.dir)
}

// ohMeasureCPU drives ohProcClients closed-loop requests of kind k
// (worker w on tenant t<w>, its own bucket) through c for dur, and reads
// c's CPU time before the first request and after the last one ended.
func ohMeasureCPU(ctx context.Context, c *child, dur time.Duration, k ohProcKind) ohProcRound {
	client := newClient(ohProcClients)
	body := ohProcBody(k.tokens, k.stream)
	r := ohProcRound{path: c.name, kind: k}
	var mu sync.Mutex
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var wg sync.WaitGroup
	before, err := c.cpu()
	sw0, serr := c.switches()
	if err != nil || serr != nil {
		r.errs = -1
		return r
	}
	for w := range ohProcClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("sk-t%d", w)
			for n := 0; ctx.Err() == nil && n < 100_000; n++ {
				tr := ohStream(ctx, client, c.url, key, body)
				mu.Lock()
				r.add(tr)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	after, err := c.cpu()
	sw1, serr := c.switches()
	if err != nil || serr != nil {
		r.errs = -1
	}
	r.cpu, r.switches = after-before, sw1-sw0
	return r
}

// ohMeasureCPUPair runs a CPU round of kind k through both processes at
// once, each with clients of its own. On a shared machine whatever else
// runs meanwhile (the host's other tenants, the harness's own collector)
// then weighs on both alike; rounds one after the other met it in one
// and not the other, and their ratio moved by a third from round to
// round (bench/findings/overhead.md).
func ohMeasureCPUPair(ctx context.Context, bare, pg *child, dur time.Duration, k ohProcKind) (b, p ohProcRound) {
	var wg sync.WaitGroup
	wg.Go(func() { b = ohMeasureCPU(ctx, bare, dur, k) })
	wg.Go(func() { p = ohMeasureCPU(ctx, pg, dur, k) })
	wg.Wait()
	return b, p
}

// ohMeasureOpen sends ohOpenRate streamed requests/s through c for dur,
// open-loop, tenant i mod ohOpenTenants for request i.
func ohMeasureOpen(ctx context.Context, c *child, dur time.Duration) ohProcRound {
	client := newClient(512)
	body := ohProcBody(ohOpenTokens, true)
	n := int(dur.Seconds() * ohOpenRate)
	events := make([]event, n)
	for i := range events {
		events[i] = event{At: time.Duration(float64(i) / ohOpenRate * float64(time.Second)), Tenant: i % ohOpenTenants}
	}
	r := ohProcRound{path: c.name, kind: ohProcKind{ohOpenTokens, true}}
	var mu sync.Mutex
	before, _ := c.cpu()
	ctx, cancel := context.WithTimeout(ctx, dur+30*time.Second)
	defer cancel()
	replay(ctx, events, func(ctx context.Context, ev event) {
		tr := ohStream(ctx, client, c.url, fmt.Sprintf("sk-t%d", ev.Tenant), body)
		mu.Lock()
		r.add(tr)
		mu.Unlock()
	})
	after, _ := c.cpu()
	r.cpu = after - before
	return r
}

// ohMeasureOpenWaits is ohMeasureOpen through pacegate's process pg,
// with its queue waits over the round (admission → release, read from
// its admin API before and after). When a reading fails the round is
// measured all the same, without its waits, and the error says why.
func ohMeasureOpenWaits(ctx context.Context, pg *child, admin *ohAdmin, dur time.Duration) (ohProcRound, error) {
	before, err := admin.queueWait(ctx)
	r := ohMeasureOpen(ctx, pg, dur)
	if err != nil {
		return r, err
	}
	after, err := admin.queueWait(ctx)
	if err == nil {
		r.waits = after.since(before)
	}
	return r, err
}

var ohSeq atomic.Int64

// ohStream is one request, bounded to 30 s: a stream's chunks are
// timestamped, a JSON answer is read whole (see readChunks).
func ohStream(ctx context.Context, c *http.Client, url, key string, body []byte) streamTrace {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return doStream(rctx, c, chatURL(url), key, fmt.Sprintf("proc-%d", ohSeq.Add(1)), body)
}

// add counts one request into r: a stream is whole with all its content
// chunks, a JSON answer with its body's completion tokens all there.
func (r *ohProcRound) add(tr streamTrace) {
	whole := len(tr.Chunks) == r.kind.tokens
	if !r.kind.stream {
		whole = tr.Completion == r.kind.tokens
		tr.TTFT = tr.End.Sub(tr.Start)
	}
	if tr.Err != nil || tr.Status != http.StatusOK || !whole {
		r.errs++
		return
	}
	r.ok++
	r.ttft = append(r.ttft, ms(tr.TTFT))
}

// ohProcBody is a process round's request: vLLM's ignore_eos, so that a
// server other than vllmsim (PACEGATE_BENCH_OVERHEAD_UPSTREAM) generates
// exactly maxTokens, as the rounds count a request whole only then.
func ohProcBody(maxTokens int, stream bool) []byte {
	b := chatBody(simModel, maxTokens, stream)
	return append(b[:len(b)-1], `,"ignore_eos":true}`...)
}

// runOverheadProcs runs the CPU rounds (both processes at once) and the
// open-loop rounds (interleaved, each path first in half the pairs)
// against upstream.
func runOverheadProcs(ctx context.Context, e *env, upstream string) (cpuB, cpuP, openB, openP []ohProcRound, err error) {
	admin, adminEnv, err := newOhAdmin()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	p, err := startOhProcs(ctx, upstream, ohCPUConfig, adminEnv...)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	defer p.stop()
	cpuRounds, cpuDur := e.pick(6, 6), time.Duration(e.pick(10, 15))*time.Second
	for range cpuRounds {
		if ctx.Err() != nil {
			break
		}
		for _, k := range ohProcKinds {
			if ctx.Err() != nil { // the scenario's budget ran out: no empty rounds
				break
			}
			b, pg := ohMeasureCPUPair(ctx, p.bare, p.pg, cpuDur, k)
			cpuB, cpuP = append(cpuB, b), append(cpuP, pg)
		}
	}
	openRounds, openDur := e.pick(4, 4), time.Duration(e.pick(3, 10))*time.Second
	for i := range openRounds {
		if ctx.Err() != nil {
			break
		}
		var werr error
		inOrder(i%2 == 0, func() { openB = append(openB, ohMeasureOpen(ctx, p.bare, openDur)) },
			func() {
				var r ohProcRound
				r, werr = ohMeasureOpenWaits(ctx, p.pg, admin, openDur)
				openP = append(openP, r)
			})
		if werr != nil && ctx.Err() == nil { // the budget's end is not the process's fault
			return nil, nil, nil, nil, fmt.Errorf("reading pacegate's queue waits: %w", werr)
		}
	}
	if e.pprof != "" { // after the measured rounds: profiling costs CPU
		prof := &ohProfiler{dir: e.pprof, admin: admin}
		if err := prof.profileRound(ctx, p.pg, ohProcKinds[0]); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("profiling pacegate: %w", err)
		}
		fmt.Fprintf(os.Stderr, "overhead: profiles of pacegate's process in %s\n", e.pprof)
	}
	return cpuB, cpuP, openB, openP, nil
}
