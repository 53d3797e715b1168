package vllmsim

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
)

// The simulated vocabulary has a token per word: the word "tok<n>" (n
// written without leading zeros, n < 2^30) is token n, any other word is
// 2^30 plus the low 30 bits of its FNV-1a hash. Detokenizing token n
// gives "tok<n>", so text the simulator generates round-trips.

const hashedTokenBase = 1 << 30

// wordToken is the token id of one word.
func wordToken(w string) int {
	if n, ok := strings.CutPrefix(w, "tok"); ok && n != "" && (n == "0" || n[0] != '0') {
		if id, err := strconv.Atoi(n); err == nil && id >= 0 && id < hashedTokenBase {
			return id
		}
	}
	h := fnv.New32a()
	h.Write([]byte(w))
	return hashedTokenBase | int(h.Sum32()&(hashedTokenBase-1))
}

type tokenizeRequest struct {
	Model           string            `json:"model"`
	Prompt          *string           `json:"prompt"`
	Messages        []json.RawMessage `json:"messages"`
	ReturnTokenStrs bool              `json:"return_token_strs"`
}

// tokenizeOut renders POST /tokenize.
type tokenizeOut struct {
	unstreamed
	j           *job
	maxModelLen int
	words       []string
	strs        bool
}

// tokenize serves POST /tokenize: a prompt, or chat messages whose
// contents are tokenized in order (the count equals a chat request's
// prompt_tokens).
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	var req tokenizeRequest
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
	o := &tokenizeOut{j: j, maxModelLen: s.cfg.MaxModelLen, strs: req.ReturnTokenStrs}
	switch {
	case req.Prompt != nil:
		o.words = strings.Fields(*req.Prompt)
	case req.Messages != nil:
		if o.words, e = messageTexts(req.Messages); e != nil {
			e.write(w)
			return
		}
	default:
		badRequest("Field required: prompt or messages.", ptr("body.prompt")).write(w)
		return
	}
	j.promptTokens, j.instant, j.out = len(o.words), true, o
	s.run(w, r, j)
}

// messageTexts are the words of every message's content, in order.
func messageTexts(msgs []json.RawMessage) ([]string, *apiError) {
	if _, e := messageWords(msgs); e != nil {
		return nil, e
	}
	var words []string
	for _, raw := range msgs {
		var m struct {
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(raw, &m) // checked by messageWords
		if text, ok := decode[string](m.Content); ok {
			words = append(words, strings.Fields(text)...)
			continue
		}
		parts, _ := decode[[]struct {
			Text string `json:"text"`
		}](m.Content)
		for _, p := range parts {
			words = append(words, strings.Fields(p.Text)...)
		}
	}
	return words, nil
}

func (o *tokenizeOut) full() []byte {
	resp := struct {
		Count       int       `json:"count"`
		MaxModelLen int       `json:"max_model_len"`
		Tokens      []int     `json:"tokens"`
		TokenStrs   *[]string `json:"token_strs"`
	}{Count: len(o.words), MaxModelLen: o.maxModelLen, Tokens: make([]int, len(o.words))}
	for i, w := range o.words {
		resp.Tokens[i] = wordToken(w)
	}
	if o.strs {
		resp.TokenStrs = &o.words
	}
	b, _ := json.Marshal(resp) // plain structs always marshal
	return b
}

// detokenizeOut renders POST /detokenize.
type detokenizeOut struct {
	unstreamed
	tokens []int
}

// detokenize serves POST /detokenize: token n reads "tok<n>", joined by
// spaces.
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string `json:"model"`
		Tokens *[]int `json:"tokens"`
	}
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
	if req.Tokens == nil {
		badRequest("Field required: tokens.", ptr("body.tokens")).write(w)
		return
	}
	j.instant, j.out = true, &detokenizeOut{tokens: *req.Tokens}
	s.run(w, r, j)
}

func (o *detokenizeOut) full() []byte {
	words := make([]string, len(o.tokens))
	for i, t := range o.tokens {
		words[i] = "tok" + strconv.Itoa(t)
	}
	return []byte(`{"prompt":` + quote(strings.Join(words, " ")) + `}`)
}
