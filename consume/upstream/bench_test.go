package upstream

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

func newSimB(b *testing.B) string {
	ts := httptest.NewServer(vllmsim.New(vllmsim.Config{Models: []string{"m"}, TTFT: -1, ITL: -1}))
	b.Cleanup(ts.Close)
	return ts.URL
}

func BenchmarkTryAcquireRelease(b *testing.B) {
	ups := make([]UpstreamConfig, 8)
	for i := range ups {
		ups[i] = UpstreamConfig{URL: "http://127.0.0.1:" + strconv.Itoa(9000+i), Models: []string{"m"}}
	}
	p, err := NewPool(Config{Upstreams: ups})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if s, ok := p.TryAcquire("m"); ok {
				s.Release()
			}
		}
	})
}

// BenchmarkDoStream is one streamed request of 16 tokens through the
// pool to a zero-latency simulator over loopback.
func BenchmarkDoStream(b *testing.B) {
	s := newSimB(b)
	p, err := NewPool(Config{Upstreams: []UpstreamConfig{{URL: s, Models: []string{"m"}}}})
	if err != nil {
		b.Fatal(err)
	}
	req := chatReq("bench", true, "")
	req.Body = []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":16,"stream":true}`)
	b.ReportAllocs()
	for b.Loop() {
		slot, ok := p.TryAcquire("m")
		if !ok {
			b.Fatal("no slot")
		}
		if err := slot.Do(b.Context(), req, &recordEvents{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidChunk is the check relayStream adds per data event: a
// vLLM token chunk must be JSON.
func BenchmarkValidChunk(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-r1","object":"chat.completion.chunk","created":946684800,"model":"sim-model","choices":[{"index":0,"delta":{"content":"tok0 "},"logprobs":null,"finish_reason":null}]}`)
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		if !json.Valid(chunk) {
			b.Fatal("not JSON")
		}
	}
}
