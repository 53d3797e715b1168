package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/pacegate/pacegate/consume"
)

// flushLog records what each flush sent the client: one write each.
// What no flush sent is sent by the response's end (see unflushed), with
// the body's end, as net/http sends it when the handler returns.
type flushLog struct {
	*httptest.ResponseRecorder
	sent   int
	writes []string
}

// unflushed is what the response's end sends.
func (f *flushLog) unflushed() string { return f.Body.String()[f.sent:] }

func (f *flushLog) Flush() {
	f.writes = append(f.writes, f.Body.String()[f.sent:])
	f.sent = f.Body.Len()
	f.ResponseRecorder.Flush()
}

// framed is a chunk in the frame it came in, with what the relay says
// follows it at once.
func framed(data string, more, ends bool) consume.Event {
	return consume.Event{Kind: consume.EventChunk, Data: []byte(data), Frame: []byte("data: " + data + "\n\n"), More: more, Ends: ends}
}

// final is framed for the upstream's last event, whose read brought the
// body's end.
func final(data string, ends bool) consume.Event {
	ev := framed(data, false, ends)
	ev.Final = true
	return ev
}

// What the relay says follows a chunk at once goes out in the chunk's
// write: a held chunk with its successor (or alone, when its successor is
// dropped), and an OpenAI stream's [DONE] with its last chunk, once. The
// stream's end goes out with the body's end, in the response's last
// write: a [DONE] written at the call's end, and the last chunk and its
// [DONE] when the upstream's body ended with them.
func TestHeldChunksShareAWrite(t *testing.T) {
	done := consume.Event{Kind: consume.EventDone}
	asked := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]}`
	cases := []struct {
		name, body string
		script     []consume.Event
		writes     []string
		end        string // what the response's end sends
	}{
		{"a held chunk goes with the next", streamReq,
			[]consume.Event{header, framed(`{"a":1}`, true, false), framed(`{"b":2}`, false, false), done},
			[]string{"data: {\"a\":1}\n\ndata: {\"b\":2}\n\n"}, "data: [DONE]\n\n"},
		{"the end goes with the last chunk; the usage chunk not asked for is dropped", streamReq,
			[]consume.Event{header, framed(`{"a":1}`, false, false), framed(`{"fin":1}`, true, false), framed(usageOnly, false, true), done},
			[]string{"data: {\"a\":1}\n\n", "data: {\"fin\":1}\n\ndata: [DONE]\n\n"}, ""},
		{"the end goes with the usage chunk asked for", asked,
			[]consume.Event{header, framed(`{"fin":1}`, true, false), framed(usageOnly, false, true), done},
			[]string{"data: {\"fin\":1}\n\ndata: " + usageOnly + "\n\ndata: [DONE]\n\n"}, ""},
		{"a dropped chunk that nothing follows flushes the held one", streamReq,
			[]consume.Event{header, framed(`{"a":1}`, true, false), framed(usageOnly, false, false), done},
			[]string{"data: {\"a\":1}\n\n"}, "data: [DONE]\n\n"},
		{"the last chunk and [DONE] go with the body's end when the upstream's did", asked,
			[]consume.Event{header, framed(`{"a":1}`, false, false), framed(`{"fin":1}`, true, false), final(usageOnly, true), done},
			[]string{"data: {\"a\":1}\n\n"}, "data: {\"fin\":1}\n\ndata: " + usageOnly + "\n\ndata: [DONE]\n\n"},
		{"a final chunk dropped leaves the held one and [DONE] to the end", streamReq,
			[]consume.Event{header, framed(`{"fin":1}`, true, false), final(usageOnly, true), done},
			nil, "data: {\"fin\":1}\n\ndata: [DONE]\n\n"},
		{"an error goes with the held chunk", streamReq,
			[]consume.Event{header, framed(`{"a":1}`, true, false), {Kind: consume.EventError, Err: context.DeadlineExceeded}},
			nil, "-"}, // checked below: one write, the chunk then the error event
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 0, tc.script...)
			defer r.close()
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer k")
			req.Header.Set("Content-Type", "application/json")
			w := &flushLog{ResponseRecorder: httptest.NewRecorder()}
			r.s.ServeHTTP(w, req)
			if tc.end == "-" {
				if len(w.writes) != 1 || !strings.HasPrefix(w.writes[0], "data: {\"a\":1}\n\ndata: {\"error\":") || w.Body.String() != w.writes[0] {
					t.Fatalf("writes %q, body %q: want the chunk and the error in one", w.writes, w.Body)
				}
				return
			}
			if !slices.Equal(w.writes, tc.writes) || w.unflushed() != tc.end {
				t.Fatalf("writes %q, then the end %q\nwant %q, then %q", w.writes, w.unflushed(), tc.writes, tc.end)
			}
		})
	}
}
