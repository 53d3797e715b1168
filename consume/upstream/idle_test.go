package upstream

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/consume"
)

// pipeUpstream answers every request with a 200 event stream whose bytes
// the test writes to w; cancelling the request closes the stream, as
// http.Transport does. It runs inside a synctest bubble.
type pipeUpstream struct {
	w        *io.PipeWriter
	canceled chan struct{} // closed when the request's ctx ends
}

func (u *pipeUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	u.w = pw
	u.canceled = make(chan struct{})
	go func() {
		<-r.Context().Done()
		pw.CloseWithError(r.Context().Err())
		close(u.canceled)
	}()
	h := http.Header{"Content-Type": {"text/event-stream"}}
	return &http.Response{StatusCode: 200, Header: h, Body: pr, Request: r}, nil
}

func (u *pipeUpstream) send(t *testing.T, frame string) {
	t.Helper()
	if _, err := io.WriteString(u.w, frame); err != nil {
		t.Fatal(err)
	}
}

func pipePool(t *testing.T, idle time.Duration) (*Pool, *pipeUpstream) {
	u := &pipeUpstream{}
	p, err := NewPool(Config{Transport: u, Upstreams: []UpstreamConfig{{URL: "http://vllm:8000", Models: []string{"m"}, IdleTimeout: idle}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, u
}

// A stream silent for IdleTimeout ends with ErrStreamStalled exactly then;
// the upstream call is aborted and the slot freed. Each event restarts
// the countdown.
func TestIdleTimeoutStallsStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, u := pipePool(t, 30*time.Second)
		var rec recordEvents
		errc := make(chan error, 1)
		t0 := time.Now()
		go func() { errc <- mustAcquire(t, p, "m").Do(t.Context(), chatReq("r1", true, ""), &rec) }()
		synctest.Wait()
		time.Sleep(20 * time.Second)
		u.send(t, "data: {\"a\":1}\n\n")
		time.Sleep(29 * time.Second)
		u.send(t, "data: {\"a\":2}\n\n")
		err := <-errc
		if d := time.Since(t0); d != 79*time.Second {
			t.Errorf("ended after %v, want 79s (the last event at 49s + 30s)", d)
		}
		want := "upstream: response broke off: stalled: http://vllm:8000: no event for 30s"
		if !errors.Is(err, ErrStreamStalled) || !errors.Is(err, ErrStreamBroken) || err.Error() != want {
			t.Fatalf("err %v, want %s", err, want)
		}
		<-u.canceled // the upstream call was aborted
		if got := strings.Join(kinds(rec.evs), " "); got != `H200 C:{"a":1} C:{"a":2}` {
			t.Errorf("events %s", got)
		}
		if s := p.Stats()[0]; s.InFlight != 0 || !s.Healthy {
			t.Errorf("stats %+v: want the slot free and the upstream still healthy", s)
		}
	})
}

// Time the client takes to read (emit blocking) never counts as upstream
// silence.
func TestIdleTimeoutIgnoresSlowClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, u := pipePool(t, 30*time.Second)
		slow := consume.EmitFunc(func(ev consume.Event) error {
			time.Sleep(time.Minute)
			return nil
		})
		errc := make(chan error, 1)
		go func() { errc <- mustAcquire(t, p, "m").Do(t.Context(), chatReq("r1", true, ""), slow) }()
		synctest.Wait()
		u.send(t, "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n")
		u.w.Close()
		if err := <-errc; err != nil {
			t.Fatalf("err %v", err)
		}
	})
}

// A broken stream is an error, never a clean end: no [DONE] before EOF,
// or a data event that is not JSON. The upstream is not marked down.
func TestMalformedStreams(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"no_done", "data: {\"a\":1}\n\n", "upstream: response broke off: malformed: http://vllm:8000: the stream ended without [DONE]"},
		{"truncated", "data: {\"a\":\n\ndata: [DONE]\n\n", "upstream: response broke off: malformed: http://vllm:8000: a data event is not JSON"},
		{"garbage", "\x00\xff junk\ndata: }{\n\ndata: [DONE]\n\n", "upstream: response broke off: malformed: http://vllm:8000: a data event is not JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, u := pipePool(t, 0)
				errc := make(chan error, 1)
				go func() {
					errc <- mustAcquire(t, p, "m").Do(t.Context(), chatReq("r1", true, ""), &recordEvents{})
				}()
				synctest.Wait()
				u.send(t, c.body)
				u.w.Close()
				err := <-errc
				if !errors.Is(err, ErrStreamMalformed) || err.Error() != c.want {
					t.Fatalf("err %v, want %s", err, c.want)
				}
				if s := p.Stats()[0]; s.InFlight != 0 || !s.Healthy {
					t.Errorf("stats %+v", s)
				}
			})
		})
	}
}

func TestNegativeIdleTimeout(t *testing.T) {
	_, err := NewPool(Config{Upstreams: []UpstreamConfig{{URL: "http://x:1", IdleTimeout: -time.Second}}})
	if err == nil || err.Error() != "upstream: http://x:1: negative IdleTimeout" {
		t.Fatalf("err %v", err)
	}
}

// A wait that begins while the timer is set for an earlier moment (the
// client took 45 s to read a chunk) still ends exactly IdleTimeout after
// it began.
func TestIdleTimeoutAfterSlowClientIsExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, u := pipePool(t, 30*time.Second)
		slowOnce := consume.EmitFunc(func(ev consume.Event) error {
			if ev.Kind == consume.EventChunk {
				time.Sleep(45 * time.Second)
			}
			return nil
		})
		errc := make(chan error, 1)
		t0 := time.Now()
		go func() { errc <- mustAcquire(t, p, "m").Do(t.Context(), chatReq("r1", true, ""), slowOnce) }()
		synctest.Wait()
		u.send(t, "data: {\"a\":1}\n\n") // read at 0 s; the wait after it begins at 45 s
		err := <-errc
		if d := time.Since(t0); d != 75*time.Second || !errors.Is(err, ErrStreamStalled) {
			t.Fatalf("ended after %v with %v, want 75s and a stall", d, err)
		}
	})
}
