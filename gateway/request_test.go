package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseGenRequest(t *testing.T) {
	cases := []struct {
		name       string
		ep         *route
		body       string
		wantErr    string // APIError message; empty = valid
		wantStream bool
		wantUsage  bool
		wantMax    int64
	}{
		{name: "chat", ep: chatEndpoint, body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{name: "max_completion_tokens wins", ep: chatEndpoint, body: `{"model":"m","messages":[],"max_tokens":9,"max_completion_tokens":4}`, wantMax: 4},
		{name: "max_tokens", ep: completionEndpoint, body: `{"model":"m","prompt":"x","max_tokens":7}`, wantMax: 7},
		{name: "stream", ep: chatEndpoint, body: `{"model":"m","stream":true,"messages":[]}`, wantStream: true},
		{name: "stream with usage", ep: chatEndpoint, body: `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]}`, wantStream: true, wantUsage: true},
		{name: "stream usage false", ep: chatEndpoint, body: `{"model":"m","stream":true,"stream_options":{"include_usage":false},"messages":[]}`, wantStream: true},
		{name: "null stream", ep: chatEndpoint, body: `{"model":"m","stream":null,"messages":[]}`},
		{name: "not an object", ep: chatEndpoint, body: `"m"`, wantErr: "We could not parse the JSON body of your request: it must be a JSON object."},
		{name: "null body", ep: chatEndpoint, body: `null`, wantErr: "We could not parse the JSON body of your request: it must be a JSON object."},
		{name: "empty model", ep: chatEndpoint, body: `{"model":"","messages":[]}`, wantErr: "Invalid value for 'model': expected a non-empty string."},
		{name: "control char model", ep: chatEndpoint, body: `{"model":"a\nb","messages":[]}`, wantErr: "Invalid value for 'model': not a valid model name."},
		{name: "long model", ep: chatEndpoint, body: `{"model":"` + strings.Repeat("m", 257) + `","messages":[]}`, wantErr: "Invalid value for 'model': not a valid model name."},
		{name: "negative max_tokens", ep: chatEndpoint, body: `{"model":"m","messages":[],"max_tokens":-1}`, wantErr: "Invalid value for 'max_tokens': must be at least 1."},
		{name: "fractional max_tokens", ep: chatEndpoint, body: `{"model":"m","messages":[],"max_tokens":1.5}`, wantErr: "Invalid type for 'max_tokens'."},
		{name: "bad stream_options", ep: chatEndpoint, body: `{"model":"m","stream":true,"stream_options":3,"messages":[]}`, wantErr: "Invalid value for 'stream_options': expected an object."},
		{name: "bad include_usage", ep: chatEndpoint, body: `{"model":"m","stream":true,"stream_options":{"include_usage":"y"},"messages":[]}`, wantErr: "Invalid type for 'include_usage'."},
		{name: "null messages", ep: chatEndpoint, body: `{"model":"m","messages":null}`, wantErr: "Missing required parameter: 'messages'."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, e := parseAPIRequest([]byte(tc.body), tc.ep)
			if tc.wantErr != "" {
				if e == nil || e.Message != tc.wantErr || e.Status != http.StatusBadRequest {
					t.Fatalf("error = %+v, want 400 %q", e, tc.wantErr)
				}
				return
			}
			if e != nil {
				t.Fatalf("unexpected error %+v", e)
			}
			if req.Stream != tc.wantStream || req.WantsUsage != tc.wantUsage || req.MaxTokens != tc.wantMax {
				t.Errorf("got stream=%v usage=%v max=%d", req.Stream, req.WantsUsage, req.MaxTokens)
			}
		})
	}
}

// A streamed request always asks the upstream for usage, and every other
// field the client sent is forwarded unchanged.
func TestStreamedBodyAsksForUsageAndKeepsFields(t *testing.T) {
	req, e := parseAPIRequest([]byte(`{"model":"m","stream":true,"temperature":0.5,"stream_options":{"continuous_usage_stats":true},"messages":[{"role":"user","content":"hi"}],"x_vendor":{"a":[1,2]}}`), chatEndpoint)
	if e != nil {
		t.Fatal(e)
	}
	var got map[string]any
	if err := json.Unmarshal(req.Body, &got); err != nil {
		t.Fatal(err)
	}
	want := `{"messages":[{"content":"hi","role":"user"}],"model":"m","stream":true,"stream_options":{"continuous_usage_stats":true,"include_usage":true},"temperature":0.5,"x_vendor":{"a":[1,2]}}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Errorf("forwarded body = %s\nwant %s", b, want)
	}
}

// A streamed body that already asks for usage is forwarded byte for
// byte; one without stream_options gets it spliced in before its closing
// brace, the client's bytes otherwise untouched; the rest is re-encoded.
func TestStreamedBodyRewrite(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":["<&>"]}`,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":["<&>"]}`},
		{`{"model":"m", "stream":true, "messages":["<&>"]}` + " \n",
			`{"model":"m", "stream":true, "messages":["<&>"],"stream_options":{"include_usage":true}}` + " \n"},
		{`{"model":"m","stream":true,"stream_options":null,"messages":[]}`,
			`{"messages":[],"model":"m","stream":true,"stream_options":{"include_usage":true}}`},
		{`{"model":"m","stream":true,"stream_options":{"include_usage":false},"messages":[]}`,
			`{"messages":[],"model":"m","stream":true,"stream_options":{"include_usage":true}}`},
	} {
		req, e := parseAPIRequest([]byte(tc.in), chatEndpoint)
		if e != nil {
			t.Fatalf("%s: %v", tc.in, e)
		}
		if string(req.Body) != tc.want {
			t.Errorf("%s:\nforwarded %s\nwant      %s", tc.in, req.Body, tc.want)
		}
	}
}

