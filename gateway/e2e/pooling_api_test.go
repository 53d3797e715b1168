package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/pacegate/pacegate/policy/policytest"
)

// rerank, score, tokenize and detokenize through pacegate to the
// simulator: exact bodies, and the usage the server reports is what the
// TPM window is charged (seen in the next request's remaining tokens).
func TestPoolingAndTokenizerRoutes(t *testing.T) {
	s := startStack(t, "\ndefaults: {tpm: 1000}\n"+tenantsYAML, newSim(t, fastSim()))
	policytest.InOneWindow(t, 10*time.Second) // each charge is seen in the next request's remaining tokens
	cases := []struct {
		path, body, want string
		charged          int // tokens charged by the first call
	}{
		{"/rerank", `{"model":"sim-model","query":"a b","documents":["c","d e"]}`,
			`{"id":"rerank-{id}","model":"sim-model","usage":{"prompt_tokens":7,"total_tokens":7},"results":[{"index":0,"document":{"text":"c","multi_modal":null},"relevance_score":0.0},{"index":1,"document":{"text":"d e","multi_modal":null},"relevance_score":0.0}]}`,
			7},
		{"/v1/score", `{"model":"sim-model","text_1":"a","text_2":["a","c"]}`,
			`{"id":"score-{id}","object":"list","created":{created},"model":"sim-model","data":[{"index":0,"object":"score","score":1.0},{"index":1,"object":"score","score":0.0}],"usage":{"prompt_tokens":4,"total_tokens":4,"completion_tokens":0,"prompt_tokens_details":null}}`,
			4},
		{"/tokenize", `{"model":"sim-model","prompt":"tok0 tok12"}`,
			`{"count":2,"max_model_len":32768,"tokens":[0,12],"token_strs":null}`, 0},
		{"/detokenize", `{"model":"sim-model","tokens":[0,12]}`, `{"prompt":"tok0 tok12"}`, 0},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			resp := s.post(t.Context(), tc.path, "sk-alice", tc.body)
			before := resp.Header.Get("x-ratelimit-remaining-tokens")
			body := readAll(t, resp.Body)
			// The simulator's ids carry pacegate's request id; created is
			// the arrival time.
			created := ""
			if i := strings.Index(body, `"created":`); i >= 0 {
				created = strings.SplitN(body[i+len(`"created":`):], ",", 2)[0]
			}
			want := strings.NewReplacer("{id}", resp.Header.Get("X-Request-Id"), "{created}", created).Replace(tc.want)
			if resp.StatusCode != 200 || body != want {
				t.Fatalf("%d %s\nwant %s", resp.StatusCode, body, want)
			}
			resp = s.post(t.Context(), tc.path, "sk-alice", tc.body)
			readAll(t, resp.Body)
			var left int
			fmt.Sscan(before, &left)
			// left is 1000 - reservation; after the second admission it
			// is 1000 - charged - the same reservation.
			if got := resp.Header.Get("x-ratelimit-remaining-tokens"); got != fmt.Sprint(left-tc.charged) {
				t.Errorf("remaining after the second call = %s; after the first %s, want %d charged", got, before, tc.charged)
			}
		})
	}
}

// openai-go's multipart transcription through pacegate: the upload
// reaches the simulator intact.
func TestSDKAudioTranscription(t *testing.T) {
	s := startStack(t, tenantsYAML, newSim(t, fastSim()))
	res, err := sdkClient(s, "sk-alice").Audio.Transcriptions.New(t.Context(), openai.AudioTranscriptionNewParams{
		Model: "sim-model",
		File:  openai.File(bytes.NewReader(make([]byte, 64000)), "a.wav", "audio/wav"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text == "" {
		t.Errorf("empty transcription: %+v", res)
	}
	resp := s.post(t.Context(), "/v1/audio/transcriptions", "sk-alice", `{"model":"sim-model"}`)
	if body := readAll(t, resp.Body); resp.StatusCode != http.StatusUnsupportedMediaType ||
		body != `{"error":{"message":"Content-Type must be multipart/form-data, got \"application/json\"","type":"invalid_request_error","param":null,"code":null}}` {
		t.Errorf("JSON body on an audio route: %d %s", resp.StatusCode, body)
	}
}
