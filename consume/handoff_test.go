package consume_test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/embedded"
	"github.com/pacegate/pacegate/policy"
)

// streamUpstreams answers every call with a header, two chunks and a
// clean end.
type streamUpstreams struct{}

func (u streamUpstreams) TryAcquire(string) (consume.Slot, bool)         { return streamSlot{}, true }
func (u streamUpstreams) TryAcquireHeadroom(string) (consume.Slot, bool) { return streamSlot{}, true }
func (streamUpstreams) OnFree(func([]string))                            {}
func (streamUpstreams) Free(string) (int, int)                           { return 1 << 20, 1 << 20 }

type streamSlot struct{}

func (streamSlot) Release() {}
func (streamSlot) Do(_ context.Context, _ *consume.Request, emit consume.Emitter) error {
	for _, ev := range []consume.Event{
		{Kind: consume.EventHeader, Status: http.StatusOK},
		{Kind: consume.EventChunk, Data: []byte(`{"a":1}`)},
		{Kind: consume.EventChunk, Data: []byte(`{"a":2}`)},
	} {
		if err := emit.Emit(ev); err != nil {
			return err
		}
	}
	return nil
}

// recordingSink keeps what it was given: each event's kind and data.
type recordingSink struct {
	mu   sync.Mutex
	got  []string
	done chan struct{}
}

func (*recordingSink) Attach(*consume.Pending) {}
func (s *recordingSink) Deliver(ev consume.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, [...]string{"header", "chunk ", "body ", "error", "done"}[ev.Kind]+string(ev.Data))
	if ev.Kind == consume.EventDone || ev.Kind == consume.EventError {
		close(s.done)
	}
	return nil
}

func (s *recordingSink) events() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

func startStreamQueue(t *testing.T, inline bool, up streamUpstreams) *consume.Queue {
	t.Helper()
	e := embedded.New(embedded.Config{Logger: quiet, InlineDelivery: inline, Workers: 4})
	q := consume.NewQueue(e, "")
	c := consume.NewConsumer(consume.ConsumerConfig{Queue: q, Pacer: unpaced{}, Upstreams: up, Logger: quiet})
	if err := e.Start(c.Handle); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close(context.Background())
		c.Close(context.Background())
	})
	return q
}

var streamed = []string{"header", `chunk {"a":1}`, `chunk {"a":2}`, "done"}

// submitStream submits one streamed request to q with a recording sink,
// finished when the test ends.
func submitStream(t *testing.T, q *consume.Queue) *recordingSink {
	t.Helper()
	s := &recordingSink{done: make(chan struct{})}
	p, err := q.SubmitTo(context.Background(), &consume.Request{ID: "r1", Key: policy.Key{Tenant: "a", Model: "m"}}, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Finish(p) })
	return s
}

// A request with a sink delivered inline (its LiteTopic was idle) makes
// its upstream call on the submitting goroutine: when SubmitTo returns,
// the whole response is in the sink, in order.
func TestSubmitToRunsAnInlineDeliveryOnTheSubmitter(t *testing.T) {
	s := submitStream(t, startStreamQueue(t, true, streamUpstreams{}))
	if got := s.events(); !slices.Equal(got, streamed) {
		t.Fatalf("sink holds %q when SubmitTo returns, want the whole response %q", got, streamed)
	}
}

// Delivered by a worker, the call runs on the worker's invocation
// goroutine (or, if the worker took it before SubmitTo returned, on the
// submitter's): either way the whole response reaches the sink, in order.
func TestSubmitToDeliversAWorkersCallToTheSink(t *testing.T) {
	s := submitStream(t, startStreamQueue(t, false, streamUpstreams{}))
	<-s.done
	if got := s.events(); !slices.Equal(got, streamed) {
		t.Fatalf("sink got %q, want %q", got, streamed)
	}
}

// brokerLike delivers each message on a goroutine of its own while its
// Publish still waits (a broker that delivers before its answer to the
// send arrives), and lets Publish return only when release is closed.
type brokerLike struct {
	h       consume.Handler
	release chan struct{}
	wg      sync.WaitGroup
}

func (b *brokerLike) Start(h consume.Handler) error { b.h = h; return nil }
func (b *brokerLike) Publish(ctx context.Context, m *consume.Message) error {
	d := &consume.Delivery{Message: *m, Attempt: 1}
	b.wg.Go(func() { b.h(ctx, d) })
	<-b.release
	return nil
}
func (b *brokerLike) Close(context.Context) (consume.Leftover, error) {
	b.wg.Wait()
	return consume.Leftover{}, nil
}
func (*brokerLike) MinSuspend() time.Duration   { return 0 }
func (*brokerLike) Ready(context.Context) error { return nil }

// A call dispatched by a backend's own goroutine while the submitter
// still waits in Publish is not handed to the submitter: it runs at
// once, and the whole response reaches the sink before Publish returns.
func TestSubmitToDoesNotWaitForAPublishToRunACallDeliveredElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &brokerLike{release: make(chan struct{})}
		q := consume.NewQueue(b, "")
		c := consume.NewConsumer(consume.ConsumerConfig{Queue: q, Pacer: unpaced{}, Upstreams: streamUpstreams{}, Logger: quiet})
		if err := b.Start(c.Handle); err != nil {
			t.Fatal(err)
		}
		s := &recordingSink{done: make(chan struct{})}
		submitted := make(chan *consume.Pending, 1)
		go func() {
			p, err := q.SubmitTo(context.Background(), &consume.Request{ID: "r1", Key: policy.Key{Tenant: "a", Model: "m"}}, s)
			if err != nil {
				t.Error(err)
			}
			submitted <- p
		}()
		synctest.Wait() // the submitter blocks in Publish
		got := s.events()
		close(b.release)
		q.Finish(<-submitted)
		b.Close(context.Background())
		c.Close(context.Background())
		if !slices.Equal(got, streamed) {
			t.Fatalf("sink holds %q while Publish waits, want the whole response %q", got, streamed)
		}
	})
}

// SubmitInto serves a request from a Pending the caller keeps, as
// SubmitTo does from one of its own; a Pending submitted once cannot be
// submitted again.
func TestSubmitIntoTheCallersPending(t *testing.T) {
	q := startStreamQueue(t, true, streamUpstreams{})
	var p consume.Pending
	s := &recordingSink{done: make(chan struct{})}
	req := &consume.Request{ID: "r1", Key: policy.Key{Tenant: "a", Model: "m"}}
	if err := q.SubmitInto(context.Background(), &p, req, s); err != nil {
		t.Fatal(err)
	}
	defer q.Finish(&p)
	if got := s.events(); !slices.Equal(got, streamed) || p.Req != req || !p.Dispatched() {
		t.Fatalf("sink holds %q, Pending of %v dispatched %v; want %q, of r1, dispatched", got, p.Req, p.Dispatched(), streamed)
	}
	defer func() {
		if v := recover(); v != "consume: SubmitInto with a Pending already submitted" {
			t.Fatalf("a second SubmitInto recovered %v, want the panic", v)
		}
	}()
	q.SubmitInto(context.Background(), &p, &consume.Request{ID: "r2", Key: req.Key}, s)
}
