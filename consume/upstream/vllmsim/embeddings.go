package vllmsim

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"strings"
)

type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
}

// embeddingsOut renders /v1/embeddings: one vector per input.
type embeddingsOut struct {
	unstreamed
	j       *job
	inputs  []string // each input's words, or its token ids, joined by spaces
	dims    int
	base64  bool
	vectors [][]float32
}

// embeddings serves POST /v1/embeddings.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	j, e := s.parseEmbeddings(r)
	if e != nil {
		e.write(w)
		return
	}
	s.run(w, r, j)
}

func (s *Server) parseEmbeddings(r *http.Request) (*job, *apiError) {
	var req embeddingsRequest
	body, e := readJSON(r, &req)
	if e != nil {
		return nil, e
	}
	j, e := s.newJob(r, req.Model, body)
	if e != nil {
		return nil, e
	}
	j.respID = "embd-" + j.id
	o := &embeddingsOut{j: j, dims: s.cfg.EmbeddingDim}
	j.out = o
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		o.base64 = true
	default:
		return nil, badRequest(fmt.Sprintf("encoding_format must be 'float' or 'base64', got %q.", req.EncodingFormat), ptr("encoding_format"))
	}
	if d := req.Dimensions; d != nil {
		if *d < 1 || *d > s.cfg.EmbeddingDim {
			return nil, badRequest(fmt.Sprintf("dimensions must be between 1 and %d, got %d.", s.cfg.EmbeddingDim, *d), ptr("dimensions"))
		}
		o.dims = *d
	}
	var counts []int
	if o.inputs, counts, e = embeddingInputs(req.Input); e != nil {
		return nil, e
	}
	for _, n := range counts {
		if n > s.cfg.MaxModelLen {
			return nil, badRequest(fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens in the input for embedding generation. Please reduce the length of the input.",
				s.cfg.MaxModelLen, n), nil)
		}
		j.promptTokens += n
	}
	return j, nil
}

// embeddingInputs splits an input (a string, a list of strings, a list of
// token ids or a list of such lists) into keys for the vectors and token
// counts.
func embeddingInputs(raw json.RawMessage) (keys []string, counts []int, e *apiError) {
	var many []string
	var idLists [][]int
	if one, ok := decode[string](raw); ok {
		many = []string{one}
	} else if l, ok := decode[[]string](raw); ok && len(l) > 0 {
		many = l
	} else if ids, ok := decode[[]int](raw); ok && len(ids) > 0 {
		idLists = [][]int{ids}
	} else if l, ok := decode[[][]int](raw); ok && len(l) > 0 {
		idLists = l
	} else {
		return nil, nil, badRequest("Field required: input must be a string, a list of strings or token ids.", ptr("body.input"))
	}
	for _, text := range many {
		words := strings.Fields(text)
		keys, counts = append(keys, strings.Join(words, " ")), append(counts, len(words))
	}
	for _, l := range idLists {
		parts := make([]string, len(l))
		for i, id := range l {
			parts[i] = "tok" + strconv.Itoa(id)
		}
		keys, counts = append(keys, strings.Join(parts, " ")), append(counts, len(l))
	}
	return keys, counts, nil
}

// decode unmarshals raw as a T, reporting whether it is one.
func decode[T any](raw json.RawMessage) (T, bool) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err == nil
}

// embedVector is the unit vector of key: value i is drawn from
// mix64(FNV-1a(key)+i) in [-1, 1), then the vector is normalised to
// length 1. A text and
// its token ids ("tok<id>" words) give the same vector.
func embedVector(key string, dims int) []float32 {
	h := fnv.New64a()
	h.Write([]byte(key))
	seed := h.Sum64()
	v := make([]float64, dims)
	var sum float64
	for i := range v {
		v[i] = float64(mix64(seed+uint64(i))>>11)/float64(1<<53)*2 - 1
		sum += v[i] * v[i]
	}
	out := make([]float32, dims)
	norm := math.Sqrt(sum)
	for i := range v {
		out[i] = float32(v[i] / norm)
	}
	return out
}

type embeddingData struct {
	Index     int    `json:"index"`
	Object    string `json:"object"`
	Embedding any    `json:"embedding"`
}

type embeddingsResponse struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Data    []embeddingData `json:"data"`
	Usage   poolingUsage    `json:"usage"`
}

// poolingUsage is vLLM's UsageInfo for a request that generates nothing.
type poolingUsage struct {
	PromptTokens        int             `json:"prompt_tokens"`
	TotalTokens         int             `json:"total_tokens"`
	CompletionTokens    int             `json:"completion_tokens"`
	PromptTokensDetails json.RawMessage `json:"prompt_tokens_details"`
}

func (o *embeddingsOut) full() []byte {
	resp := embeddingsResponse{ID: o.j.respID, Object: "list", Created: o.j.created, Model: unquote(o.j.model),
		Data: make([]embeddingData, len(o.inputs)), Usage: poolingUsage{PromptTokens: o.j.promptTokens, TotalTokens: o.j.promptTokens}}
	for i, key := range o.inputs {
		vec := embedVector(key, o.dims)
		d := embeddingData{Index: i, Object: "embedding"}
		if o.base64 {
			b := make([]byte, 4*len(vec))
			for k, x := range vec {
				binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(x))
			}
			d.Embedding = base64.StdEncoding.EncodeToString(b)
		} else {
			f := make([]float64, len(vec))
			for k, x := range vec {
				f[k] = float64(x) // as vLLM prints a float32 tensor's values
			}
			d.Embedding = f
		}
		resp.Data[i] = d
	}
	b, _ := json.Marshal(resp) // plain structs always marshal
	return b
}

// mix64 is the SplitMix64 finaliser.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
