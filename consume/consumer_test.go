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

// fakeBackend only answers MinSuspend.
type fakeBackend struct{ min time.Duration }

func (fakeBackend) Publish(context.Context, *Message) error   { return nil }
func (fakeBackend) Start(Handler) error                       { return nil }
func (fakeBackend) Close(context.Context) (Leftover, error)   { return Leftover{}, nil }
func (b fakeBackend) MinSuspend() time.Duration               { return b.min }
func (fakeBackend) Ready(context.Context) error               { return nil }
func (f *fakeUpstreams) TryAcquire(model string) (Slot, bool) { return f.acquire(model) }
func (f fakePacer) AcquireOrSuspend(k policy.Key, c float64) time.Duration {
	return f(k, c)
}

// fakePacer answers with a function.
type fakePacer func(k policy.Key, cost float64) time.Duration

// fakeUpstreams hands out fakeSlots while capacity allows.
type fakeUpstreams struct {
	mu       sync.Mutex
	full     bool
	acquired int
	released atomic.Int32
	calls    atomic.Int32
	do       func(ctx context.Context, req *UpstreamRequest, emit func(Event) error) error
}

func (f *fakeUpstreams) acquire(string) (Slot, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.full {
		return nil, false
	}
	f.acquired++
	return &fakeSlot{u: f}, true
}

type fakeSlot struct {
	u    *fakeUpstreams
	once sync.Once
}

func (s *fakeSlot) Do(ctx context.Context, req *UpstreamRequest, emit func(Event) error) error {
	defer s.Release()
	s.u.calls.Add(1)
	if s.u.do == nil {
		return nil
	}
	return s.u.do(ctx, req, emit)
}

func (s *fakeSlot) Release() { s.once.Do(func() { s.u.released.Add(1) }) }

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
func (r *recorder) Released(k policy.Key, _ time.Duration) { r.add("released") }
func (r *recorder) Suspended(k policy.Key, d time.Duration, reason string) {
	r.add(fmt.Sprintf("suspended %s %s", d, reason))
}
func (r *recorder) Dropped(k policy.Key, reason string) { r.add("dropped " + reason) }
func (r *recorder) Panicked(k policy.Key)               { r.add("panicked") }
func (r *recorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// rig is a Consumer with fakes around it.
type rig struct {
	c   *Consumer
	reg *Registry
	up  *fakeUpstreams
	obs *recorder
	bk  *Buckets
	key policy.Key
}

func newRig(minSuspend time.Duration, pacer fakePacer) *rig {
	r := &rig{reg: &Registry{}, up: &fakeUpstreams{}, obs: &recorder{}, bk: NewBuckets(), key: policy.Key{Tenant: "acme", Model: "m"}}
	if pacer == nil {
		pacer = func(policy.Key, float64) time.Duration { return 0 }
	}
	r.c = NewConsumer(ConsumerConfig{
		Backend: fakeBackend{min: minSuspend}, Registry: r.reg, Pacer: pacer, Upstreams: r.up,
		Buckets: r.bk, Observer: r.obs, Logger: quietLog,
	})
	return r
}

// enqueue registers a waiting request (unless register is false) and
// returns its delivery.
func (r *rig) enqueue(ctx context.Context, id string, register bool) (*Delivery, *Pending) {
	tk := r.bk.Enqueue(r.key, time.Now())
	p := NewPending(ctx, id, r.key.Tenant, r.key.Model, 8)
	if register {
		r.reg.Register(p)
	}
	return &Delivery{Attempt: 1, Message: Message{ID: id, LiteTopic: "acme__m", Body: []byte("{}"), Properties: map[string]string{
		PropTenant: r.key.Tenant, PropModel: r.key.Model, PropPath: "/v1/chat/completions", PropStream: "1",
		PropCost: "1", PropEnqueued: tk.EnqueuedProp(),
	}}}, p
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
		case <-time.After(5 * time.Second):
			t.Fatalf("no terminal event after %v", evs)
		}
	}
}

