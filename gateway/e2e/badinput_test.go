package e2e

import (
	"net/http"
	"strings"
	"testing"
)

func TestBadInputs(t *testing.T) {
	sim := newSim(t, fastSim())
	s := startStack(t, `
server: {max_body_bytes: 1024}
`+tenantsYAML, sim)
	big := `{"model":"sim-model","messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`
	cases := []struct {
		name, path, key, contentType, body string
		status                             int
		want                               string
	}{
		{"no key", "/v1/chat/completions", "", "application/json", chatBody, 401,
			`{"error":{"message":"You didn't provide an API key. Send it as 'Authorization: Bearer \u003ckey\u003e'.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
		{"unknown key", "/v1/chat/completions", "sk-nobody", "application/json", chatBody, 401,
			`{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
		{"wrong content type", "/v1/chat/completions", "sk-alice", "text/plain", chatBody, 415,
			`{"error":{"message":"Content-Type must be application/json, got \"text/plain\"","type":"invalid_request_error","param":null,"code":null}}`},
		{"invalid json", "/v1/chat/completions", "sk-alice", "application/json", `{"model":`, 400,
			`{"error":{"message":"We could not parse the JSON body of your request: it must be a JSON object.","type":"invalid_request_error","param":null,"code":null}}`},
		{"json array", "/v1/chat/completions", "sk-alice", "application/json", `[1,2]`, 400,
			`{"error":{"message":"We could not parse the JSON body of your request: it must be a JSON object.","type":"invalid_request_error","param":null,"code":null}}`},
		{"too large", "/v1/chat/completions", "sk-alice", "application/json", big, 413,
			`{"error":{"message":"Request body is larger than the limit of 1024 bytes.","type":"invalid_request_error","param":null,"code":null}}`},
		{"missing model", "/v1/chat/completions", "sk-alice", "application/json", `{"messages":[]}`, 400,
			`{"error":{"message":"Missing required parameter: 'model'.","type":"invalid_request_error","param":"model","code":null}}`},
		{"model not a string", "/v1/chat/completions", "sk-alice", "application/json", `{"model":7,"messages":[]}`, 400,
			`{"error":{"message":"Invalid value for 'model': expected a non-empty string.","type":"invalid_request_error","param":"model","code":null}}`},
		{"unknown model", "/v1/chat/completions", "sk-alice", "application/json", `{"model":"gpt-9","messages":[]}`, 404,
			"{\"error\":{\"message\":\"The model `gpt-9` does not exist.\",\"type\":\"invalid_request_error\",\"param\":\"model\",\"code\":\"model_not_found\"}}"},
		{"missing messages", "/v1/chat/completions", "sk-alice", "application/json", `{"model":"sim-model"}`, 400,
			`{"error":{"message":"Missing required parameter: 'messages'.","type":"invalid_request_error","param":"messages","code":null}}`},
		{"missing prompt", "/v1/completions", "sk-alice", "application/json", `{"model":"sim-model"}`, 400,
			`{"error":{"message":"Missing required parameter: 'prompt'.","type":"invalid_request_error","param":"prompt","code":null}}`},
		{"stream not a bool", "/v1/chat/completions", "sk-alice", "application/json", `{"model":"sim-model","stream":"yes","messages":[]}`, 400,
			`{"error":{"message":"Invalid type for 'stream'.","type":"invalid_request_error","param":"stream","code":null}}`},
		{"max_tokens zero", "/v1/chat/completions", "sk-alice", "application/json", `{"model":"sim-model","max_tokens":0,"messages":[]}`, 400,
			`{"error":{"message":"Invalid value for 'max_tokens': must be at least 1.","type":"invalid_request_error","param":"max_tokens","code":null}}`},
		{"unknown path", "/v1/images/generations", "sk-alice", "application/json", `{}`, 404,
			`{"error":{"message":"Unknown path /v1/images/generations.","type":"invalid_request_error","param":null,"code":"unknown_url"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.contentType)
			if tc.key != "" {
				req.Header.Set("Authorization", "Bearer "+tc.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := strings.TrimSpace(readAll(t, resp.Body))
			if resp.StatusCode != tc.status || body != tc.want {
				t.Errorf("got %d %s\nwant %d %s", resp.StatusCode, body, tc.status, tc.want)
			}
			if resp.Header.Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id header")
			}
		})
	}
	if n := len(sim.Arrivals()); n != 0 {
		t.Errorf("%d bad requests reached the model", n)
	}
}
