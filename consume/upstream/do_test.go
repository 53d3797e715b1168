package upstream

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
)

// kinds renders an event sequence compactly: H200 C:<data> B:<data>.
func kinds(evs []consume.Event) []string {
	var out []string
	for _, ev := range evs {
		switch ev.Kind {
		case consume.EventHeader:
			out = append(out, fmt.Sprintf("H%d", ev.Status))
		case consume.EventChunk:
			out = append(out, "C:"+string(ev.Data))
		case consume.EventBody:
			out = append(out, "B:"+string(ev.Data))
		default:
			out = append(out, fmt.Sprintf("kind%d", ev.Kind))
		}
	}
	return out
}

func TestDoStreamEventSequence(t *testing.T) {
	s := newSim(t, "m")
	p := newPool(t, UpstreamConfig{URL: s.url, Models: []string{"m"}})
	var rec recordEvents
	err := mustAcquire(t, p, "m").Do(t.Context(), chatReq("r1", true, `,"stream_options":{"include_usage":true}`), &rec)
	if err != nil {
		t.Fatal(err)
	}
	const head = `{"id":"chatcmpl-r1","object":"chat.completion.chunk","created":%d,"model":"m","choices":`
	created := extractCreated(t, rec.evs)
	h := fmt.Sprintf(head, created)
	want := []string{
		"H200",
		"C:" + h + `[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
		"C:" + h + `[{"index":0,"delta":{"content":"tok0 "},"logprobs":null,"finish_reason":null}]}`,
		"C:" + h + `[{"index":0,"delta":{"content":"tok1"},"logprobs":null,"finish_reason":null}]}`,
		"C:" + h + `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length","stop_reason":null}]}`,
		"C:" + h + `[],"usage":{"prompt_tokens":2,"total_tokens":4,"completion_tokens":2}}`,
	}
	if got := kinds(rec.evs); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, ev := range rec.evs[1:] { // the sim frames as a Writer does: each chunk comes in its frame
		if want := "data: " + string(ev.Data) + "\n\n"; string(ev.Frame) != want {
			t.Errorf("frame %q, want %q", ev.Frame, want)
		}
	}
	hdr := rec.evs[0].Header
	if hdr.Get("Content-Type") != "text/event-stream; charset=utf-8" || hdr.Get("X-Request-Id") != "r1" {
		t.Errorf("header %v", hdr)
	}
	if st := p.Stats()[0]; st.InFlight != 0 {
		t.Errorf("slot not released: %+v", st)
	}
}

