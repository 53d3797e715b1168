package gateway

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Embeddings, rerank and score reserve their input estimate and are
// charged the usage the server reports.
func TestPoolingRoutesCharged(t *testing.T) {
	cases := []struct {
		path, body, answer string
		reserved, charged  int
	}{
		{"/v1/embeddings", `{"model":"m","input":["one two","three"]}`,
			`{"object":"list","data":[],"usage":{"prompt_tokens":6,"total_tokens":6}}`, 5, 6},
		{"/v1/rerank", `{"model":"m","query":"q","documents":["a","b"]}`,
			`{"id":"rerank-1","results":[],"usage":{"total_tokens":11}}`, 1 + 3, 11},
		{"/rerank", `{"model":"m","query":"q","documents":["a","b"]}`,
			`{"id":"rerank-1","results":[],"usage":{"total_tokens":11}}`, 1 + 3, 11},
		{"/score", `{"model":"m","text_1":"a","text_2":"b"}`,
			`{"id":"score-1","data":[],"usage":{"prompt_tokens":4,"total_tokens":4}}`, 1 + 1, 4},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			r := newAPIRig(t, "{tpm: 1000}", jsonBody(200, tc.answer))
			expect(t, r.call("POST", tc.path, tc.body, "Authorization: Bearer ka"), 200, tc.answer)
			w := r.call("POST", tc.path, tc.body, "Authorization: Bearer ka")
			expectHeader(t, w, "x-ratelimit-remaining-tokens", fmt.Sprint(1000-tc.charged-tc.reserved))
			if got := r.ups[0].seen()[0]; got.Path != tc.path || got.Body != tc.body {
				t.Errorf("upstream saw %+v", got)
			}
		})
	}
}

// Each route checks its own required input, in the OpenAI shape.
func TestRouteInputsRequired(t *testing.T) {
	r := newAPIRig(t, "", jsonBody(200, `{}`))
	cases := []struct{ path, body, want string }{
		{"/v1/embeddings", `{"model":"m"}`, `Missing required parameter: one of 'input', 'messages'.","type":"invalid_request_error","param":"input"`},
		{"/v1/rerank", `{"model":"m","query":"q"}`, `Missing required parameter: 'documents'.","type":"invalid_request_error","param":"documents"`},
		{"/score", `{"model":"m","text_1":"q"}`, `Missing required parameter: 'text_2'.","type":"invalid_request_error","param":"text_2"`},
		{"/tokenize", `{"model":"m"}`, `Missing required parameter: one of 'prompt', 'messages'.","type":"invalid_request_error","param":"prompt"`},
		{"/detokenize", `{"model":"m","tokens":null}`, `Missing required parameter: 'tokens'.","type":"invalid_request_error","param":"tokens"`},
		{"/v1/responses", `{"model":"m"}`, `Missing required parameter: 'input'.","type":"invalid_request_error","param":"input"`},
		{"/v1/responses", `{"model":"m","input":"x","previous_response_id":"a/b"}`, `Invalid value for 'previous_response_id': not a response id.","type":"invalid_request_error","param":"previous_response_id"`},
		{"/v1/responses", `{"model":"m","input":"x","max_output_tokens":0}`, `Invalid value for 'max_output_tokens': must be at least 1.","type":"invalid_request_error","param":"max_output_tokens"`},
	}
	for _, tc := range cases {
		expect(t, r.call("POST", tc.path, tc.body, "Authorization: Bearer ka"), 400, `{"error":{"message":"`+tc.want+`,"code":null}}`)
	}
	if n := len(r.ups[0].seen()); n != 0 {
		t.Errorf("%d invalid requests reached the upstream", n)
	}
}

// tokenize and detokenize are direct and charged nothing but the request.
func TestTokenizeDirect(t *testing.T) {
	r := newAPIRig(t, "{tpm: 1000, rpm: 10}", byPath(map[string]http.HandlerFunc{
		"POST /tokenize":   jsonBody(200, `{"count":2,"max_model_len":4096,"tokens":[1,2]}`),
		"POST /detokenize": jsonBody(200, `{"prompt":"hi"}`),
	}))
	expect(t, r.call("POST", "/tokenize", `{"model":"m","prompt":"hi"}`, "Authorization: Bearer ka"), 200, `{"count":2,"max_model_len":4096,"tokens":[1,2]}`)
	w := r.call("POST", "/detokenize", `{"model":"m","tokens":[1,2]}`, "Authorization: Bearer ka")
	expect(t, w, 200, `{"prompt":"hi"}`)
	expectHeader(t, w, "x-ratelimit-remaining-tokens", "1000")
	expectHeader(t, w, "x-ratelimit-remaining-requests", "8")
}

