package vllmsim

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// A cross-encoder scores a (query, document) pair: the share of the
// query's distinct words that occur in the document (0 for an empty
// query). The pair costs the words of both as prompt tokens.

type rerankRequest struct {
	Model     string   `json:"model"`
	Query     *string  `json:"query"`
	Documents []string `json:"documents"`
	TopN      int      `json:"top_n"`
}

type scoreRequest struct {
	Model string          `json:"model"`
	Text1 json.RawMessage `json:"text_1"`
	Text2 json.RawMessage `json:"text_2"`
}

type scorePair struct{ query, doc string }

// pairScore is the relevance of doc to query.
func pairScore(query, doc string) float64 {
	q := strings.Fields(query)
	slices.Sort(q)
	q = slices.Compact(q)
	if len(q) == 0 {
		return 0
	}
	words := strings.Fields(doc)
	hit := 0
	for _, w := range q {
		if slices.Contains(words, w) {
			hit++
		}
	}
	return float64(hit) / float64(len(q))
}

func pairTokens(p scorePair) int {
	return len(strings.Fields(p.query)) + len(strings.Fields(p.doc))
}

// rerankOut renders /rerank, /v1/rerank and /v2/rerank.
type rerankOut struct {
	unstreamed
	j     *job
	query string
	docs  []string
	topN  int
}

type rerankResult struct {
	Index          int            `json:"index"`
	Document       rerankDocument `json:"document"`
	RelevanceScore pyNumber       `json:"relevance_score"`
}

type rerankDocument struct {
	Text       string          `json:"text"`
	MultiModal json.RawMessage `json:"multi_modal"`
}

type rerankResponse struct {
	ID    string `json:"id"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
	Results []rerankResult `json:"results"`
}

// rerank serves the rerank routes.
func (s *Server) rerank(w http.ResponseWriter, r *http.Request) {
	var req rerankRequest
	body, e := readJSON(r, &req)
	if e != nil {
		e.write(w)
		return
	}
	if req.Query == nil {
		badRequest("Field required: query.", ptr("body.query")).write(w)
		return
	}
	j, e := s.newJob(r, req.Model, body)
	if e != nil {
		e.write(w)
		return
	}
	j.respID = "rerank-" + j.id
	o := &rerankOut{j: j, query: *req.Query, docs: req.Documents, topN: req.TopN}
	for _, d := range req.Documents {
		j.promptTokens += pairTokens(scorePair{*req.Query, d})
	}
	j.out = o
	s.run(w, r, j)
}

func (o *rerankOut) full() []byte {
	resp := rerankResponse{ID: o.j.respID, Model: unquote(o.j.model), Results: make([]rerankResult, len(o.docs))}
	resp.Usage.PromptTokens, resp.Usage.TotalTokens = o.j.promptTokens, o.j.promptTokens
	for i, d := range o.docs {
		resp.Results[i] = rerankResult{Index: i, Document: rerankDocument{Text: d}, RelevanceScore: pyNumber(pairScore(o.query, d))}
	}
	slices.SortStableFunc(resp.Results, func(a, b rerankResult) int {
		switch {
		case a.RelevanceScore > b.RelevanceScore:
			return -1
		case a.RelevanceScore < b.RelevanceScore:
			return 1
		}
		return 0
	})
	if o.topN > 0 && o.topN < len(resp.Results) {
		resp.Results = resp.Results[:o.topN]
	}
	b, _ := json.Marshal(resp) // plain structs always marshal
	return b
}

// scoreOut renders /score and /v1/score.
type scoreOut struct {
	unstreamed
	j     *job
	pairs []scorePair
}

type scoreData struct {
	Index  int      `json:"index"`
	Object string   `json:"object"`
	Score  pyNumber `json:"score"`
}

type scoreResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Data    []scoreData  `json:"data"`
	Usage   poolingUsage `json:"usage"`
}

// score serves the score routes: text_1 and text_2 are strings or lists;
// one text_1 is paired with every text_2, lists of equal length pair up.
func (s *Server) score(w http.ResponseWriter, r *http.Request) {
	var req scoreRequest
	body, e := readJSON(r, &req)
	if e != nil {
		e.write(w)
		return
	}
	j, e := s.newJob(r, req.Model, body)
	if e != nil {
		e.write(w)
		return
	}
	pairs, e := scorePairs(req.Text1, req.Text2)
	if e != nil {
		e.write(w)
		return
	}
	j.respID = "score-" + j.id
	for _, p := range pairs {
		j.promptTokens += pairTokens(p)
	}
	j.out = &scoreOut{j: j, pairs: pairs}
	s.run(w, r, j)
}

func scorePairs(raw1, raw2 json.RawMessage) ([]scorePair, *apiError) {
	t1, ok1 := textList(raw1)
	t2, ok2 := textList(raw2)
	switch {
	case !ok1:
		return nil, badRequest("Field required: text_1 must be a string or a list of strings.", ptr("body.text_1"))
	case !ok2:
		return nil, badRequest("Field required: text_2 must be a string or a list of strings.", ptr("body.text_2"))
	case len(t1) == 1:
		t1 = slices.Repeat(t1, len(t2))
	case len(t1) != len(t2):
		return nil, badRequest("text_1 and text_2 must have the same length, or text_1 must be a single text.", nil)
	}
	pairs := make([]scorePair, len(t2))
	for i := range t2 {
		pairs[i] = scorePair{t1[i], t2[i]}
	}
	return pairs, nil
}

// textList reads a string or a non-empty list of strings.
func textList(raw json.RawMessage) ([]string, bool) {
	if one, ok := decode[string](raw); ok {
		return []string{one}, true
	}
	l, ok := decode[[]string](raw)
	return l, ok && len(l) > 0
}

func (o *scoreOut) full() []byte {
	resp := scoreResponse{ID: o.j.respID, Object: "list", Created: o.j.created, Model: unquote(o.j.model),
		Data: make([]scoreData, len(o.pairs)), Usage: poolingUsage{PromptTokens: o.j.promptTokens, TotalTokens: o.j.promptTokens}}
	for i, p := range o.pairs {
		resp.Data[i] = scoreData{Index: i, Object: "score", Score: pyNumber(pairScore(p.query, p.doc))}
	}
	b, _ := json.Marshal(resp) // plain structs always marshal
	return b
}

// pyNumber is a float that marshals as Python prints it: 1.0, not 1.
type pyNumber float64

// MarshalJSON implements [json.Marshaler].
func (f pyNumber) MarshalJSON() ([]byte, error) { return []byte(pyFloat(float64(f))), nil }
