package gateway

import (
	"context"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume"
)

// coldStreams is how many streams BenchmarkDeliverChunkCold takes turns
// over. Their exchanges and writers (about 6 MiB) are beyond a core's L2
// cache (2 MiB here), so what a chunk touches has left it by its
// stream's next chunk, as on a gateway where thousands of streams take
// turns; the sink's lock, an atomic instruction, keeps the processor
// from starting on the next chunk's misses before this one's are over.
const coldStreams = 4096

// deadlineDiscard is a client's connection that drops what it gets and
// takes write deadlines, as a net/http response does.
type deadlineDiscard struct {
	h        http.Header
	deadline time.Time
	n        int
}

func (w *deadlineDiscard) Header() http.Header { return w.h }
func (w *deadlineDiscard) WriteHeader(int)     {}
func (w *deadlineDiscard) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}
func (w *deadlineDiscard) FlushError() error { return nil }
func (w *deadlineDiscard) SetWriteDeadline(t time.Time) error {
	w.deadline = t
	return nil
}

// BenchmarkDeliverChunkCold is one chat token chunk (op) delivered to the
// next of coldStreams open streams in turn: the sink, its exchange's
// tally, the stall guard and the SSE writer, to a client that drops the
// bytes. It measures what the gateway's side of a chunk costs when its
// memory is cold, which is the normal case on a busy gateway and what
// BenchmarkRelayChunk (one stream, always warm) cannot see.
func BenchmarkDeliverChunkCold(b *testing.B) {
	s := &Server{cfg: Config{WriteStallTimeout: time.Minute}}
	rt := routeTable[0] // chat completions
	sinks := make([]*responseSink, coldStreams)
	for i := range sinks {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour) // a request's own, as in the handler
		b.Cleanup(cancel)
		x := &exchange{rt: rt, req: &apiRequest{Stream: true}, ctx: ctx,
			tally: consume.Tally{Shape: rt.shape}, firstByte: time.Now()} // timed already: no observer here
		sinks[i] = s.openSink(&deadlineDiscard{h: http.Header{}}, x)
		if err := sinks[i].Deliver(consume.Event{Kind: consume.EventHeader, Header: http.Header{"Content-Type": {"text/event-stream"}}}); err != nil {
			b.Fatal(err)
		}
	}
	data := []byte(`{"id":"chatcmpl-r1","object":"chat.completion.chunk","created":946684800,"model":"sim-model","choices":[{"index":0,"delta":{"content":"tok0 "},"logprobs":null,"finish_reason":null}]}`)
	reading, _ := (&consume.Tally{Shape: rt.shape}).Scan("", data)
	frame := append(append([]byte("data: "), data...), "\n\n"...)
	// As the relay sends it: the frame it came in, flushed alone.
	ev := consume.Event{Kind: consume.EventChunk, Data: data, Frame: frame, Reading: reading}
	// In an order no prefetcher can follow, as the upstreams' tokens come.
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(sinks), func(i, j int) { sinks[i], sinks[j] = sinks[j], sinks[i] })
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := range b.N {
		if err := sinks[i%coldStreams].Deliver(ev); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if b.N >= coldStreams && sinks[0].x.tally.Streamed == 0 {
		b.Fatal("no chunk was counted")
	}
}
