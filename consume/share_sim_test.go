package consume_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/embedded"
	"github.com/pacegate/pacegate/policy"
)

// simPool is a pool of limit slots plus headroom whose calls take virtual
// time: a first token after ttft, then one token per itl, then the usage.
// With slow > 1 the batch slows as it fills, as vLLM's does: a token
// takes itl × (1 + (slow−1) × running/limit). It counts the tokens it
// generated for each tenant after from.
type simPool struct {
	limit, headroom int
	ttft, itl       time.Duration
	slow            float64
	from            time.Time

	mu     sync.Mutex
	inUse  int
	onFree func([]string)
	tokens map[string]int
}

func (p *simPool) TryAcquire(string) (consume.Slot, bool) { return p.take(p.limit) }
func (p *simPool) TryAcquireHeadroom(string) (consume.Slot, bool) {
	return p.take(p.limit + p.headroom)
}
func (p *simPool) OnFree(f func([]string)) { p.onFree = f }
func (p *simPool) Free(string) (int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limit - p.inUse, p.limit
}

func (p *simPool) take(limit int) (consume.Slot, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inUse >= limit {
		return nil, false
	}
	p.inUse++
	return &simSlot{p: p}, true
}

type simSlot struct {
	p    *simPool
	once sync.Once
}

func (s *simSlot) Release() {
	s.once.Do(func() {
		s.p.mu.Lock()
		s.p.inUse--
		s.p.mu.Unlock()
		s.p.onFree([]string{"m"})
	})
}

func (s *simSlot) Do(ctx context.Context, req *consume.Request, emit consume.Emitter) error {
	defer s.Release()
	emit.Emit(consume.Event{Kind: consume.EventHeader, Status: 200})
	n := int(req.CompletionTokens)
	time.Sleep(s.p.ttft)
	for i := range n {
		if i > 0 {
			time.Sleep(s.p.tokenTime())
		}
		emit.Emit(consume.Event{Kind: consume.EventChunk, Data: []byte(`{"choices":[{"delta":{"content":"x"}}]}`)})
		if !time.Now().Before(s.p.from) {
			s.p.mu.Lock()
			s.p.tokens[req.Key.Tenant]++
			s.p.mu.Unlock()
		}
	}
	usage := fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":%d,"total_tokens":%d}}`, n, n+1)
	return emit.Emit(consume.Event{Kind: consume.EventChunk, Data: []byte(usage)})
}

// tokenTime is how long the next token takes at the batch's present size.
func (p *simPool) tokenTime() time.Duration {
	if p.slow <= 1 {
		return p.itl
	}
	p.mu.Lock()
	fill := float64(p.inUse) / float64(p.limit)
	p.mu.Unlock()
	return time.Duration(float64(p.itl) * (1 + (p.slow-1)*min(fill, 1)))
}

// unpaced never makes a bucket wait: the pool is the only limit.
type unpaced struct{}

func (unpaced) WaitAt(time.Time, policy.Key, float64) time.Duration { return 0 }
func (unpaced) AcquireOrSuspendAt(time.Time, policy.Key, float64) time.Duration {
	return 0
}
func (unpaced) Interval(policy.Key) time.Duration { return 0 }

// simTenant is one tenant of a simulated run: closed-loop clients of
// equal requests, pausing between an answer and the next request.
type simTenant struct {
	name           string
	weight         float64
	band           int
	streams, tokns int
	pause          time.Duration
}

// simResult is what one tenant got after the warm-up.
type simResult struct {
	tokens int
	ttft   []time.Duration // submission to first token, of the requests submitted after the warm-up
}

// shareRun plays tenants on a pool of 8 slots plus headroom (20 ms to the
// first token, 5 ms per token, no cost for a bigger batch) in virtual
// time, for run, and returns what each got after warm.
func shareRun(t *testing.T, mode consume.CapacityMode, headroom int, tenants []simTenant, warm, run time.Duration) map[string]*simResult {
	return simRun(t, simSetup{mode: mode, limit: 8, headroom: headroom, slow: 1}, tenants, warm, run)
}

// simSetup is the pool and the consumer of a simulated run.
type simSetup struct {
	mode            consume.CapacityMode
	limit, headroom int
	slow            float64 // see simPool
}

