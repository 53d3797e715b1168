package vllmsim

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"
	"testing/synctest"
	"time"
)

func TestEmbeddingsGolden(t *testing.T) {
	const p = "/v1/embeddings"
	runGolden(t, []routeCase{
		{name: "embeddings_string", path: p, body: `{"model":"sim-model","input":"hello there"}`, hdr: reqID},
		{name: "embeddings_list_dimensions", path: p, body: `{"input":["a b","c"],"dimensions":2}`, hdr: reqID},
		{name: "embeddings_token_ids_base64", path: p, body: `{"input":[[1,2,3],[4]],"encoding_format":"base64"}`, hdr: reqID},
		{name: "embeddings_err_dimensions", path: p, body: `{"input":"x","dimensions":5}`},
		{name: "embeddings_err_format", path: p, body: `{"input":"x","encoding_format":"int8"}`},
		{name: "embeddings_err_no_input", path: p, body: `{"model":"sim-model"}`},
		{name: "embeddings_err_context_length", path: p, body: `{"input":[[` + repeatIDs(65) + `]]}`},
		{name: "fault_embeddings_truncated_json", path: p, body: `{"input":"x"}`, hdr: withFault("truncated-json")},
		{name: "fault_embeddings_status_500", path: p, body: `{"input":"x"}`, hdr: withFault("status=500")},
	})
}

func repeatIDs(n int) string {
	b := make([]byte, 0, 2*n)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '7')
	}
	return string(b)
}

// Vectors are unit length; base64 carries the same float32 values; the
// token ids 1 2 read as the text "tok1 tok2"; an embedding takes a slot
// and answers after TTFT.
func TestEmbeddingsVectors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{TTFT: 50 * time.Millisecond})
		type resp struct {
			Data []struct {
				Embedding json.RawMessage `json:"embedding"`
			} `json:"data"`
			Usage map[string]any `json:"usage"`
		}
		get := func(body string) resp {
			t.Helper()
			var r resp
			rec := serve(t.Context(), s, "POST", "/v1/embeddings", body, nil)
			if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
				t.Fatalf("%s: %v", rec.Body, err)
			}
			return r
		}
		t0 := time.Now()
		floats := get(`{"input":["tok1 tok2"]}`)
		if d := time.Since(t0); d != 50*time.Millisecond {
			t.Errorf("took %v, want TTFT 50ms", d)
		}
		var vec []float64
		_ = json.Unmarshal(floats.Data[0].Embedding, &vec)
		var sum float64
		for _, x := range vec {
			sum += x * x
		}
		if len(vec) != 16 || math.Abs(sum-1) > 1e-6 {
			t.Errorf("vector %v: len %d, norm² %v", vec, len(vec), sum)
		}
		ids := get(`{"input":[1,2]}`)
		if string(ids.Data[0].Embedding) != string(floats.Data[0].Embedding) {
			t.Errorf("token ids vector %s != text vector %s", ids.Data[0].Embedding, floats.Data[0].Embedding)
		}
		b64 := get(`{"input":"tok1 tok2","encoding_format":"base64"}`)
		var enc string
		_ = json.Unmarshal(b64.Data[0].Embedding, &enc)
		raw, err := base64.StdEncoding.DecodeString(enc)
		if err != nil || len(raw) != 4*len(vec) {
			t.Fatalf("base64 %q: %v", enc, err)
		}
		for i, x := range vec {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); float64(got) != x {
				t.Errorf("dim %d: base64 %v, float %v", i, got, x)
			}
		}
	})
}
