package vllmsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacegate/pacegate/sse"
)

// streamRoutes are the streamed routes other than chat, each with a
// request for 3 tokens and the number of frames before the first token
// and after the last.
var streamRoutes = []struct {
	name, path, body string
	hdr              map[string]string
	head, tail       int
	events           []string // the event names in order, tokens collapsed to one
}{
	{"responses", "/v1/responses", `{"input":"a b","max_output_tokens":3,"stream":true}`, reqID, 4, 4,
		[]string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
			"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}},
	{"messages", "/v1/messages", `{"model":"sim-model","messages":[{"role":"user","content":"a b"}],"max_tokens":3,"stream":true}`, reqID, 3, 3,
		[]string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}},
	{"audio", "/v1/audio/transcriptions", multipartBody(10, "stream", "true", "max_completion_tokens", "3"), multipartHdr, 0, 1,
		[]string{""}},
}

// Headers at once; the head frames and the first token at TTFT; one
// token per ITL; the tail with the last token.
func TestRouteStreamTiming(t *testing.T) {
	for _, rt := range streamRoutes {
		t.Run(rt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{TTFT: 200 * time.Millisecond, ITL: 20 * time.Millisecond})
				t0 := time.Now()
				rec := serve(t.Context(), s, "POST", rt.path, rt.body, rt.hdr)
				var want []time.Duration
				for range rt.head {
					want = append(want, 200*time.Millisecond)
				}
				for i := range 3 {
					want = append(want, 200*time.Millisecond+time.Duration(i)*20*time.Millisecond)
				}
				for range rt.tail {
					want = append(want, 240*time.Millisecond)
				}
				var got []time.Duration
				for _, w := range rec.writes {
					got = append(got, w.at.Sub(t0))
				}
				if !slices.Equal(got, want) {
					t.Errorf("writes at %v, want %v", got, want)
				}
				if st := s.Stats(); st.Completed != 1 || st.Requests != 1 || st.Running != 0 {
					t.Errorf("stats %+v", st)
				}
			})
		})
	}
}

// Every named event decodes with the repository's SSE decoder, carries
// its name as "type", and Responses numbers its events 0, 1, ...
func TestRouteStreamDecodes(t *testing.T) {
	for _, rt := range streamRoutes {
		t.Run(rt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{})
				rec := serve(t.Context(), s, "POST", rt.path, rt.body, rt.hdr)
				d := sse.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
				var names []string
				for seq := 0; ; seq++ {
					ev, err := d.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if n := len(names); n == 0 || names[n-1] != ev.Event {
						names = append(names, ev.Event)
					}
					if ev.Event == "" {
						continue
					}
					var data struct {
						Type string `json:"type"`
						Seq  *int   `json:"sequence_number"`
					}
					if err := json.Unmarshal(ev.Data, &data); err != nil || data.Type != ev.Event {
						t.Errorf("event %s: data %s (%v)", ev.Event, ev.Data, err)
					}
					if rt.name == "responses" && (data.Seq == nil || *data.Seq != seq) {
						t.Errorf("event %s: sequence_number %v, want %d", ev.Event, data.Seq, seq)
					}
				}
				if !slices.Equal(names, rt.events) {
					t.Errorf("events %q, want %q", names, rt.events)
				}
			})
		})
	}
}

// The new routes share the running slots: with one slot, two embeddings
// and a Responses request run one after another.
func TestRouteSlotsShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{MaxNumSeqs: 1, TTFT: 100 * time.Millisecond, ITL: 10 * time.Millisecond})
		t0 := time.Now()
		var mu sync.Mutex
		var done []string
		var wg sync.WaitGroup
		for i, req := range []struct{ path, body string }{
			{"/v1/embeddings", `{"input":"x"}`},
			{"/v1/responses", `{"input":"x","max_output_tokens":2}`},
			{"/v1/embeddings", `{"input":"y"}`},
		} {
			wg.Go(func() {
				serve(context.Background(), s, "POST", req.path, req.body, nil)
				mu.Lock()
				done = append(done, fmt.Sprintf("%s@%v", req.path, time.Since(t0)))
				mu.Unlock()
			})
			synctest.Wait() // queue them in this order
			if i == 0 {
				if st := s.Stats(); st.Running != 1 {
					t.Errorf("stats %+v", st)
				}
			}
		}
		wg.Wait()
		want := []string{"/v1/embeddings@100ms", "/v1/responses@210ms", "/v1/embeddings@310ms"}
		if !slices.Equal(done, want) {
			t.Errorf("finished %v, want %v", done, want)
		}
	})
}

