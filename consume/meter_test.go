package consume

import "testing"

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
