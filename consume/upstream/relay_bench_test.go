package upstream

import (
	"context"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/sse"
)

// benchChunk is one vLLM chat token chunk, as the relay sees it.
const benchChunk = `data: {"id":"chatcmpl-r1","object":"chat.completion.chunk","created":946684800,"model":"sim-model","choices":[{"index":0,"delta":{"content":"tok0 "},"logprobs":null,"finish_reason":null}]}` + "\n\n"

// chunkStream reads as n token chunks and the usage chunk, then [DONE],
// without allocating: it stands in for an upstream's response body.
type chunkStream struct {
	n    int
	cur  string
	tail []string
}

func newChunkStream(n int) *chunkStream {
	return &chunkStream{n: n, tail: []string{
		`data: {"id":"chatcmpl-r1","object":"chat.completion.chunk","created":946684800,"model":"sim-model","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":` + "1" + `,"total_tokens":4}}` + "\n\n",
		"data: [DONE]\n\n"}}
}

func (s *chunkStream) Read(p []byte) (int, error) {
	if s.cur == "" {
		switch {
		case s.n > 0:
			s.n--
			s.cur = benchChunk
		case len(s.tail) > 0:
			s.cur, s.tail = s.tail[0], s.tail[1:]
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, s.cur)
	s.cur = s.cur[n:]
	return n, nil
}

func (s *chunkStream) Close() error { return nil }

// streamTransport answers every request with a fresh chunkStream of n
// chunks.
type streamTransport struct{ n int }

func (t streamTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	h := http.Header{"Content-Type": {"text/event-stream"}}
	return &http.Response{StatusCode: 200, Header: h, Body: newChunkStream(t.n), Request: r}, nil
}

// discardWriter is a flushing ResponseWriter that drops what it gets.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Flush()                      {}

// relayStreamOnce sends one streamed request of n chunks through the
// whole relay path: the pool's relay (decode, validate, read usage once),
// a Pending's hand-off to the handler goroutine, and the SSE writer, as
// the gateway's handler writes it.
func relayStreamOnce(tb testing.TB, p *Pool, n int) {
	req := chatReq("bench", true, "")
	pend, wait := consume.Direct(context.Background(), req, p.Forward)
	defer wait()
	sw := sse.NewWriter(&discardWriter{h: http.Header{}})
	var tally consume.Tally
	for ev := range pend.Events() {
		switch ev.Kind {
		case consume.EventChunk:
			tally.Observe(&ev)
			if err := sw.Data(ev.Data); err != nil {
				tb.Fatal(err)
			}
		case consume.EventError:
			tb.Fatal(ev.Err)
		case consume.EventDone:
			if tally.Streamed != int64(n) || !tally.Final {
				tb.Fatalf("tally %+v after %d chunks", tally, n)
			}
			return
		}
	}
}

// relayInlineOnce is relayStreamOnce as a queued stream runs it: the
// relay calls the writer of the response (the gateway's sink) on its own
// goroutine, with no hand-off per chunk.
func relayInlineOnce(tb testing.TB, p *Pool, n int) {
	sw := sse.NewSerialWriter(&discardWriter{h: http.Header{}})
	var tally consume.Tally
	err := p.Forward(context.Background(), chatReq("bench", true, ""), consume.EmitFunc(func(ev consume.Event) error {
		if ev.Kind != consume.EventChunk {
			return nil
		}
		tally.Observe(&ev)
		if ev.Frame != nil { // as the gateway writes it: the frame it came in
			return sw.Frame(ev.Frame)
		}
		return sw.Data(ev.Data)
	}))
	if err != nil || tally.Streamed != int64(n) || !tally.Final {
		tb.Fatalf("err %v, tally %+v after %d chunks", err, tally, n)
	}
}

func relayPool(tb testing.TB, n int) *Pool {
	p, err := NewPool(Config{Transport: streamTransport{n: n}, Upstreams: []UpstreamConfig{{URL: "http://vllm:8000", Models: []string{"m"}, IdleTimeout: time.Minute}}})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// BenchmarkRelayChunk is the cost of one relayed chunk (op = chunk) in a
// stream of b.N chunks through pacegate's relay path. Compare with
// BenchmarkBareProxyChunk: allocs/op must be 0 in both.
func BenchmarkRelayChunk(b *testing.B) { benchRelay(b, relayStreamOnce) }

// benchRelay times one stream of b.N chunks relayed by once.
func benchRelay(b *testing.B, once func(testing.TB, *Pool, int)) {
	p := relayPool(b, b.N)
	defer p.Close()
	b.ReportAllocs()
	b.SetBytes(int64(len(benchChunk)))
	once(b, p, b.N)
}

// BenchmarkRelayChunkInline is BenchmarkRelayChunk on a queued stream's
// path, where the relay writes each chunk itself (see consume.Sink).
func BenchmarkRelayChunkInline(b *testing.B) { benchRelay(b, relayInlineOnce) }

// BenchmarkBareProxyChunk is one chunk (op = chunk) of a stream of b.N
// chunks through httputil.ReverseProxy, the bare proxy the overhead
// scenario compares with.
func BenchmarkBareProxyChunk(b *testing.B) {
	target, _ := url.Parse("http://vllm:8000")
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = streamTransport{n: b.N}
	rp.FlushInterval = -1
	req, _ := http.NewRequest(http.MethodPost, "http://gw/v1/chat/completions", nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchChunk)))
	rp.ServeHTTP(&discardWriter{h: http.Header{}}, req)
}

// BenchmarkReadWhole reads a 1,000-token answer's body (6.9 kB) whose
// length the upstream said, as relayBody does; io.ReadAll is the way it
// was read before (allocs/op: every growth).
func BenchmarkReadWhole(b *testing.B) {
	body := strings.Repeat("tok12 ", 1150)
	b.Run("readWhole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if data, _ := readWhole(strings.NewReader(body), int64(len(body)), 1<<20); len(data) != len(body) {
				b.Fatal(len(data))
			}
		}
	})
	b.Run("io.ReadAll", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if data, _ := io.ReadAll(io.LimitReader(strings.NewReader(body), 1<<20+1)); len(data) != len(body) {
				b.Fatal(len(data))
			}
		}
	})
}