// A non-streamed body is forwarded byte for byte.
func TestNonStreamedBodyIsUntouched(t *testing.T) {
	in := `{"model":"m",  "messages":[] , "n":2}`
	req, e := parseAPIRequest([]byte(in), chatEndpoint)
	if e != nil || string(req.Body) != in {
		t.Fatalf("body = %q, %v; want the input", req.Body, e)
	}
}

func FuzzParseAPIRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","messages":[]}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[],"max_tokens":3}`,
		`{"model":"m","prompt":"x","max_completion_tokens":1}`,
		`{"model":null}`, `[]`, `{`, `{"model":"\u0000"}`,
		`{"model":"m","input":"hi","instructions":"x","max_output_tokens":4,"previous_response_id":"resp_1","stream":true}`,
		`{"model":"m","input":[{"role":"user","content":"hi"}],"previous_response_id":"a/b"}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"system":"s","max_tokens":8,"stream":true}`,
		`{"model":"m","input":["a","b",[1,2,3]]}`,
		`{"model":"m","query":"q","documents":["a","b"],"top_n":1}`,
		`{"model":"m","text_1":"a","text_2":["b","c"]}`,
		`{"model":"m","tokens":[1,2,3]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, ep := range routeTable { // every JSON route's parser
			if ep.fields == nil {
				continue
			}
			req, e := parseAPIRequest(body, ep)
			if e != nil {
				if e.Status != http.StatusBadRequest || e.Message == "" {
					t.Fatalf("bad error %+v", e)
				}
				continue
			}
			if req.Model == "" || !json.Valid(req.Body) {
				t.Fatalf("accepted request with model %q body %q", req.Model, req.Body)
			}
			if ep.forceUsage && req.Stream && !strings.Contains(string(req.Body), `"include_usage":true`) {
				t.Fatalf("streamed body does not ask for usage: %s", req.Body)
			}
		}
	})
}

// routeFor finds a route of the table.
func routeFor(method, path string) *route {
	for _, rt := range routeTable {
		if rt.method == method && rt.path == path {
			return rt
		}
	}
	panic("no route " + method + " " + path)
}

var (
	chatEndpoint       = routeFor("POST", "/v1/chat/completions")
	completionEndpoint = routeFor("POST", "/v1/completions")
)

// FuzzDecodeScalar: a scanned value decodes into a bool, an int64 or a
// string exactly as json.Unmarshal decodes it, and fails where it fails.
func FuzzDecodeScalar(f *testing.F) {
	for _, seed := range []string{`true`, `false`, `64`, `-0`, `1e2`, `64.0`, `9223372036854775808`, `"s\u00e9"`, `"x`, `null`, `[1]`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) || isNull(raw) || len(bytes.TrimSpace(raw)) != len(raw) {
			return // decodeScalar is given scanned, non-null tokens only
		}
		checkScalar[bool](t, raw)
		checkScalar[int64](t, raw)
		checkScalar[string](t, raw)
	})
}

func checkScalar[T bool | int64 | string](t *testing.T, raw []byte) {
	var got, want T
	ok := decodeScalar(raw, &got)
	wantOK := json.Unmarshal(raw, &want) == nil
	if ok != wantOK || (ok && got != want) {
		t.Fatalf("decodeScalar(%q) into %T = %v, %v; json.Unmarshal: %v, %v", raw, got, got, ok, want, wantOK)
	}
}

// readLimited reads the whole body whatever length the client said, and
// refuses one over the limit with the 413 the limit names.
func TestReadLimited(t *testing.T) {
	body := strings.Repeat("0123456789", 100)
	for _, c := range []struct {
		name          string
		length, limit int64
		status        int
	}{
		{"length said", 1000, 4096, 0},
		{"length unsaid", -1, 4096, 0},
		{"length said short", 10, 4096, 0},
		{"length said past the preallocation", maxPrealloc + 1, maxPrealloc * 2, 0},
		{"over the limit", 1000, 100, http.StatusRequestEntityTooLarge},
		{"over the limit, unsaid", -1, 100, http.StatusRequestEntityTooLarge},
	} {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		r.ContentLength = c.length
		got, e := readLimited(r, c.limit)
		switch {
		case c.status != 0 && (e == nil || e.Status != c.status || e.Message != "Request body is larger than the limit of 100 bytes."):
			t.Errorf("%s: %d bytes, %+v; want a %d", c.name, len(got), e, c.status)
		case c.status == 0 && (e != nil || string(got) != body):
			t.Errorf("%s: %d bytes, %+v; want the body", c.name, len(got), e)
		}
	}
}
