package consume

import "testing"

type chunk struct{ name, data string }

// Each shape's tally: which events are tokens, where usage comes from,
// and what a stream is charged, complete or cut short.
func TestTally(t *testing.T) {
	cases := []struct {
		name   string
		shape  Shape
		chunks []chunk
		tokens int
		want   Usage
		final  bool
		charge int64 // Charge(100)
	}{
		{"chat", ShapeOpenAI, []chunk{
			{"", `{"choices":[{"delta":{"content":"a"}}]}`},
			{"", `{"choices":[{"delta":{"content":"b"}}]}`},
			{"", `{"choices":[],"usage":{"prompt_tokens":6,"completion_tokens":2,"total_tokens":8}}`},
		}, 2, Usage{6, 2, 8, true, 0, false}, true, 8},
		{"chat cut", ShapeOpenAI, []chunk{
			{"", `{"choices":[{"delta":{"content":"a"}}]}`},
		}, 1, Usage{}, false, 101},
		{"responses", ShapeResponses, []chunk{
			{"response.created", `{"type":"response.created","response":{"id":"resp_1","usage":null}}`},
			{"response.output_text.delta", `{"type":"response.output_text.delta","delta":"a"}`},
			{"response.output_text.delta", `{"type":"response.output_text.delta","delta":"b"}`},
			{"response.output_text.done", `{"type":"response.output_text.done","text":"ab"}`},
			{"response.completed", `{"type":"response.completed","response":{"id":"resp_1","usage":{"input_tokens":5,"output_tokens":2,"total_tokens":7}}}`},
		}, 2, Usage{5, 2, 7, false, 0, false}, true, 7},
		{"responses cut", ShapeResponses, []chunk{
			{"response.created", `{"type":"response.created"}`},
			{"response.output_text.delta", `{"delta":"a"}`},
		}, 1, Usage{}, false, 101},
		{"anthropic", ShapeAnthropic, []chunk{
			{"message_start", `{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":9,"output_tokens":1}}}`},
			{"content_block_start", `{"type":"content_block_start","index":0}`},
			{"ping", `{"type":"ping"}`},
			{"content_block_delta", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"a"}}`},
			{"content_block_delta", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"b"}}`},
			{"content_block_delta", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"c"}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":0}`},
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":3}}`},
			{"message_stop", `{"type":"message_stop"}`},
		}, 3, Usage{9, 3, 12, false, 0, false}, true, 12},
		{"anthropic cached", ShapeAnthropic, []chunk{
			{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":4,"cache_read_input_tokens":32,"output_tokens":1}}}`},
			{"content_block_delta", `{"delta":{"text":"a"}}`},
			{"message_delta", `{"type":"message_delta","usage":{"output_tokens":1}}`},
		}, 1, Usage{36, 1, 37, false, 32, true}, true, 37},
		{"chat cached", ShapeOpenAI, []chunk{
			{"", `{"choices":[{"delta":{"content":"a"}}]}`},
			{"", `{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":1,"total_tokens":41,"prompt_tokens_details":{"cached_tokens":32}}}`},
		}, 1, Usage{40, 1, 41, true, 32, true}, true, 41},
		{"anthropic cut after start", ShapeAnthropic, []chunk{
			{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":1}}}`},
			{"content_block_delta", `{"delta":{"text":"a"}}`},
			{"content_block_delta", `{"delta":{"text":"b"}}`},
		}, 2, Usage{9, 1, 10, false, 0, false}, false, 11},
	}
	for _, tc := range cases {
		tl := Tally{Shape: tc.shape}
		tokens := 0
		for _, c := range tc.chunks {
			if tok, _ := tl.Chunk(c.name, []byte(c.data)); tok {
				tokens++
			}
		}
		if tokens != tc.tokens || tl.Usage != tc.want || tl.Final != tc.final {
			t.Errorf("%s: tokens %d usage %+v final %v; want %d %+v %v", tc.name, tokens, tl.Usage, tl.Final, tc.tokens, tc.want, tc.final)
		}
		if got := tl.Charge(100); got != tc.charge {
			t.Errorf("%s: Charge(100) = %d, want %d", tc.name, got, tc.charge)
		}
	}
}

func TestTallyBody(t *testing.T) {
	cases := []struct {
		body string
		ok   bool
		want Usage
	}{
		{`{"object":"chat.completion","usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`, true, Usage{3, 4, 7, false, 0, false}},
		{`{"object":"response","usage":{"input_tokens":5,"output_tokens":2,"total_tokens":7}}`, true, Usage{5, 2, 7, false, 0, false}},
		{`{"type":"message","usage":{"input_tokens":9,"output_tokens":3,"cache_read_input_tokens":2}}`, true, Usage{11, 3, 14, false, 2, true}},
		{`{"object":"list","data":[],"usage":{"prompt_tokens":12,"total_tokens":12}}`, true, Usage{12, 0, 12, false, 0, false}},
		{`{"results":[],"usage":{"total_tokens":30}}`, true, Usage{30, 0, 30, false, 0, false}},
		{`{"object":"chat.completion","usage":{"prompt_tokens":30,"completion_tokens":4,"total_tokens":34,"prompt_tokens_details":{"cached_tokens":16}}}`, true, Usage{30, 4, 34, false, 16, true}},
		{`{"object":"response","usage":{"input_tokens":30,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"total_tokens":32}}`, true, Usage{30, 2, 32, false, 0, true}},
		{`{"input_tokens":5}`, false, Usage{}},
		{`{"usage":null}`, false, Usage{}},
	}
	for _, tc := range cases {
		var tl Tally
		if ok := tl.Body([]byte(tc.body)); ok != tc.ok || tl.Usage != tc.want {
			t.Errorf("Body(%s) = %v %+v; want %v %+v", tc.body, ok, tl.Usage, tc.ok, tc.want)
		}
	}
}

// FuzzTally: any event in any shape is read without a panic; an event is
// never both a token and a usage report, and a body's usage is final.
func FuzzTally(f *testing.F) {
	for _, c := range []struct {
		name, data string
	}{
		{"", `{"choices":[],"usage":{"prompt_tokens":6,"completion_tokens":2}}`},
		{"response.completed", `{"response":{"usage":{"input_tokens":5,"output_tokens":2,"total_tokens":7}}}`},
		{"response.output_text.delta", `{"delta":"a"}`},
		{"message_start", `{"message":{"usage":{"input_tokens":9,"output_tokens":1}}}`},
		{"message_delta", `{"usage":{"output_tokens":3,"input_tokens":null}}`},
		{"content_block_delta", `{}`},
		{"message_delta", `{"usage":{"output_tokens":"x"}}`},
	} {
		f.Add(c.name, []byte(c.data), uint8(0))
	}
	f.Fuzz(func(t *testing.T, name string, data []byte, shape uint8) {
		tl := Tally{Shape: Shape(shape % 3)}
		token, reported := tl.Chunk(name, data)
		if token && reported {
			t.Fatalf("%q %q: both a token and a usage report", name, data)
		}
		_ = tl.Charge(10)
		var body Tally
		if body.Body(data) && !body.Final {
			t.Fatalf("body usage not final: %q", data)
		}
	})
}
