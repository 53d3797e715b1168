package gateway

import (
	"bytes"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// textBody answers with a fixed status, type and body.
func textBody(contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write([]byte(body))
	}
}

// transcription posts a multipart transcription request with extra
// form fields ("name", "value", ...).
func (r *apiRig) transcription(fields ...string) *httptest.ResponseRecorder {
	r.t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("model", "m")
	for i := 0; i+1 < len(fields); i += 2 {
		_ = mw.WriteField(fields[i], fields[i+1])
	}
	fw, _ := mw.CreateFormFile("file", "a.wav")
	_, _ = fw.Write([]byte("RIFF....WAVE"))
	_ = mw.Close()
	req := httptest.NewRequestWithContext(r.t.Context(), "POST", "/v1/audio/transcriptions", &b)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer ka")
	w := httptest.NewRecorder()
	r.s.ServeHTTP(w, req)
	return w
}

// A 2xx body that is not JSON (response_format text, srt or vtt) reaches
// the client byte for byte with the upstream's Content-Type, on the
// queued path (audio) and the direct path (tokenize), streamed or not.
func TestNonJSONBodyReachesClient(t *testing.T) {
	const vtt = "WEBVTT\n\n00:00:00.000 --> 00:00:02.000\nhello there\n\n"
	for _, c := range []struct{ ct, body string }{
		{"text/plain; charset=utf-8", "hello there\n"},
		{"text/vtt; charset=utf-8", vtt},
	} {
		r := newAPIRig(t, "{tpm: 1000}", textBody(c.ct, c.body))
		for name, w := range map[string]*httptest.ResponseRecorder{
			"queued":          r.transcription("response_format", "text"),
			"queued, stream":  r.transcription("response_format", "text", "stream", "true"),
			"direct tokenize": r.call("POST", "/tokenize", `{"model":"m","prompt":"hi"}`, "Authorization: Bearer ka"),
		} {
			expect(t, w, 200, c.body)
			if got := w.Header().Get("Content-Type"); got != c.ct {
				t.Errorf("%s %s: Content-Type %q", c.ct, name, got)
			}
		}
	}
}

// A body that says it is JSON and is not gets a 502 that says so (not a
// word of streams), and the log carries the cause.
func TestBodyNotJSONNamedAndLogged(t *testing.T) {
	var mu sync.Mutex
	var logged bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logged}, nil))
	r := newAPIRigWith(t, "", func(c *Config) { c.Logger = logger }, textBody("application/json", "hello there"))
	expect(t, r.transcription(), 502,
		`{"error":{"message":"The model server's response body is not JSON, although its Content-Type says it is.","type":"server_error","param":null,"code":"upstream_error"}}`)
	mu.Lock()
	defer mu.Unlock()
	want := `level=WARN msg="upstream error" request_id=req-1 path=/v1/audio/transcriptions status=502 cause="upstream: response broke off: malformed: the body is not JSON: ` +
		r.ups[0].url + `: Content-Type \"application/json\""`
	if !strings.Contains(logged.String(), want) {
		t.Errorf("log:\n%s\nwant a line with\n%s", logged.String(), want)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