// A route the upstream does not serve (FastAPI's 404, vLLM's 501) is a
// 404 that says so, in the route's own shape; the upstream stays up.
func TestRouteNotServed(t *testing.T) {
	r := newAPIRig(t, "", byPath(map[string]http.HandlerFunc{
		"POST /v1/embeddings": jsonBody(501, `{"error":{"message":"The model does not support Embeddings API","type":"NotImplementedError","param":null,"code":501}}`),
	}))
	expect(t, r.call("POST", "/v1/rerank", `{"model":"m","query":"q","documents":["a"]}`, "Authorization: Bearer ka"), 404,
		"{\"error\":{\"message\":\"No model server in the pool serves POST /v1/rerank for the model `m`.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"unknown_url\"}}")
	expect(t, r.call("POST", "/v1/embeddings", `{"model":"m","input":"a"}`, "Authorization: Bearer ka"), 404,
		"{\"error\":{\"message\":\"No model server in the pool serves POST /v1/embeddings for the model `m`.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"unknown_url\"}}")
	expect(t, r.call("POST", "/v1/messages/count_tokens", `{"model":"m","messages":[]}`, "X-Api-Key: ka"), 404,
		"{\"type\":\"error\",\"error\":{\"type\":\"not_found_error\",\"message\":\"No model server in the pool serves POST /v1/messages/count_tokens for the model `m`.\"}}")
	if known, up := r.pool.Pinned(r.ups[0].url); !known || !up {
		t.Errorf("upstream marked down by a route it does not serve")
	}
}

// Audio goes upstream as the multipart body it came as, boundary and all.
func TestAudioMultipart(t *testing.T) {
	r := newAPIRig(t, "{tpm: 1000}", jsonBody(200, `{"text":"hello","usage":{"type":"duration","seconds":2}}`))
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("model", "m")
	fw, _ := mw.CreateFormFile("file", "a.wav")
	_, _ = fw.Write([]byte("RIFF....WAVE"))
	_ = mw.Close()
	req := httptest.NewRequestWithContext(t.Context(), "POST", "/v1/audio/transcriptions", bytes.NewReader(b.Bytes()))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer ka")
	w := httptest.NewRecorder()
	r.s.ServeHTTP(w, req)
	expect(t, w, 200, `{"text":"hello","usage":{"type":"duration","seconds":2}}`)
	got := r.ups[0].seen()[0]
	if got.Path != "/v1/audio/transcriptions" || got.ContentType != mw.FormDataContentType() || got.Body != b.String() {
		t.Errorf("upstream saw %s %q (%d bytes)", got.Path, got.ContentType, len(got.Body))
	}
	// No token usage reported: the default reservation (256) stands.
	expectHeader(t, w, "x-ratelimit-remaining-tokens", "744")

	for _, tc := range []struct{ ct, body, want string }{
		{"application/json", `{}`, `Content-Type must be multipart/form-data, got \"application/json\"`},
		{"multipart/form-data", ``, `The multipart body has no boundary.`},
		{mw.FormDataContentType(), "--" + mw.Boundary() + "--\r\n", `Missing required parameter: 'model'.`},
	} {
		req := httptest.NewRequestWithContext(t.Context(), "POST", "/v1/audio/translations", bytes.NewReader([]byte(tc.body)))
		req.Header.Set("Content-Type", tc.ct)
		req.Header.Set("Authorization", "Bearer ka")
		w := httptest.NewRecorder()
		r.s.ServeHTTP(w, req)
		if !bytes.Contains(w.Body.Bytes(), []byte(tc.want)) || w.Code/100 != 4 {
			t.Errorf("%s: %d %s", tc.ct, w.Code, w.Body)
		}
	}
}

// FuzzParseForm: any multipart body and content type is refused with a
// 4xx or accepted with a valid model, a file, and the body unchanged.
func FuzzParseForm(f *testing.F) {
	f.Add([]byte("--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\nRIFF\r\n--b--\r\n"), "multipart/form-data; boundary=b")
	f.Add([]byte("--b\r\nContent-Disposition: form-data; name=\"stream\"\r\n\r\nmaybe\r\n--b--\r\n"), "multipart/form-data; boundary=b")
	f.Add([]byte("--b\r\n\r\n--b--"), "multipart/form-data; boundary=\"b\"")
	f.Fuzz(func(t *testing.T, body []byte, ct string) {
		rt := routeFor("POST", "/v1/audio/transcriptions")
		req, e := parseForm(body, ct, rt)
		if e != nil {
			if e.Status != 400 || e.Message == "" {
				t.Fatalf("bad error %+v", e)
			}
			return
		}
		if checkModel(req.Model) != nil || !bytes.Equal(req.Body, body) || req.ContentType != ct || req.MaxTokens < 0 {
			t.Fatalf("accepted %+v", req)
		}
	})
}