func TestConsumerDropsWhenClientGone(t *testing.T) {
	r := newRig(time.Millisecond, nil)
	d, _ := r.enqueue(context.Background(), "unregistered", false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d2, _ := r.enqueue(ctx, "cancelled", true)
	for _, d := range []*Delivery{d, d2} {
		if res := r.c.Handle(context.Background(), d); res.Action != ActionSuccess {
			t.Fatalf("%s: %v", d.ID, res)
		}
	}
	if r.up.acquired != 0 || r.up.calls.Load() != 0 {
		t.Fatalf("upstream touched: %d acquired, %d calls", r.up.acquired, r.up.calls.Load())
	}
	if got := r.obs.events(); !slices.Equal(got, []string{"dropped client_gone", "dropped client_gone"}) {
		t.Fatalf("observer %v", got)
	}
	if r.bk.Backlog(r.key) != 0 {
		t.Fatalf("departures not recorded: backlog %d", r.bk.Backlog(r.key))
	}
}

func TestConsumerDuplicateNeverCallsTwice(t *testing.T) {
	r := newRig(time.Millisecond, nil)
	d, p := r.enqueue(context.Background(), "1", true)
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
	if got := r.obs.events(); !slices.Equal(got, []string{"released", "dropped duplicate"}) {
		t.Fatalf("observer %v", got)
	}
}

func TestConsumerCapacitySuspendsBeforePacer(t *testing.T) {
	var asked atomic.Int32
	r := newRig(time.Millisecond, func(policy.Key, float64) time.Duration { asked.Add(1); return 0 })
	r.up.full = true
	d, _ := r.enqueue(context.Background(), "1", true)
	if res := r.c.Handle(context.Background(), d); res != Suspend(25*time.Millisecond) {
		t.Fatalf("got %v, want suspend(25ms)", res)
	}
	if asked.Load() != 0 {
		t.Fatal("pacer asked although there was no capacity")
	}
	if st, _ := r.bk.Stat(r.key); st.State != StateSuspended || st.Backlog != 1 {
		t.Fatalf("bucket %+v", st)
	}
	if got := r.obs.events(); !slices.Equal(got, []string{"suspended 25ms capacity"}) {
		t.Fatalf("observer %v", got)
	}
}

func TestConsumerPaceSuspends(t *testing.T) {
	r := newRig(30*time.Millisecond, func(policy.Key, float64) time.Duration { return 40 * time.Millisecond })
	d, _ := r.enqueue(context.Background(), "1", true)
	if res := r.c.Handle(context.Background(), d); res != Suspend(40*time.Millisecond) {
		t.Fatalf("got %v", res)
	}
	if r.up.released.Load() != 1 || r.up.calls.Load() != 0 {
		t.Fatalf("slot not given back: released %d, calls %d", r.up.released.Load(), r.up.calls.Load())
	}
}

// With MaxSuspend set (a backend that cannot be woken), a long pacing wait
// becomes several short suspensions, so that a rate increase is felt
// within MaxSuspend.
func TestConsumerMaxSuspendCapsLongWaits(t *testing.T) {
	r := newRig(30*time.Millisecond, func(policy.Key, float64) time.Duration { return 20 * time.Second })
	r.c.cfg.MaxSuspend = time.Second
	d, _ := r.enqueue(context.Background(), "1", true)
	if res := r.c.Handle(context.Background(), d); res != Suspend(time.Second) {
		t.Fatalf("got %v, want suspend(1s)", res)
	}
	if got := r.obs.events(); !slices.Equal(got, []string{"suspended 1s pace"}) {
		t.Fatalf("observer %v", got)
	}
}

// A wait below MinSuspend is made up locally, then the pacer is asked again.
func TestConsumerShortWaitIsLocal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answers := []time.Duration{10 * time.Millisecond, 0}
		r := newRig(30*time.Millisecond, func(policy.Key, float64) time.Duration {
			a := answers[0]
			answers = answers[1:]
			return a
		})
		d, p := r.enqueue(context.Background(), "1", true)
		start := time.Now()
		if res := r.c.Handle(context.Background(), d); res.Action != ActionSuccess {
			t.Fatalf("got %v", res)
		}
		if took := time.Since(start); took != 10*time.Millisecond {
			t.Fatalf("local wait took %v, want 10ms", took)
		}
		collect(t, p)
		if r.up.acquired != 2 || r.up.released.Load() != 2 {
			t.Fatalf("acquired %d released %d, want 2 and 2", r.up.acquired, r.up.released.Load())
		}
		// A second short answer after the local wait becomes a Suspend.
		answers = []time.Duration{5 * time.Millisecond, 5 * time.Millisecond}
		d, _ = r.enqueue(context.Background(), "2", true)
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
		var gotReq *UpstreamRequest
		r.up.do = func(_ context.Context, req *UpstreamRequest, emit func(Event) error) error {
			gotReq = req
			emit(Event{Kind: EventHeader, Status: 200})
			emit(Event{Kind: EventChunk, Data: []byte("a")})
			emit(Event{Kind: EventChunk, Data: []byte("b")})
			if fail {
				return boom
			}
			return nil
		}
		d, p := r.enqueue(context.Background(), "1", true)
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
		if gotReq.ID != "1" || gotReq.Path != "/v1/chat/completions" || !gotReq.Stream || gotReq.Model != "m" {
			t.Errorf("request %+v", gotReq)
		}
		if !p.Dispatched() || r.bk.Backlog(r.key) != 0 {
			t.Errorf("dispatched %v backlog %d", p.Dispatched(), r.bk.Backlog(r.key))
		}
	}
}

