package e2e

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

func responseParams(input string, maxTokens int64) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:           "sim-model",
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String(input)},
		MaxOutputTokens: openai.Int(maxTokens),
	}
}

// openai-go's Responses client, not streamed: exact text and usage, a
// retrieval and a follow-up on the instance that stored the response
// (two simulators: the wrong one would answer 404), and tenant bob's
// probes of alice's id, answered 404 as if it did not exist.
func TestSDKResponsesNonStreaming(t *testing.T) {
	s := startStack(t, tenantsYAML, newSim(t, fastSim()), newSim(t, fastSim()))
	alice, bob := sdkClient(s, "sk-alice"), sdkClient(s, "sk-bob")
	for range 3 { // the pool rotates: every response must be found where it lives
		resp, err := alice.Responses.New(t.Context(), responseParams("hello there world", 3))
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.OutputText(); got != "tok0 tok1 tok2" {
			t.Errorf("text = %q", got)
		}
		if resp.Usage.InputTokens != 3 || resp.Usage.OutputTokens != 3 || resp.Usage.TotalTokens != 6 {
			t.Errorf("usage = %+v, want 3 in, 3 out", resp.Usage)
		}
		got, err := alice.Responses.Get(t.Context(), resp.ID, responses.ResponseGetParams{})
		if err != nil || got.ID != resp.ID || got.OutputText() != "tok0 tok1 tok2" {
			t.Fatalf("Get(%s) = %v, %v", resp.ID, got, err)
		}
		p := responseParams("and more", 2)
		p.PreviousResponseID = openai.String(resp.ID)
		next, err := alice.Responses.New(t.Context(), p)
		if err != nil {
			t.Fatalf("follow-up of %s: %v", resp.ID, err)
		}
		// The simulator counts the previous turn into the input: 3 + 3 + 2.
		if next.Usage.InputTokens != 8 || next.OutputText() != "tok0 tok1" {
			t.Errorf("follow-up usage %+v text %q", next.Usage, next.OutputText())
		}

		_, err = bob.Responses.Get(t.Context(), resp.ID, responses.ResponseGetParams{})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "not_found" ||
			apiErr.Message != "Response with id '"+resp.ID+"' not found." {
			t.Errorf("bob's Get of alice's response = %v, want 404 not_found", err)
		}
		_, err = bob.Responses.New(t.Context(), p)
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Param != "previous_response_id" {
			t.Errorf("bob's follow-up of alice's response = %v, want 404 on previous_response_id", err)
		}
		_, err = bob.Responses.Cancel(t.Context(), resp.ID)
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
			t.Errorf("bob's cancel of alice's response = %v, want 404", err)
		}
	}
}

// openai-go's Responses stream: the named events arrive in order and the
// SDK decodes them; the text and the usage on response.completed are
// exact, and the id learnt from response.created can be retrieved.
func TestSDKResponsesStreaming(t *testing.T) {
	s := startStack(t, tenantsYAML, newSim(t, fastSim()), newSim(t, fastSim()))
	c := sdkClient(s, "sk-alice")
	stream := c.Responses.NewStreaming(t.Context(), responseParams("hello there world", 4))
	var types []string
	var text strings.Builder
	var done responses.Response
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			done = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		strings.Repeat("response.output_text.delta ", 4) +
		"response.output_text.done response.content_part.done response.output_item.done response.completed"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("events:\n%s\nwant\n%s", got, want)
	}
	if text.String() != "tok0 tok1 tok2 tok3" || done.Usage.InputTokens != 3 || done.Usage.OutputTokens != 4 {
		t.Errorf("text %q usage %+v", text.String(), done.Usage)
	}
	if _, err := c.Responses.Get(t.Context(), done.ID, responses.ResponseGetParams{}); err != nil {
		t.Errorf("Get of a streamed response: %v", err)
	}
}

// A 429 on /v1/responses is openai-go's rate-limit error, and the SDK
// retries it after retry-after-ms.
func TestSDKResponsesRateLimitRetried(t *testing.T) {
	s := startStack(t, "\ndefaults: {rpm: 60, burst: 1, rate: 100}\n"+tenantsYAML, newSim(t, fastSim()))
	if _, err := sdkClient(s, "sk-alice").Responses.New(t.Context(), responseParams("hi", 1)); err != nil {
		t.Fatal(err)
	}
	_, err := sdkClient(s, "sk-alice").Responses.New(t.Context(), responseParams("hi", 1))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "rate_limit_exceeded" {
		t.Fatalf("without retries: %v, want 429 rate_limit_exceeded", err)
	}
	rt := &recordingTransport{}
	c := sdkClient(s, "sk-alice", option.WithMaxRetries(2), option.WithHTTPClient(&http.Client{Transport: rt}))
	if _, err := c.Responses.New(t.Context(), responseParams("hi", 1)); err != nil {
		t.Fatalf("retried request failed: %v", err)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if n := len(rt.attempts); n < 2 || rt.attempts[0].status != 429 || rt.attempts[n-1].status != 200 {
		t.Fatalf("attempts = %+v, want 429 ... 200", rt.attempts)
	}
}

// openai-go's embeddings with a batched input: one vector per input and
// prompt_tokens over all of them.
func TestSDKEmbeddings(t *testing.T) {
	s := startStack(t, tenantsYAML, newSim(t, fastSim()))
	resp, err := sdkClient(s, "sk-alice").Embeddings.New(t.Context(), openai.EmbeddingNewParams{
		Model: "sim-model",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"one two", "three", "four five six"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 3 || resp.Usage.PromptTokens != 6 || resp.Usage.TotalTokens != 6 {
		t.Errorf("%d vectors, usage %+v; want 3 and 6 prompt tokens", len(resp.Data), resp.Usage)
	}
}