// Config.Faults rules (what a test behind the gateway uses) match a
// marker in the body of the new routes and act in each route's terms.
func TestRouteFaultRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{TTFT: -1, ITL: -1, Faults: []FaultRule{
			{Match: "FAULT-NODONE", Fault: Fault{NoDone: true}},
			{Match: "FAULT-503", Fault: Fault{Status: 503}},
		}})
		for _, c := range []struct {
			path, body string
			code       int
			want       string // the last event's name, or the body
		}{
			{"/v1/responses", `{"input":"FAULT-NODONE","max_output_tokens":1,"stream":true}`, 200, "response.output_item.done"},
			{"/v1/messages", `{"model":"sim-model","messages":[{"role":"user","content":"FAULT-NODONE"}],"max_tokens":1,"stream":true}`, 200, "message_delta"},
			{"/v1/messages", `{"model":"sim-model","messages":[{"role":"user","content":"FAULT-503"}],"max_tokens":1}`, 503,
				`{"type":"error","error":{"type":"api_error","message":"Simulated failure (status 503)."}}`},
			{"/v1/embeddings", `{"input":"FAULT-503"}`, 503,
				`{"error":{"message":"Simulated failure (status 503).","type":"ServiceUnavailableError","param":null,"code":503}}`},
		} {
			rec := serve(t.Context(), s, "POST", c.path, c.body, nil)
			got := rec.Body.String()
			if c.code == 200 {
				got = lastEventName(t, rec.Body.Bytes())
			}
			if rec.Code != c.code || got != c.want {
				t.Errorf("%s %s: %d %q; want %d %q", c.path, c.body, rec.Code, got, c.code, c.want)
			}
		}
		if st := s.Stats(); st.Failed != 4 {
			t.Errorf("stats %+v, want 4 failed", st)
		}
	})
}

// A stall on a Messages stream holds it until the client leaves and
// counts an abort.
func TestRouteStallEndsWithClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{TTFT: 100 * time.Millisecond})
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		rec := serve(ctx, s, "POST", "/v1/messages", `{"model":"sim-model","messages":[{"role":"user","content":"x"}],"max_tokens":4,"stream":true}`,
			map[string]string{"X-Sim-Fault": "stall-after=4"})
		if n := strings.Count(rec.Body.String(), "event: "); n != 4 {
			t.Errorf("%d events, want 4", n)
		}
		if st := s.Stats(); st.Aborted != 1 || st.Completed != 0 || st.Failed != 1 {
			t.Errorf("stats %+v", st)
		}
	})
}

// Over a real connection, ResetAfterChunks breaks a Responses stream
// after that many events.
func TestRouteResetAfterChunks(t *testing.T) {
	s := New(Config{TTFT: -1, ITL: -1})
	srv := httptest.NewServer(s)
	defer srv.Close()
	s.InjectFailure(Failure{ResetAfterChunks: 3})
	resp, err := post(t, t.Context(), srv.URL+"/v1/responses", `{"input":"x","max_output_tokens":3,"stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	d := sse.NewDecoder(resp.Body)
	for i := range 3 {
		if _, err := d.Next(); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	if _, err := d.Next(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("after the reset: %v, want a broken stream", err)
	}
}

// lastEventName decodes a stream and returns its last event's name.
func lastEventName(t *testing.T, body []byte) string {
	t.Helper()
	d := sse.NewDecoder(bytes.NewReader(body))
	last := ""
	for {
		ev, err := d.Next()
		if errors.Is(err, io.EOF) {
			return last
		}
		if err != nil {
			t.Fatal(err)
		}
		last = ev.Event
	}
}
