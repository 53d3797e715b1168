package consume

import (
	"math/rand/v2"
	"testing"
)

// coldCalls is how many running calls BenchmarkEmitChunkCold takes turns
// over: their Pendings (about 7 MiB) are beyond a core's L2 cache, so
// what a chunk touches has left it by its stream's next one, as on a
// gateway where thousands of streams take turns.
const coldCalls = 16384

// countingSink takes every event and counts it: the client's side,
// which BenchmarkDeliverChunkCold measures in the gateway. next is the
// call whose chunk comes after this one's.
type countingSink struct{ n, next int }

func (k *countingSink) Attach(*Pending)     {}
func (k *countingSink) Deliver(Event) error { k.n++; return nil }

// BenchmarkEmitChunkCold is one token chunk (op) of the next of
// coldCalls running calls in turn, from the relay's emit to the sink:
// the meter's count and the Pending's hand-off, cold in the cache.
func BenchmarkEmitChunkCold(b *testing.B) {
	calls := make([]*invocation, coldCalls)
	sinks := make([]*countingSink, coldCalls)
	for i := range calls {
		sinks[i] = new(countingSink)
		p := &Pending{Req: &Request{Shape: ShapeOpenAI}, sink: sinks[i]}
		p.inv = invocation{p: p, m: meter{w: DefaultCompletionWeight, expected: 1 << 30, tally: Tally{Shape: ShapeOpenAI}}}
		calls[i] = &p.inv
	}
	data := []byte(`{"id":"chatcmpl-r1","object":"chat.completion.chunk","created":946684800,"model":"sim-model","choices":[{"index":0,"delta":{"content":"tok0 "},"logprobs":null,"finish_reason":null}]}`)
	reading, _ := (&Tally{Shape: ShapeOpenAI}).Scan("", data)
	ev := Event{Kind: EventChunk, Data: data, Reading: reading}
	// In an order no prefetcher can follow, as the upstreams' tokens come;
	// each call names the next, so that the processor cannot start on the
	// next chunk's misses before this chunk is through (in a gateway, a
	// read and a write of the kernel's lie between two chunks).
	order := rand.New(rand.NewPCG(1, 2)).Perm(coldCalls)
	for i, c := range order {
		sinks[c].next = order[(i+1)%coldCalls]
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i, c := 0, order[0]; i < b.N; i, c = i+1, sinks[c].next {
		if err := calls[c].Emit(ev); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if c := calls[0]; b.N >= coldCalls && (c.m.streamed == 0 || c.p.sink.(*countingSink).n == 0) {
		b.Fatal("no chunk was counted")
	}
}
