package upstream

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/policy"
)

// named labels chunks with their event names.
func named(evs []consume.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Kind == consume.EventChunk {
			out = append(out, ev.Name+":"+string(ev.Data))
		}
	}
	return out
}

// countingUpstream answers every request with a chat body and counts them.
type countingUpstream struct {
	url string
	n   atomic.Int32
}

func newCounting(t *testing.T) *countingUpstream {
	t.Helper()
	c := &countingUpstream{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	}))
	t.Cleanup(ts.Close)
	c.url = ts.URL
	return c
}

// A named-event stream keeps its names, ends at its last event (no
// [DONE]), and whatever follows is not relayed.
func TestRelayNamedEvents(t *testing.T) {
	for _, tc := range []struct {
		shape consume.Shape
		body  string
		want  []string
	}{
		{consume.ShapeResponses,
			"event: response.created\ndata: {\"a\":1}\n\n: keep-alive\n\nevent: response.output_text.delta\ndata: {\"d\":\"x\"}\n\nevent: response.completed\ndata: {\"c\":1}\n\nevent: late\ndata: {}\n\n",
			[]string{`response.created:{"a":1}`, `response.output_text.delta:{"d":"x"}`, `response.completed:{"c":1}`}},
		{consume.ShapeAnthropic,
			"event: message_start\ndata: {\"m\":1}\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\nevent: message_stop\ndata: {}\n\n",
			[]string{`message_start:{"m":1}`, `ping:{"type":"ping"}`, `message_stop:{}`}},
	} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, tc.body)
		}))
		p := newPool(t, UpstreamConfig{URL: ts.URL, Models: []string{"m"}})
		req := chatReq("n1", true, "")
		req.Shape = tc.shape
		var rec recordEvents
		if err := mustAcquire(t, p, "m").Do(t.Context(), req, &rec); err != nil {
			t.Fatalf("shape %d: %v", tc.shape, err)
		}
		if got := named(rec.evs); strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("shape %d: events %q, want %q", tc.shape, got, tc.want)
		}
		if rec.evs[0].Upstream != ts.URL {
			t.Errorf("header event upstream %q, want %q", rec.evs[0].Upstream, ts.URL)
		}
		ts.Close()
	}
}

// A named stream that ends before its last event is broken, not done.
func TestRelayNamedEventsTruncated(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: response.created\ndata: {}\n\n")
	}))
	defer ts.Close()
	p := newPool(t, UpstreamConfig{URL: ts.URL, Models: []string{"m"}})
	req := chatReq("n2", true, "")
	req.Shape = consume.ShapeResponses
	var rec recordEvents
	err := mustAcquire(t, p, "m").Do(t.Context(), req, &rec)
	if !errors.Is(err, ErrStreamMalformed) || !strings.Contains(err.Error(), "before its last event") {
		t.Fatalf("err = %v, want ErrStreamMalformed before its last event", err)
	}
}

// Forward sends the method, path, content type and headers it is given,
// with no body for a GET, to the pinned upstream.
func TestForwardPinnedMethodAndHeaders(t *testing.T) {
	type seen struct {
		method, path, ct, version, body string
	}
	got := make(chan seen, 1)
	pinned := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.RequestURI(), r.Header.Get("Content-Type"), r.Header.Get("Anthropic-Version"), string(b)}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"resp_1"}`)
	}))
	defer pinned.Close()
	other := newCounting(t)
	p := newPool(t, UpstreamConfig{URL: other.url, Models: []string{"m"}, MaxConcurrency: 1},
		UpstreamConfig{URL: pinned.URL, Models: []string{"m"}, MaxConcurrency: 1})
	req := &consume.Request{ID: "f1", Key: policy.Key{Tenant: "t", Model: "m"}, Method: http.MethodGet,
		Path: "/v1/responses/resp_1?x=1", Upstream: pinned.URL, Header: http.Header{"Anthropic-Version": {"2023-06-01"}}}
	var rec recordEvents
	if err := p.Forward(t.Context(), req, &rec); err != nil {
		t.Fatal(err)
	}
	want := seen{"GET", "/v1/responses/resp_1?x=1", "", "2023-06-01", ""}
	if s := <-got; s != want {
		t.Errorf("upstream saw %+v, want %+v", s, want)
	}
	if k := kinds(rec.evs); strings.Join(k, "|") != `H200|B:{"id":"resp_1"}` {
		t.Errorf("events %v", k)
	}
	for _, st := range p.Stats() { // direct requests take no slot
		if st.InFlight != 0 {
			t.Errorf("%s in flight %d after Forward", st.URL, st.InFlight)
		}
	}
}

// A pinned request never goes anywhere else: an unknown upstream is
// ErrPinnedGone, a down one ErrUpstreamUnavailable.
func TestForwardPinnedGoneOrDown(t *testing.T) {
	s := newCounting(t)
	down := closedURL(t)
	p := newPool(t, UpstreamConfig{URL: s.url, Models: []string{"m"}}, UpstreamConfig{URL: down, Models: []string{"m"}})
	req := chatReq("g1", false, "")
	req.Upstream = "http://gone.invalid"
	if err := p.Forward(t.Context(), req, &recordEvents{}); !errors.Is(err, ErrPinnedGone) {
		t.Errorf("unknown pin: %v, want ErrPinnedGone", err)
	}
	req.Upstream = down
	if err := p.Forward(t.Context(), req, &recordEvents{}); !errors.Is(err, ErrUpstreamUnavailable) {
		t.Errorf("down pin: %v, want ErrUpstreamUnavailable", err)
	}
	if known, ok := p.Pinned(down); !known || ok {
		t.Errorf("Pinned(down) = %v, %v; want true, false (marked down, no retry elsewhere)", known, ok)
	}
	if n := s.n.Load(); n != 0 {
		t.Errorf("the other upstream got %d requests; a pinned request must not move", n)
	}
}

// A queued request pinned elsewhere moves its slot to the pinned
// upstream, even when that one is at its concurrency limit.
func TestDoMovesToPinnedUpstream(t *testing.T) {
	a, b := newCounting(t), newCounting(t)
	p := newPool(t, UpstreamConfig{URL: a.url, Models: []string{"m"}, MaxConcurrency: 1},
		UpstreamConfig{URL: b.url, Models: []string{"m"}, MaxConcurrency: 1})
	s1 := mustAcquire(t, p, "m")
	s2 := mustAcquire(t, p, "m") // both upstreams full now
	target := s1.(*slot).u.url
	req := chatReq("p1", false, "")
	req.Upstream = target
	if err := s2.Do(t.Context(), req, &recordEvents{}); err != nil {
		t.Fatal(err)
	}
	s1.Release()
	for _, up := range []*countingUpstream{a, b} {
		want := int32(0)
		if up.url == target {
			want = 1
		}
		if n := up.n.Load(); n != want {
			t.Errorf("%s got %d requests, want %d", up.url, n, want)
		}
	}
	for _, st := range p.Stats() {
		if st.InFlight != 0 {
			t.Errorf("%s in flight %d after both released", st.URL, st.InFlight)
		}
	}
}