// simRun plays tenants on the pool of setup (20 ms to the first token,
// 5 ms per token at an empty batch) in virtual time, for run, and returns
// what each got after warm.
func simRun(t *testing.T, setup simSetup, tenants []simTenant, warm, run time.Duration) map[string]*simResult {
	res := map[string]*simResult{}
	headroom := setup.headroom
	mode := setup.mode
	synctest.Test(t, func(t *testing.T) {
		from := time.Now().Add(warm)
		pool := &simPool{limit: setup.limit, headroom: headroom, ttft: 20 * time.Millisecond, itl: 5 * time.Millisecond,
			slow: setup.slow, from: from, tokens: map[string]int{}}
		e := embedded.New(embedded.Config{MaxMessages: 1 << 16, Logger: quiet})
		q := consume.NewQueue(e, "")
		c := consume.NewConsumer(consume.ConsumerConfig{Queue: q, Pacer: unpaced{}, Upstreams: pool,
			Capacity: mode, Headroom: headroom, Logger: quiet})
		e.Start(c.Handle)
		ctx, stop := context.WithTimeout(context.Background(), run)
		var wg sync.WaitGroup
		var mu sync.Mutex
		client := 0
		for _, tn := range tenants {
			res[tn.name] = &simResult{}
			for range tn.streams {
				client++
				l := loop{q: q, t: tn, client: client, from: from, mu: &mu, res: res[tn.name]}
				wg.Go(func() { l.run(ctx) })
			}
		}
		wg.Wait()
		stop()
		_, _ = e.Close(context.Background())
		_ = c.Close(context.Background())
		pool.mu.Lock()
		for name, n := range pool.tokens {
			res[name].tokens = n
		}
		pool.mu.Unlock()
	})
	return res
}

// loop is one closed-loop client.
type loop struct {
	q      *consume.Queue
	t      simTenant
	client int
	from   time.Time
	mu     *sync.Mutex // guards res
	res    *simResult
}

// run sends one request after another until ctx ends, recording the TTFT
// of those submitted after from.
func (l loop) run(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		at := time.Now()
		p, err := l.q.Submit(ctx, &consume.Request{ID: fmt.Sprintf("%s-%d-%d", l.t.name, l.client, i),
			Key: policy.Key{Tenant: l.t.name, Model: "m"}, Body: []byte("{}"), Stream: true, Band: l.t.band,
			Weight: l.t.weight, PromptTokens: 1, CompletionTokens: int64(l.t.tokns), Submitted: at})
		if err != nil {
			return
		}
		first, ok := waitEnd(ctx, p)
		l.q.Finish(p)
		if ok && !at.Before(l.from) {
			l.mu.Lock()
			l.res.ttft = append(l.res.ttft, first.Sub(at))
			l.mu.Unlock()
		}
		l.pauseFor(ctx)
	}
}

// pauseFor waits the tenant's pause between requests (a client reading
// its answer), or until ctx ends. No timer at all for no pause: a timer
// of 0 in a select crashed the Go 1.26 runtime inside a synctest bubble
// under -race (SIGSEGV in timer.maybeRunChan), once in a few runs.
func (l loop) pauseFor(ctx context.Context) {
	if l.t.pause <= 0 {
		return
	}
	t := time.NewTimer(l.t.pause)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// waitEnd reads p's events up to its end, or until ctx ends (the client
// leaves, as an HTTP handler does). It returns when the first token came,
// and whether the response ended.
func waitEnd(ctx context.Context, p *consume.Pending) (first time.Time, ended bool) {
	for {
		select {
		case ev := <-p.Events():
			if ev.Kind == consume.EventChunk && first.IsZero() {
				first = time.Now()
			}
			if ev.Kind == consume.EventDone || ev.Kind == consume.EventError {
				return first, ev.Kind == consume.EventDone
			}
		case <-ctx.Done():
			return first, false
		}
	}
}

func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)*99+99)/100-1]
}

