package upstream

import (
	"errors"
	"slices"
	"testing"

	"github.com/pacegate/pacegate/consume"
)

func TestTryAcquireLeastOutstanding(t *testing.T) {
	p := newPool(t,
		UpstreamConfig{URL: "http://127.0.0.1:1", Models: []string{"m"}},
		UpstreamConfig{URL: "http://127.0.0.1:2/", Models: []string{"m"}},
		UpstreamConfig{URL: "http://127.0.0.1:3", Models: []string{"other"}})
	a := mustAcquire(t, p, "m")
	b := mustAcquire(t, p, "m")
	c := mustAcquire(t, p, "m")
	if got := inFlight(p); !slices.Equal(got, []int{2, 1, 0}) && !slices.Equal(got, []int{1, 2, 0}) {
		t.Fatalf("in flight %v after 3 acquires", got)
	}
	// The next goes to the idler upstream, whichever that is.
	d := mustAcquire(t, p, "m")
	if got := inFlight(p); !slices.Equal(got, []int{2, 2, 0}) {
		t.Fatalf("in flight %v after a fourth acquire, want [2 2 0]", got)
	}
	a.Release()
	b.Release()
	c.Release()
	c.Release() // idempotent
	d.Release()
	if got := inFlight(p); !slices.Equal(got, []int{0, 0, 0}) {
		t.Fatalf("in flight %v after releasing all (one twice), want [0 0 0]", got)
	}
	one := mustAcquire(t, p, "m")
	two := mustAcquire(t, p, "m")
	if got := inFlight(p); !slices.Equal(got, []int{1, 1, 0}) {
		t.Fatalf("in flight %v, want [1 1 0]", got)
	}
	one.Release()
	three := mustAcquire(t, p, "m") // must take the freed upstream
	if got := inFlight(p); !slices.Equal(got, []int{1, 1, 0}) {
		t.Fatalf("in flight %v, want [1 1 0]", got)
	}
	two.Release()
	three.Release()
	if _, ok := p.TryAcquire("nope"); ok {
		t.Fatal("acquired an unserved model")
	}
}

func inFlight(p *Pool) []int {
	var out []int
	for _, s := range p.Stats() {
		out = append(out, s.InFlight)
	}
	return out
}

func TestConcurrencyLimit(t *testing.T) {
	p := newPool(t, UpstreamConfig{URL: "http://127.0.0.1:1", Models: []string{"m"}, MaxConcurrency: 2})
	a := mustAcquire(t, p, "m")
	mustAcquire(t, p, "m")
	if _, ok := p.TryAcquire("m"); ok {
		t.Fatal("third acquire beyond MaxConcurrency 2 succeeded")
	}
	a.Release()
	mustAcquire(t, p, "m")
	if st := p.Stats()[0]; st.InFlight != 2 || st.MaxConcurrency != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDefaultsAndValidation(t *testing.T) {
	p := newPool(t, UpstreamConfig{URL: "http://h:8000/", Models: []string{"b", "a", "b"}})
	if st := p.Stats()[0]; st.URL != "http://h:8000" || st.MaxConcurrency != 64 || !st.Healthy {
		t.Fatalf("stats %+v", st)
	}
	if got := p.Models(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Models = %v", got)
	}
	for _, tc := range []struct {
		ups  []UpstreamConfig
		want string
	}{
		{nil, "upstream: no upstreams configured"},
		{[]UpstreamConfig{{URL: "h:8000"}}, `upstream: bad URL "h:8000": want http(s)://host[:port][/path]`},
		{[]UpstreamConfig{{URL: "ftp://h"}}, `upstream: bad URL "ftp://h": want http(s)://host[:port][/path]`},
		{[]UpstreamConfig{{URL: "http://h?x=1"}}, `upstream: bad URL "http://h?x=1": want http(s)://host[:port][/path]`},
		{[]UpstreamConfig{{URL: "http://h"}, {URL: "http://h/"}}, "upstream: http://h listed twice"},
		{[]UpstreamConfig{{URL: "http://h", MaxConcurrency: -1}}, "upstream: http://h: negative MaxConcurrency"},
	} {
		if _, err := NewPool(Config{Upstreams: tc.ups}); err == nil || err.Error() != tc.want {
			t.Errorf("NewPool(%v) = %v, want %s", tc.ups, err, tc.want)
		}
	}
}

func TestDiscoveryMerge(t *testing.T) {
	a := newSim(t, "x", "y")
	p := newPool(t, UpstreamConfig{URL: a.url}, UpstreamConfig{URL: "http://127.0.0.1:1", Models: []string{"z", "y"}})
	if p.Serves("x") {
		t.Fatal("serves x before discovery")
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := p.Models(); !slices.Equal(got, []string{"x", "y", "z"}) {
		t.Fatalf("Models = %v", got)
	}
	if !p.Serves("x") || !p.Serves("z") || p.Serves("w") {
		t.Fatal("Serves wrong")
	}
	// The static upstream is unreachable: the initial probe marked it down.
	st := p.Stats()
	if !st[0].Healthy || st[1].Healthy || !p.Ready() {
		t.Fatalf("stats %+v", st)
	}
	if err := p.Start(t.Context()); err != ErrClosed {
		t.Fatalf("second Start: %v", err)
	}
}

// TestReservedCountsSlotsNotYetUsed: a slot from TryAcquire counts as
// reserved on its upstream from then until a call uses it or it is
// released unused, once either way; the learner counts reserved slots as
// running (see learner).
func TestReservedCountsSlotsNotYetUsed(t *testing.T) {
	s := newSim(t, "m")
	p := newPool(t, UpstreamConfig{URL: s.url, Models: []string{"m"}})
	want := func(when string, inFlight, reserved int) {
		t.Helper()
		if st := p.Stats()[0]; st.InFlight != inFlight || st.Reserved != reserved {
			t.Fatalf("%s: in flight %d, reserved %d; want %d, %d", when, st.InFlight, st.Reserved, inFlight, reserved)
		}
	}
	a := mustAcquire(t, p, "m")
	b := mustAcquire(t, p, "m")
	want("two acquired", 2, 2)
	var during []int
	err := a.Do(t.Context(), chatReq("r1", true, ""), consume.EmitFunc(func(consume.Event) error {
		during = append(during, p.Stats()[0].Reserved)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(during) == 0 || slices.ContainsFunc(during, func(n int) bool { return n != 1 }) {
		t.Fatalf("reserved while a's call ran: %v, want 1 at every event", during)
	}
	want("a's call over", 1, 1)
	b.Release()
	b.Release()
	want("b released unused, twice", 0, 0)
	if err := b.Do(t.Context(), chatReq("r2", true, ""), consume.EmitFunc(func(consume.Event) error { return nil })); !errors.Is(err, errSlotUsed) {
		t.Fatalf("Do on a released slot: %v, want errSlotUsed", err)
	}
	want("Do on a released slot", 0, 0)
}
