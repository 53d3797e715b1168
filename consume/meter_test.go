package consume

import (
	"slices"
	"testing"
	"time"

	"github.com/pacegate/pacegate/consume/fairshare"
	"github.com/pacegate/pacegate/policy"
)

func TestParseUsage(t *testing.T) {
	cases := []struct {
		data string
		ok   bool
		want Usage
	}{
		{`{"choices":[{"index":0,"delta":{"content":"x"}}]}`, false, Usage{}},
		{`{"choices":[],"usage":{"prompt_tokens":6,"total_tokens":11,"completion_tokens":5}}`, true,
			Usage{PromptTokens: 6, CompletionTokens: 5, TotalTokens: 11, Only: true}},
		{`{"choices":[{"index":0,"delta":{}}],"usage":{"total_tokens":3}}`, true, Usage{TotalTokens: 3}},
		{`{"choices":[{"index":0}],"usage":{"prompt_tokens":2,"completion_tokens":4}}`, true,
			Usage{PromptTokens: 2, CompletionTokens: 4, TotalTokens: 6}}, // no total: the sum
		{`{"choices":[{"delta":{"content":"\"usage\""}}],"usage":null}`, false, Usage{}},
		{`{"error":{"message":"x"}}`, false, Usage{}},
		{`not json "usage"`, false, Usage{}},
	}
	for _, tc := range cases {
		got, ok := ParseUsage([]byte(tc.data))
		if ok != tc.ok || got != tc.want {
			t.Errorf("ParseUsage(%s) = %+v, %v; want %+v, %v", tc.data, got, ok, tc.want, tc.ok)
		}
	}
}

// A request's commitment is prompt + w × the smaller of its max_tokens
// and its bucket's recent mean; tokens beyond it are charged as they
// stream, in batches, and the final usage sets the exact total.
func TestMeterChargesTheCommitmentAndReconciles(t *testing.T) {
	s := fairshare.New(0)
	k := policy.Key{Tenant: "t", Model: "m"}
	now := time.Unix(1000, 0)
	s.Start(k, 0, now) // an earlier request that generated 10 tokens
	s.Completed(k, 10)
	s.Done(k, now)
	counter := func() float64 {
		st, _ := s.Flow(k, now)
		return st.Counter
	}
	token := Event{Kind: EventChunk, Data: []byte(`{"choices":[{"delta":{"content":"x"}}]}`)}
	m := startMeter(s, k, 2, &Request{Key: k, PromptTokens: 5, CompletionTokens: 100}, now)
	var got []float64
	got = append(got, counter()) // 5 + 2 × 10, not 2 × 100
	for range 10 {
		m.observe(token)
	}
	got = append(got, counter()) // within the commitment
	for range 16 {
		m.observe(token)
	}
	got = append(got, counter()) // 16 beyond it: one batch of 2 × 16
	for range 4 {
		m.observe(token)
	}
	got = append(got, counter()) // 4 more, owed
	m.observe(Event{Kind: EventChunk, Data: []byte(`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":30,"total_tokens":35}}`)})
	got = append(got, counter()) // the usage: 5 + 2 × 30
	m.end()
	if want := []float64{25, 25, 57, 57, 65}; !slices.Equal(got, want) {
		t.Fatalf("counter %v, want %v", got, want)
	}
	if mean, _ := s.MeanCompletion(k); mean != 14 { // 10 + 0.2 × (30 − 10)
		t.Fatalf("mean completion %v, want 14", mean)
	}
}

// A stream cut short is charged what it produced: the commitment not
// generated is given back at the end.
func TestMeterGivesBackTheUnusedCommitment(t *testing.T) {
	s := fairshare.New(0)
	k := policy.Key{Tenant: "t", Model: "m"}
	now := time.Unix(1000, 0)
	token := Event{Kind: EventChunk, Data: []byte(`{"choices":[{"delta":{"content":"x"}}]}`)}
	m := startMeter(s, k, 2, &Request{Key: k, PromptTokens: 5, CompletionTokens: 100}, now)
	for range 3 {
		m.observe(token)
	}
	m.end()
	if st, _ := s.Flow(k, now); st.Counter != 11 { // 5 + 2 × 3
		t.Fatalf("counter %v, want 11", st.Counter)
	}
}

// startMeter is a new meter, started.
func startMeter(s *fairshare.Scheduler, k policy.Key, w float64, req *Request, now time.Time) *meter {
	m := new(meter)
	m.start(s, k, w, req, false, now)
	return m
}
