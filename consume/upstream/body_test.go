package upstream

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// bodyUpstream answers every request with one fixed body and type.
func bodyUpstream(t *testing.T, contentType, body string) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		} else {
			w.Header()["Content-Type"] = nil // no sniffing: no type at all
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// A non-JSON 2xx body (a transcription's text, SRT or VTT, any text/*)
// reaches the client byte for byte with its type, whether the request
// asked for a stream or not, through a generation slot or a direct
// forward.
func TestNonJSONBodyPassesThrough(t *testing.T) {
	const vtt = "WEBVTT\n\n00:00:00.000 --> 00:00:01.000\nhello \"usage\" {\n"
	for _, c := range []struct{ ct, body string }{
		{"text/plain; charset=utf-8", "hello world\n"},
		{"text/vtt", vtt},
		{"application/x-subrip", "1\n00:00:00,000 --> 00:00:01,000\nhello\n"},
		{"audio/mpeg", "ID3\x03\x00\xff\xfb"},
	} {
		url := bodyUpstream(t, c.ct, c.body)
		p := newPool(t, UpstreamConfig{URL: url, Models: []string{"m"}})
		for _, stream := range []bool{false, true} {
			for _, direct := range []bool{false, true} {
				var rec recordEvents
				var err error
				if direct {
					err = p.Forward(t.Context(), chatReq("r", stream, ""), &rec)
				} else {
					err = mustAcquire(t, p, "m").Do(t.Context(), chatReq("r", stream, ""), &rec)
				}
				if err != nil {
					t.Fatalf("%s stream=%v direct=%v: %v", c.ct, stream, direct, err)
				}
				if got, want := kinds(rec.evs), []string{"H200", "B:" + c.body}; !slices.Equal(got, want) {
					t.Errorf("%s stream=%v direct=%v: events %q, want %q", c.ct, stream, direct, got, want)
				}
				if got := rec.evs[0].Header.Get("Content-Type"); got != c.ct {
					t.Errorf("%s: header Content-Type %q", c.ct, got)
				}
			}
		}
		if s := p.Stats()[0]; s.InFlight != 0 || !s.Healthy {
			t.Errorf("%s: stats %+v", c.ct, s)
		}
	}
}

// A body that declares JSON, or declares nothing, must be JSON: the
// error names the body and its type, and the upstream stays up (it
// answered).
func TestBodyDeclaredJSONMustBeJSON(t *testing.T) {
	for _, c := range []struct{ ct, body, want string }{
		{"application/json", "hello", `upstream: response broke off: malformed: the body is not JSON: URL: Content-Type "application/json"`},
		{"application/problem+json; charset=utf-8", "{", `upstream: response broke off: malformed: the body is not JSON: URL: Content-Type "application/problem+json; charset=utf-8"`},
		{"", "hello", `upstream: response broke off: malformed: the body is not JSON: URL: Content-Type ""`},
		{"not a / type", "hello", `upstream: response broke off: malformed: the body is not JSON: URL: Content-Type "not a / type"`},
	} {
		url := bodyUpstream(t, c.ct, c.body)
		p := newPool(t, UpstreamConfig{URL: url, Models: []string{"m"}})
		var rec recordEvents
		err := mustAcquire(t, p, "m").Do(t.Context(), chatReq("r", false, ""), &rec)
		want := strings.Replace(c.want, "URL", url, 1)
		if !errors.Is(err, ErrBodyNotJSON) || !errors.Is(err, ErrStreamMalformed) || err.Error() != want {
			t.Errorf("%q: err %v\nwant %s", c.ct, err, want)
		}
		if got := kinds(rec.evs); !slices.Equal(got, []string{"H200"}) {
			t.Errorf("%q: events %q", c.ct, got)
		}
		if s := p.Stats()[0]; s.InFlight != 0 || !s.Healthy {
			t.Errorf("%q: stats %+v", c.ct, s)
		}
	}
}

// An oversized body of any type is refused with the limit named.
func TestBodyTooLargeNamesTheLimit(t *testing.T) {
	url := bodyUpstream(t, "text/plain", "eleven byte")
	p, err := NewPool(Config{MaxBodyBytes: 10, Upstreams: []UpstreamConfig{{URL: url, Models: []string{"m"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	err = mustAcquire(t, p, "m").Do(t.Context(), chatReq("r", false, ""), &recordEvents{})
	want := "upstream: response broke off: the body exceeds the size limit: " + url + ": 10 bytes"
	if !errors.Is(err, ErrBodyTooLarge) || err.Error() != want {
		t.Fatalf("err %v\nwant %s", err, want)
	}
}

// readWhole reads the whole body whether its length is said, unsaid or
// wrong, and one byte past the limit of a body that is too long.
func TestReadWhole(t *testing.T) {
	body := strings.Repeat("0123456789", 100)
	for _, c := range []struct {
		name          string
		length, limit int64
		want          string
	}{
		{"length said", 1000, 4096, body},
		{"length unsaid", -1, 4096, body},
		{"length said short", 10, 4096, body},
		{"length said long", 5000, 4096, body},
		{"length said past the preallocation", maxPrealloc + 1, maxPrealloc * 2, body},
		{"over the limit", 1000, 100, body[:101]},
		{"over the limit, unsaid", -1, 100, body[:101]},
	} {
		got, err := readWhole(strings.NewReader(body), c.length, c.limit)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: %d bytes, %v; want %d", c.name, len(got), err, len(c.want))
		}
	}
}
