package consume

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume/fairshare"
	"github.com/pacegate/pacegate/policy"
)

// streamTokens makes the fake upstream wait for begin (nil: no wait),
// stream n chunks and then wait for release before it returns (and frees
// its slot).
func streamTokens(up *fakeUpstreams, begin <-chan struct{}, n int, release <-chan struct{}) {
	up.do = func(ctx context.Context, _ *Request, emit func(Event) error) error {
		if begin != nil {
			<-begin
		}
		emit(Event{Kind: EventHeader, Status: 200})
		for range n {
			emit(Event{Kind: EventChunk, Data: []byte(`{"choices":[{"delta":{"content":"x"}}]}`)})
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
}

func drain(p *Pending) {
	go func() {
		for ev := range p.Events() {
			if ev.Kind == EventDone || ev.Kind == EventError {
				return
			}
		}
	}()
}

// With the pool full, waiting buckets hold no worker and poll nothing;
// the freed slot goes to the bucket owed the most, which is woken to
// take it, and the others stay in the wait set.
func TestFreedSlotIsGrantedToTheBucketOwedMost(t *testing.T) {
	b := &wakeableBackend{fakeBackend{min: time.Millisecond}}
	r := newRigOn(b, nil, CapacityFair)
	r.up.limit = 1
	begin, release := make(chan struct{}), make(chan struct{})
	streamTokens(r.up, begin, chargeBatch, release)

	h1, p := r.submit(context.Background(), "heavy")
	drain(p)
	if res := r.c.Handle(context.Background(), h1); res.Action != ActionSuccess {
		t.Fatalf("heavy's first request: %v, want dispatched", res)
	}
	h2, p := r.submit(context.Background(), "heavy")
	drain(p)
	l1, p := r.submit(context.Background(), "light")
	drain(p)
	for _, d := range []*Delivery{h2, l1} {
		if res := r.c.Handle(context.Background(), d); res != Suspend(capacityWaitWakeable) {
			t.Fatalf("%s with the pool full: %v, want to wait for a grant", d.ID, res)
		}
	}
	// Both wait at the same counter (light was lifted to heavy's). Now
	// heavy's running request streams a batch of tokens, charged 2
	// each as they come: the freed slot is light's.
	close(begin)
	waitFor(t, func() bool {
		f, _ := r.c.Fairness().Flow(policy.Key{Tenant: "heavy", Model: "m"}, time.Now())
		return f.Counter == 2*chargeBatch
	})
	close(release)
	waitFor(t, func() bool { return len(b.wokenList()) == 1 })
	if got := b.wokenList(); !slices.Equal(got, []string{"light__m"}) {
		t.Fatalf("woken %v, want [light__m]", got)
	}
	if res := r.c.Handle(context.Background(), h2); res != Suspend(capacityWaitWakeable) {
		t.Fatalf("heavy delivered again without a grant: %v, want to keep waiting", res)
	}
	if res := r.c.Handle(context.Background(), l1); res.Action != ActionSuccess {
		t.Fatalf("light with its grant: %v, want dispatched", res)
	}
	want := []string{"released heavy", "suspended heavy 1m0s capacity", "suspended light 1m0s capacity",
		"suspended heavy 1m0s capacity_recheck", "released light"}
	if got := r.obs.events(); !slices.Equal(got, want) {
		t.Fatalf("observer\n got %v\nwant %v", got, want)
	}
	r.c.Close(context.Background())
}

func (b *wakeableBackend) wokenList() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.woken)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // hang guard
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// A grant its bucket does not claim in time goes to the next bucket, so
// a free slot never idles behind a bucket that went away.
func TestUnclaimedGrantMovesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, b, release, _, _ := inLine(t, "b", "c") // both wait; neither is dispatched here
		close(release)
		synctest.Wait()
		if got := b.wokenList(); !slices.Equal(got, []string{"b__m"}) {
			t.Fatalf("woken %v, want [b__m]", got)
		}
		// b never comes back for it. On a backend that can be woken the
		// grant is held for grantHoldMargin, not for the backstop.
		time.Sleep(grantHoldMargin - time.Millisecond)
		synctest.Wait()
		if got := b.wokenList(); !slices.Equal(got, []string{"b__m"}) {
			t.Fatalf("woken %v before b's grant expired, want [b__m]", got)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := b.wokenList(); !slices.Equal(got, []string{"b__m", "c__m"}) {
			t.Fatalf("woken %v after b's grant expired, want c next", got)
		}
		r.c.Close(context.Background())
	})
}