// In virtual time, free of the machine's noise, tenants of weights
// 1 : 2 : 4 that all want more than the pool get tokens in that ratio,
// with and without headroom.
func TestWeightsShareTheSaturatedPool(t *testing.T) {
	tenants := []simTenant{{"w1", 1, 1, 12, 256, 0}, {"w2", 2, 1, 12, 256, 0}, {"w4", 4, 1, 12, 256, 0}}
	for _, headroom := range []int{0, 2} {
		res := shareRun(t, consume.CapacityFair, headroom, tenants, 10*time.Second, 190*time.Second)
		total := 0
		for _, r := range res {
			total += r.tokens
		}
		for _, tn := range tenants {
			want := float64(total) * tn.weight / 7
			off := float64(res[tn.name].tokens)/want - 1
			if max(off, -off) > 0.05 {
				t.Errorf("headroom %d: %s got %d tokens, %.1f %% off its weight's share %.0f", headroom, tn.name, res[tn.name].tokens, 100*off, want)
			}
		}
	}
}

// The noisy neighbour in virtual time: beside a tenant that keeps 32
// long requests going, three light tenants (two clients each, pausing
// 50 ms between requests) get their first token as soon as alone with
// headroom 2 (20 ms, the model's own), and the pool makes as many tokens
// as it does for the old poll; without headroom they wait for slots.
func TestNoisyNeighbourInVirtualTime(t *testing.T) {
	light := []simTenant{{"a", 1, 1, 2, 32, 50 * time.Millisecond}, {"b", 1, 1, 2, 32, 50 * time.Millisecond},
		{"c", 1, 1, 2, 32, 50 * time.Millisecond}}
	loaded := append([]simTenant{{"heavy", 1, 1, 32, 256, 0}}, light...)
	pool := func(res map[string]*simResult) (tokens int) {
		for _, r := range res {
			tokens += r.tokens
		}
		return tokens
	}
	lightP99 := func(res map[string]*simResult) (worst time.Duration) {
		for _, tn := range light {
			worst = max(worst, p99(res[tn.name].ttft))
		}
		return worst
	}
	poll := shareRun(t, consume.CapacityPoll, 0, loaded, 5*time.Second, 35*time.Second)
	fair := shareRun(t, consume.CapacityFair, 0, loaded, 5*time.Second, 35*time.Second)
	head := shareRun(t, consume.CapacityFair, 2, loaded, 5*time.Second, 35*time.Second)
	alone := shareRun(t, consume.CapacityFair, 2, light, 5*time.Second, 35*time.Second)
	t.Logf("light TTFT p99 (0s: no first token after the warm-up): alone %v, poll %v, fair %v, headroom %v",
		lightP99(alone), lightP99(poll), lightP99(fair), lightP99(head))
	t.Logf("pool tokens: poll %d, fair %d, headroom %d", pool(poll), pool(fair), pool(head))
	if got, want := lightP99(head), lightP99(alone)*3/2; got > want {
		t.Errorf("light TTFT p99 with headroom %v, want ≤ 1.5× alone (%v)", got, want)
	}
	for _, tn := range light {
		if got, want := head[tn.name].tokens, alone[tn.name].tokens*95/100; got < want {
			t.Errorf("%s got %d tokens beside heavy with headroom, want ≥ 0.95× alone (%d)", tn.name, got, want)
		}
	}
	if got, want := pool(head), pool(poll)*97/100; got < want {
		t.Errorf("pool tokens with headroom %d, want ≥ 0.97× poll's %d", got, want)
	}
}

// Bands in virtual time: a high tenant beside normal and low tenants that
// saturate the pool gets its first token as soon as alone with headroom.
func TestHighBandInVirtualTime(t *testing.T) {
	hi := []simTenant{{"hi", 1, 0, 2, 32, 50 * time.Millisecond}}
	loaded := append([]simTenant{{"norm", 1, 1, 16, 256, 0}, {"lo", 1, 2, 16, 256, 0}}, hi...)
	alone := shareRun(t, consume.CapacityFair, 2, hi, 5*time.Second, 35*time.Second)
	fair := shareRun(t, consume.CapacityFair, 0, loaded, 5*time.Second, 35*time.Second)
	head := shareRun(t, consume.CapacityFair, 2, loaded, 5*time.Second, 35*time.Second)
	t.Logf("high TTFT p99: alone %v, fair %v, headroom %v", p99(alone["hi"].ttft), p99(fair["hi"].ttft), p99(head["hi"].ttft))
	if got, want := p99(head["hi"].ttft), p99(alone["hi"].ttft)*6/5; got > want || got == 0 {
		t.Errorf("high TTFT p99 with headroom %v, want ≤ 1.2× alone (%v)", got, want)
	}
}
