package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume"
)

// Once a request's context has ended, its sink refuses what the aborted
// call says next (its error, its end), leaving the response's end to the
// handler; a chunk already on its way still goes out before that end.
func TestSinkAfterItsContextEnded(t *testing.T) {
	rt := routeTable[0] // chat completions
	ctx, cancel := context.WithCancel(context.Background())
	x := &exchange{rt: rt, req: &apiRequest{Stream: true}, ctx: ctx,
		tally: consume.Tally{Shape: rt.shape}, firstByte: time.Now()} // timed already: no observer here
	w := httptest.NewRecorder()
	k := (&Server{}).openSink(w, x)
	if err := k.Deliver(consume.Event{Kind: consume.EventHeader, Header: http.Header{"Content-Type": {"text/event-stream"}}}); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := k.Deliver(framed(`{"a":1}`, false, false)); err != nil {
		t.Fatalf("the chunk: %v, want it written", err)
	}
	for _, ev := range []consume.Event{{Kind: consume.EventError, Err: context.Canceled}, {Kind: consume.EventDone}} {
		if err := k.Deliver(ev); !errors.Is(err, context.Canceled) {
			t.Errorf("event %v: %v, want context.Canceled", ev.Kind, err)
		}
	}
	if want := "data: {\"a\":1}\n\n"; w.Body.String() != want || k.over {
		t.Fatalf("body %q, over %v; want %q and the end left to the handler", w.Body, k.over, want)
	}
}