func TestConsumerBadMessage(t *testing.T) {
	r := newRig(time.Millisecond, nil)
	d, p := r.enqueue(context.Background(), "1", true)
	d.Properties[PropCost] = "lots"
	if res := r.c.Handle(context.Background(), d); res.Action != ActionSuccess {
		t.Fatalf("got %v", res)
	}
	if evs := collect(t, p); evs[0].Kind != EventError {
		t.Fatalf("events %v", evs)
	}
	if got := r.obs.events(); !slices.Equal(got, []string{"dropped bad_message"}) || r.up.acquired != 0 {
		t.Fatalf("observer %v, acquired %d", got, r.up.acquired)
	}
}

func TestConsumerPanicsAreContained(t *testing.T) {
	r := newRig(time.Millisecond, nil)
	r.up.do = func(context.Context, *UpstreamRequest, func(Event) error) error { panic("upstream bug") }
	d, p := r.enqueue(context.Background(), "1", true)
	r.c.Handle(context.Background(), d)
	if evs := collect(t, p); evs[len(evs)-1].Kind != EventError {
		t.Fatalf("events %v", evs)
	}
	r2 := newRig(time.Millisecond, func(policy.Key, float64) time.Duration { panic("pacer bug") })
	d, p = r2.enqueue(context.Background(), "2", true)
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
}

// Close waits for invocations, which end with their request context.
func TestConsumerCloseWaitsForInvocations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(time.Millisecond, nil)
		r.up.do = func(ctx context.Context, _ *UpstreamRequest, _ func(Event) error) error {
			<-ctx.Done() // a long stream, until the client leaves
			return ctx.Err()
		}
		ctx, cancel := context.WithCancel(context.Background())
		d, p := r.enqueue(ctx, "1", true)
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
		d, p = r.enqueue(context.Background(), "2", true)
		r.c.Handle(context.Background(), d)
		if ev := <-p.Events(); !errors.Is(ev.Err, ErrConsumerClosed) {
			t.Fatalf("after Close: %+v", ev)
		}
	})
}
