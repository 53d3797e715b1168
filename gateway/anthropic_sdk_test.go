package gateway

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aopt "github.com/anthropics/anthropic-sdk-go/v2/option"
)

// panicAtFirstByte is an Observer that panics when a response's first
// byte arrives: a bug in the handler, after admission and before anything
// was written, which only the recoverer can answer.
type panicAtFirstByte struct{ nopObserver }

func (panicAtFirstByte) TTFT(string, string, time.Duration) { panic("observer failed") }

// sdkClient is anthropic-sdk-go pointed at the rig's server, without
// retries so that each call sees the first answer.
func sdkClient(t *testing.T, r *apiRig) *anthropic.Client {
	t.Helper()
	ts := httptest.NewServer(r.s)
	t.Cleanup(ts.Close)
	c := anthropic.NewClient(aopt.WithoutEnvironmentDefaults(), aopt.WithBaseURL(ts.URL+"/"),
		aopt.WithAPIKey("ka"), aopt.WithMaxRetries(0))
	return &c
}

var sdkParams = anthropic.MessageNewParams{Model: "m", MaxTokens: 4,
	Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}

// expectSDKError checks that err is the Anthropic error the SDK parsed
// from exactly body, with the request id the SDK read from request-id.
func expectSDKError(t *testing.T, err error, status int, typ, body string) {
	t.Helper()
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want an *anthropic.Error", err)
	}
	if apiErr.StatusCode != status || string(apiErr.Type()) != typ || apiErr.RawJSON() != body {
		t.Errorf("got %d %q %s\nwant %d %q %s", apiErr.StatusCode, apiErr.Type(), apiErr.RawJSON(), status, typ, body)
	}
	if apiErr.RequestID != "req-1" || apiErr.Response.Header.Get("X-Request-Id") != "req-1" {
		t.Errorf("RequestID = %q, X-Request-Id = %q; want req-1 for both", apiErr.RequestID, apiErr.Response.Header.Get("X-Request-Id"))
	}
}

// Every error on an Anthropic path, whoever raises it, reaches
// anthropic-sdk-go as an Anthropic error with its request id: the
// recoverer's 500, the overall timeout, the drain's 503, an unknown path
// and a wrong method.
func TestAnthropicErrorsThroughTheSDK(t *testing.T) {
	t.Run("recoverer", func(t *testing.T) {
		r := newAPIRigWith(t, "", func(c *Config) { c.Observer = panicAtFirstByte{} }, jsonBody(200, `{}`))
		_, err := sdkClient(t, r).Messages.New(t.Context(), sdkParams)
		expectSDKError(t, err, 500, "api_error", `{"type":"error","error":{"type":"api_error","message":"Internal error."}}`)
		// The same panic on an OpenAI path is an OpenAI error.
		expect(t, r.call("POST", "/v1/chat/completions", `{"model":"m","messages":[]}`, "Authorization: Bearer ka"), 500,
			`{"error":{"message":"Internal error.","type":"server_error","param":null,"code":null}}`)
	})
	t.Run("timeout", func(t *testing.T) {
		hang := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
		r := newAPIRigWith(t, "", func(c *Config) { c.RequestTimeout = 300 * time.Millisecond }, hang)
		_, err := sdkClient(t, r).Messages.New(t.Context(), sdkParams)
		expectSDKError(t, err, 504, "timeout_error", `{"type":"error","error":{"type":"timeout_error","message":"The request did not complete within 300ms."}}`)
	})
	t.Run("draining", func(t *testing.T) {
		r := newAPIRig(t, "", jsonBody(200, `{}`))
		r.s.Drain()
		_, err := sdkClient(t, r).Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{Model: "m", Messages: sdkParams.Messages})
		expectSDKError(t, err, 503, "overloaded_error", `{"type":"error","error":{"type":"overloaded_error","message":"pacegate is shutting down; retry on another replica."}}`)
	})
	t.Run("unknown path and method", func(t *testing.T) {
		r := newAPIRig(t, "", jsonBody(200, `{}`))
		c := sdkClient(t, r)
		var res map[string]any
		err := c.Post(t.Context(), "v1/messages/batches", map[string]any{}, &res)
		expectSDKError(t, err, 404, "not_found_error", `{"type":"error","error":{"type":"not_found_error","message":"Unknown path /v1/messages/batches."}}`)
		err = c.Get(t.Context(), "v1/messages", nil, &res)
		expectSDKError(t, err, 405, "invalid_request_error", `{"type":"error","error":{"type":"invalid_request_error","message":"Method GET is not allowed on /v1/messages."}}`)
	})
}