// A chunk framed otherwise than a Writer would frame it (no space after
// "data:", CRLF line ends) comes without its frame, to be framed anew.
func TestDoStreamOtherFrames(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data:{\"a\":1}\n\ndata: {\"b\":2}\r\n\r\ndata: {\"c\":3}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(ts.Close)
	p := newPool(t, UpstreamConfig{URL: ts.URL, Models: []string{"m"}})
	var rec recordEvents
	if err := mustAcquire(t, p, "m").Do(t.Context(), chatReq("r1", true, ""), &rec); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range rec.evs[1:] {
		got = append(got, fmt.Sprintf("%s %q", ev.Data, ev.Frame))
	}
	want := []string{`{"a":1} ""`, `{"b":2} ""`, `{"c":3} "data: {\"c\":3}\n\n"`}
	if !slices.Equal(got, want) {
		t.Fatalf("chunks and frames:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// What follows a chunk at once, read already, is said on it: another
// event (More) or [DONE] (Ends); nothing after a named stream's last
// event, and nothing when the next event has not arrived. The last
// event is Final when the body's end came in the same read.
func TestDoStreamSaysWhatFollows(t *testing.T) {
	next, last := make(chan struct{}), make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		switch r.URL.Path {
		case "/v1/responses":
			fmt.Fprint(w, "event: response.created\ndata: {}\n\nevent: response.completed\ndata: {}\n\nevent: x\ndata: {}\n\n")
		default:
			fmt.Fprint(w, "data: {\"a\":1}\n\n")
			http.NewResponseController(w).Flush()
			select { // the relay has emitted a, alone
			case <-next:
			case <-r.Context().Done():
				return
			}
			fmt.Fprint(w, "data: {\"b\":2}\n\ndata: {\"c\":3}\n\ndata: [DONE]\n\n")
			if r.Header.Get("X-Request-Id") == "r3" { // the body's end waits for the relay's last chunk
				http.NewResponseController(w).Flush()
				select {
				case <-last:
				case <-r.Context().Done():
				}
			}
		}
	}))
	t.Cleanup(ts.Close)
	p := newPool(t, UpstreamConfig{URL: ts.URL, Models: []string{"m"}})
	run := func(req *consume.Request) []string {
		var got []string
		err := mustAcquire(t, p, "m").Do(t.Context(), req, consume.EmitFunc(func(ev consume.Event) error {
			if ev.Kind == consume.EventChunk {
				got = append(got, fmt.Sprintf("%s%s more=%v ends=%v final=%v", ev.Name, ev.Data, ev.More, ev.Ends, ev.Final))
				switch {
				case string(ev.Data) == `{"a":1}`:
					next <- struct{}{}
				case ev.Ends && req.ID == "r3":
					close(last)
				}
			}
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := []string{`{"a":1} more=false ends=false final=false`, `{"b":2} more=true ends=false final=false`, `{"c":3} more=false ends=true final=true`}
	if got := run(chatReq("r1", true, "")); !slices.Equal(got, want) {
		t.Errorf("chat:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	want[2] = `{"c":3} more=false ends=true final=false`
	if got := run(chatReq("r3", true, "")); !slices.Equal(got, want) {
		t.Errorf("chat, the body's end later:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	responses := &consume.Request{ID: "r2", Key: chatReq("r2", true, "").Key, Path: "/v1/responses", Body: []byte(`{"model":"m","input":"hi","stream":true}`), Stream: true, Shape: consume.ShapeResponses}
	want = []string{`response.created{} more=true ends=false final=false`, `response.completed{} more=false ends=false final=true`}
	if got := run(responses); !slices.Equal(got, want) {
		t.Errorf("responses:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func extractCreated(t *testing.T, evs []consume.Event) int64 {
	t.Helper()
	var c int64
	if len(evs) < 2 {
		t.Fatalf("events %v", kinds(evs))
	}
	i := strings.Index(string(evs[1].Data), `"created":`)
	fmt.Sscanf(string(evs[1].Data[i+len(`"created":`):]), "%d", &c)
	return c
}

func TestDoNonStreamBody(t *testing.T) {
	s := newSim(t, "m")
	p := newPool(t, UpstreamConfig{URL: s.url, Models: []string{"m"}})
	var rec recordEvents
	if err := mustAcquire(t, p, "m").Do(t.Context(), chatReq("r2", false, ""), &rec); err != nil {
		t.Fatal(err)
	}
	got := kinds(rec.evs)
	if len(got) != 2 || got[0] != "H200" || !strings.HasPrefix(got[1], `B:{"id":"chatcmpl-r2","object":"chat.completion"`) ||
		!strings.Contains(got[1], `"content":"tok0 tok1"`) {
		t.Fatalf("events %v", got)
	}
}

// The request carries the id, content type and Accept; hop-by-hop
// response headers are dropped.
func TestDoRequestAndResponseHeaders(t *testing.T) {
	seen := make(chan *http.Request, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r
		w.Header().Set("Connection", "X-Hop")
		w.Header().Set("X-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-End", "kept")
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": keep-alive\n\ndata: {\"a\":1}\n\ndata: {\"error\":{\"message\":\"x\"}}\n\ndata: [DONE]\n\ndata: after\n\n")
	}))
	defer ts.Close()
	p := newPool(t, UpstreamConfig{URL: ts.URL, Models: []string{"m"}})
	var rec recordEvents
	if err := mustAcquire(t, p, "m").Do(t.Context(), chatReq("r3", true, ""), &rec); err != nil {
		t.Fatal(err)
	}
	r := <-seen
	if r.URL.Path != "/v1/chat/completions" || r.Header.Get("X-Request-Id") != "r3" ||
		r.Header.Get("Accept") != "text/event-stream" || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %v", r.URL.Path, r.Header)
	}
	h := rec.evs[0].Header
	if h.Get("X-Hop") != "" || h.Get("Keep-Alive") != "" || h.Get("Connection") != "" || h.Get("X-End") != "kept" {
		t.Errorf("response header %v", h)
	}
	want := []string{"H200", `C:{"a":1}`, `C:{"error":{"message":"x"}}`}
	if got := kinds(rec.evs); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events %v, want %v", got, want)
	}
}

func TestRetryBeforeFirstByte(t *testing.T) {
	closed := closedURL(t)
	for _, tc := range []struct {
		name   string
		first  func(t *testing.T) string
		status int // what the first upstream answered (0: no answer)
	}{
		{"status 503", func(t *testing.T) string {
			s := newSim(t, "m")
			s.InjectFailure(vllmsim.Failure{StatusBeforeFirstByte: 503})
			return s.url
		}, 503},
		{"connection refused", func(*testing.T) string { return closed }, 0},
		{"reset before headers", func(t *testing.T) string {
			s := newSim(t, "m")
			s.InjectFailure(vllmsim.Failure{ResetBeforeFirstByte: true})
			return s.url
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good := newSim(t, "m")
			obs := &observer{}
			p, err := NewPool(Config{Observer: obs, Upstreams: []UpstreamConfig{
				{URL: tc.first(t), Models: []string{"m"}}, {URL: good.url, Models: []string{"m"}}}})
			if err != nil {
				t.Fatal(err)
			}
			var rec recordEvents
			slot := mustAcquire(t, p, "m") // ties go to the first upstream
			if err := slot.Do(t.Context(), chatReq("r", true, ""), &rec); err != nil {
				t.Fatal(err)
			}
			if n := len(rec.evs); n != 5 || rec.evs[0].Status != 200 {
				t.Fatalf("events %v", kinds(rec.evs))
			}
			st := p.Stats()
			if st[0].Healthy || st[0].Errors != 1 || !st[1].Healthy || st[0].InFlight+st[1].InFlight != 0 {
				t.Errorf("stats %+v", st)
			}
			if got := obs.String(); got != fmt.Sprintf("%d:err 200:ok", tc.status) {
				t.Errorf("observer saw %s", got)
			}
		})
	}
}

func TestNoRetryOn4xx(t *testing.T) {
	bad, good := newSim(t, "m"), newSim(t, "m")
	p := newPool(t, UpstreamConfig{URL: bad.url, Models: []string{"m"}}, UpstreamConfig{URL: good.url, Models: []string{"m"}})
	// The sim does not serve "m2": it answers 404 as vLLM does.
	req := chatReq("r", false, "")
	req.Body = []byte(strings.Replace(string(req.Body), `"model":"m"`, `"model":"m2"`, 1))
	err := mustAcquire(t, p, "m").Do(t.Context(), req, &recordEvents{})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 404 || se.Upstream != bad.url || !strings.Contains(string(se.Body), "does not exist") {
		t.Fatalf("err = %v", err)
	}
	if good.Stats().Requests != 0 || !p.Stats()[0].Healthy {
		t.Errorf("a 4xx was retried or marked the upstream down")
	}
}

func TestNoOtherUpstreamReturnsStatusError(t *testing.T) {
	s := newSim(t, "m")
	s.InjectFailure(vllmsim.Failure{StatusBeforeFirstByte: 503})
	p := newPool(t, UpstreamConfig{URL: s.url, Models: []string{"m"}})
	err := mustAcquire(t, p, "m").Do(t.Context(), chatReq("r", true, ""), &recordEvents{})
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 503 || !strings.Contains(string(se.Body), `"code":503`) {
		t.Fatalf("err = %v", err)
	}
	if p.Ready() {
		t.Error("Ready after the only upstream failed")
	}
	if _, ok := p.TryAcquire("m"); ok {
		t.Error("acquired a slot on a down upstream")
	}
}

func TestUnavailableWrapsTransportError(t *testing.T) {
	p := newPool(t, UpstreamConfig{URL: closedURL(t), Models: []string{"m"}})
	err := mustAcquire(t, p, "m").Do(t.Context(), chatReq("r", true, ""), &recordEvents{})
	if !errors.Is(err, ErrUpstreamUnavailable) {
		t.Fatalf("err = %v", err)
	}
}

func TestNoRetryAfterFirstByte(t *testing.T) {
	bad, good := newSim(t, "m"), newSim(t, "m")
	bad.InjectFailure(vllmsim.Failure{ResetAfterChunks: 2})
	p := newPool(t, UpstreamConfig{URL: bad.url, Models: []string{"m"}}, UpstreamConfig{URL: good.url, Models: []string{"m"}})
	var rec recordEvents
	err := mustAcquire(t, p, "m").Do(t.Context(), chatReq("r", true, ""), &rec)
	if !errors.Is(err, ErrStreamBroken) {
		t.Fatalf("err = %v, want ErrStreamBroken", err)
	}
	if got := kinds(rec.evs); len(got) != 3 || got[0] != "H200" {
		t.Fatalf("events %v, want the header and 2 chunks", got)
	}
	if good.Stats().Requests != 0 {
		t.Error("retried after the first byte")
	}
}

func TestNonStreamBodyLimit(t *testing.T) {
	s := newSim(t, "m")
	p, err := NewPool(Config{MaxBodyBytes: 10, Upstreams: []UpstreamConfig{{URL: s.url, Models: []string{"m"}}}})
	if err != nil {
		t.Fatal(err)
	}
	err = mustAcquire(t, p, "m").Do(t.Context(), chatReq("r", false, ""), &recordEvents{})
	if !errors.Is(err, ErrStreamBroken) {
		t.Fatalf("err = %v", err)
	}
}

// A slot carries one request: a second Do, or a Do after Release, is
// refused without reaching the upstream, and a second Release does not
// free a place twice.
func TestDoTwiceAndAfterRelease(t *testing.T) {
	sim := newSim(t, "m")
	p := newPool(t, UpstreamConfig{URL: sim.url, Models: []string{"m"}})
	used := mustAcquire(t, p, "m")
	if err := used.Do(t.Context(), chatReq("r1", false, ""), &recordEvents{}); err != nil {
		t.Fatalf("first Do: %v", err)
	}
	if err := used.Do(t.Context(), chatReq("r2", false, ""), &recordEvents{}); !errors.Is(err, errSlotUsed) {
		t.Fatalf("second Do = %v, want errSlotUsed", err)
	}
	released := mustAcquire(t, p, "m")
	released.Release()
	if err := released.Do(t.Context(), chatReq("r3", false, ""), &recordEvents{}); !errors.Is(err, errSlotUsed) {
		t.Fatalf("Do after Release = %v, want errSlotUsed", err)
	}
	if n := sim.Stats().Requests; n != 1 {
		t.Fatalf("the upstream saw %d requests, want only the first Do's", n)
	}
	used.Release() // Do released it already: a no-op
	released.Release()
	if got := inFlight(p); !slices.Equal(got, []int{0}) {
		t.Fatalf("in flight %v, want [0]", got)
	}
}

// closedURL is an address nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	return url
}

// observer records Result calls as "status:ok|err".
type observer struct{ calls []string }

func (o *observer) Result(_ string, status int, err error) {
	r := "ok"
	if err != nil {
		r = "err"
	}
	o.calls = append(o.calls, fmt.Sprintf("%d:%s", status, r))
}

func (o *observer) String() string { return strings.Join(o.calls, " ") }
