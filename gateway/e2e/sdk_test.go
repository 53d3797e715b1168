package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func sdkClient(s *stack, key string, opts ...option.RequestOption) *openai.Client {
	base := []option.RequestOption{option.WithBaseURL(s.url + "/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0)}
	c := openai.NewClient(append(base, opts...)...)
	return &c
}

func chatParams(maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:               "sim-model",
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there world")},
		MaxCompletionTokens: openai.Int(maxTokens),
	}
}

func TestSDKChatNonStreaming(t *testing.T) {
	s := startStack(t, tenantsYAML, newSim(t, fastSim()))
	c := sdkClient(s, "sk-alice")
	resp, err := c.Chat.Completions.New(t.Context(), chatParams(3))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "tok0 tok1 tok2" {
		t.Errorf("content = %q, want %q", got, "tok0 tok1 tok2")
	}
	if resp.Usage.PromptTokens != 3 || resp.Usage.CompletionTokens != 3 || resp.Usage.TotalTokens != 6 {
		t.Errorf("usage = %+v, want prompt 3, completion 3, total 6", resp.Usage)
	}
	if resp.Choices[0].FinishReason != "length" {
		t.Errorf("finish_reason = %q, want length", resp.Choices[0].FinishReason)
	}
}

func TestSDKChatStreaming(t *testing.T) {
	s := startStack(t, tenantsYAML, newSim(t, fastSim()))
	c := sdkClient(s, "sk-alice")
	for _, include := range []bool{true, false} {
		p := chatParams(4)
		if include {
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		}
		stream := c.Chat.Completions.NewStreaming(t.Context(), p)
		var content strings.Builder
		var usageChunks int
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			ch := stream.Current()
			acc.AddChunk(ch)
			if len(ch.Choices) > 0 {
				content.WriteString(ch.Choices[0].Delta.Content)
			}
			if ch.JSON.Usage.Valid() && ch.Usage.TotalTokens > 0 {
				usageChunks++
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("include_usage=%v: %v", include, err)
		}
		if got := content.String(); got != "tok0 tok1 tok2 tok3" {
			t.Errorf("include_usage=%v: content = %q", include, got)
		}
		wantUsage := 0
		if include {
			wantUsage = 1
			if acc.Usage.CompletionTokens != 4 || acc.Usage.PromptTokens != 3 {
				t.Errorf("usage = %+v, want prompt 3 completion 4", acc.Usage)
			}
		}
		if usageChunks != wantUsage {
			t.Errorf("include_usage=%v: %d usage chunks, want %d", include, usageChunks, wantUsage)
		}
	}
}

func TestSDKCompletions(t *testing.T) {
	s := startStack(t, tenantsYAML, newSim(t, fastSim()))
	c := sdkClient(s, "sk-bob")
	p := openai.CompletionNewParams{
		Model:     "sim-model",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("once upon")},
		MaxTokens: openai.Int(2),
	}
	resp, err := c.Completions.New(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Text != "tok0 tok1" || resp.Usage.PromptTokens != 2 || resp.Usage.CompletionTokens != 2 {
		t.Errorf("completion = %q usage %+v, want \"tok0 tok1\" prompt 2 completion 2", resp.Choices[0].Text, resp.Usage)
	}
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Completions.NewStreaming(t.Context(), p)
	var text strings.Builder
	var total int64
	for stream.Next() {
		ch := stream.Current()
		if len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Text)
		}
		total += ch.Usage.TotalTokens
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != "tok0 tok1" || total != 4 {
		t.Errorf("streamed %q total tokens %d, want \"tok0 tok1\" and 4", text.String(), total)
	}
}

func TestSDKUnknownModelAndKey(t *testing.T) {
	s := startStack(t, tenantsYAML, newSim(t, fastSim()))
	p := chatParams(1)
	p.Model = "nope"
	_, err := sdkClient(s, "sk-alice").Chat.Completions.New(t.Context(), p)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" {
		t.Fatalf("unknown model: err = %v, want 404 model_not_found", err)
	}
	_, err = sdkClient(s, "sk-wrong").Chat.Completions.New(context.Background(), chatParams(1))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "invalid_api_key" {
		t.Fatalf("unknown key: err = %v, want 401 invalid_api_key", err)
	}
}
