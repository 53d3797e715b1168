package consume

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/policy"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeBackend accepts every message and answers MinSuspend; with wakes
// set it is a Waker that records the LiteTopics it was asked to wake.
type fakeBackend struct {
	min   time.Duration
	mu    sync.Mutex
	woken []string
}

func (*fakeBackend) Publish(context.Context, *Message) error  { return nil }
func (*fakeBackend) Start(Handler) error                      { return nil }
func (*fakeBackend) Close(context.Context) (Leftover, error)  { return Leftover{}, nil }
func (b *fakeBackend) MinSuspend() time.Duration              { return b.min }
func (*fakeBackend) Ready(context.Context) error              { return nil }
func (f *fakeUpstreams) TryAcquire(model string) (Slot, bool) { return f.acquire(model) }
func (f *fakeUpstreams) TryAcquireHeadroom(string) (Slot, bool) {
	return f.acquireUpTo(f.limit + f.headroom)
}
func (f *fakeUpstreams) OnFree(fn func([]string)) { f.onFree = fn }
func (f *fakeUpstreams) Free(string) (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	limit := f.limit
	if limit == 0 { // no limit: as many slots as anyone could use
		limit = 1 << 20
	}
	if f.full {
		return 0, limit
	}
	return limit - f.inUse, limit
}
func (p fakePacer) WaitAt(_ time.Time, k policy.Key, c float64) time.Duration {
	return p(k, c)
}
func (p fakePacer) AcquireOrSuspendAt(_ time.Time, k policy.Key, c float64) time.Duration {
	return p(k, c)
}
func (p fakePacer) Interval(policy.Key) time.Duration { return time.Millisecond }

// wakeableBackend is a fakeBackend that can end suspensions.
type wakeableBackend struct{ fakeBackend }

func (b *wakeableBackend) Wake(lt string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.woken = append(b.woken, lt)
	return true
}

// fakePacer answers with a function.
type fakePacer func(k policy.Key, cost float64) time.Duration

// fakeUpstreams hands out up to limit fakeSlots at once (0: no limit
// unless full is set).
type fakeUpstreams struct {
	mu       sync.Mutex
	full     bool
	limit    int
	headroom int // beyond limit, for TryAcquireHeadroom
	inUse    int
	acquired int
	released atomic.Int32
	calls    atomic.Int32
	onFree   func([]string)
	models   []string // the models its slots serve, passed to onFree; nil: just "m"
	do       func(ctx context.Context, req *Request, emit func(Event) error) error
}

func (f *fakeUpstreams) acquire(string) (Slot, bool) { return f.acquireUpTo(f.limit) }

// acquireUpTo takes a slot if fewer than limit are in use (0: no limit).
func (f *fakeUpstreams) acquireUpTo(limit int) (Slot, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.full || limit > 0 && f.inUse >= limit {
		return nil, false
	}
	f.acquired++
	f.inUse++
	return &fakeSlot{u: f}, true
}

type fakeSlot struct {
	u    *fakeUpstreams
	once sync.Once
}

func (s *fakeSlot) Do(ctx context.Context, req *Request, emit Emitter) error {
	defer s.Release()
	s.u.calls.Add(1)
	if s.u.do == nil {
		return nil
	}
	return s.u.do(ctx, req, emit.Emit)
}

func (s *fakeSlot) Release() {
	s.once.Do(func() {
		s.u.released.Add(1)
		s.u.mu.Lock()
		s.u.inUse--
		f, models := s.u.onFree, s.u.models
		s.u.mu.Unlock()
		if models == nil {
			models = []string{"m"}
		}
		if f != nil {
			f(models)
		}
	})
}