// The poll mode, kept to measure against, retries every 25 ms.
func TestPollModeSuspendsForTheBackoff(t *testing.T) {
	r := newRigOn(&wakeableBackend{fakeBackend{min: time.Millisecond}}, nil, CapacityPoll)
	r.up.full = true
	d, _ := r.submit(context.Background(), "acme")
	if res := r.c.Handle(context.Background(), d); res != Suspend(25*time.Millisecond) {
		t.Fatalf("got %v, want suspend(25ms)", res)
	}
	if got := r.obs.events(); !slices.Equal(got, []string{"suspended acme 25ms capacity"}) {
		t.Fatalf("observer %v", got)
	}
}

// On RocketMQ a waiting bucket cannot be woken: it comes back every
// capacityWaitBroker, and the slot granted to it is held until then.
func TestGrantHeldForABucketThatCannotBeWoken(t *testing.T) {
	r := newRig(time.Millisecond, nil) // not a Waker
	r.up.limit = 1
	release := make(chan struct{})
	streamTokens(r.up, nil, 0, release)
	first, p := r.submit(context.Background(), "a")
	drain(p)
	r.c.Handle(context.Background(), first)
	d, p := r.submit(context.Background(), "b")
	drain(p)
	if res := r.c.Handle(context.Background(), d); res != Suspend(capacityWaitBroker) {
		t.Fatalf("got %v, want suspend(%s)", res, capacityWaitBroker)
	}
	close(release)
	waitFor(t, func() bool { return r.up.released.Load() == 1 })
	// A newcomer does not take the slot held for b.
	d3, _ := r.submit(context.Background(), "c")
	if res := r.c.Handle(context.Background(), d3); res.Action != ActionSuspend {
		t.Fatalf("newcomer took the held slot: %v", res)
	}
	if res := r.c.Handle(context.Background(), d); res.Action != ActionSuccess {
		t.Fatalf("b on its next delivery: %v, want dispatched with its grant", res)
	}
	r.c.Close(context.Background())
}

func TestMeterChargesExpectedThenActual(t *testing.T) {
	chunk := Event{Kind: EventChunk, Data: []byte(`{"choices":[{"delta":{"content":"a"}}]}`)}
	counter := func(s *fairshare.Scheduler, k policy.Key) float64 { f, _ := s.Flow(k, time.Now()); return f.Counter }
	k := policy.Key{Tenant: "acme", Model: "m"}
	for _, tc := range []struct {
		name   string
		events []Event
		end    bool
		want   []float64 // counter after the start, then after each event (and after end)
	}{
		{"within the expectation, settled by usage", []Event{chunk, chunk,
			{Kind: EventChunk, Data: []byte(`{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}`)}},
			false, []float64{5 + 2*3, 11, 11, 7 + 2*2}},
		// The token beyond the expectation is owed until a batch of
		// chargeBatch (TestMeterChargesTheCommitmentAndReconciles), and
		// charged at the end.
		{"beyond the expectation, charged at the end", []Event{chunk, chunk, chunk, chunk}, true,
			[]float64{11, 11, 11, 11, 11, 5 + 2*4}},
		{"cut short, charged what it produced", []Event{chunk}, true, []float64{11, 11, 5 + 2*1}},
		{"non-streamed body", []Event{{Kind: EventBody, Data: []byte(`{"choices":[{}],"usage":{"prompt_tokens":4,"completion_tokens":10}}`)}},
			true, []float64{11, 4 + 2*10, 4 + 2*10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fairshare.New(0)
			m := startMeter(s, k, 2, &Request{PromptTokens: 5, CompletionTokens: 3}, time.Now())
			got := []float64{counter(s, k)}
			for _, ev := range tc.events {
				m.observe(ev)
				got = append(got, counter(s, k))
			}
			if tc.end {
				m.end()
				got = append(got, counter(s, k))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("counter steps %v, want %v", got, tc.want)
			}
		})
	}
}
