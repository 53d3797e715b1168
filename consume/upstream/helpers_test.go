package upstream

import (
	"bytes"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
	"github.com/pacegate/pacegate/policy"
)

// sim is a simulated vLLM on a loopback socket.
type sim struct {
	*vllmsim.Server
	url string
}

func newSim(t *testing.T, models ...string) *sim {
	t.Helper()
	s := vllmsim.New(vllmsim.Config{Models: models, TTFT: -1, ITL: -1})
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return &sim{Server: s, url: ts.URL}
}

func newPool(t *testing.T, ups ...UpstreamConfig) *Pool {
	t.Helper()
	p, err := NewPool(Config{Upstreams: ups})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// recordEvents collects what Do emits.
type recordEvents struct {
	mu  sync.Mutex
	evs []consume.Event
}

func (r *recordEvents) Emit(ev consume.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev.Data, ev.Frame = bytes.Clone(ev.Data), bytes.Clone(ev.Frame) // valid only during the call
	r.evs = append(r.evs, ev)
	return nil
}

func chatReq(id string, stream bool, extra string) *consume.Request {
	body := `{"model":"m","messages":[{"role":"user","content":"hi there"}],"max_tokens":2`
	if stream {
		body += `,"stream":true`
	}
	return &consume.Request{ID: id, Key: policy.Key{Tenant: "t", Model: "m"}, Path: "/v1/chat/completions", Body: []byte(body + extra + "}"), Stream: stream}
}

func mustAcquire(t *testing.T, p *Pool, model string) consume.Slot {
	t.Helper()
	s, ok := p.TryAcquire(model)
	if !ok {
		t.Fatalf("TryAcquire(%q) = false", model)
	}
	return s
}

func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second): // hang guard: the events come within milliseconds
		t.Fatalf("timed out waiting for %s", what)
	}
	panic("unreachable")
}