// recorder is an Observer that writes down what it saw.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, s)
}
func (r *recorder) Released(k policy.Key, _ time.Duration) { r.add("released " + k.Tenant) }
func (r *recorder) Suspended(k policy.Key, d time.Duration, reason string) {
	r.add(fmt.Sprintf("suspended %s %s %s", k.Tenant, d, reason))
}
func (r *recorder) Dropped(k policy.Key, reason string) { r.add("dropped " + reason) }
func (r *recorder) Panicked(k policy.Key)               { r.add("panicked") }
func (r *recorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// rig is a Consumer with a Queue and fakes around it.
type rig struct {
	c   *Consumer
	q   *Queue
	b   Backend
	up  *fakeUpstreams
	obs *recorder
	key policy.Key
	n   int
}

func newRig(minSuspend time.Duration, pacer fakePacer) *rig {
	return newRigOn(&fakeBackend{min: minSuspend}, pacer, CapacityFair)
}

func newRigOn(b Backend, pacer fakePacer, mode CapacityMode) *rig {
	return newRigWith(b, pacer, func(c *ConsumerConfig) { c.Capacity = mode })
}

// newRigWith is newRigOn with the consumer's config changed by set.
func newRigWith(b Backend, pacer fakePacer, set func(*ConsumerConfig)) *rig {
	r := &rig{b: b, q: NewQueue(b, ""), up: &fakeUpstreams{}, obs: &recorder{}, key: policy.Key{Tenant: "acme", Model: "m"}}
	if pacer == nil {
		pacer = func(policy.Key, float64) time.Duration { return 0 }
	}
	cfg := ConsumerConfig{Queue: r.q, Pacer: pacer, Upstreams: r.up, Observer: r.obs, Logger: quietLog}
	set(&cfg)
	r.c = NewConsumer(cfg)
	return r
}

// submit queues a request of tenant's bucket and returns its delivery.
func (r *rig) submit(ctx context.Context, tenant string) (*Delivery, *Pending) {
	return r.submitFor(ctx, tenant, "m")
}

// submitFor is submit for a model other than "m".
func (r *rig) submitFor(ctx context.Context, tenant, model string) (*Delivery, *Pending) {
	return r.submitIn(ctx, tenant, model, 1)
}

// submitIn is submitFor in a band other than normal.
func (r *rig) submitIn(ctx context.Context, tenant, model string, band int) (*Delivery, *Pending) {
	r.n++
	k := policy.Key{Tenant: tenant, Model: model}
	p, err := r.q.Submit(ctx, &Request{ID: fmt.Sprint(tenant, "-", r.n), Key: k, Path: "/v1/chat/completions",
		Body: []byte("{}"), Stream: true, Band: band, Weight: 1, Submitted: time.Now()})
	if err != nil {
		panic(err)
	}
	return &Delivery{Attempt: 1, Message: Message{ID: p.Req.ID, LiteTopic: r.q.LiteTopic(k), Key: k}}, p
}

// collect reads p's events up to and including a terminal one.
func collect(t *testing.T, p *Pending) []Event {
	t.Helper()
	var evs []Event
	for {
		select {
		case ev := <-p.Events():
			evs = append(evs, ev)
			if ev.Kind == EventDone || ev.Kind == EventError {
				return evs
			}
		case <-time.After(10 * time.Second): // hang guard
			t.Fatalf("no terminal event after %v", evs)
		}
	}
}

func TestConsumerDropsWhenClientGone(t *testing.T) {
	r := newRig(time.Millisecond, nil)
	unknown := &Delivery{Attempt: 1, Message: Message{ID: "nobody", Key: policy.Key{Tenant: "acme", Model: "m"}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, _ := r.submit(ctx, "acme")
	d2, p2 := r.submit(context.Background(), "acme")
	p2.Abandon() // e.g. its band's max_wait passed
	for _, d := range []*Delivery{unknown, d, d2} {
		if res := r.c.Handle(context.Background(), d); res.Action != ActionSuccess {
			t.Fatalf("%s: %v", d.ID, res)
		}
	}
	if r.up.acquired != 0 || r.up.calls.Load() != 0 {
		t.Fatalf("upstream touched: %d acquired, %d calls", r.up.acquired, r.up.calls.Load())
	}
	if got := r.obs.events(); !slices.Equal(got, []string{"dropped client_gone", "dropped client_gone", "dropped client_gone"}) {
		t.Fatalf("observer %v", got)
	}
	if b := r.q.Backlog(r.key); b != 0 {
		t.Fatalf("departures not recorded: backlog %d", b)
	}
}

func TestConsumerDuplicateNeverCallsTwice(t *testing.T) {
	r := newRig(time.Millisecond, nil)
	d, p := r.submit(context.Background(), "acme")
	r.c.Handle(context.Background(), d)
	collect(t, p)
	redelivered := *d
	redelivered.Attempt = 2
	if res := r.c.Handle(context.Background(), &redelivered); res.Action != ActionSuccess {
		t.Fatalf("redelivery: %v", res)
	}
	if err := r.c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := r.up.calls.Load(); n != 1 {
		t.Fatalf("%d upstream calls, want 1", n)
	}
	if got := r.obs.events(); !slices.Equal(got, []string{"released acme", "dropped duplicate"}) {
		t.Fatalf("observer %v", got)
	}
}

// Requests submitted in one order and departing in another leave nothing
// behind: the ledger matches by request, never by time. (Before the
// ledger, a tracker that matched departures by admission time kept a
// phantom request here.)
func TestNoPhantomBacklog(t *testing.T) {
	r := newRig(time.Millisecond, nil)
	t0 := time.Now()
	mk := func(id string, at time.Time) (*Delivery, *Pending) {
		p, err := r.q.Submit(context.Background(), &Request{ID: id, Key: r.key, Submitted: at, Weight: 1, Band: 1})
		if err != nil {
			t.Fatal(err)
		}
		return &Delivery{Attempt: 1, Message: Message{ID: id}}, p
	}
	d2, _ := mk("second-admitted", t0.Add(2*time.Millisecond)) // submitted first
	d1, p1 := mk("first-admitted", t0.Add(time.Millisecond))
	if pos := r.q.Position(p1); pos != 2 {
		t.Fatalf("position of the later submission = %d, want 2", pos)
	}
	r.c.Handle(context.Background(), d1)
	r.c.Handle(context.Background(), d2)
	if b := r.q.Backlog(r.key); b != 0 {
		t.Fatalf("Backlog = %d with nothing queued", b)
	}
	r.c.Close(context.Background())
}

// The bucket's backlog limit is enforced once, at submission.
func TestQueueBacklogLimit(t *testing.T) {
	q := NewQueue(&fakeBackend{min: time.Millisecond}, "r0")
	k := policy.Key{Tenant: "acme", Model: "m"}
	for i := range 2 {
		if _, err := q.Submit(context.Background(), &Request{ID: fmt.Sprint(i), Key: k, MaxBacklog: 2}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := q.Submit(context.Background(), &Request{ID: "x", Key: k, MaxBacklog: 2})
	full, ok := IsFull(err)
	if !ok || full.Scope != ScopeBucket || full.Limit != 2 || full.LiteTopic != "acme__m__r0" || !errors.Is(err, ErrFull) {
		t.Fatalf("third Submit = %v, want a bucket FullError with limit 2", err)
	}
	if q.Len() != 2 || q.Backlog(k) != 2 {
		t.Fatalf("a refused Submit left state behind: len %d backlog %d", q.Len(), q.Backlog(k))
	}
}

// A request whose handler leaves while it is queued leaves the backlog at
// once, before its message is delivered.
func TestFinishWithdrawsQueuedRequest(t *testing.T) {
	r := newRig(time.Millisecond, nil)
	_, p1 := r.submit(context.Background(), "acme")
	_, p2 := r.submit(context.Background(), "acme")
	r.q.Finish(p1)
	if b, pos := r.q.Backlog(r.key), r.q.Position(p2); b != 1 || pos != 1 {
		t.Fatalf("after Finish: backlog %d, position of the next %d; want 1 and 1", b, pos)
	}
	r.q.Finish(p1) // idempotent
	if r.q.Len() != 1 {
		t.Fatalf("Len = %d, want 1", r.q.Len())
	}
}

func TestConsumerPaceSuspendsHoldingNothing(t *testing.T) {
	r := newRig(30*time.Millisecond, func(policy.Key, float64) time.Duration { return 40 * time.Millisecond })
	d, _ := r.submit(context.Background(), "acme")
	if res := r.c.Handle(context.Background(), d); res != Suspend(40*time.Millisecond) {
		t.Fatalf("got %v", res)
	}
	if r.up.acquired != 0 || r.up.calls.Load() != 0 {
		t.Fatalf("a paced bucket took a slot: acquired %d, calls %d", r.up.acquired, r.up.calls.Load())
	}
	if st, _ := r.q.Stat(r.key); st.State != StateSuspended || st.Backlog != 1 || st.Suspends != 1 {
		t.Fatalf("bucket %+v", st)
	}
}

// On a backend that cannot be woken, a long pacing wait becomes several
// short suspensions, so that a rate increase is felt within a second.
func TestConsumerCapsLongWaitsWithoutWake(t *testing.T) {
	r := newRig(30*time.Millisecond, func(policy.Key, float64) time.Duration { return 20 * time.Second })
	d, _ := r.submit(context.Background(), "acme")
	if res := r.c.Handle(context.Background(), d); res != Suspend(time.Second) {
		t.Fatalf("got %v, want suspend(1s)", res)
	}
	w := newRigOn(&wakeableBackend{fakeBackend{min: time.Millisecond}}, func(policy.Key, float64) time.Duration { return 20 * time.Second }, CapacityFair)
	d, _ = w.submit(context.Background(), "acme")
	if res := w.c.Handle(context.Background(), d); res != Suspend(20*time.Second) {
		t.Fatalf("wakeable backend: got %v, want suspend(20s)", res)
	}
}

// A wait below MinSuspend is made up locally, then the pacer is asked again.
func TestConsumerShortWaitIsLocal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answers := []time.Duration{10 * time.Millisecond, 0, 0}
		r := newRig(30*time.Millisecond, func(policy.Key, float64) time.Duration {
			a := answers[0]
			answers = answers[1:]
			return a
		})
		d, p := r.submit(context.Background(), "acme")
		start := time.Now()
		if res := r.c.Handle(context.Background(), d); res.Action != ActionSuccess {
			t.Fatalf("got %v", res)
		}
		if took := time.Since(start); took != 10*time.Millisecond {
			t.Fatalf("local wait took %v, want 10ms", took)
		}
		collect(t, p)
		// A second short answer after the local wait becomes a Suspend.
		answers = []time.Duration{5 * time.Millisecond, 5 * time.Millisecond}
		d, _ = r.submit(context.Background(), "acme")
		if res := r.c.Handle(context.Background(), d); res != Suspend(30*time.Millisecond) {
			t.Fatalf("got %v, want suspend(30ms)", res)
		}
		r.c.Close(context.Background())
	})
}

func TestConsumerEventsInOrder(t *testing.T) {
	boom := errors.New("upstream reset")
	for _, fail := range []bool{false, true} {
		r := newRig(time.Millisecond, nil)
		var gotReq *Request
		r.up.do = func(_ context.Context, req *Request, emit func(Event) error) error {
			gotReq = req
			emit(Event{Kind: EventHeader, Status: 200})
			emit(Event{Kind: EventChunk, Data: []byte("a")})
			emit(Event{Kind: EventChunk, Data: []byte("b")})
			if fail {
				return boom
			}
			return nil
		}
		d, p := r.submit(context.Background(), "acme")
		r.c.Handle(context.Background(), d)
		evs := collect(t, p)
		var kinds []EventKind
		for _, ev := range evs {
			kinds = append(kinds, ev.Kind)
		}
		last := EventDone
		if fail {
			last = EventError
		}
		if want := []EventKind{EventHeader, EventChunk, EventChunk, last}; !slices.Equal(kinds, want) {
			t.Errorf("fail=%v: kinds %v, want %v", fail, kinds, want)
		}
		if fail && !errors.Is(evs[3].Err, boom) {
			t.Errorf("error event carries %v", evs[3].Err)
		}
		r.c.Close(context.Background())
		if gotReq != p.Req {
			t.Errorf("upstream got %+v, want the submitted request", gotReq)
		}
		if !p.Dispatched() || r.q.Backlog(r.key) != 0 {
			t.Errorf("dispatched %v backlog %d", p.Dispatched(), r.q.Backlog(r.key))
		}
	}
}

func TestConsumerPanicsAreContained(t *testing.T) {
	r := newRig(time.Millisecond, nil)
	r.up.do = func(context.Context, *Request, func(Event) error) error { panic("upstream bug") }
	d, p := r.submit(context.Background(), "acme")
	r.c.Handle(context.Background(), d)
	if evs := collect(t, p); evs[len(evs)-1].Kind != EventError {
		t.Fatalf("events %v", evs)
	}
	r2 := newRig(time.Millisecond, func(policy.Key, float64) time.Duration { panic("pacer bug") })
	d, p = r2.submit(context.Background(), "acme")
	if res := r2.c.Handle(context.Background(), d); res.Action != ActionSuccess {
		t.Fatalf("got %v", res)
	}
	if evs := collect(t, p); evs[0].Kind != EventError {
		t.Fatalf("events %v", evs)
	}
	r.c.Close(context.Background())
	for _, rr := range []*rig{r, r2} {
		if got := rr.obs.events(); !slices.Contains(got, "panicked") {
			t.Errorf("observer %v", got)
		}
	}
	if b := r2.q.Backlog(r2.key); b != 0 {
		t.Errorf("a panicked delivery left backlog %d", b)
	}
}

// Close waits for invocations, which end with their request context.
func TestConsumerCloseWaitsForInvocations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(time.Millisecond, nil)
		r.up.do = func(ctx context.Context, _ *Request, _ func(Event) error) error {
			<-ctx.Done() // a long stream, until the client leaves
			return ctx.Err()
		}
		ctx, cancel := context.WithCancel(context.Background())
		d, _ := r.submit(ctx, "acme")
		r.c.Handle(context.Background(), d)
		short, stop := context.WithTimeout(context.Background(), time.Second)
		defer stop()
		if err := r.c.Close(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close with a live stream: %v", err)
		}
		cancel()
		if err := r.c.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		// After Close nothing is dispatched; the client hears why.
		d, p := r.submit(context.Background(), "acme")
		r.c.Handle(context.Background(), d)
		if ev := <-p.Events(); !errors.Is(ev.Err, ErrConsumerClosed) {
			t.Fatalf("after Close: %+v", ev)
		}
	})
}
